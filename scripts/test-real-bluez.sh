#!/usr/bin/env bash
# The real-BlueZ suite (tests/vm/real-bluez.sh): builds proximityd and proximityctl on the host,
# boots scripts/bluez-vm with 3 btvirt controllers and dbus/org.proximityd.conf as the system bus
# policy, and runs the suite in the guest against bluetoothd 5.66. .ci/run runs it after the main
# suite.
#   scripts/test-real-bluez.sh [--runs N] [--keep-logs DIR]
#     --runs N   run the suite N times (fresh guests), and print the time-to-identify figures
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh

runs=1
keep=()
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs="$2"; shift ;;
    --keep-logs) keep=(--keep-logs "$2"); shift ;;
    *) echo "usage: scripts/test-real-bluez.sh [--runs N] [--keep-logs DIR]" >&2; exit 64 ;;
  esac
  shift
done

swift build --product proximityd
swift build --product proximityctl
bin="$(swift build --show-bin-path)"

# In the repository: the guest writes back only there (its /tmp is its own).
mkdir -p .build
results="$(mktemp "$PWD/.build/real-bluez-results.XXXXXX")"
trap 'rm -f "$results"' EXIT
status=0
for run in $(seq "$runs"); do
  # The nodes' logs and state, where the guest can write them and they stay for a look.
  work="$PWD/.build/real-bluez/$(date +%Y%m%d-%H%M%S)-run$run"
  mkdir -p "$work"
  echo "== real-BlueZ suite, run $run of $runs (logs: $work)"
  scripts/bluez-vm -n 3 -t 900 --dbus-policy dbus/org.proximityd.conf "${keep[@]}" \
    -e PROXIMITYD_BIN="$bin" -e REAL_BLUEZ_RESULTS="$results" -e REAL_BLUEZ_WORK="$work" -- tests/vm/real-bluez.sh || status=$?
  [ "$status" = 0 ] || break
done
if [ -s "$results" ]; then
  # mawk has no asort: sort first.
  awk '$3 != "none" { print $3 }' "$results" | sort -n | awk '{ v[++n] = $1 } END {
    if (n == 0) exit; m = (n % 2) ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2;
    printf "time to identify a peer on real BlueZ (from its start): median %.2f s, max %.2f s over %d identifications\n", m, v[n], n }'
fi
exit "$status"
