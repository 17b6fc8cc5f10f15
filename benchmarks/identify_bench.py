#!/usr/bin/python3
"""Time to identify: N nodes started at the same moment on bluez-sim, until every node's
Node1.GetIdentities lists all the others; open nodes and nodes of a trusted fleet in one run.

For each node count and run: a scenario of N boxes on a circle (all within a few metres, addresses
in shuffled order of position), bluez-sim playing the air and bluetoothd, N proximityd processes
launched together. The time is from the launch of the last node until every GetIdentities is
complete, polled every 20 ms over D-Bus (dbus-python, one connection per box). Connections per
pair come from bluez-sim's own count (GetState: connection_attempts).

--trust: open (no fleet key), keyed (every node's config file names the same fleet key, made by
`proximityctl fleet-key new --output`, mode 0600: the trusted protocol), or both (default: each
run open then keyed, same seed, so the machine's load falls on both alike). After each run the
nodes' Peer1 objects are read: in a keyed run every peer must be Verified.

--decoys 0,100: a flood. Each run is made once per count: that many decoys (bluez-sim's `decoy`
frame: a connectable advertisement of the general UUID from a device that never answers a
connection, so every link to it stalls until the 20-s connect timeout) on a 3-m circle around the
nodes, on the air from the start. The table then compares each count's times with the first's
(the unflooded time): the goal is a flooded median at most 2 x the unflooded one.

Usage: identify_bench.py --bin DIR [--proximityd PATH] [--proximityctl PATH] [--trust both|open|keyed]
                         [--baseline-proximityd PATH] [--decoys 0,100]
                         [--nodes 2,4,10,20] [--runs 3] [--timeout 90] [--seed 1] [--json]
"""
import argparse
import json
import math
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

import dbus


GENERAL_UUID = "b89491c9-43dd-4d75-bf16-dff381aed967"


def scenario(n, seed, decoys=0):
    rng = random.Random(seed)
    addresses = [f"02:00:00:00:{i >> 8:02X}:{i & 0xff:02X}" for i in range(1, n + 1)]
    rng.shuffle(addresses)
    radius = 1.0 if n <= 2 else max(1.5, 0.5 * n / math.pi)
    boxes = []
    for i in range(n):
        a = 2 * math.pi * i / n
        boxes.append({"name": f"n{i:02d}", "address": addresses[i],
                      "position": [round(radius * math.cos(a), 3), round(radius * math.sin(a), 3)]})
    beacons = []
    for i in range(decoys):
        a = 2 * math.pi * i / max(decoys, 1)
        beacons.append({"name": f"decoy{i:03d}", "address": f"D0:00:00:00:{i >> 8:02X}:{i & 0xff:02X}",
                        "decoy": {"uuid": GENERAL_UUID}, "position": [round(3 * math.cos(a), 3), round(3 * math.sin(a), 3)]})
    return {"seed": seed, "radio": {"shadowing_sigma": 2, "packet_loss": 0.1, "connection_failure_rate": 0.0},
            "boxes": boxes, "beacons": beacons}


def wait_for(what, condition, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.02)
    raise RuntimeError(f"timed out waiting for {what}")


def config_file(args, work, trust):
    """The nodes' config file: empty for open nodes, the fleet key for keyed ones."""
    path = os.path.join(work, "proximityd.yaml")
    text = ""
    if trust == "keyed":
        key = os.path.join(work, "fleet.key")
        subprocess.run([args.proximityctl, "fleet-key", "new", "--output", key], check=True, stdout=subprocess.DEVNULL)
        text = f"fleet-key: {key}\n"
    with open(path, "w") as f:
        f.write(text)
    return path


def verified_peers(buses, boxes, n, timeout=10):
    """Peer1 objects of kind node that are Verified, over all nodes, once every node exports one
    for each of its n - 1 peers (or the timeout): (verified, exported)."""
    def count():
        verified = exported = 0
        for b in boxes:
            try:
                objects = buses[b["name"]].get_object("org.proximityd", "/org/proximityd").GetManagedObjects(
                    dbus_interface="org.freedesktop.DBus.ObjectManager", timeout=2)
            except dbus.DBusException:
                continue
            for interfaces in objects.values():
                peer = interfaces.get("org.proximityd.Peer1")
                if peer is not None and str(peer.get("Kind", "")) == "node":
                    exported += 1
                    verified += bool(peer.get("Verified", False))
        return verified, exported
    deadline = time.monotonic() + timeout
    result = count()
    while result[1] < n * (n - 1) and time.monotonic() < deadline:
        time.sleep(0.1)
        result = count()
    return result


