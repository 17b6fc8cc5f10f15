#!/usr/bin/env python3
"""proximityd and proximity-fleet in a real Home Assistant (issue 34): what a household sees.

bluez-sim plays two boxes, the kitchen and the hall 5 m apart, and Anna's keys (an iBeacon)
1 m from the kitchen's box and 4 m from the hall's. Each box runs proximityd publishing to a real
Mosquitto (discovery on, `compat: [espresense, mqtt-room]`); proximity-fleet decides rooms on a
floor plan of the two rooms. Home Assistant (the newest release installable here, set up by
setup.sh) is onboarded, gets its MQTT integration through the config flow as a person adds it,
and has two `mqtt_room` sensors with their default settings, one on `room_presence`, one on
ESPresense's topic. Checked:

- the entities Home Assistant made from the discovery: their entity ids (the payloads'
  object_id / default_entity_id), names and states: each box's connectivity and peer count, the
  keys' device_tracker and room sensor ("kitchen", named "Anna's keys"), each room's occupancy
  and device count (with the names attribute);
- the keys standing still for 150 s: neither mqtt_room sensor changes room.

Run after a debug build (scripts/test.sh builds it); tests/homeassistant/run.sh sets it up.
Prints one line per check and exits non-zero when one fails.
"""
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import ha_harness as H  # noqa: E402

REPO = os.path.dirname(os.path.dirname(HERE))
KEYS = "ibeacon:f7826da6-4fa2-4e98-8024-bc5b71e0893e:1:2"
STILL_SECONDS = float(os.environ.get("HA_STILL_SECONDS", "150"))

SCENARIO = f"""\
seed: 34
radio: {{ path_loss_exponent: 2.0, shadowing_sigma: 2, packet_loss: 0.05, advertising_interval: 0.1 }}
boxes:
  - {{ name: kitchen, address: "02:00:00:00:00:01", position: [0, 0] }}
  - {{ name: hall,    address: "02:00:00:00:00:02", position: [5, 0] }}
beacons:
  - name: keys
    address: "C0:00:00:00:00:01"
    ibeacon: {{ uuid: f7826da6-4fa2-4e98-8024-bc5b71e0893e, major: 1, minor: 2 }}
    position: [1, 0]
"""

PLAN = """\
nodes:
  - { name: kitchen, position: [0, 0] }
  - { name: hall,    position: [5, 0] }
rooms:
  - { name: kitchen, polygon: [[-2.5, -2], [2.5, -2], [2.5, 2], [-2.5, 2]] }
  - { name: hall,    polygon: [[2.5, -2], [7.5, -2], [7.5, 2], [2.5, 2]] }
"""

passed = 0
failed = 0


def check(name, ok, detail=""):
    global passed, failed
    if ok:
        passed += 1
        print(f"ok - {name}", flush=True)
    else:
        failed += 1
        print(f"not ok - {name}" + (f": {detail}" if detail else ""), flush=True)


def products():
    out = subprocess.run(["swift", "build", "--show-bin-path"], cwd=REPO, capture_output=True, text=True, check=True)
    return out.stdout.strip()


