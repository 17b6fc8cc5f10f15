#!/usr/bin/env bash
# The test command: sets up the machine, builds, and runs the whole test suite against real
# private dbus-daemons (never the machine's own buses); then builds the Debian package
# (scripts/package.sh) and tests it (tests/package/run.sh: lintian, the binaries with the Swift
# toolchain hidden, install, upgrade, remove and purge in a Debian 12 root booted under systemd).
#   scripts/test.sh                       everything
#   scripts/test.sh [swift test arguments, e.g. --filter DBusKitTests]   those Swift tests only
#
# The Swift suite runs in two passes (run_swift_suite, scripts/swift-suite.sh): every test in
# parallel but the suites named …RealTimeTests, then those, one at a time. They check bounds read
# off the wall clock (an exit within its period plus one second), which the rest of the suite
# running beside them on a busy two-core machine would stretch.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
source scripts/swift-suite.sh

mark=$SECONDS
took() { echo "test.sh: $1 took $((SECONDS - mark)) s"; mark=$SECONDS; }
swift build --build-tests
if [ $# -gt 0 ]; then
  exec swift test --skip-build --disable-xctest "$@"
fi
took "the build"
status=0
run_swift_suite || status=$?
took "the Swift suite"
scripts/package.sh || status=$?
took "the package's build"
tests/package/run.sh || status=$?
took "the package's tests"
exit "$status"
