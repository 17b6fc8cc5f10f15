#!/usr/bin/env bash
# The test command: sets up the machine, builds, and runs the whole test suite against real
# private dbus-daemons (never the machine's own buses).
#   scripts/test.sh [extra swift test arguments, e.g. --filter DBusKitTests]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh

swift build --build-tests
swift test --skip-build --disable-xctest "$@"
