#!/usr/bin/env bash
# The main job, live, with no Bluetooth hardware. bluez-sim plays the air and bluetoothd for three
# boxes (each a private dbus-daemon standing in for that box's system bus) and a proximityd runs on
# each. The nodes identify each other, then charlie walks past alpha and bravo: alpha's table shows
# charlie change zone, leave, and come back. Everything is queried as a user would on real
# machines, with busctl, bluetoothctl and proximityctl.
#
#   scripts/demo.sh [--once] [--scenario FILE]
#   scripts/demo.sh --fleet [--once]   the fleet on a local Mosquitto: scripts/demo-fleet.sh
#     (default)   on a terminal: prints the commands to query any box, then shows alpha's live
#                 table (proximityctl watch) while charlie walks, round after round. Ctrl-C stops
#                 everything and removes the temporary directory.
#     --once      walk once, print the table at the key moments, check that the story happened,
#                 and exit: 0 if it did, 1 with the node logs if not. This is CI's smoke test. It
#                 is also the default when stdin or stdout is not a terminal.
#     --scenario  the room, scenarios/demo-room.yaml by default (docs/simulator.md has the format).
#                 The walk needs boxes alpha, bravo and charlie, with bravo 4 m or more from alpha.
#                 It puts the door and the exit out of range for the scenario's radio. With other
#                 boxes the scenario plays as written: the demo shows the first box's table, and
#                 --once checks that the first box identifies every other box.
#
# The walk is driven from here, not written as waypoints. Simulated time starts with bluez-sim, and
# the nodes take a moment to register with BlueZ and find each other (longer on a busy machine),
# so a walk in waypoints would race them. This walk starts once they are up. It moves charlie with
# MoveBox five times a second, the position computed from the elapsed time. In --once mode, each
# step of the story is a condition polled with a timeout, and nothing waits on a bare sleep.
#
# charlie starts next to alpha rather than walking in for its first identification. bluez-sim
# decides whether a Connect reaches the peer once, as the attempt starts. A node first hears a
# peer walking in at the edge of range, where that check fails, and the attempt then waits out the
# 20 s connection timeout. Later rounds come in through the door: alpha knows charlie's identity
# by then and does not connect again.
set -euo pipefail
cd "$(dirname "$0")/.."
export PROXIMITYD_SETUP=demo   # setup.sh installs only what the demo needs (the fleet's too)
for arg in "$@"; do [ "$arg" != --fleet ] || exec scripts/demo-fleet.sh "$@"; done
source scripts/setup.sh
export LC_ALL=C.UTF-8   # decimal points for awk, busctl and $EPOCHREALTIME

once=false
scenario=scenarios/demo-room.yaml
while [ $# -gt 0 ]; do
  case "$1" in
    --once) once=true ;;
    --scenario) [ $# -ge 2 ] || { echo "demo.sh: --scenario needs a file" >&2; exit 64; }; scenario="$2"; shift ;;
    *) echo "usage: scripts/demo.sh [--once] [--scenario FILE] | scripts/demo.sh --fleet [--once]" >&2; exit 64 ;;
  esac
  shift
done
[ -t 0 ] && [ -t 1 ] || once=true
[ -f "$scenario" ] || { echo "demo.sh: no scenario file $scenario" >&2; exit 64; }

started=$SECONDS
run_dir="$(mktemp -d /tmp/proximityd-demo.XXXXXX)"

