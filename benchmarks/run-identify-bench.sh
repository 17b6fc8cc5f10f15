#!/usr/bin/env bash
# Time to identify: N proximityd nodes started at the same moment on bluez-sim, until every node's
# GetIdentities lists all the others; a table for 2, 4, 10 and 20 nodes (3 runs each), open nodes
# and nodes of one trusted fleet (a fleet key) side by side, with the GATT connections per pair and
# whether every keyed peer is Verified. Goal: 4 nodes in <= 3 s, 20 nodes in <= 10 s, keyed as fast.
#
# Usage: benchmarks/run-identify-bench.sh [identify_bench.py options...]
#   e.g. benchmarks/run-identify-bench.sh --nodes 4 --runs 10
#        benchmarks/run-identify-bench.sh --trust open     (or keyed: one kind of node only)
#        benchmarks/run-identify-bench.sh --proximityd /path/to/an/older/proximityd   (the same runs, another build)
#
# Builds in release mode with its own scratch directory, .build-release, so it never touches .build.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
case "${1:-}" in -h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
source scripts/setup.sh >&2

echo "== building proximityd, proximityctl and bluez-sim (release, .build-release)" >&2
swift build -c release --scratch-path .build-release --product proximityd >&2
swift build -c release --scratch-path .build-release --product proximityctl >&2
swift build -c release --scratch-path .build-release --product bluez-sim >&2
bin="$(swift build -c release --scratch-path .build-release --show-bin-path)"
exec /usr/bin/python3 benchmarks/identify_bench.py --bin "$bin" "$@"
