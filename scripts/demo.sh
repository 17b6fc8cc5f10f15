#!/usr/bin/env bash
# The main job, live: a box (a private dbus-daemon playing a machine's system bus) with proximityd
# on it, queried with busctl exactly as a user would on a real machine.
#   scripts/demo.sh          run, then keep the box up until Ctrl-C
#   scripts/demo.sh --once   run the walk-through and exit
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh

once=false
[ "${1:-}" = "--once" ] && once=true
[ -t 0 ] || once=true

swift build --product proximityd >/dev/null
swift build --product proximityctl >/dev/null
bin="$(swift build --show-bin-path)"

box="$(mktemp -d /tmp/proximityd-demo.XXXXXX)"
cat > "$box/bus.conf" <<CONF
<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <listen>unix:path=$box/bus</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/><allow own="*"/><allow send_destination="*"/><allow receive_sender="*"/>
  </policy>
</busconfig>
CONF
dbus-daemon --config-file="$box/bus.conf" --nofork --nopidfile --print-address > "$box/address" &
bus_pid=$!
node_pid=""
cleanup() {
  [ -n "$node_pid" ] && kill "$node_pid" 2>/dev/null && wait "$node_pid" 2>/dev/null || true
  kill "$bus_pid" 2>/dev/null || true
  rm -rf "$box"
}
trap cleanup EXIT
trap 'exit 0' INT TERM
for _ in $(seq 100); do [ -s "$box/address" ] && break; sleep 0.05; done
address="unix:path=$box/bus"

"$bin/proximityd" run --bus "$address" --state-dir "$box/state" --name demo-box 2> "$box/proximityd.log" &
node_pid=$!
# Wait until the node owns its name (busctl status answers) or has exited.
for _ in $(seq 200); do
  busctl --address="$address" status org.proximityd >/dev/null 2>&1 && break
  kill -0 "$node_pid" 2>/dev/null || { cat "$box/proximityd.log" >&2; exit 1; }
  sleep 0.05
done

run() {
  printf '\n\033[1m$ %s\033[0m\n' "$*"
  "$@"
}
echo "A box is up: its bus is $address; proximityd runs on it."
run busctl --address="$address" tree org.proximityd
run busctl --address="$address" introspect org.proximityd /org/proximityd org.proximityd.Node1
run busctl --address="$address" get-property org.proximityd /org/proximityd org.proximityd.Node1 Identifier Name ServiceUUID
run busctl --address="$address" call org.proximityd /org/proximityd org.proximityd.Node1 GetPeers
run "$bin/proximityctl" status --bus "$address"
printf '\nproximityd log:\n'; sed 's/^/  /' "$box/proximityd.log"

if ! $once; then
  cat <<TEXT

Try it yourself, in another terminal, while this one runs (Ctrl-C stops the box):
  busctl --address=$address introspect org.proximityd /org/proximityd
  busctl --address=$address get-property org.proximityd /org/proximityd org.proximityd.Node1 Identifier
  $bin/proximityctl status --bus $address --json
On a real machine the same commands are: busctl --system ...   and   proximityctl status
TEXT
  wait "$node_pid"
fi
