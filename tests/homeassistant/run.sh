#!/usr/bin/env bash
# proximityd and proximity-fleet in a real Home Assistant (docs/mqtt.md, docs/fleet.md): sets up
# Home Assistant 2025.4 in a venv (setup.sh; about 2 minutes the first time, from PyPI), then runs
# test_proximityd.py on the debug build (scripts/test.sh builds it) with bluez-sim and a real
# Mosquitto. Not in the Swift suite (it takes about 3 minutes, 150 s of them watching a still
# device); .ci/run runs it.
#   tests/homeassistant/run.sh          HA_STILL_SECONDS=N for a shorter watch
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/setup.sh
ensure_debian_packages "Home Assistant test" mosquitto mosquitto-clients
started=$SECONDS
tests/homeassistant/setup.sh
echo "Home Assistant's venv: $((SECONDS - started)) s"
swift build --product bluez-sim >/dev/null
swift build --product proximityd >/dev/null
swift build --product proximity-fleet >/dev/null
exec /usr/bin/python3 tests/homeassistant/test_proximityd.py
