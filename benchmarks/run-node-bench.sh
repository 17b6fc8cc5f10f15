#!/usr/bin/env bash
# The node's throughput benchmark: one proximityd fed by bluez-sim with RSSI updates from many
# devices (200 iBeacons within 5 m advertising every 35 ms: 5,000 updates a second), its table
# capped. Reports the updates delivered on the box bus, proximityd's CPU use (% of one core) and
# peak RSS over the measured window, and its table's size, against the targets (< 25% of one
# core, < 50 MB).
#
# Usage: benchmarks/run-node-bench.sh [--json] [bluez-sim bench options...]
#   e.g. benchmarks/run-node-bench.sh --devices 400 --interval 0.02 --seconds 30 --max-peers 200
#
# Builds in release mode with its own scratch directory, .build-release, so it never touches .build.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
case "${1:-}" in -h|--help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac

if ! command -v swift >/dev/null 2>&1 && [ -x /opt/swift/usr/bin/swift ]; then
    export PATH="/opt/swift/usr/bin:$PATH"
fi

echo "== building proximityd and bluez-sim (release, .build-release)" >&2
swift build -c release --scratch-path .build-release --product proximityd >&2
swift build -c release --scratch-path .build-release --product bluez-sim >&2
bin="$(swift build -c release --scratch-path .build-release --show-bin-path)"

echo "== 200 devices, 5,000 RSSI updates/s offered, table capped at 100, 3 s warm-up, 20 s measured" >&2
exec "$bin/bluez-sim" bench --proximityd "$bin/proximityd" --devices 200 --interval 0.035 --seconds 20 --warm-up 3 \
    --max-peers 100 "$@"
