#!/usr/bin/python3
"""Time to identify: N nodes started at the same moment on bluez-sim, until every node's
Node1.GetIdentities lists all the others.

For each node count and run: a scenario of N boxes on a circle (all within a few metres, addresses
in shuffled order of position), bluez-sim playing the air and bluetoothd, N proximityd processes
launched together. The time is from the launch of the last node until every GetIdentities is
complete, polled every 20 ms over D-Bus (dbus-python, one connection per box). Connections per
pair come from bluez-sim's own count (GetState: connection_attempts).

Usage: identify_bench.py --bin DIR [--proximityd PATH] [--nodes 2,4,10,20] [--runs 3]
                         [--timeout 90] [--seed 1] [--json]
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


def scenario(n, seed):
    rng = random.Random(seed)
    addresses = [f"02:00:00:00:{i >> 8:02X}:{i & 0xff:02X}" for i in range(1, n + 1)]
    rng.shuffle(addresses)
    radius = 1.0 if n <= 2 else max(1.5, 0.5 * n / math.pi)
    boxes = []
    for i in range(n):
        a = 2 * math.pi * i / n
        boxes.append({"name": f"n{i:02d}", "address": addresses[i],
                      "position": [round(radius * math.cos(a), 3), round(radius * math.sin(a), 3)]})
    return {"seed": seed, "radio": {"shadowing_sigma": 2, "packet_loss": 0.1, "connection_failure_rate": 0.0},
            "boxes": boxes}


def wait_for(what, condition, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.02)
    raise RuntimeError(f"timed out waiting for {what}")


def one_run(args, n, seed):
    work = tempfile.mkdtemp(prefix=f"identify-bench-{n}-")
    sim = None
    nodes = []
    try:
        path = os.path.join(work, "scenario.json")
        with open(path, "w") as f:
            json.dump(scenario(n, seed), f)
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
            nodes.append(subprocess.Popen([args.proximityd, "run", "--bus", b["bus"], "--state-dir", state, "--name", b["name"],
                                           "--log-level", "info"], stdout=subprocess.DEVNULL, stderr=log))
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
        waited = sum(open(os.path.join(work, b["name"] + ".log")).read().count("did not introduce itself") for b in boxes)
        return {"nodes": n, "seed": seed, "complete": complete, "seconds": max(done.values()) if complete else None,
                "identified": len(done), "connections": stats.get("connection_attempts"), "pairs": n * (n - 1) // 2,
                "yields_expired": waited}
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


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", required=True, help="directory with bluez-sim (and proximityd)")
    parser.add_argument("--proximityd", help="the proximityd to measure (default: BIN/proximityd)")
    parser.add_argument("--nodes", default="2,4,10,20")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=90)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--keep", action="store_true", help="keep each run's directory (logs, state)")
    args = parser.parse_args()
    args.proximityd = args.proximityd or os.path.join(args.bin, "proximityd")
    counts = [int(x) for x in args.nodes.split(",")]
    if any(c < 2 or c > 100 for c in counts) or not 1 <= args.runs <= 50:
        parser.error("--nodes: 2...100 each; --runs: 1...50")
    results = []
    for n in counts:
        for r in range(args.runs):
            result = one_run(args, n, args.seed + r)
            results.append(result)
            print(f"  {n} nodes, run {r + 1}: " + (f"{result['seconds']:.2f} s" if result["complete"]
                  else f"incomplete ({result['identified']}/{n} nodes)") + f", {result['connections']} connections",
                  file=sys.stderr)
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(f"proximityd: {args.proximityd}")
    print("| nodes | runs | complete | median s | max s | connections per pair | yields run out |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for n in counts:
        rows = [r for r in results if r["nodes"] == n]
        times = [r["seconds"] for r in rows if r["complete"]]
        conns = [r["connections"] / r["pairs"] for r in rows if r["connections"] is not None]
        print(f"| {n} | {len(rows)} | {len(times)}/{len(rows)} | "
              + (f"{statistics.median(times):.2f} | {max(times):.2f}" if times else "- | -")
              + f" | {statistics.mean(conns):.2f} | {sum(r['yields_expired'] for r in rows)} |")


if __name__ == "__main__":
    main()
