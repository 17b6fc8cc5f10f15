#!/usr/bin/env bash
# The fleet, live, with no Bluetooth hardware (scripts/demo.sh --fleet runs this). A local
# Mosquitto broker, bluez-sim playing the three boxes of scenarios/demo-room.yaml (alpha and bravo
# 5 m apart, charlie next to alpha), a proximityd on each: alpha and bravo publish to the broker
# (`mqtt:` in their config files, docs/mqtt.md), and proximity-fleet places charlie on a floor plan
# of two rooms, one around each (docs/positioning.md), with its live map on 127.0.0.1. charlie
# walks to bravo and back, and its room and its dot on the map follow.
#
#   scripts/demo.sh --fleet [--once]
#     (default)   on a terminal: prints the mosquitto_sub and proximityctl commands to watch the
#                 broker, then shows `proximityctl fleet` live while charlie walks, round after
#                 round. Ctrl-C stops everything and removes the temporary directory.
#     --once      one walk to bravo: checks that charlie's room goes from alpha to bravo, prints
#                 the raw topics and the fleet table, and exits 0 (1 with the logs if not). Also
#                 the default when stdin or stdout is not a terminal.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
export LC_ALL=C.UTF-8

once=false
while [ $# -gt 0 ]; do
  case "$1" in
    --fleet) ;;
    --once) once=true ;;
    *) echo "usage: scripts/demo.sh --fleet [--once]" >&2; exit 64 ;;
  esac
  shift
done
[ -t 0 ] && [ -t 1 ] || once=true
command -v mosquitto > /dev/null || [ -x /usr/sbin/mosquitto ] || { echo "demo.sh: mosquitto is not installed (scripts/setup.sh)" >&2; exit 69; }
mosquitto_bin=$(command -v mosquitto || echo /usr/sbin/mosquitto)

started=$SECONDS
run_dir="$(mktemp -d /tmp/proximityd-fleet.XXXXXX)"
pids=()
stopping=false
cleanup() {
  local status=$? pid i
  stopping=true
  set +e
  # Helpers and the fleet first, then the nodes (before bluez-sim), then bluez-sim and the broker.
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
    pid=${pids[i]}
    kill -TERM "$pid" 2> /dev/null
    for _ in $(seq 100); do kill -0 "$pid" 2> /dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2> /dev/null
    wait "$pid" 2> /dev/null
  done
  rm -rf "$run_dir"
  $once || echo "Stopped the nodes, proximity-fleet, bluez-sim and mosquitto; removed $run_dir."
  exit "$status"
}
trap cleanup EXIT
trap '$stopping || { $once && exit 130 || exit 0; }' INT TERM

