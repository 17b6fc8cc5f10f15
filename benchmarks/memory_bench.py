#!/usr/bin/python3
"""Bounded memory (issue 33, item 4): a node's RSS before and after hostile D-Bus calls, and what
refusing the largest config file it reads costs, on one build or two in the same run.

For each build, a fresh bluez-sim room (one box, three iBeacons in range) and one proximityd on
the box's bus, run as root with a config file of one region and one alert:

- **hostile calls**: once the node ranges the beacons and its RSS has settled (3 s), --calls
  method calls (10,000 by default) over one connection, eight kinds in turn, each refused: a
  512 KiB region identifier; a matcher of 10,000 entries; a matcher whose value is a variant
  nested 60 deep; a 512 KiB rule; StartRecording of 10,000 peers; a 512 KiB peer name; a call
  of a known method with a 10,000-element array of the wrong signature; Properties.Set of a
  read-only property to a 512 KiB string. RSS is read (/proc/PID/status VmRSS) before, at its
  peak (every 200 calls), and 3 s after the last call; the goal: after <= 1.5 x before.
- **the largest messages**: three calls each of four kinds, each message near the 32 MiB the
  system bus allows: 7,000,000 int32s to GetPeers, StartRecording of 2,000,000 peers, a matcher
  of 1,000,000 entries, a 30 MB IRK name; RSS before, at its peak and after (goal: <= 1.5 x).
- **the largest config file refused**: the config file replaced by one of --config-size bytes
  (default: the reader's cap, YAMLLimits.maxSize) of flow-style regions whose last one is invalid,
  then Node1.Reload: the time until the node answers (InvalidConfiguration), and RSS before,
  peak, and 3 s after; the goals: under 1 s, and at most 30 MB more RSS after than before. A file
  1 byte over the cap is refused too (its time printed). Then a 320-byte file whose YAML aliases
  stand for just under the reader's limit of values (YAMLLimits.maxValues): the same goals.

Between the two the node must still answer, range the beacons and hold its region and alert.

Usage: memory_bench.py --bin DIR [--proximityd PATH] [--baseline-proximityd PATH]
                       [--calls 10000] [--config-size BYTES] [--json] [--keep]
  e.g. benchmarks/memory_bench.py --bin .build-release/release
       benchmarks/memory_bench.py --bin .build-release/release --baseline-proximityd ~/.cache/proximityd-bench/SHA/.build-release/release/proximityd
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

import dbus

NODE = "org.proximityd"
PATH = "/org/proximityd"
BIG = 512 * 1024
MAX_CONFIG = 1 << 20  # keep in step with Sources/StrictYAML/YAMLLimits.swift (maxSize)
MAX_VALUES = 1_000_000  # and maxValues


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for {pid}")


class Peak(threading.Thread):
    """Samples a process's RSS every 20 ms until stopped: the peak."""
    def __init__(self, pid):
        super().__init__(daemon=True)
        self.pid, self.peak, self.running = pid, rss_mb(pid), True

    def run(self):
        while self.running:
            try:
                self.peak = max(self.peak, rss_mb(self.pid))
            except (OSError, RuntimeError):
                return
            time.sleep(0.02)

    def stop(self):
        self.running = False
        self.join()
        return self.peak


