#!/usr/bin/env bash
# The test command: sets up the machine, builds, and runs the whole test suite against real
# private dbus-daemons (never the machine's own buses); then builds the Debian package
# (scripts/package.sh) and tests it (tests/package/run.sh: lintian, the binaries with the Swift
# toolchain hidden, install, upgrade, remove and purge in a Debian 12 root booted under systemd).
#   scripts/test.sh                       everything
#   scripts/test.sh [swift test arguments, e.g. --filter DBusKitTests]   those Swift tests only
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh

swift build --build-tests
if [ $# -gt 0 ]; then
  exec swift test --skip-build --disable-xctest "$@"
fi
status=0
swift test --skip-build --disable-xctest || status=$?
package_started=$SECONDS
scripts/package.sh || status=$?
tests/package/run.sh || status=$?
echo "test.sh: the package's build and tests took $((SECONDS - package_started)) s"
exit "$status"