def main():
    work = tempfile.mkdtemp(prefix="proximityd-ha-")
    bin_dir = os.environ.get("PROXIMITYD_BIN") or products()
    processes = []

    def spawn(name, argv):
        log = open(os.path.join(work, f"{name}.log"), "w")
        p = subprocess.Popen(argv, cwd=work, stdout=log, stderr=subprocess.STDOUT, preexec_fn=H._set_pdeathsig)
        processes.append((name, p))
        return p

    broker = H.Mosquitto().start()
    try:
        port = broker.port
        with open(os.path.join(work, "house.yaml"), "w") as f:
            f.write(SCENARIO)
        spawn("bluez-sim", [f"{bin_dir}/bluez-sim", "run", "--scenario", "house.yaml", "--runtime-dir", "run"])
        H.wait_until(lambda: os.path.exists(os.path.join(work, "run", "boxes.json")), 60, "bluez-sim's boxes")
        for room in ["kitchen", "hall"]:
            with open(os.path.join(work, f"{room}.yaml"), "w") as f:
                f.write(f"name: {room}\nnames:\n  {KEYS}: Anna's keys\nmqtt:\n  broker: mqtt://127.0.0.1:{port}\n"
                        "  compat: [espresense, mqtt-room]\n")
            address = open(os.path.join(work, "run", f"{room}.address")).read().strip()
            spawn(room, [f"{bin_dir}/proximityd", "run", "--bus", address, "--state-dir", f"state-{room}", "--config", f"{room}.yaml"])
        with open(os.path.join(work, "plan.yaml"), "w") as f:
            f.write(PLAN)
        spawn("fleet", [f"{bin_dir}/proximity-fleet", "run", "--broker", f"mqtt://127.0.0.1:{port}", "--plan", "plan.yaml"])

        t0 = time.monotonic()
        ha = H.HomeAssistantInstance(broker_port=port, mqtt_rooms=[
            (KEYS, "keys room_presence", "room_presence"),
            (KEYS, "keys espresense", f"espresense/devices/{KEYS}"),
        ], state_dir=os.path.join(work, "ha"))
        with ha:
            print(f"# Home Assistant {ha.info()['version']} ready in {time.monotonic() - t0:.1f} s", flush=True)
            url, token = ha.url, ha.token

            # The ids the discovery asked for, as the fleet published them.
            def retained(topic):
                out = subprocess.run(["mosquitto_sub", "-p", str(port), "-t", topic, "-C", "1", "-W", "30"],
                                     capture_output=True, text=True)
                return json.loads(out.stdout) if out.stdout.strip() else {}
            tracker_config = retained("homeassistant/device_tracker/+/config")
            tracker = tracker_config.get("default_entity_id", "")
            check("the fleet's device_tracker discovery carries default_entity_id and object_id",
                  tracker.startswith("device_tracker.proximity_fleet_ibeacon_f7826da6_4fa2")
                  and tracker == "device_tracker." + tracker_config.get("object_id", ""), json.dumps(tracker_config))
            room_sensor = tracker.replace("device_tracker.", "sensor.") + "_room"

            expected = {
                "binary_sensor.proximityd_kitchen_connectivity": ("on", "Connectivity"),
                "binary_sensor.proximityd_hall_connectivity": ("on", "Connectivity"),
                "sensor.proximityd_kitchen_peers": (None, "Peers"),
                tracker: ("kitchen", None),
                room_sensor: ("kitchen", "Room"),
                "binary_sensor.proximity_fleet_kitchen_occupancy": ("on", "kitchen occupancy"),
                "sensor.proximity_fleet_kitchen_devices": ("1", "kitchen devices"),
                "binary_sensor.proximity_fleet_hall_occupancy": ("off", "hall occupancy"),
                "sensor.proximity_fleet_hall_devices": ("0", "hall devices"),
            }
            deadline = time.monotonic() + 120
            for entity, (state, _) in expected.items():
                try:
                    H.wait_for_state(url, token, entity, state, timeout=max(1, deadline - time.monotonic()))
                except H.HarnessError:
                    pass   # reported below
            states = {s["entity_id"]: s for s in H.get_states(url, token)}
            registry = {e["entity_id"]: e for e in H.entity_registry(url, token)}
            for entity, (state, name) in expected.items():
                s = states.get(entity)
                r = registry.get(entity, {})
                got = s and s["state"]
                if state is None:
                    ok = got is not None and got.isdigit() and int(got) >= 1
                else:
                    ok = got == state
                check(f"{entity} is {state or 'a count of 1 or more'}", ok, f"state {got!r}")
                check(f"{entity} is named {name or 'after its device'}", r.get("original_name") == name,
                      f"original_name {r.get('original_name')!r}")
            check("the keys' tracker shows Anna's keys", (states.get(tracker) or {}).get("attributes", {}).get("friendly_name") == "Anna's keys",
                  json.dumps((states.get(tracker) or {}).get("attributes")))
            kitchen_devices = (states.get("sensor.proximity_fleet_kitchen_devices") or {}).get("attributes", {})
            check("the kitchen's devices name Anna's keys", kitchen_devices.get("names") == ["Anna's keys"], json.dumps(kitchen_devices))
            unavailable = sorted(e for e, s in states.items() if s["state"] == "unavailable"
                                 and registry.get(e, {}).get("platform") == "mqtt")
            check("no MQTT entity is unavailable", not unavailable, ", ".join(unavailable))

            # mqtt_room with its defaults: the keys stand still; no room change in 150 s.
            sensors = {name: ha.room_entities[name] for name in ["keys room_presence", "keys espresense"]}
            for name, entity in sensors.items():
                try:
                    H.wait_for_state(url, token, entity, "kitchen", timeout=60)
                    check(f"mqtt_room ({name}) says kitchen", True)
                except H.HarnessError as e:
                    check(f"mqtt_room ({name}) says kitchen", False, str(e))
            changes = {entity: [] for entity in sensors.values()}

            def record(event):
                if event["entity_id"] in changes and event.get("old") != event.get("new"):
                    changes[event["entity_id"]].append(event)
            with H.WebSocket(url, token) as ws:
                ws.call("subscribe_events", event_type="state_changed")
                deadline = time.monotonic() + STILL_SECONDS
                while (remaining := deadline - time.monotonic()) > 0:
                    try:
                        msg = ws.recv(remaining)
                    except OSError:
                        break
                    if msg.get("type") != "event":
                        continue
                    data = msg["event"]["data"]
                    old, new = data.get("old_state"), data.get("new_state")
                    record({"entity_id": data.get("entity_id"), "old": old and old["state"], "new": new and new["state"]})
            for name, entity in sensors.items():
                check(f"mqtt_room ({name}), default timeout: 0 room changes in {STILL_SECONDS:.0f} s while the keys stand still",
                      not changes[entity], json.dumps(changes[entity]))
            # The traffic that costs: each node's compatibility reports of the one present device.
            count = subprocess.run(["timeout", "10", "mosquitto_sub", "-p", str(port), "-t", "room_presence/#", "-v"],
                                   capture_output=True, text=True).stdout.splitlines()
            per_node = {room: sum(1 for line in count if line.startswith(f"room_presence/{room} ")) / 10 for room in ["kitchen", "hall"]}
            print(f"# room_presence messages a second, one device: {per_node}", flush=True)
            check("each node sends a present device in room_presence at most once a second",
                  all(0 < rate <= 1.0 for rate in per_node.values()), json.dumps(per_node))
    finally:
        for name, p in reversed(processes):
            H.stop_process(p, name, timeout=10)
        broker.stop() if hasattr(broker, "stop") else None
        if failed:
            for name, _ in processes:
                path = os.path.join(work, f"{name}.log")
                if os.path.exists(path):
                    print(f"# --- {name}.log (last 20 lines)")
                    for line in open(path).read().splitlines()[-20:]:
                        print(f"#   {line}")
    print(f"{passed} passed, {failed} failed", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