if [ -t 1 ]; then bold=$'\e[1m'; plain=$'\e[0m'; else bold=""; plain=""; fi
say() { printf '\n%s%s%s\n' "$bold" "$*" "$plain"; }
show() { printf '%s$ %s%s\n' "$bold" "$*" "$plain"; "$@" || true; }
fail() {
  set +e
  {
    echo
    echo "demo.sh --fleet: FAILED: $*"
    for log in "$run_dir"/*.log; do
      echo "--- $(basename "$log") (last 20 lines) ---"
      tail -n 20 "$log"
    done
  } >&2
  exit 1
}
wait_for() {
  local timeout=$1 what=$2
  shift 2
  local deadline=$((SECONDS + timeout))
  until "$@"; do
    ((SECONDS < deadline)) || fail "timed out after $timeout s waiting for $what"
    sleep 0.2
  done
}

echo "Building proximityd, proximityctl, proximity-fleet and bluez-sim (the first build takes a few minutes)…"
for product in proximityd proximityctl proximity-fleet bluez-sim; do
  swift build --product "$product" > "$run_dir/build.log" 2>&1 || { cat "$run_dir/build.log" >&2; exit 1; }
done
bin="$(swift build --show-bin-path)"
export PATH="$bin:$PATH"

# --- the broker: Debian's mosquitto on a free port of 127.0.0.1 -------------------------------------------
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
printf 'listener %s 127.0.0.1\nallow_anonymous true\npersistence false\nlog_dest stderr\n' "$port" > "$run_dir/mosquitto.conf"
"$mosquitto_bin" -c "$run_dir/mosquitto.conf" 2> "$run_dir/mosquitto.log" &
pids+=($!)
wait_for 10 "mosquitto to start" grep -q " running" "$run_dir/mosquitto.log"
broker="mqtt://127.0.0.1:$port"
sub=(mosquitto_sub -h 127.0.0.1 -p "$port")

# --- the boxes ------------------------------------------------------------------------------------------------
bluez-sim --scenario scenarios/demo-room.yaml --json --runtime-dir "$run_dir" > "$run_dir/sim.json" 2> "$run_dir/sim.log" &
pids+=($!)
wait_for 30 "bluez-sim to start the boxes" test -s "$run_dir/sim.json"
declare -A bus
for box in alpha bravo charlie; do
  bus[$box]=$(cat "$run_dir/$box.address")
  bus[$box]=${bus[$box]%%,guid=*}
done
for box in alpha bravo; do
  printf 'mqtt:\n  broker: %s\n  report-interval: 2\n  compat: [espresense]\n' "$broker" > "$run_dir/$box.yaml"
done
: > "$run_dir/charlie.yaml"   # charlie is the one tracked: it runs a node, but publishes nothing
for box in alpha bravo charlie; do
  proximityd run --bus "${bus[$box]}" --state-dir "$run_dir/$box-state" --name "$box" --config "$run_dir/$box.yaml" \
    2> "$run_dir/$box-proximityd.log" &
  pids+=($!)
done
on() { busctl --address="${bus[$1]}" "${@:2}"; }
node_up() { on "$1" status org.proximityd > /dev/null 2>&1; }
for box in alpha bravo charlie; do
  wait_for 30 "$box's proximityd to own org.proximityd" node_up "$box"
done
charlie=$(on charlie get-property org.proximityd /org/proximityd org.proximityd.Node1 Identifier)
charlie=${charlie#s \"}
charlie=${charlie%\"}

# The floor plan: alpha's room and bravo's room, split halfway between them, named after them.
cat > "$run_dir/plan.yaml" << 'EOF'
nodes:
  - name: alpha
    position: [0, 0, 0]
  - name: bravo
    position: [5, 0, 0]
rooms:
  - name: alpha
    polygon: [[-4, -4], [2.5, -4], [2.5, 4], [-4, 4]]
  - name: bravo
    polygon: [[2.5, -4], [9, -4], [9, 4], [2.5, 4]]
EOF
http_port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
map="http://127.0.0.1:$http_port/"
proximity-fleet --broker "$broker" --track "$charlie" --plan "$run_dir/plan.yaml" --http "127.0.0.1:$http_port" \
  2> "$run_dir/fleet.log" &
pids+=($!)

move() {
  busctl --address="${bus[alpha]}" -- call org.proximityd.BlueZSim /org/proximityd/BlueZSim org.proximityd.BlueZSim1 \
    MoveBox sddd charlie "$1" "$2" 0 > /dev/null
}
# walk X0 X1 SPEED: charlie along y = 0.3 m from X0 to X1 at SPEED m/s, five steps a second.
walk() {
  local start=$EPOCHREALTIME x arrived
  while :; do
    read -r x arrived < <(awk -v a="$1" -v b="$2" -v v="$3" -v t0="$start" -v t1="$EPOCHREALTIME" 'BEGIN {
      d = (b > a) ? b - a : a - b; f = (d > 0) ? v * (t1 - t0) / d : 1; if (f > 1) f = 1
      printf "%.3f %d\n", a + (b - a) * f, (f >= 1) }')
    move "$x" 0.3
    ((arrived)) && return 0
    sleep 0.2
  done
}
room() { "${sub[@]}" -t "proximity-fleet/devices/$charlie/room" -C 1 -W 2 2> /dev/null || true; }
in_room() { [ "$(room)" = "$1" ]; }

echo
echo "A local Mosquitto on 127.0.0.1:$port; bluez-sim plays alpha (0, 0), bravo (5, 0) and charlie"
echo "(0, 0.3). alpha and bravo publish to the broker; proximity-fleet tracks charlie ($charlie)."
say "The raw topics, as any MQTT client sees them:"
echo "  ${sub[*]} -t 'proximityd/#' -t 'proximity-fleet/#' -t 'homeassistant/#' -v"
echo "  ${sub[*]} -t 'espresense/devices/#' -v      # ESPresense's form (compat: [espresense])"
echo "The fleet's table:"
echo "  export PATH=$bin:\$PATH"
echo "  proximityctl fleet --broker $broker"
echo "The live map (floor plan, charlie's position, the nodes' health), in a browser:"
echo "  $map      (JSON: ${map}api/devices, ${map}api/nodes, ${map}api/plan)"

if $once; then
  since=$SECONDS
  say "1. charlie stands 0.3 m from alpha. Once alpha and bravo have identified it, its room is alpha:"
  wait_for 90 "charlie's room to be alpha" in_room alpha
  show timeout 10 "${sub[@]}" -t "proximityd/+/peers/$charlie" -C 2 -v
  show proximityctl fleet --broker "$broker" --count 1
  say "2. charlie walks to 0.3 m from bravo (1.25 m/s): its room follows."
  walk 0 5 1.25
  walked=$SECONDS
  wait_for 60 "charlie's room to be bravo" in_room bravo
  show proximityctl fleet --broker "$broker" --count 1
  show "${sub[@]}" -t "proximity-fleet/devices/$charlie/room" -C 1 -v
  say "The live map's JSON: charlie's position on the plan, as the page shows it."
  show python3 -c 'import json, sys, urllib.request
table = json.load(urllib.request.urlopen(sys.argv[1] + "api/devices", timeout=10))
for d in table["devices"]:
    print(d["id"], d["room"], d.get("position"))' "$map"
  echo
  echo "proximity-fleet's log:"
  grep ' room' "$run_dir/fleet.log" | sed 's/^/  /' || true
  echo
  echo "Checked: charlie's room went from alpha to bravo ($((SECONDS - walked)) s after the 4 s walk ended)."
  echo "demo OK in $((SECONDS - started)) s."
  exit 0
fi

# --- interactive: the live table while charlie walks ----------------------------------------------------
(
  wait_for 90 "charlie's room" in_room alpha
  while :; do
    sleep 8; walk 0 5 1.25
    sleep 12; walk 5 0 1.25
  done
) > /dev/null 2>&1 &
pids+=($!)
say "proximityctl fleet, live (charlie walks between alpha and bravo, pausing 8 to 12 s at each). Ctrl-C stops."
proximityctl fleet --broker "$broker" --timeout 120 || true
