#!/usr/bin/env bash
# The live soak: one proximityd on bluez-sim for N minutes under 200 beacons, 1,000 new phone
# addresses a minute and a walker making events, with a fault every 2 minutes (a deaf scanner, an
# unplugged adapter, a restarted bluetoothd, a power cycle), the MQTT broker restarted every 3
# minutes and a client on the bus. It samples the node every 5 s and fails on growth (a fitted
# slope of RSS, descriptors, threads or the table), on an event of the log not signalled or not
# delivered on MQTT, or on a fault the node did not recover from within 90 s. It prints the
# figures (docs/reliability.md, "The live soak").
#
#   scripts/soak.sh [--minutes N] [--deb FILE.deb] [--keep] [--samples FILE.json]
#   scripts/soak.sh --budget [--baseline REF] [--minutes N]
#
#   --minutes N       how long (default 10; CI runs 10)
#   --deb FILE.deb    soak the proximityd of this package (as installed), not this tree's build
#   --release         soak this tree's release build (.build-release), not the debug one
#   --budget          the Pi budget: the room alone (no faults, broker restarts or bus client),
#                     the node's CPU share and RSS; with --baseline REF, REF's proximityd too, in
#                     the same run (built in ~/.cache/proximityd-bench/SHA as run-node-bench.sh
#                     does); release builds
#   --keep            keep the working directory (logs, state); it is kept anyway on a failure
#   --samples FILE    every sample and figure, as JSON
# e.g.
#   scripts/soak.sh --minutes 60 --release
#   scripts/soak.sh --budget --baseline ae80512 --minutes 5
#
# bluez-sim comes from this tree's debug build (or release with --release or --budget). Needs
# mosquitto, mosquitto-clients, python3-dbus and python3-gi (scripts/setup.sh installs them).
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in -h|--help) sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac

die() { echo "soak.sh: $*" >&2; exit 64; }
minutes=10 deb="" release=0 budget=0 baseline="" extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --minutes) [ $# -ge 2 ] || die "--minutes needs a number"; minutes="$2"; shift 2 ;;
    --deb) [ $# -ge 2 ] || die "--deb needs a file"; deb="$2"; shift 2 ;;
    --release) release=1; shift ;;
    --budget) budget=1; release=1; shift ;;
    --baseline) [ $# -ge 2 ] || die "--baseline needs a commit"; baseline="$2"; shift 2 ;;
    --keep) extra+=(--keep); shift ;;
    --samples) [ $# -ge 2 ] || die "--samples needs a file"; extra+=(--samples "$2"); shift 2 ;;
    *) die "unknown argument $1 (scripts/soak.sh --help)" ;;
  esac
done
case "$minutes" in ''|*[!0-9.]*) die "--minutes must be a number of minutes" ;; esac
[ -z "$baseline" ] || [ "$budget" = 1 ] || die "--baseline needs --budget"
[ -z "$deb" ] || [ "$budget" = 0 ] || die "--deb and --budget are separate runs"

source scripts/setup.sh   # Debian's packages (mosquitto, python3-dbus, python3-gi) and Swift on PATH

if [ "$release" = 1 ]; then
  build=(swift build -c release --scratch-path .build-release)
else
  build=(swift build)
fi
"${build[@]}" --product bluez-sim >&2
bin="$("${build[@]}" --show-bin-path)"
args=(--bin "$bin" --minutes "$minutes")

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
if [ -n "$deb" ]; then
  [ -f "$deb" ] || die "--deb: no file $deb"
  dpkg-deb -x "$deb" "$work/root"
  args+=(--proximityd "$work/root/usr/bin/proximityd")
  echo "soak.sh: the proximityd of $deb" >&2
else
  "${build[@]}" --product proximityd >&2
  args+=(--proximityd "$bin/proximityd")
fi
if [ -n "$baseline" ]; then
  sha="$(git rev-parse --verify --quiet "$baseline^{commit}")" || die "--baseline: $baseline is not a commit"
  tree="${XDG_CACHE_HOME:-$HOME/.cache}/proximityd-bench/$sha"
  if [ ! -e "$tree/.git" ]; then
    mkdir -p "$(dirname "$tree")"
    git worktree add --force --detach "$tree" "$sha" >&2
  fi
  echo "soak.sh: building $baseline's proximityd (release, $tree/.build-release)" >&2
  (cd "$tree" && swift build -c release --scratch-path .build-release --product proximityd >&2)
  args+=(--baseline-proximityd "$(cd "$tree" && swift build -c release --scratch-path .build-release --show-bin-path)/proximityd")
fi
[ "$budget" = 1 ] && args+=(--budget)
# Debian's python3 with python3-dbus and python3-gi (the venv of the tests has neither).
/usr/bin/python3 scripts/soak.py "${args[@]}" ${extra[@]+"${extra[@]}"}