# --- processes: each is started here and stopped by its pid on exit --------------------------------
sim_pid=""
node_pids=()
helper_pids=()   # the walk, and proximityctl watch
live=false       # the live table is on screen, with the cursor hidden
stopping=false
cleanup() {
  local status=$?
  stopping=true   # a second Ctrl-C (or timeout's signal to the whole group) must not cut this short
  set +e
  if $live; then printf '\e[?25h'; fi
  stop "${helper_pids[@]}"
  stop "${node_pids[@]}"   # before bluez-sim, so that they unregister from a live BlueZ
  [ -z "$sim_pid" ] || stop "$sim_pid"   # bluez-sim stops the boxes' dbus-daemons
  rm -rf "$run_dir"
  if ! $once; then echo "Stopped the nodes and bluez-sim; removed $run_dir."; fi
  exit "$status"
}
# stop PID...: SIGTERM, then up to 10 s to exit before SIGKILL. Only this shell's running jobs
# are signalled: a job bash has reaped is off its list, and its pid may belong to another process.
stop() {
  local pid i
  for pid in "$@"; do exited "$pid" || kill -TERM "$pid" 2> /dev/null; done
  for pid in "$@"; do
    for i in $(seq 100); do exited "$pid" && break; sleep 0.1; done
    exited "$pid" || kill -KILL "$pid" 2> /dev/null
    wait "$pid" 2> /dev/null
  done
  return 0
}
# exited PID: PID is not one of this shell's running background jobs (any more).
exited() { ! jobs -pr | grep -qx "$1"; }
trap cleanup EXIT
# Ctrl-C is how the interactive demo ends: exit 0. An interrupted --once run did not finish: 130.
# A signal that comes during the cleanup runs this too, and must not end the cleanup.
interrupted() {
  if $stopping; then return; fi
  if $once; then exit 130; else exit 0; fi
}
trap interrupted INT TERM

