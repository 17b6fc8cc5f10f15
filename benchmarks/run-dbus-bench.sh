#!/usr/bin/env bash
# Builds dbuskit-bench and runs the DBusKit benchmarks on private buses:
#   1. calls:   method calls per second, client -> exported object (p50/p99 latency)
#   2. signals: signals per second decoded by DBusKit, side by side with dbus-fast (and dbus-python)
#
# Usage: benchmarks/run-dbus-bench.sh [--json]
#   CALLS_ARGS / SIGNALS_ARGS add options to each run, e.g. SIGNALS_ARGS="--count 100000 --check".
#
# Sets up a Python venv with dbus-fast at .venv-bench (once), and builds in release mode with its
# own scratch directory, .build-release, so it never touches .build. The dbus-python baseline uses
# /usr/bin/python3 when it has python3-dbus and python3-gi; otherwise that client is skipped.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

json=()
for arg in "$@"; do
    case "$arg" in
        --json) json=(--json) ;;
        -h|--help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "unknown argument: $arg" >&2; exit 2 ;;
    esac
done

if ! command -v swift >/dev/null 2>&1 && [ -x /opt/swift/usr/bin/swift ]; then
    export PATH="/opt/swift/usr/bin:$PATH"
fi

venv="$root/.venv-bench"
if ! "$venv/bin/python" -c 'import dbus_fast' >/dev/null 2>&1; then
    echo "== setting up $venv with dbus-fast" >&2
    python3 -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet dbus-fast
fi

if ! /usr/bin/python3 -c 'import dbus, dbus.mainloop.glib, gi' >/dev/null 2>&1; then
    echo "note: /usr/bin/python3 lacks dbus or gi (apt-get install python3-dbus python3-gi); the dbus-python baseline will be skipped" >&2
fi

echo "== building dbuskit-bench (release, .build-release)" >&2
swift build -c release --product dbuskit-bench --scratch-path "$root/.build-release" >&2
bench="$root/.build-release/release/dbuskit-bench"

echo "== dbuskit-bench calls ${CALLS_ARGS:-}" >&2
# shellcheck disable=SC2086 # the *_ARGS variables are word lists on purpose
"$bench" calls ${json[@]+"${json[@]}"} ${CALLS_ARGS:-}
[ ${#json[@]} -gt 0 ] || echo
echo "== dbuskit-bench signals ${SIGNALS_ARGS:-}" >&2
# shellcheck disable=SC2086
"$bench" signals --python "$venv/bin/python" ${json[@]+"${json[@]}"} ${SIGNALS_ARGS:-}
