#!/usr/bin/env bash
# Create (idempotently) the venv with Home Assistant for tests/homeassistant/ha_harness.py.
#   HA_VENV     venv path (default ~/.cache/proximityd-ha/venv)
#   HA_PYTHON   a Python 3.13 interpreter to use (default: newest 3.13.x from pyenv)
#   --force     recreate the venv
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
venv="${HA_VENV:-$HOME/.cache/proximityd-ha/venv}"
req="$here/requirements.txt"
start=$(date +%s)

force=0
[ "${1:-}" = "--force" ] && force=1

find_python() {
  if [ -n "${HA_PYTHON:-}" ]; then echo "$HA_PYTHON"; return; fi
  local roots=()
  command -v pyenv >/dev/null 2>&1 && roots+=("$(pyenv root)")
  roots+=("${PYENV_ROOT:-}" "$HOME/.pyenv" /root/.pyenv)
  local r cand
  for r in "${roots[@]}"; do
    [ -n "$r" ] && [ -d "$r/versions" ] || continue
    cand=$(ls -d "$r"/versions/3.13.* 2>/dev/null | grep -E '/3\.13\.[0-9]+$' | sort -V | tail -1 || true)
    if [ -n "$cand" ] && [ -x "$cand/bin/python3.13" ]; then echo "$cand/bin/python3.13"; return; fi
  done
  command -v python3.13 2>/dev/null || true
}

py=$(find_python)
if [ -z "$py" ] || ! "$py" -c 'import sys; assert sys.version_info[:2] == (3, 13)' 2>/dev/null; then
  echo "setup.sh: no Python 3.13 found (looked in \$HA_PYTHON, \$(pyenv root)/versions/3.13.*," >&2
  echo "  ~/.pyenv/versions/3.13.*, /root/.pyenv/versions/3.13.*, python3.13 on PATH)." >&2
  echo "  Home Assistant 2025.4 needs Python 3.13: install one (e.g. 'pyenv install 3.13.0')" >&2
  echo "  or point HA_PYTHON at it." >&2
  exit 2
fi
echo "setup.sh: python $("$py" -c 'import sys; print(sys.version.split()[0])') at $py; venv $venv"

stamp="$venv/.proximityd-ha-requirements"
want="$(sha256sum "$req" | cut -d' ' -f1) $("$py" -c 'import sys; print(sys.version.split()[0])')"

if [ $force = 1 ]; then rm -rf "$venv"; fi
if [ -x "$venv/bin/hass" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  echo "setup.sh: up to date ($(cat "$stamp" | cut -c1-12)...), nothing to install"
else
  if [ -e "$venv" ] && ! "$venv/bin/python" -c 'import sys; assert sys.version_info[:2] == (3, 13)' 2>/dev/null; then
    echo "setup.sh: $venv is not a Python 3.13 venv; recreating"
    rm -rf "$venv"
  fi
  [ -x "$venv/bin/python" ] || "$py" -m venv "$venv"
  rm -f "$stamp"
  "$venv/bin/python" -m pip install --disable-pip-version-check --no-input -q -r "$req"
fi

# Check that every requirement that Home Assistant would pip-install at runtime for the
# integrations the harness loads is installed, so `hass --skip-pip` works offline.
"$venv/bin/python" - <<'PY'
import json, pathlib, sys
import homeassistant
from homeassistant.const import __version__
from homeassistant import bootstrap
from homeassistant.util.package import is_installed

comp = pathlib.Path(homeassistant.__file__).parent / "components"
used = {"http", "api", "auth", "config", "onboarding", "websocket_api", "logger",
        "sensor", "binary_sensor", "device_tracker", "mqtt", "mqtt_room"}
todo = list(bootstrap.CORE_INTEGRATIONS | bootstrap.DEFAULT_INTEGRATIONS | used)
seen, missing = set(), []
while todo:
    d = todo.pop()
    if d in seen:
        continue
    seen.add(d)
    m = json.loads((comp / d / "manifest.json").read_text())
    todo += m.get("dependencies", [])
    missing += [f"{r} ({d})" for r in m.get("requirements", []) if not is_installed(r)]
if missing:
    sys.exit("setup.sh: missing runtime requirements, add them to requirements.txt: "
             + ", ".join(missing))
print(f"setup.sh: homeassistant {__version__}: requirements of {len(seen)} integrations present")
PY
echo "$want" > "$stamp"
"$venv/bin/hass" --version | sed 's/^/setup.sh: hass --version: /'
echo "setup.sh: done in $(( $(date +%s) - start ))s"
