#!/usr/bin/env bash
# Installs what proximityd needs to build, test and run its demo on a Debian machine, and puts the
# Swift toolchain on PATH. Safe to run again: it installs only what is missing.
#   source scripts/setup.sh      (or run it; the other scripts source it)
#   PROXIMITYD_SETUP=demo        only what the demo needs (scripts/demo.sh sets it): not the
#                                packages of PROXIMITYD_TEST_ONLY_PACKAGES, nothing from PyPI
set -euo pipefail

PROXIMITYD_DEBIAN_PACKAGES=(
  pkg-config libdbus-1-dev libbluetooth-dev   # build: libdbus-1 (CDBus), libbluetooth (doctor)
  libxml2-dev                                 # build: FoundationXML, linked statically into the package's binaries
  zlib1g-dev                                  # build: zlib (CZlib), the test kit's PNG reader of screenshots
  libssl-dev                                  # build: libcrypto (COpenSSL), the trusted fleet's primitives
  dbus-daemon dbus-bin                        # private buses, dbus-send
  libglib2.0-bin                              # gdbus, an independent client in the interop tests
  bluez                                       # bluetoothctl, a real BlueZ client
  systemd                                     # systemd-analyze verify/security for dbus/proximityd.service
  python3 python3-venv python3-dbus python3-gi # Python baselines and fidelity clients (bleak: .venv-tests)
  dunst xvfb espeak-ng                        # proximityctl alerts consume's tests: a real notification server
                                              # (dunst on Xvfb, dunstctl) and speech to WAV files (--speak-to)
  libmosquitto-dev mosquitto mosquitto-clients # MQTT: libmosquitto (CMosquitto), a real broker and
                                              # mosquitto_sub/mosquitto_pub, independent clients in the tests
  openssl                                     # the MQTT TLS test makes its CA and the broker's certificate
  openssh-server openssh-client               # proximityctl -H's tests: a real sshd on 127.0.0.1, ssh, ssh-keygen
  chromium                                    # the live map's test: headless Chromium loads the page (proximity-fleet --http)
  jq                                          # the docs' scripted busctl --json sessions
)

# ensure_debian_packages WHO PACKAGE...: installs those of PACKAGE... that are missing, saying so as
# WHO. scripts/package.sh and tests/package/run.sh use it for their own packages.
ensure_debian_packages() {
  local who=$1 package missing=() sudo=""
  shift
  for package in "$@"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
  done
  ((${#missing[@]})) || return 0
  echo "$who: installing ${missing[*]}" >&2
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}
# Those of the list above only the tests use; the demo goes without them.
PROXIMITYD_TEST_ONLY_PACKAGES=(libglib2.0-bin python3-venv python3-dbus python3-gi dunst xvfb espeak-ng openssl openssh-server openssh-client chromium jq)
if [ "${PROXIMITYD_SETUP:-}" = demo ]; then
  demo_packages=()
  for package in "${PROXIMITYD_DEBIAN_PACKAGES[@]}"; do
    [[ " ${PROXIMITYD_TEST_ONLY_PACKAGES[*]} " == *" $package "* ]] || demo_packages+=("$package")
  done
  ensure_debian_packages setup "${demo_packages[@]}"
else
  ensure_debian_packages setup "${PROXIMITYD_DEBIAN_PACKAGES[@]}"
fi

# bleak, a BLE client nobody here wrote, for the simulator's fidelity tests (from PyPI); not for
# the demo.
venv="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/.venv-tests"
if [ "${PROXIMITYD_SETUP:-}" != demo ] && ! "$venv/bin/python" -c 'import bleak' >/dev/null 2>&1; then
  echo "setup: creating $venv with bleak" >&2
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$(dirname "$venv")/tests/python/requirements.txt"
fi

if ! command -v swift >/dev/null 2>&1; then
  if [ -x /opt/swift/usr/bin/swift ]; then
    export PATH="/opt/swift/usr/bin:$PATH"
  else
    echo "setup: no Swift toolchain found (expected swift on PATH or in /opt/swift/usr/bin)" >&2
    exit 1
  fi
fi