def wait_for(what, condition, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if condition():
                return
        except dbus.DBusException:
            pass
        time.sleep(0.05)
    raise RuntimeError(f"timed out waiting for {what}")


def scenario():
    beacons = [{"name": f"b{i}", "address": f"C0:00:00:00:00:0{i}", "position": [1 + i, 0],
                "ibeacon": {"uuid": "f7826da6-4fa2-4e98-8024-bc5b71e0893e", "major": 1, "minor": i}}
               for i in range(1, 4)]
    return {"seed": 1, "radio": {"shadowing_sigma": 0, "packet_loss": 0},
            "boxes": [{"name": "box", "address": "02:00:00:00:00:01", "position": [0, 0]}], "beacons": beacons}


GOOD_CONFIG = """regions:
  - identifier: kontakt
    match: { uuid: f7826da6-4fa2-4e98-8024-bc5b71e0893e }
alerts:
  - identifier: near-kontakt
    match: { uuid: f7826da6-4fa2-4e98-8024-bc5b71e0893e }
    range: near
"""


def refused_config(size):
    """A config file of exactly `size` bytes: flow-style regions, the last with an invalid UUID
    (so the whole file is read and parsed before it is refused), padded with a comment."""
    head = "regions:\n"
    last = "  - { identifier: bad, match: { uuid: not-a-uuid } }\n"
    lines = [head]
    used = len(head) + len(last)
    i = 0
    while True:
        line = f"  - {{ identifier: r{i:06d}, match: {{ uuid: f7826da6-4fa2-4e98-8024-bc5b71e0893e, major: {i % 65536} }} }}\n"
        if used + len(line) + 2 > size:
            break
        lines.append(line)
        used += len(line)
        i += 1
    lines.append(last)
    text = "".join(lines)
    pad = size - len(text.encode())
    if pad >= 2:
        text += "#" + "x" * (pad - 2) + "\n"
    elif pad == 1:
        text += "\n"
    assert len(text.encode()) == size, (len(text.encode()), size)
    return text, i


def alias_config(values):
    """A small config file whose aliases, expanded, stand for just under `values` values (the
    reader's maxValues): every one is built before the file is refused (`regions` holds lists,
    not regions)."""
    lines = ["x0: &x0 [0, 0, 0, 0, 0, 0, 0, 0, 0, 0]\n"]
    size = 11                      # values x0 stands for
    total = 1 + 1 + size           # the top mapping, the key, x0
    level = 0
    while total + 1 + 2 * (1 + 10 * size) + 2 <= values:
        level += 1
        lines.append(f"x{level}: &x{level} [" + ", ".join([f"*x{level - 1}"] * 10) + "]\n")
        size = 1 + 10 * size
        total += 1 + size
    count = max(1, (values - total - 2) // size)
    lines.append("regions: [" + ", ".join([f"*x{level}"] * count) + "]\n")
    total += 1 + 1 + count * size
    return "".join(lines), total


def hostile_kinds(bus):
    node = bus.get_object(NODE, PATH, introspect=False)
    big = "x" * BIG
    many = dbus.Dictionary({f"k{i}": dbus.String("v", variant_level=1) for i in range(10_000)}, signature="sv")
    deep = dbus.Dictionary({"uuid": dbus.String("x", variant_level=60)}, signature="sv")
    peers = dbus.Array([f"peer-{i:05d}-" + "y" * 90 for i in range(10_000)], signature="s")
    wrong = dbus.Array(list(range(10_000)), signature="i")
    return [
        ("512 KiB region identifier", lambda: node.StartMonitoring(big, dbus.Dictionary({}, signature="sv"),
                                                                   dbus_interface=NODE + ".RegionMonitor1", timeout=30)),
        ("matcher of 10,000 entries", lambda: node.StartMonitoring("r", many, dbus_interface=NODE + ".RegionMonitor1", timeout=30)),
        ("variant nested 60 deep", lambda: node.StartMonitoring("r", deep, dbus_interface=NODE + ".RegionMonitor1", timeout=30)),
        ("512 KiB rule", lambda: node.AddRule("rule", big, dbus_interface=NODE + ".Profile1", timeout=30)),
        ("StartRecording of 10,000 peers", lambda: node.StartRecording(peers, dbus_interface=NODE + ".Node1", timeout=30)),
        ("512 KiB peer name", lambda: node.SetPeerName("nobody", big, dbus_interface=NODE + ".Node1", timeout=30)),
        ("10,000 int32s to GetPeers", lambda: node.get_dbus_method("GetPeers", NODE + ".Node1")(wrong, timeout=30)),
        ("Set a read-only property", lambda: node.Set(NODE + ".Node1", "Name", dbus.String(big, variant_level=1),
                                                      dbus_interface="org.freedesktop.DBus.Properties", timeout=30)),
    ]


def measure(args, proximityd):
    work = tempfile.mkdtemp(prefix="memory-bench-")
    sim = node = None
    result = {"build": proximityd}
    try:
        with open(os.path.join(work, "scenario.json"), "w") as f:
            json.dump(scenario(), f)
        sim = subprocess.Popen([os.path.join(args.bin, "bluez-sim"), "--scenario", os.path.join(work, "scenario.json"),
                                "--runtime-dir", work], stdout=subprocess.DEVNULL, stderr=open(os.path.join(work, "sim.log"), "w"))
        listing = os.path.join(work, "boxes.json")
        wait_for("bluez-sim", lambda: os.path.exists(listing), 30)
        address = json.load(open(listing))["boxes"][0]["bus"]
        config = os.path.join(work, "proximityd.yaml")
        with open(config, "w") as f:
            f.write(GOOD_CONFIG)
        node = subprocess.Popen([proximityd, "run", "--bus", address, "--state-dir", os.path.join(work, "state"), "--name", "box",
                                 "--config", config, "--log-level", "notice"],
                                stdout=subprocess.DEVNULL, stderr=open(os.path.join(work, "node.log"), "w"))
        bus = dbus.bus.BusConnection(address)
        wait_for("the node on the bus", lambda: bus.name_has_owner(NODE), 60)
        proxy = bus.get_object(NODE, PATH, introspect=False)

        def ranging():
            return len(proxy.GetRanging(dbus_interface=NODE + ".Node1", timeout=5)) == 3
        wait_for("the node ranging the three beacons", ranging, 60)
        time.sleep(3)
        before = rss_mb(node.pid)
        peak = Peak(node.pid)
        peak.start()
        kinds = hostile_kinds(bus)
        refused = {name: 0 for name, _ in kinds}
        errors = {}
        accepted = []
        started = time.monotonic()
        for i in range(args.calls):
            name, call = kinds[i % len(kinds)]
            try:
                call()
                accepted.append(name)
            except dbus.DBusException as error:
                if error.get_dbus_name() == "org.freedesktop.DBus.Error.NoReply":
                    raise RuntimeError(f"{name}: the node did not answer") from error
                refused[name] += 1
                errors.setdefault(name, error.get_dbus_name())
        took = time.monotonic() - started
        top = peak.stop()
        time.sleep(3)
        after = rss_mb(node.pid)
        if not ranging():
            raise RuntimeError("the node no longer ranges the beacons after the hostile calls")
        result["hostile"] = {"calls": args.calls, "seconds": round(took, 1), "rss_before_mb": round(before, 1),
                             "rss_peak_mb": round(top, 1), "rss_after_mb": round(after, 1), "ratio": round(after / before, 2),
                             "accepted": len(accepted), "refused": refused, "errors": errors}

        # The largest messages the bus lets through (dbus-daemon's max_message_size: 32 MiB), three of each.
        largest = {
            "7,000,000 int32s to GetPeers": lambda: proxy.get_dbus_method("GetPeers", NODE + ".Node1")(
                dbus.Array(range(7_000_000), signature="i"), timeout=120),
            "StartRecording of 2,000,000 peers": lambda: proxy.StartRecording(
                dbus.Array(["ab"] * 2_000_000, signature="s"), dbus_interface=NODE + ".Node1", timeout=120),
            "a matcher of 1,000,000 entries": lambda: proxy.StartMonitoring("r", dbus.Dictionary(
                {f"k{i}": dbus.Byte(1, variant_level=1) for i in range(1_000_000)}, signature="sv"),
                dbus_interface=NODE + ".RegionMonitor1", timeout=120),
            "a 30 MB IRK name": lambda: proxy.AddIRK("x" * 30_000_000, "y", dbus_interface=NODE + ".Node1", timeout=120),
        }
        time.sleep(1)
        before = rss_mb(node.pid)
        peak = Peak(node.pid)
        peak.start()
        answers = {}
        started = time.monotonic()
        for name, call in largest.items():
            for _ in range(3):
                try:
                    call()
                    answers[name] = "accepted"
                except dbus.DBusException as error:
                    answers[name] = error.get_dbus_name()
        took = time.monotonic() - started
        top = peak.stop()
        time.sleep(3)
        after = rss_mb(node.pid)
        result["largest"] = {"seconds": round(took, 1), "rss_before_mb": round(before, 1), "rss_peak_mb": round(top, 1),
                             "rss_after_mb": round(after, 1), "ratio": round(after / before, 2), "answers": answers}

        def refuse(text):
            """Writes `text` as the config file and reloads: the time to the answer, the error's
            name, and RSS before, at the peak and 3 s after."""
            with open(config, "w") as f:
                f.write(text)
            time.sleep(1)
            before = rss_mb(node.pid)
            peak = Peak(node.pid)
            peak.start()
            started = time.monotonic()
            name = None
            try:
                proxy.Reload(dbus_interface=NODE + ".Node1", timeout=120)
            except dbus.DBusException as error:
                name = error.get_dbus_name()
            took = time.monotonic() - started
            top = peak.stop()
            time.sleep(3)
            after = rss_mb(node.pid)
            return {"seconds": round(took, 3), "error": name, "rss_before_mb": round(before, 1), "rss_peak_mb": round(top, 1),
                    "rss_after_mb": round(after, 1), "lasting_mb": round(after - before, 1)}

        # The largest config file, refused; one byte more; aliases expanded to just under the
        # reader's limit of values.
        text, regions = refused_config(args.config_size)
        largest_file = refuse(text)
        over = refuse(text + "#")
        text, values = alias_config(args.alias_values)
        result["aliases"] = {"bytes": len(text), "values": values, **refuse(text)}
        monitor = bus.get_object(NODE, PATH, introspect=False)
        kept = str(monitor.RequestState("kontakt", dbus_interface=NODE + ".RegionMonitor1", timeout=5))
        result["config"] = {"bytes": args.config_size, "regions": regions, **largest_file,
                            "one_byte_over": (over["error"], over["seconds"]), "region_kept": kept}
        result["alive"] = node.poll() is None and ranging()
        return result
    finally:
        for process in (node, sim):
            if process:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    process.kill()
        if args.keep:
            print(f"kept {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)


def report(r):
    h, c = r["hostile"], r["config"]
    print(f"== {r['build']}")
    print(f"  {h['calls']} hostile calls in {h['seconds']} s: RSS {h['rss_before_mb']} MB before, {h['rss_peak_mb']} MB peak, "
          f"{h['rss_after_mb']} MB after = {h['ratio']} x  (goal <= 1.5 x: {'met' if h['ratio'] <= 1.5 else 'NOT MET'})")
    print(f"    refused: " + ", ".join(f"{k} {v} ({h['errors'].get(k)})" for k, v in h["refused"].items()) + f"; accepted: {h['accepted']}")
    g = r["largest"]
    print(f"  12 of the largest messages the bus allows in {g['seconds']} s: RSS {g['rss_before_mb']} MB before, "
          f"{g['rss_peak_mb']} MB peak, {g['rss_after_mb']} MB after = {g['ratio']} x  "
          f"(goal <= 1.5 x: {'met' if g['ratio'] <= 1.5 else 'NOT MET'})")
    print("    answers: " + ", ".join(f"{k} {v}" for k, v in g["answers"].items()))
    ok_time = c["seconds"] < 1
    ok_rss = c["lasting_mb"] <= 30
    print(f"  config file of {c['bytes']} bytes ({c['regions']} regions, the last invalid) refused in {c['seconds']} s "
          f"({c['error']}): RSS {c['rss_before_mb']} MB before, {c['rss_peak_mb']} MB peak, {c['rss_after_mb']} MB after, "
          f"{c['lasting_mb']:+} MB lasting  (goals < 1 s: {'met' if ok_time else 'NOT MET'}; <= 30 MB: {'met' if ok_rss else 'NOT MET'})")
    a = r["aliases"]
    print(f"  config file of {a['bytes']} bytes whose aliases stand for {a['values']} values refused in {a['seconds']} s "
          f"({a['error']}): RSS {a['rss_before_mb']} MB before, {a['rss_peak_mb']} MB peak, {a['rss_after_mb']} MB after, "
          f"{a['lasting_mb']:+} MB lasting  (goals < 1 s: {'met' if a['seconds'] < 1 else 'NOT MET'}; "
          f"<= 30 MB: {'met' if a['lasting_mb'] <= 30 else 'NOT MET'})")
    print(f"    one byte over: {c['one_byte_over']}; region kontakt still {c['region_kept']}; node alive and ranging: {r['alive']}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", required=True, help="directory with bluez-sim (and proximityd)")
    parser.add_argument("--proximityd", help="the proximityd to measure (default: BIN/proximityd)")
    parser.add_argument("--baseline-proximityd", help="another build measured in the same run, first")
    parser.add_argument("--calls", type=int, default=10_000)
    parser.add_argument("--config-size", type=int, default=MAX_CONFIG)
    parser.add_argument("--alias-values", type=int, default=MAX_VALUES - 1000)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    if not 8 <= args.calls <= 1_000_000 or not 1024 <= args.config_size <= 64 << 20:
        parser.error("--calls: 8...1,000,000; --config-size: 1024...64 MiB")
    builds = ([args.baseline_proximityd] if args.baseline_proximityd else []) + [args.proximityd or os.path.join(args.bin, "proximityd")]
    results = [measure(args, b) for b in builds]
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        for r in results:
            report(r)
    failed = any(r["hostile"]["ratio"] > 1.5 or r["config"]["seconds"] >= 1 or r["config"]["lasting_mb"] > 30 or not r["alive"]
                 or r["largest"]["ratio"] > 1.5 or r["aliases"]["seconds"] >= 1 or r["aliases"]["lasting_mb"] > 30
                 for r in results[-1:])
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
