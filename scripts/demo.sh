#!/usr/bin/env bash
# The main job, live, with no Bluetooth hardware: bluez-sim plays the air and bluetoothd for three
# boxes (each a private dbus-daemon playing that box's system bus), a proximityd runs on every box,
# and everything is queried exactly as a user would on real machines: busctl, bluetoothctl,
# proximityctl.
#   scripts/demo.sh [--once] [--scenario FILE]
#     --once      run the walk-through and exit (the default when not on a terminal)
#     --scenario  default scenarios/walk-past.yaml: charlie walks past alpha and bravo
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh

once=false
scenario=scenarios/walk-past.yaml
while [ $# -gt 0 ]; do
  case "$1" in
    --once) once=true ;;
    --scenario) scenario="$2"; shift ;;
    *) echo "usage: scripts/demo.sh [--once] [--scenario FILE]" >&2; exit 64 ;;
  esac
  shift
done
[ -t 0 ] || once=true

echo "Building proximityd, proximityctl and bluez-sim…"
swift build --product proximityd >/dev/null
swift build --product proximityctl >/dev/null
swift build --product bluez-sim >/dev/null
bin="$(swift build --show-bin-path)"

run_dir="$(mktemp -d /tmp/proximityd-demo.XXXXXX)"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$run_dir"
}
trap cleanup EXIT
trap 'exit 0' INT TERM

# The simulator prints one JSON line once org.bluez is up on every box, and writes NAME.address.
"$bin/bluez-sim" --scenario "$scenario" --json --runtime-dir "$run_dir" > "$run_dir/sim.json" 2> "$run_dir/sim.log" &
pids+=($!)
for _ in $(seq 400); do
  [ -s "$run_dir/sim.json" ] && break
  kill -0 "${pids[0]}" 2>/dev/null || { cat "$run_dir/sim.log" >&2; exit 1; }
  sleep 0.05
done
boxes=()
for f in "$run_dir"/*.address; do boxes+=("$(basename "$f" .address)"); done
address() { cat "$run_dir/$1.address"; }

for box in "${boxes[@]}"; do
  "$bin/proximityd" run --bus "$(address "$box")" --state-dir "$run_dir/$box-state" --name "$box" \
    2> "$run_dir/$box-proximityd.log" &
  pids+=($!)
done
for box in "${boxes[@]}"; do
  for _ in $(seq 200); do
    busctl --address="$(address "$box")" status org.proximityd >/dev/null 2>&1 && break
    sleep 0.05
  done
done

show() {
  printf '\n\033[1m$ %s\033[0m\n' "$*"
  "$@" || true
}
first="${boxes[0]}"
echo
echo "bluez-sim is simulating ${#boxes[@]} boxes from $scenario: ${boxes[*]}."
for box in "${boxes[@]}"; do echo "  $box: $(address "$box")"; done

echo
echo "On each box, BlueZ (simulated) and proximityd answer as they would on a real machine."
show busctl --address="$(address "$first")" tree org.bluez
show env DBUS_SYSTEM_BUS_ADDRESS="$(address "$first")" bluetoothctl list
echo
echo "BlueZ's own bluetoothctl scans the simulated air from $first (4 s): the third-party beacon on the shelf appears."
show env DBUS_SYSTEM_BUS_ADDRESS="$(address "$first")" bluetoothctl --timeout 4 scan on
for box in "${boxes[@]}"; do
  show "$bin/proximityctl" status --bus "$(address "$box")"
done
show busctl --address="$(address "$first")" get-property org.proximityd /org/proximityd org.proximityd.Node1 Identifier
show "$bin/bluez-sim" ctl --bus "$(address "$first")" move charlie 1 0

cat <<TEXT

Advertising the general UUID, identifying peers over GATT and ranging them come with the node's
next stage (see README "Status"); the simulator and the node's bus API are live now.
TEXT

if ! $once; then
  cat <<TEXT

Try it in another terminal while this one runs (Ctrl-C stops everything):
  busctl --address=$(address "$first") introspect org.proximityd /org/proximityd
  DBUS_SYSTEM_BUS_ADDRESS=$(address "$first") bluetoothctl
  $bin/bluez-sim ctl --bus $(address "$first") status
  $bin/proximityctl status --bus $(address "$first") --json
On a real machine the same commands are: busctl --system ...   bluetoothctl   proximityctl status
TEXT
  wait "${pids[0]}"
fi