# --- output and waiting ------------------------------------------------------------------------------
if [ -t 1 ]; then bold=$'\e[1m'; plain=$'\e[0m'; else bold=""; plain=""; fi
# show CMD...: prints the command as a user would type it, then runs it.
show() {
  printf '%s$ %s%s\n' "$bold" "$*" "$plain"
  "$@" || true
}
say() { printf '\n%s%s%s\n' "$bold" "$*" "$plain"; }
boxes=()
story=()   # alpha's view of charlie: zone, time, zone, time…
story_line() {
  local i out=""
  for ((i = 0; i < ${#story[@]}; i += 2)); do out+="${out:+ → }${story[i]} ${story[i + 1]}"; done
  echo "$out"
}
# fail MESSAGE: what went wrong, what alpha saw, the logs; exit 1.
fail() {
  set +e
  if $live; then printf '\e[?25h\n'; live=false; fi
  {
    echo
    echo "demo.sh: FAILED: $*"
    [ ${#story[@]} -eq 0 ] || echo "alpha's view of charlie so far: $(story_line)"
    for box in "${boxes[@]}"; do
      [ -f "$run_dir/$box-proximityd.log" ] || continue
      echo "--- $box: proximityd log (last 30 lines) ---"
      tail -n 30 "$run_dir/$box-proximityd.log"
    done
    echo "--- bluez-sim log (last 20 lines) ---"
    tail -n 20 "$run_dir/sim.log" 2> /dev/null
  } >&2
  exit 1
}
# wait_for TIMEOUT WHAT CONDITION...: polls CONDITION five times a second until it holds. Fails,
# naming WHAT, after TIMEOUT seconds.
wait_for() {
  local timeout=$1 what=$2
  shift 2
  local deadline=$((SECONDS + timeout))
  until "$@"; do
    ((SECONDS < deadline)) || fail "timed out after $timeout s waiting for $what"
    sleep 0.2
  done
}

# --- build ---------------------------------------------------------------------------------------------
echo "Building proximityd, proximityctl and bluez-sim (swift build; the first build takes a few minutes)…"
for product in proximityd proximityctl bluez-sim; do
  swift build --product "$product" > "$run_dir/build.log" 2>&1 || { cat "$run_dir/build.log" >&2; exit 1; }
done
bin="$(swift build --show-bin-path)"
export PATH="$bin:$PATH"   # so that the commands shown below are the ones that run

# --- the room --------------------------------------------------------------------------------------------
# bluez-sim starts one dbus-daemon per box and plays org.bluez on each. It writes NAME.address to
# the runtime dir, then prints one JSON line once every box is up.
bluez-sim --scenario "$scenario" --json --runtime-dir "$run_dir" > "$run_dir/sim.json" 2> "$run_dir/sim.log" &
sim_pid=$!
sim_up() {
  ! exited "$sim_pid" || fail "bluez-sim exited: $(cat "$run_dir/sim.log")"
  [ -s "$run_dir/sim.json" ]
}
wait_for 30 "bluez-sim to start the boxes" sim_up
declare -A bus id address
ctl_status() { bluez-sim ctl --bus "$ctl_bus" status; }
while read -r box box_address; do
  boxes+=("$box")
  address[$box]=$box_address
  bus[$box]=$(cat "$run_dir/$box.address")
  bus[$box]=${bus[$box]%%,guid=*}
done < <(python3 -c 'import json, sys; [print(b["name"], b["address"]) for b in json.load(sys.stdin)["boxes"]]' < "$run_dir/sim.json")
first=${boxes[0]}
ctl_bus=${bus[$first]}   # the simulator's control service is on every box bus; any one drives all
walk=false
[ -n "${bus[alpha]:-}" ] && [ -n "${bus[bravo]:-}" ] && [ -n "${bus[charlie]:-}" ] && walk=true

# move BOX X Y: puts BOX at (X, Y) from now on. This is the call `bluez-sim ctl move BOX X Y` makes,
# through busctl because busctl is cheaper five times a second.
move() {
  busctl --address="$ctl_bus" -- call org.proximityd.BlueZSim /org/proximityd/BlueZSim org.proximityd.BlueZSim1 \
    MoveBox sddd "$1" "$2" "$3" 0 > /dev/null
}
if $walk; then
  # The walk in the room's geometry, from the simulator's state. Every point is 0.3 m off the line
  # from alpha to bravo: next to alpha, next to bravo, the door on alpha's far side and the exit past
  # bravo. The door and the exit are where the mean RSSI is 3.5 sigma below the sensitivity, so
  # one advertisement in 4,000 gets through. `range` is where the mean RSSI meets the sensitivity.
  read -r at_alpha_x at_alpha_y at_bravo_x at_bravo_y door_x door_y exit_x exit_y range < <(ctl_status | python3 -c '
import json, math, sys
state = json.load(sys.stdin)
at = {b["name"]: b["position"] for b in state["boxes"]}
r = state["radio"]
(ax, ay), (bx, by) = at["alpha"][:2], at["bravo"][:2]
length = math.hypot(bx - ax, by - ay) or 1
ux, uy = (bx - ax) / length, (by - ay) / length
def point(x, y, along): return (x + ux * along - uy * 0.3, y + uy * along + ux * 0.3)
def distance(margin_db): return 10 ** ((r["measured_power"] - r["sensitivity"] + margin_db) / (10 * r["path_loss_exponent"]))
reach = distance(3.5 * r["shadowing_sigma"])
values = point(ax, ay, 0) + point(bx, by, 0) + point(ax, ay, -reach) + point(bx, by, reach) + (distance(0),)
print(" ".join("%.1f" % v for v in values))')
  move charlie "$at_alpha_x" "$at_alpha_y"
fi

echo
echo "bluez-sim runs the room of $scenario. Each box is a private dbus-daemon standing in for"
echo "that box's system bus, with a simulated bluetoothd (org.bluez) on it:"
while read -r box position; do
  printf '  %-8s at %-13s adapter %s   bus %s\n' "$box" "$position" "${address[$box]}" "${bus[$box]}"
done < <(ctl_status | python3 -c '
import json, sys
for b in json.load(sys.stdin)["boxes"]:
    print(b["name"], "(%g, %g) m" % tuple(round(v, 1) for v in b["position"][:2]))')
if $walk; then echo "The radio reaches $range m, so bravo hears charlie next to alpha and alpha hears it next to bravo."; fi

say "BlueZ's own client, bluetoothctl, on $first's bus. No node runs yet, so a 3 s scan finds only the beacons:"
export DBUS_SYSTEM_BUS_ADDRESS="${bus[$first]}"
echo "$ export DBUS_SYSTEM_BUS_ADDRESS=${bus[$first]}"
show bluetoothctl list < /dev/null
# The beacon is shown while the scan runs: BlueZ forgets a non-connectable device when discovery
# stops, so `bluetoothctl devices` afterwards would not list it. bluetoothctl's colours are dropped.
echo "$ bluetoothctl --timeout 3 scan on | grep NEW"
timeout 20 bluetoothctl --timeout 3 scan on < /dev/null | sed 's/\x1b\[[0-9;]*m//g; s/[\x01\x02]//g' | grep NEW || true
unset DBUS_SYSTEM_BUS_ADDRESS

if ! $once; then
  say "Try these from another terminal while the demo runs:"
  echo "  export PATH=$bin:\$PATH"
  for box in "${boxes[@]}"; do
    b=${bus[$box]}
    echo "  # $box"
    echo "  busctl --address=$b call org.proximityd /org/proximityd org.proximityd.Node1 GetRanging"
    echo "  busctl --address=$b get-property org.proximityd /org/proximityd org.proximityd.Node1 Identifier"
    echo "  busctl --address=$b tree org.proximityd"
    echo "  proximityctl peers --bus $b"
  done
  mover=${boxes[${#boxes[@]} - 1]}
  if $walk; then mover=bravo; fi
  echo "  # the simulator: any box's bus controls every box.$($walk && echo " The demo walks charlie, so move bravo to try it.")"
  echo "  bluez-sim ctl --bus $ctl_bus status"
  echo "  bluez-sim ctl --bus $ctl_bus move $mover 2 0"
  echo "  DBUS_SYSTEM_BUS_ADDRESS=${bus[$first]} bluetoothctl"
  echo "On a real machine the same commands run without the addresses: busctl --system …, proximityctl peers, bluetoothctl."
fi

# --- the nodes ---------------------------------------------------------------------------------------------
say "Starting proximityd on each box. ClearInterval is lowered from 10 s to 5 s on every node, so a peer"
echo "that leaves is dropped 5 s after it was last heard:"
echo "$ busctl --address=${bus[$first]} set-property org.proximityd /org/proximityd org.proximityd.Node1 ClearInterval d 5"
for box in "${boxes[@]}"; do
  proximityd run --bus "${bus[$box]}" --state-dir "$run_dir/$box-state" --name "$box" --log-level debug \
    2> "$run_dir/$box-proximityd.log" &
  node_pids+=($!)
done
node_up() {
  local i
  for i in "${!boxes[@]}"; do
    ! exited "${node_pids[$i]}" || fail "${boxes[$i]}'s proximityd exited"
  done
  busctl --address="${bus[$1]}" status org.proximityd > /dev/null 2>&1
}
on() { busctl --address="${bus[$1]}" "${@:2}"; }
for box in "${boxes[@]}"; do
  wait_for 30 "$box's proximityd to own org.proximityd" node_up "$box"
  on "$box" set-property org.proximityd /org/proximityd org.proximityd.Node1 ClearInterval d 5 || fail "cannot set $box's ClearInterval"
  id[$box]=$(on "$box" get-property org.proximityd /org/proximityd org.proximityd.Node1 Identifier) || fail "cannot read $box's Identifier"
  id[$box]=${id[$box]#s \"}
  id[$box]=${id[$box]%\"}
done

# --- what the nodes see ------------------------------------------------------------------------------------
# ranging BOX: the node's GetRanging, `a{ss} N "id" "zone" …`. zone_in RANGING ID: ID's zone there.
ranging() { on "$1" call org.proximityd /org/proximityd org.proximityd.Node1 GetRanging 2> /dev/null || true; }
zone_in() { awk -F'"' -v id="$2" '{ for (i = 2; i < NF; i += 4) if ($i == id) print $(i + 2) }' <<< "$1"; }
ids_in() { awk -F'"' '{ for (i = 2; i < NF; i += 4) print $i }' <<< "$1"; }
since=$EPOCHREALTIME
elapsed() { awk -v a="$since" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'; }

# walk X0 Y0 X1 Y1 SPEED: walks charlie in a straight line at SPEED m/s, five steps a second.
walk_charlie() {
  local start=$EPOCHREALTIME x y arrived
  while :; do
    read -r x y arrived < <(awk -v x0="$1" -v y0="$2" -v x1="$3" -v y1="$4" -v v="$5" -v t0="$start" -v t1="$EPOCHREALTIME" 'BEGIN {
      d = sqrt((x1 - x0) ^ 2 + (y1 - y0) ^ 2); f = (d > 0) ? v * (t1 - t0) / d : 1
      if (f > 1) f = 1
      printf "%.3f %.3f %d\n", x0 + (x1 - x0) * f, y0 + (y1 - y0) * f, (f >= 1) }')
    move charlie "$x" "$y"
    ((arrived)) && return 0
    sleep 0.2
  done
}
# seconds FROM_X FROM_Y TO_X TO_Y SPEED: how long that walk takes, rounded up. metres: its length.
metres() { awk -v a="$1" -v b="$2" -v c="$3" -v d="$4" 'BEGIN { printf "%.1f", sqrt((c - a) ^ 2 + (d - b) ^ 2) }'; }
seconds() { awk -v d="$(metres "$1" "$2" "$3" "$4")" -v v="$5" 'BEGIN { printf "%d", d / v + 0.999 }'; }

# --- --once: the story, checked ------------------------------------------------------------------------------
if $once && ! $walk; then
  say "The boxes move as $scenario says. $first must identify every other box by its Identifier:"
  first_ranges_all() {
    local r box
    r=$(ranging "$first")
    for box in "${boxes[@]}"; do
      [ "$box" = "$first" ] || [ -n "$(zone_in "$r" "${id[$box]}")" ] || return 1
    done
  }
  wait_for 60 "$first to range every other box by its Identifier" first_ranges_all
  show proximityctl peers --bus "${bus[$first]}"
  echo
  echo "demo OK in $((SECONDS - started)) s: $first identified every other box and ranges it."
  exit 0
fi

if $once; then
  alpha_ranging=""
  charlie_zone=""
  # observe: reads alpha's GetRanging and records each change of charlie's zone in `story`.
  observe() {
    alpha_ranging=$(ranging alpha)
    local zone peer
    zone=$(zone_in "$alpha_ranging" "${id[charlie]}")
    zone=${zone:-absent}
    if [ "$zone" != "$charlie_zone" ]; then
      story+=("$zone" "$(elapsed)s")
      charlie_zone=$zone
    fi
    for peer in $(ids_in "$alpha_ranging"); do
      # Beacons are ranged too, under their frame's identifier (ibeacon:…, altbeacon:…, eddystone…).
      case "$peer" in ibeacon:* | altbeacon:* | eddystone*) continue ;; esac
      [ "$peer" = "${id[bravo]}" ] || [ "$peer" = "${id[charlie]}" ] || fail "alpha ranges $peer, the Identifier of no box"
    done
  }
  identified_both() { observe; [ -n "$(zone_in "$alpha_ranging" "${id[bravo]}")" ] && [ "$charlie_zone" = immediate ]; }
  # distance BOX ID: the distance BOX's node estimates to peer ID (its Peer1 Distance), or nothing.
  distance() {
    proximityctl peers --json --bus "${bus[$1]}" 2> /dev/null |
      python3 -c 'import json, sys; [print(p["distance"]) for p in json.load(sys.stdin) if p["identifier"] == sys.argv[1]]' "$2"
  }
  charlie_at_bravo() {
    observe
    [ "$charlie_zone" = far ] && [ "$(zone_in "$(ranging bravo)" "${id[charlie]}")" = immediate ] &&
      awk -v d="$(distance alpha "${id[charlie]}")" -v near="$settled" 'BEGIN { exit !(d != "" && d >= near) }'
  }
  charlie_gone() { observe; [ "$charlie_zone" = absent ]; }

  spacing=$(metres "$at_alpha_x" "$at_alpha_y" "$at_bravo_x" "$at_bravo_y")
  settled=$(awk -v d="$spacing" 'BEGIN { printf "%.1f", 0.8 * d }')   # alpha's estimate has caught up with the walk
  echo
  echo "Each node's identity, the UUID it serves over GATT (its Identifier property):"
  echo "$ busctl --address=<box's bus> get-property org.proximityd /org/proximityd org.proximityd.Node1 Identifier"
  for box in "${boxes[@]}"; do printf '  %-8s s "%s"\n' "$box" "${id[$box]}"; done

  say "1. Each node finds the others advertising the general service UUID, reads each one's identity"
  echo "   over GATT once, and ranges it. alpha: charlie (0.3 m away) immediate, bravo ($spacing m) far."
  wait_for 30 "alpha to range bravo (${id[bravo]}) and charlie (${id[charlie]}, immediate)" identified_both
  show proximityctl peers --bus "${bus[alpha]}"
  echo "alpha's log, one GATT read per peer:"
  grep 'identified a peer' "$run_dir/alpha-proximityd.log" |
    sed -E 's/^([^ ]+).*(peer\.address=[^ ]+) (peer\.id=[^ ]+).*/  \1 identified a peer \2 \3/' || true

  say "2. charlie walks to 0.3 m from bravo (1.25 m/s): alpha ranges it far ($settled m or more), bravo immediate."
  since=$EPOCHREALTIME
  story=(immediate 0.0s)
  walk_charlie "$at_alpha_x" "$at_alpha_y" "$at_bravo_x" "$at_bravo_y" 1.25 &
  walker=$!
  helper_pids+=($walker)
  wait_for $(($(seconds "$at_alpha_x" "$at_alpha_y" "$at_bravo_x" "$at_bravo_y" 1.25) + 20)) \
    "alpha to range charlie far, at $settled m or more, and bravo to range it immediate" charlie_at_bravo
  wait "$walker" || fail "the walk to bravo failed"
  show proximityctl peers --bus "${bus[alpha]}"
  show busctl --address="${bus[bravo]}" call org.proximityd /org/proximityd org.proximityd.Node1 GetRanging
  echo "(bravo's view: charlie immediate, alpha far.)"

  say "3. charlie walks out, $(metres "$at_bravo_x" "$at_bravo_y" "$exit_x" "$exit_y") m past bravo (1.5 m/s). alpha stops hearing it,"
  echo "   reports it unknown, and drops it once it has been silent for ClearInterval (5 s):"
  walk_charlie "$at_bravo_x" "$at_bravo_y" "$exit_x" "$exit_y" 1.5 &
  walker=$!
  helper_pids+=($walker)
  wait_for $(($(seconds "$at_bravo_x" "$at_bravo_y" "$exit_x" "$exit_y" 1.5) + 40)) "charlie to leave alpha's table" charlie_gone
  show busctl --address="${bus[alpha]}" call org.proximityd /org/proximityd org.proximityd.Node1 GetRanging

  echo
  echo "alpha's view of charlie as it walked (GetRanging, seconds since it left alpha's side):"
  echo "  $(story_line)"
  echo
  echo "Checked: alpha identified bravo and charlie by the Identifier each serves; charlie was immediate,"
  echo "then farther, then left alpha's table. demo OK in $((SECONDS - started)) s."
  exit 0
fi

# --- interactive: alpha's live table ---------------------------------------------------------------------------
now_file="$run_dir/now"
narrate() { echo "$*" > "$now_file.tmp" && mv "$now_file.tmp" "$now_file"; }
narrate "the nodes start: each finds the others advertising the general service UUID and reads each one's identity over GATT, once."
if $walk; then
  out_m=$(metres "$at_bravo_x" "$at_bravo_y" "$exit_x" "$exit_y")
  # charlie's rounds until Ctrl-C. The pauses pace the show and synchronise nothing.
  tour() {
    local round=1 deadline
    deadline=$((SECONDS + 30))
    ranges_both() { local r; r=$(ranging alpha); [ -n "$(zone_in "$r" "${id[bravo]}")" ] && [ -n "$(zone_in "$r" "${id[charlie]}")" ]; }
    until ranges_both || ((SECONDS > deadline)); do sleep 0.2; done
    narrate "alpha identified bravo and charlie. charlie stands 0.3 m from alpha."
    sleep 6
    while :; do
      narrate "charlie walks to bravo…"
      walk_charlie "$at_alpha_x" "$at_alpha_y" "$at_bravo_x" "$at_bravo_y" 1.25
      narrate "charlie stands 0.3 m from bravo: far from alpha."
      sleep 6
      narrate "charlie walks out, $out_m m past bravo: alpha stops hearing it, says unknown, and drops it after 5 s of silence…"
      walk_charlie "$at_bravo_x" "$at_bravo_y" "$exit_x" "$exit_y" 1.5
      deadline=$((SECONDS + 30))
      while [ -n "$(zone_in "$(ranging alpha)" "${id[charlie]}")" ] && ((SECONDS < deadline)); do sleep 0.2; done
      narrate "charlie has left."
      sleep 4
      round=$((round + 1))
      move charlie "$door_x" "$door_y"
      narrate "round $round: charlie comes back in through the door on alpha's side. alpha knows its identity: no GATT read this time…"
      walk_charlie "$door_x" "$door_y" "$at_alpha_x" "$at_alpha_y" 1.5
      narrate "charlie stands 0.3 m from alpha."
      sleep 6
    done
  }
  tour 2> "$run_dir/tour.log" &
  tour_pid=$!
  helper_pids+=($tour_pid)
fi

# alpha's table as `proximityctl watch` prints it. Off a terminal, watch appends each refresh, so it
# writes to a pipe here and each refresh is redrawn in place below the commands above, which stay
# on screen to copy. A refresh is one write, shorter than a pipe's atomic size. The pipe is a
# FIFO, so watch is an ordinary background job, stopped with the others.
say "$first's live table: proximityctl watch --bus ${bus[$first]}   (Ctrl-C stops the demo)"
mkfifo "$run_dir/watch"
proximityctl watch --bus "${bus[$first]}" --interval 1 > "$run_dir/watch" &
helper_pids+=($!)
exec {watch_fd}< "$run_dir/watch"
live=true
printf '\e[?25l'
# Here Ctrl-C only sets a flag, and the loop exits. bash 5.2 crashed when the trap exited from
# within `read -t`: the read's timeout alarm later jumped back into it, in the middle of cleanup.
stop_requested=false
trap 'stop_requested=true' INT TERM
frame=()
fresh=false
shown_now=""
drawn_rows=0
# draw: moves up over the last drawing, clears to the end of the screen, and prints the narration
# and the refresh. Lines wider than the terminal wrap and are counted as the rows they take.
draw() {
  local cols line lines
  cols=$(tput cols 2> /dev/null || echo 80)
  ((cols > 0)) || cols=80
  shown_now=$(cat "$now_file" 2> /dev/null || true)
  # (When bluez-sim is gone the walk stops too, and the demo is ending anyway.)
  if $walk && exited "$tour_pid" && ! exited "$sim_pid"; then shown_now="the walk stopped: $(tail -n 1 "$run_dir/tour.log")"; fi
  lines=("now: $shown_now" "${frame[@]}")
  ((drawn_rows == 0)) || printf '\e[%dA\r' "$drawn_rows"
  printf '\e[J'
  drawn_rows=0
  for line in "${lines[@]}"; do
    printf '%s\n' "$line"
    drawn_rows=$((drawn_rows + (${#line} > cols ? (${#line} + cols - 1) / cols : 1)))
  done
}
until $stop_requested; do
  if IFS= read -r -t 0.3 -u "$watch_fd" line; then
    [ -n "$line" ] || continue   # the blank line between refreshes
    if [[ $line == "proximityd "* ]]; then frame=("${line//${bus[$first]}/$first}"); else frame+=("$line"); fi
    fresh=true
  elif (($? > 128)); then   # 0.3 s without output (the refresh is complete), or Ctrl-C
    if $fresh || [ "$(cat "$now_file" 2> /dev/null)" != "$shown_now" ]; then draw; fresh=false; fi
  else
    # watch ended. On Ctrl-C every process gets the signal, and watch may end (its bus gone with
    # bluez-sim) before this shell has run its trap: give the trap a moment before failing.
    sleep 0.5
    $stop_requested || fail "proximityctl watch stopped"
  fi
done
exit 0