def one_run(args, n, seed, trust, proximityd, decoys=0):
    work = tempfile.mkdtemp(prefix=f"identify-bench-{trust}-{n}-")
    sim = None
    nodes = []
    try:
        path = os.path.join(work, "scenario.json")
        with open(path, "w") as f:
            json.dump(scenario(n, seed, decoys), f)
        config = config_file(args, work, trust)
        sim = subprocess.Popen([os.path.join(args.bin, "bluez-sim"), "--scenario", path, "--runtime-dir", work],
                               stdout=subprocess.DEVNULL, stderr=open(os.path.join(work, "sim.log"), "w"))
        listing = os.path.join(work, "boxes.json")
        wait_for("bluez-sim", lambda: os.path.exists(listing), 30)
        boxes = json.load(open(listing))["boxes"]
        buses = {b["name"]: dbus.bus.BusConnection(b["bus"]) for b in boxes}
        launched = []
        for b in boxes:
            state = os.path.join(work, "state-" + b["name"])
            log = open(os.path.join(work, b["name"] + ".log"), "w")
            nodes.append(subprocess.Popen([proximityd, "run", "--bus", b["bus"], "--state-dir", state, "--name", b["name"],
                                           "--config", config, "--log-level", "info"], stdout=subprocess.DEVNULL, stderr=log))
            launched.append(time.monotonic())
        start = launched[-1]

        def identities(name):
            try:
                node = buses[name].get_object("org.proximityd", "/org/proximityd")
                return len(node.GetIdentities(dbus_interface="org.proximityd.Node1", timeout=2))
            except dbus.DBusException:
                return -1

        done = {}
        deadline = start + args.timeout
        while len(done) < n and time.monotonic() < deadline:
            for b in boxes:
                if b["name"] not in done and identities(b["name"]) == n - 1:
                    done[b["name"]] = time.monotonic() - start
            time.sleep(0.02)
        first = boxes[0]["name"]
        control = buses[first].get_object("org.proximityd.BlueZSim", "/org/proximityd/BlueZSim")
        stats = json.loads(str(control.GetState(dbus_interface="org.proximityd.BlueZSim1"))).get("stats", {})
        complete = len(done) == n
        verified, exported = verified_peers(buses, boxes, n) if complete else (None, None)
        waited = sum(open(os.path.join(work, b["name"] + ".log")).read().count("did not introduce itself") for b in boxes)
        return {"build": proximityd, "trust": trust, "nodes": n, "decoys": decoys, "seed": seed, "complete": complete, "seconds": max(done.values()) if complete else None,
                "identified": len(done), "connections": stats.get("connection_attempts"), "pairs": n * (n - 1) // 2,
                "yields_expired": waited, "peers_verified": verified, "peers_exported": exported}
    finally:
        for p in nodes:
            p.send_signal(signal.SIGTERM)
        for p in nodes:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
        if sim:
            sim.send_signal(signal.SIGTERM)
            try:
                sim.wait(timeout=10)
            except subprocess.TimeoutExpired:
                sim.kill()
        if args.keep:
            print(f"kept {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)


def summary(results, trust, n):
    """median and max seconds, complete runs, connections per pair, yields run out, peers verified."""
    rows = [r for r in results if r["nodes"] == n and r["trust"] == trust]
    return summarise(rows)


def summarise(rows):
    times = [r["seconds"] for r in rows if r["complete"]]
    conns = [r["connections"] / r["pairs"] for r in rows if r["connections"] is not None]
    checked = [r for r in rows if r["peers_exported"] is not None]
    return {"runs": len(rows), "complete": len(times),
            "median": statistics.median(times) if times else None, "max": max(times) if times else None,
            "min": min(times) if times else None,
            "connections_per_pair": statistics.mean(conns) if conns else None,
            "yields_expired": sum(r["yields_expired"] for r in rows),
            "verified": sum(r["peers_verified"] for r in checked), "verified_of": sum(r["pairs"] * 2 for r in checked),
            "exported": sum(r["peers_exported"] for r in checked)}


def goal(n):
    """Issue 9's goal for n nodes, seconds (None: none stated)."""
    return {4: 3.0, 20: 10.0}.get(n)


def cell(s):
    text = f"{s['median']:.2f} / {s['max']:.2f}" if s["median"] is not None else "-"
    return text if s["complete"] == s["runs"] else f"{text} ({s['complete']}/{s['runs']} complete)"


def verdicts(open_, keyed, n):
    """Whether keyed is within open for one node count, and the goal. Noise is the larger spread
    (slowest − fastest run) of the two sides, and at least two polling steps (40 ms): keyed is
    within open when its median exceeds open's by no more than that."""
    out = []
    if open_["median"] is not None and keyed["median"] is not None and open_["complete"] == open_["runs"] \
            and keyed["complete"] == keyed["runs"]:
        noise = max(open_["max"] - open_["min"], keyed["max"] - keyed["min"], 0.04)
        difference = keyed["median"] - open_["median"]
        within = "keyed within open" if difference <= noise else "KEYED SLOWER than open"
        out.append(f"{within} ({difference:+.2f} s, noise {noise:.2f} s)")
    else:
        out.append("incomplete runs")
    if keyed["verified"] != keyed["verified_of"] or keyed["exported"] != keyed["verified_of"]:
        out.append(f"NOT ALL VERIFIED ({keyed['verified']}/{keyed['verified_of']})")
    limit = goal(n)
    if limit is not None:
        met = all(s["max"] is not None and s["max"] <= limit and s["complete"] == s["runs"] for s in (open_, keyed))
        out.append(f"<= {limit:g} s: {'met' if met else 'NOT MET'}")
    return "; ".join(out)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", required=True, help="directory with bluez-sim (and proximityd, proximityctl)")
    parser.add_argument("--proximityd", help="the proximityd to measure (default: BIN/proximityd)")
    parser.add_argument("--proximityctl", help="the proximityctl that makes the fleet key (default: BIN/proximityctl)")
    parser.add_argument("--trust", choices=["both", "open", "keyed"], default="both",
                        help="open nodes, keyed nodes (one fleet key), or both in the same runs (default)")
    parser.add_argument("--nodes", default="2,4,10,20")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=90)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--keep", action="store_true", help="keep each run's directory (logs, state)")
    parser.add_argument("--baseline-proximityd", help="another build measured in the same runs, interleaved (an older commit's: "
                        "before and after)")
    parser.add_argument("--decoys", default="0", help="decoy counts, each run made once per count (e.g. 0,100: unflooded, flooded)")
    args = parser.parse_args()
    args.proximityd = args.proximityd or os.path.join(args.bin, "proximityd")
    args.proximityctl = args.proximityctl or os.path.join(args.bin, "proximityctl")
    counts = [int(x) for x in args.nodes.split(",")]
    if any(c < 2 or c > 100 for c in counts) or not 1 <= args.runs <= 50:
        parser.error("--nodes: 2...100 each; --runs: 1...50")
    trusts = ["open", "keyed"] if args.trust == "both" else [args.trust]
    if args.baseline_proximityd and not os.access(args.baseline_proximityd, os.X_OK):
        parser.error(f"--baseline-proximityd: {args.baseline_proximityd} is not an executable file")
    try:
        decoy_counts = [int(x) for x in args.decoys.split(",")]
    except ValueError:
        parser.error("--decoys: counts separated by commas, e.g. 0,100")
    if any(d < 0 or d > 500 for d in decoy_counts):
        parser.error("--decoys: 0...500 each")
    builds = [args.proximityd] + ([args.baseline_proximityd] if args.baseline_proximityd else [])
    results = []
    for n in counts:
        for r in range(args.runs):
            for trust in trusts:
              for build in builds:
               for decoys in decoy_counts:
                result = one_run(args, n, args.seed + r, trust, build, decoys)
                results.append(result)
                label = "" if len(builds) == 1 else (" (baseline)" if build == args.baseline_proximityd else " (this build)")
                label += f", {decoys} decoys" if len(decoy_counts) > 1 or decoys else ""
                print(f"  {n} nodes, {trust}{label}, run {r + 1}: " + (f"{result['seconds']:.2f} s" if result["complete"]
                      else f"incomplete ({result['identified']}/{n} nodes)") + f", {result['connections']} connections"
                      + (f", {result['peers_verified']}/{result['peers_exported']} peers verified" if result["complete"] else ""),
                      file=sys.stderr)
    if args.json:
        print(json.dumps(results, indent=2))
        return
    if len(decoy_counts) > 1:
        # The flood: each decoy count's times against the first count's, per build and trust.
        base = decoy_counts[0]
        print("| nodes | trust | build | decoys | median / max s | median vs " + f"{base} decoys | <= 2x |")
        print("| --- | --- | --- | --- | --- | --- | --- |")
        for n in counts:
            for trust in trusts:
                for build in builds:
                    name = "baseline" if build == args.baseline_proximityd and len(builds) > 1 else "this build"
                    rows = lambda d: summarise([r for r in results if r["nodes"] == n and r["trust"] == trust and r["build"] == build
                                                and r["decoys"] == d])
                    unflooded = rows(base)
                    for d in decoy_counts:
                        s_ = rows(d)
                        if d == base or s_["median"] is None or unflooded["median"] is None:
                            ratio, verdict = "-", "-"
                        else:
                            ratio = f"{s_['median'] / unflooded['median']:.1f}x"
                            verdict = "met" if s_["complete"] == s_["runs"] and s_["median"] <= 2 * unflooded["median"] else "NOT MET"
                        print(f"| {n} | {trust} | {name} | {d} | {cell(s_)} | {ratio} | {verdict} |")
        return
    if args.baseline_proximityd:
        # Before and after, in the same runs: each build's median / max per node count and trust.
        print(f"this build: {args.proximityd}\nbaseline: {args.baseline_proximityd}")
        print("| nodes | trust | runs | this build: median / max s | baseline: median / max s | connections per pair (this / baseline) "
              "| yields run out (this / baseline) |")
        print("| --- | --- | --- | --- | --- | --- | --- |")
        for n in counts:
            for trust in trusts:
                new_ = summarise([r for r in results if r["nodes"] == n and r["trust"] == trust and r["build"] == args.proximityd])
                old_ = summarise([r for r in results if r["nodes"] == n and r["trust"] == trust and r["build"] == args.baseline_proximityd])
                print(f"| {n} | {trust} | {new_['runs']} | {cell(new_)} | {cell(old_)} "
                      f"| {new_['connections_per_pair']:.2f} / {old_['connections_per_pair']:.2f} "
                      f"| {new_['yields_expired']} / {old_['yields_expired']} |")
        return
    print(f"proximityd: {args.proximityd}")
    if args.trust != "both":
        print("| nodes | runs | complete | median s | max s | connections per pair | yields run out | peers verified |")
        print("| --- | --- | --- | --- | --- | --- | --- | --- |")
        for n in counts:
            s = summary(results, args.trust, n)
            print(f"| {n} | {s['runs']} | {s['complete']}/{s['runs']} | "
                  + (f"{s['median']:.2f} | {s['max']:.2f}" if s["median"] is not None else "- | -")
                  + f" | {s['connections_per_pair']:.2f} | {s['yields_expired']} | {s['verified']}/{s['verified_of']} |")
        return
    print("| nodes | runs | open: median / max s | keyed: median / max s | keyed peers verified "
          "| connections per pair (open / keyed) | yields run out (open / keyed) | verdict |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for n in counts:
        o, k = summary(results, "open", n), summary(results, "keyed", n)
        print(f"| {n} | {o['runs']} | {cell(o)} | {cell(k)} | {k['verified']}/{k['verified_of']} "
              f"| {o['connections_per_pair']:.2f} / {k['connections_per_pair']:.2f} "
              f"| {o['yields_expired']} / {k['yields_expired']} | {verdicts(o, k, n)} |")


if __name__ == "__main__":
    main()
