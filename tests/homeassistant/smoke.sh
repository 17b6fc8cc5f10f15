#!/usr/bin/env bash
# End-to-end check of the harness and of what Home Assistant 2025.4 does with our MQTT payloads:
# a throwaway mosquitto, a real HA (onboarded, MQTT added by config flow, one mqtt_room sensor),
# retained discovery configs, and the mqtt_room update rule. Run tests/homeassistant/setup.sh first.
# Prints "N passed, N failed"; exits non-zero on any failure.
set -u
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
py="${PYTHON:-/usr/bin/python3}"
H=("$py" "$here/ha_harness.py")   # run directly (not via a function) when backgrounded, so $! is its pid
harness() { "${H[@]}" "$@"; }
work=$(mktemp -d /tmp/ha-smoke-XXXXXX)
pass=0; fail=0
ok()  { pass=$((pass + 1)); echo "ok   - $1"; }
bad() { fail=$((fail + 1)); echo "FAIL - $1"; }
check() { if [ "$2" = "$3" ]; then ok "$1"; else bad "$1: got '$2', want '$3'"; fi; }

cleanup() {
  [ -n "${ha_pid:-}" ] && kill "$ha_pid" 2>/dev/null && wait "$ha_pid" 2>/dev/null
  [ -n "${broker_pid:-}" ] && kill "$broker_pid" 2>/dev/null && wait "$broker_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

wait_line() {  # file timeout
  local i
  for ((i = 0; i < $2 * 10; i++)); do [ -s "$1" ] && return 0; sleep 0.1; done
  return 1
}
jget() { "$py" -c "import json,sys; d=json.load(sys.stdin); print(eval(sys.argv[1]))" "$1"; }

"${H[@]}" broker > "$work/broker.json" 2> "$work/broker.err" & broker_pid=$!
wait_line "$work/broker.json" 15 || { cat "$work/broker.err"; exit 1; }
port=$(jget 'd["port"]' < "$work/broker.json")

"${H[@]}" start --broker-port "$port" --mqtt-room phone-1 --state-dir "$work/ha" \
  > "$work/ready.json" 2> "$work/ha.err" & ha_pid=$!
if ! wait_line "$work/ready.json" 300; then cat "$work/ha.err"; exit 1; fi
cat "$work/ha.err"
check "version" "$(jget 'd["version"]' < "$work/ready.json")" "2025.4.4"
room=$(jget 'd["mqtt_room_entities"]["phone-1"]' < "$work/ready.json")
check "mqtt_room entity" "$room" "sensor.phone_1_room"
S=(--state-dir "$work/ha")

pub() { mosquitto_pub -h 127.0.0.1 -p "$port" "$@"; }
dev='"device":{"identifiers":["pxd-smoke"],"name":"PXD Smoke"}'
pub -r -t homeassistant/sensor/pxd/test_one/config -m '{"name":"Test One","unique_id":"pxd_test_one","object_id":"test_one","default_entity_id":"sensor.test_one","state_topic":"pxd/test_one/state",'"$dev"'}'
pub -r -t homeassistant/sensor/pxd/test_two/config -m '{"name":"Test Two","unique_id":"pxd_test_two","default_entity_id":"sensor.test_two_custom","state_topic":"pxd/test_two/state",'"$dev"'}'
pub -r -t homeassistant/device_tracker/pxd/tracker_one/config -m '{"name":"Tracker One","unique_id":"pxd_tracker_one","object_id":"tracker_one","default_entity_id":"device_tracker.tracker_one","state_topic":"pxd/tracker_one/state","source_type":"bluetooth_le",'"$dev"'}'
pub -r -t homeassistant/binary_sensor/pxd/occ_one/config -m '{"name":"Occupancy One","unique_id":"pxd_occ_one","object_id":"occ_one","default_entity_id":"binary_sensor.occ_one","device_class":"occupancy","state_topic":"pxd/occ_one/state",'"$dev"'}'

harness wait "${S[@]}" --entity sensor.test_one --timeout 20 > /dev/null \
  && ok "object_id + default_entity_id: sensor.test_one" || bad "sensor.test_one never appeared"
harness wait "${S[@]}" --entity sensor.pxd_smoke_test_two --timeout 20 > /dev/null \
  && ok "default_entity_id alone is ignored: sensor.pxd_smoke_test_two" \
  || bad "sensor.pxd_smoke_test_two never appeared"
harness wait "${S[@]}" --entity device_tracker.tracker_one --timeout 20 > /dev/null \
  && ok "device_tracker.tracker_one" || bad "device_tracker.tracker_one never appeared"
harness wait "${S[@]}" --entity binary_sensor.occ_one --timeout 20 > /dev/null \
  && ok "binary_sensor.occ_one" || bad "binary_sensor.occ_one never appeared"
# Retained: HA subscribes to a new entity's state topic in a batch shortly after the entity
# appears, so a non-retained state published right after discovery can be missed.
pub -r -t pxd/tracker_one/state -m home
pub -r -t pxd/occ_one/state -m ON
harness wait "${S[@]}" --entity device_tracker.tracker_one --state home --timeout 10 > /dev/null \
  && ok "tracker home" || bad "tracker not home"
harness wait "${S[@]}" --entity binary_sensor.occ_one --state on --timeout 10 > /dev/null \
  && ok "occupancy on" || bad "occupancy not on"
check "occupancy device_class" \
  "$(harness states "${S[@]}" --entity binary_sensor.occ_one | jget 'd["attributes"].get("device_class")')" "occupancy"
check "registry: unique_id and original_name of sensor.test_one" \
  "$(harness registry "${S[@]}" --platform mqtt | jget '[(e["unique_id"], e["original_name"]) for e in d if e["entity_id"]=="sensor.test_one"]')" \
  "[('pxd_test_one', 'Test One')]"
grep -E "ERROR" "$work/ha/config/home-assistant.log" && bad "errors in the HA log" || ok "no ERROR in the HA log"

# mqtt_room: closer room wins at once; a farther room only after `timeout` (5 s) without update.
"${H[@]}" watch "${S[@]}" --entity "$room" --seconds 9 > "$work/watch.jsonl" & watch_pid=$!
sleep 1  # let the watcher subscribe (the events below come after it)
room_pub() { pub -t "room_presence/$1" -m "{\"id\":\"$2\",\"distance\":$3}"; }
room_pub kitchen phone-1 2.0; sleep 0.5
room_pub office phone-1 3.0; sleep 0.5     # farther, other room, < 5 s: ignored
room_pub office PHONE_1 1.5; sleep 0.5     # closer: office (ids compared slugified, upper case)
room_pub kitchen phone-1 2.5; sleep 5.5    # farther, < 5 s: ignored
room_pub kitchen "phone 1" 9.0             # farther, but >= 5 s since the last update: kitchen
wait "$watch_pid"
check "mqtt_room sequence" \
  "$("$py" -c 'import json,sys; print(" ".join("%s@%s" % (j["new"], j["attributes"]["distance"]) for j in map(json.loads, open(sys.argv[1]))))' "$work/watch.jsonl")" \
  "kitchen@2.0 office@1.5 kitchen@9.0"

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
