#!/usr/bin/env bash
# The region monitor's cost per report and memory per region: 10,000 regions and 1,000 peers, the
# monitor against a naive monitor (every region checked against every peer, each report) in the same
# run, with a cross-check of their events. Runs the realistic mix, then the wildcard mix (every
# region kind-only or within-only: the worst case for the index).
#
# Usage: benchmarks/run-region-bench.sh [--json] [region-bench options...]
#   e.g. benchmarks/run-region-bench.sh --regions 20000 --seed 2
#   REALISTIC_ARGS / WILDCARD_ARGS add options to one run; WILDCARD_ARGS defaults to
#   "--reports 20 --warm-up 2" (a wildcard report takes seconds); the later option wins.
#
# Builds in release mode with its own scratch directory, .build-release, so it never touches .build.
# Exits with status 1 if the monitor and the naive monitor disagree.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
case "${1:-}" in -h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac

if ! command -v swift >/dev/null 2>&1 && [ -x /opt/swift/usr/bin/swift ]; then
    export PATH="/opt/swift/usr/bin:$PATH"
fi

echo "== building region-bench (release, .build-release)" >&2
swift build -c release --scratch-path .build-release --product region-bench >&2
bench="$(swift build -c release --scratch-path .build-release --show-bin-path)/region-bench"

echo "== region-bench --mix realistic ${REALISTIC_ARGS:-} $*" >&2
# shellcheck disable=SC2086 # the *_ARGS variables are word lists on purpose
"$bench" --mix realistic ${REALISTIC_ARGS:-} "$@"
echo
echo "== region-bench --mix wildcard ${WILDCARD_ARGS---reports 20 --warm-up 2} $*" >&2
# shellcheck disable=SC2086
"$bench" --mix wildcard ${WILDCARD_ARGS---reports 20 --warm-up 2} "$@"
