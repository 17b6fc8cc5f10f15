#!/usr/bin/env bash
# The real-BlueZ suite (tests/vm/real-bluez.sh): boots scripts/bluez-vm with 3 btvirt controllers
# and dbus/org.proximityd.conf as the system bus policy, and runs the suite in the guest against
# bluetoothd 5.66, with the proximityd and proximityctl of the Debian package: what is tested on
# real BlueZ is what a box installs. .ci/run runs it after the main suite.
#   scripts/test-real-bluez.sh [--deb FILE] [--runs N] [--keep-logs DIR]
#     --deb FILE   the package whose binaries run (default: build it now with scripts/package.sh)
#     --runs N     run the suite N times (fresh guests), and print the time-to-identify figures
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh

runs=1
keep=()
deb=""
usage() { echo "usage: scripts/test-real-bluez.sh [--deb FILE] [--runs N] [--keep-logs DIR]${1:+ ($1)}" >&2; exit 64; }
while [ $# -gt 0 ]; do
  case "$1" in
    --deb|--runs|--keep-logs) [ $# -ge 2 ] && [ -n "$2" ] || usage "$1 needs a value" ;;&
    --deb) deb="$2"; shift ;;
    --runs) [[ $2 =~ ^[1-9][0-9]*$ ]] || usage "--runs takes a positive number, not '$2'"; runs="$2"; shift ;;
    --keep-logs) keep=(--keep-logs "$2"); shift ;;
    *) usage "unknown argument '$1'" ;;
  esac
  shift
done

if [ -z "$deb" ]; then
  scripts/package.sh
  deb="dist/proximityd_$(head -n 1 VERSION)_$(dpkg --print-architecture).deb"
fi
[ -s "$deb" ] || { echo "test-real-bluez.sh: no package $deb" >&2; exit 66; }
# The package's files, where the guest can read them (the repository is shared with it).
mkdir -p .build
packaged="$PWD/.build/real-bluez-package"
rm -rf "$packaged"
dpkg-deb -x "$deb" "$packaged"
bin="$packaged/usr/bin"
echo "== the binaries of $deb: $("$bin/proximityd" --version)"

# In the repository: the guest writes back only there (its /tmp is its own).
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
  # Open nodes (time_to_identify), and keyed nodes (keyed_time_to_identify, section 8).
  for kind in time_to_identify keyed_time_to_identify; do
    awk -v k="$kind" '$1 == k && $3 != "none" { print $3 }' "$results" | sort -n | awk -v k="$kind" '{ v[++n] = $1 } END {
      if (n == 0) exit; m = (n % 2) ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2;
      printf "time to identify a peer on real BlueZ (from its start%s): median %.2f s, max %.2f s over %d identifications\n",
        (k == "keyed_time_to_identify" ? ", two keyed nodes" : ""), m, v[n], n }'
  done
fi
exit "$status"
