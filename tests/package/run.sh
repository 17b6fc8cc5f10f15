#!/usr/bin/env bash
# The Debian package's tests (docs/install.md): what a box gets from `apt install ./proximityd_*.deb`.
#
#   tests/package/run.sh [DEB]
#     DEB   the package to test; default dist/proximityd_<VERSION>_<arch>.deb (scripts/package.sh)
#
#   - lintian reports no error, and no warning about the man pages;
#   - the man pages render without a warning or a stray escape, show the examples as typed, and
#     every document they cite is in the package;
#   - dpkg-deb -c lists every file the package must hold, and its conffiles are the config files;
#   - no file refers to the Swift toolchain's folder or needs a libswift*/Foundation library, and
#     with that folder hidden (an empty tmpfs over it, in a mount namespace of their own) the
#     packaged binaries print VERSION for --version, check the shipped conffile, and two packaged
#     nodes on bluez-sim identify each other;
#   - in a fresh Debian 12 root (debootstrap --variant=minbase, cached), apt-get installs the
#     package with its dependencies: the files land, user and group proximityd exist, the units are
#     enabled as they must be (no user unit), proximityctl --help works there, and the installed units pass
#     systemd-analyze verify with an exposure of 1.5 at most; an upgrade from an older version keeps
#     the edited config and the state and disables the user unit 0.2.0 enabled; remove keeps them; purge leaves nothing behind;
#   - that root, booted under systemd (systemd-nspawn), runs proximityd.service, and the packaged
#     proximityctl reads the node's status on its system bus.
# Each check prints "ok" or "not ok" with its time; the last line is "N passed, N failed".
#
# Environment: PROXIMITYD_PACKAGE_CACHE (default ~/.cache/proximityd-package) keeps the fresh root
# between runs; PROXIMITYD_DEBIAN_MIRROR (default http://deb.debian.org/debian) is where
# debootstrap and apt-get in the root fetch from.
set -uo pipefail
cd "$(dirname "$0")/../.."
repo=$PWD
source scripts/setup.sh
set +e   # setup.sh sets -e; each check runs under -e of its own, and a failed one must not end the run

# systemd-container: systemd-nspawn, which boots the Debian 12 root.
# procps: pgrep, to find the booted machine's systemd.
ensure_debian_packages "package tests" lintian man-db debootstrap systemd-container binutils util-linux procps dbus-bin

version="$(head -n 1 VERSION)"
arch="$(dpkg --print-architecture)"
deb="${1:-dist/proximityd_${version}_${arch}.deb}"
[ -s "$deb" ] || { echo "package tests: no $deb: run scripts/package.sh first" >&2; exit 2; }
deb="$(realpath "$deb")"
# The toolchain's folder, the one the packaged files must not need: /opt/swift here.
toolchain="$(dirname "$(dirname "$(dirname "$(readlink -f "$(command -v swift)")")")")"
mirror="${PROXIMITYD_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
cache="${PROXIMITYD_PACKAGE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/proximityd-package}"

work="$(mktemp -d /tmp/proximityd-package-tests.XXXXXX)"
root="$work/root"          # the Debian 12 root
booted=""                  # the nspawn machine's pid, while it runs
sim_pid=""
node_pids=()
cleanup() {
  set +e
  for mount in "$root/proc" "$root/dev/pts"; do mountpoint -q "$mount" && umount -l "$mount"; done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

passed=0
failed=0
failures=()
# check NAME FUNCTION: runs FUNCTION in a subshell with `set -e`, its output in a log, and reports
# it. A check fails at its first failing command; `fail MESSAGE` says why. What it started in the
# background is stopped when it ends.
check() {
  local name=$1 started=$SECONDS status
  shift
  ( set -eE; trap stop_background EXIT; "$@" ) > "$work/check.log" 2>&1 < /dev/null
  status=$?
  if [ "$status" = 0 ]; then
    passed=$((passed + 1))
    printf 'ok - %s (%d s)\n' "$name" $((SECONDS - started))
  else
    failed=$((failed + 1))
    failures+=("$name")
    printf 'not ok - %s (%d s)\n' "$name" $((SECONDS - started))
    tail -n 40 "$work/check.log" | sed 's/^/    /'
  fi
  return "$status"
}
fail() { echo "FAILED: $*"; exit 1; }
stop_background() {
  local pid
  for pid in "${node_pids[@]}" $sim_pid $booted; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${node_pids[@]}" $sim_pid $booted; do wait "$pid" 2>/dev/null || true; done
}
# wait_until TIMEOUT WHAT COMMAND...: COMMAND polled until it succeeds, for what cannot be awaited
# as an event (a file, a process's state); fails with WHAT after TIMEOUT seconds.
wait_until() {
  local deadline=$((SECONDS + $1)) what=$2
  shift 2
  until "$@"; do
    ((SECONDS < deadline)) || { echo "timed out after $1 s waiting for $what"; return 1; }
    sleep 0.2
  done
}

# --- the package as built -------------------------------------------------------------------------------
# What the package must hold, each where Debian puts it (docs/install.md).
expected_files=(
  /usr/bin/proximityd /usr/bin/proximityctl /usr/bin/proximity-fleet
  /lib/systemd/system/proximityd.service /lib/systemd/system/proximity-fleet.service
  /usr/lib/systemd/user/proximityctl-consume.service
  /usr/share/dbus-1/system.d/org.proximityd.conf
  /usr/share/dbus-1/system-services/org.proximityd.service
  /usr/lib/sysusers.d/proximityd.conf
  /etc/proximityd/proximityd.yaml /etc/proximityd/fleet.env
  /usr/share/man/man1/proximityd.1.gz /usr/share/man/man1/proximityctl.1.gz /usr/share/man/man1/proximity-fleet.1.gz
  /usr/share/bash-completion/completions/proximityd /usr/share/bash-completion/completions/proximityctl
  /usr/share/bash-completion/completions/proximity-fleet
  /usr/share/zsh/vendor-completions/_proximityd /usr/share/zsh/vendor-completions/_proximityctl
  /usr/share/zsh/vendor-completions/_proximity-fleet
  /usr/share/doc/proximityd/copyright /usr/share/doc/proximityd/changelog.gz
  /usr/share/doc/proximityd/README.md.gz /usr/share/doc/proximityd/install.md.gz
  /usr/share/doc/proximityd/configuration.md.gz /usr/share/doc/proximityd/dbus-api.md.gz
  /usr/share/doc/proximityd/proximityctl.md.gz /usr/share/doc/proximityd/mqtt.md.gz
  /usr/share/doc/proximityd/fleet.md.gz
  /usr/share/doc/proximityd/positioning.md.gz /usr/share/doc/proximityd/security.md.gz
  /usr/share/doc/proximityd/reliability.md.gz /usr/share/doc/proximityd/quick-start.md.gz
  /usr/share/doc/proximityd/status.md.gz
  /usr/share/doc/proximityd/examples/proximityd.yaml.example
  /usr/share/doc/proximityd/examples/house.yaml
)

lintian_clean() {
  lintian --fail-on error --tag-display-limit 0 "$deb" | tee "$work/lintian.txt"
  # Not even a warning about the man pages (groff's messages, mandoc's, bad whatis entries).
  if grep -E '^[EW]: .*(manpage|groff|mandoc)' "$work/lintian.txt"; then fail "lintian warns about the man pages"; fi
  true
}

# The man pages render without a warning (man --warnings, as lintian's manpage check does) and
# with no stray escape (a literal \e, \(, a backslash that is not a line's continuation); each
# document they cite is in the package; the examples are displays, shown as typed.
man_pages() {
  local page rendered cited missing=()
  for page in "$extracted"/usr/share/man/man1/*.1.gz; do
    rendered="$(LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -l "$page" 2> "$work/man-warnings.txt")" || fail "man -l $page"
    [ ! -s "$work/man-warnings.txt" ] || fail "man --warnings $page: $(cat "$work/man-warnings.txt")"
    if grep -nE '\\[a-z(]|\\[^ ]|\\ +[^ ]' <<< "$rendered"; then fail "$page renders a stray backslash"; fi
    grep -q '^ *\$ proximity' <<< "$rendered" || fail "$page shows no example as typed"
    for cited in $(zcat "$page" | grep -oE '/usr/share/doc/proximityd/[a-z-]+\.md\.gz' | sort -u); do
      [ -e "$extracted$cited" ] || missing+=("$cited")
    done
  done
  ((${#missing[@]} == 0)) || fail "the man pages cite documents the package does not ship: ${missing[*]}"
}

lists_every_file() {
  local listing missing_files=() file
  listing="$(dpkg-deb -c "$deb" | awk '{ print substr($6, 2) }')"
  for file in "${expected_files[@]}"; do
    grep -qxF "$file" <<< "$listing" || missing_files+=("$file")
  done
  ((${#missing_files[@]} == 0)) || fail "dpkg-deb -c does not list: ${missing_files[*]}"
  local conffiles
  conffiles="$(dpkg-deb --ctrl-tarfile "$deb" | tar -xO ./conffiles | sort | tr '\n' ' ')"
  [ "$conffiles" = "/etc/proximityd/fleet.env /etc/proximityd/proximityd.yaml " ] || fail "conffiles: $conffiles"
  [ "$(dpkg-deb --field "$deb" Version)" = "$version" ] || fail "Version: $(dpkg-deb --field "$deb" Version), VERSION says $version"
  local depends
  depends="$(dpkg-deb --field "$deb" Depends)"
  for library in libdbus-1-3 libbluetooth3 libmosquitto1; do
    grep -q "$library" <<< "$depends" || fail "Depends: lacks $library: $depends"
  done
  grep -q "bluez" <<< "$(dpkg-deb --field "$deb" Recommends)" || fail "Recommends: lacks bluez"
  echo "Depends: $depends"
}

extracted="$work/extracted"
mkdir -p "$extracted"
dpkg-deb -x "$deb" "$extracted"

no_toolchain_references() {
  local file bad=()
  for file in "$extracted"/usr/bin/*; do
    readelf -d "$file" | grep -E 'R(UN)?PATH' && bad+=("$file has a RUNPATH")
    readelf -d "$file" | grep -E 'NEEDED.*(libswift|libFoundation|libdispatch|libBlocksRuntime|lib_FoundationICU)' \
      && bad+=("$file needs a Swift library")
  done
  local referring
  referring="$(grep -rlF "$toolchain/" "$extracted" || true)"
  [ -z "$referring" ] || bad+=("files naming $toolchain/: $referring")
  ((${#bad[@]} == 0)) || fail "${bad[*]}"
}

# hidden COMMAND...: COMMAND in a mount namespace of its own, where the toolchain's folder is an
# empty, read-only tmpfs: what a box without Swift has.
hidden() {
  unshare --mount --propagation private -- sh -c 'mount -t tmpfs -o ro,size=4k proximityd-no-swift "$0" && exec "$@"' \
    "$toolchain" "$@"
}

runs_without_toolchain() {
  hidden sh -c "[ -z \"\$(ls -A '$toolchain')\" ]" || fail "the toolchain is not hidden"
  local product out
  for product in proximityd proximityctl proximity-fleet; do
    out="$(hidden "$extracted/usr/bin/$product" --version)" || fail "$product --version failed: $out"
    [ "$out" = "$version" ] || fail "$product --version printed '$out', VERSION says $version"
    if hidden ldd "$extracted/usr/bin/$product" | grep -E 'not found|swift'; then fail "$product's libraries"; fi
  done
  hidden "$extracted/usr/bin/proximityd" check-config "$extracted/etc/proximityd/proximityd.yaml" \
    || fail "check-config of the shipped conffile"
  hidden "$extracted/usr/bin/proximityctl" --help | grep -q "doctor" || fail "proximityctl --help"
}

# Two packaged nodes on bluez-sim's boxes, the toolchain hidden from both, and alpha's published
# table (Node1.FoundDevices, once a second) names bravo's identity: alpha identified bravo over GATT.
identifies_a_peer() {
  swift build --product bluez-sim > "$work/build.log" 2>&1 || { cat "$work/build.log"; return 1; }
  local sim run="$work/sim"
  sim="$(swift build --show-bin-path)/bluez-sim"
  mkdir -p "$run"
  "$sim" --scenario tests/package/two-boxes.yaml --json --runtime-dir "$run" > "$run/sim.json" 2> "$run/sim.log" &
  sim_pid=$!
  wait_until 60 "bluez-sim's boxes" test -s "$run/sim.json" || { cat "$run/sim.log"; return 1; }
  local alpha bravo
  alpha="$(cat "$run/alpha.address")"; alpha=${alpha%%,guid=*}
  bravo="$(cat "$run/bravo.address")"; bravo=${bravo%%,guid=*}
  # Subscribed before the nodes start, so that no table is missed.
  timeout 120 dbus-monitor --address "$alpha" \
    "type='signal',interface='org.proximityd.Node1',member='FoundDevices'" > "$run/alpha-tables.log" 2>&1 &
  local monitor=$!
  node_pids+=("$monitor")
  for box in alpha bravo; do
    local address=$alpha
    [ "$box" = alpha ] || address=$bravo
    hidden "$extracted/usr/bin/proximityd" run --bus "$address" --state-dir "$run/$box-state" --name "$box" \
      2> "$run/$box.log" &
    node_pids+=($!)
  done
  local bravo_id
  wait_until 60 "bravo's node on its bus" busctl --address="$bravo" status org.proximityd > /dev/null 2>&1 \
    || { tail -n 20 "$run/bravo.log"; return 1; }
  bravo_id="$(busctl --address="$bravo" get-property org.proximityd /org/proximityd org.proximityd.Node1 Identifier)"
  bravo_id=${bravo_id#s \"}; bravo_id=${bravo_id%\"}
  [ -n "$bravo_id" ] || fail "no Identifier on bravo"
  # The event: a FoundDevices table of alpha's that holds bravo's identity, within 90 s.
  local started=$SECONDS
  if ! timeout 90 sh -c 'tail -n +1 -f "$0" | grep -q -m 1 -F "\"$1\""' "$run/alpha-tables.log" "$bravo_id"; then
    tail -n 30 "$run/alpha.log"
    fail "alpha published no table with bravo ($bravo_id) within 90 s"
  fi
  echo "alpha identified bravo ($bravo_id) $((SECONDS - started)) s after bravo was up"
  hidden "$extracted/usr/bin/proximityctl" status --bus "$alpha" || fail "the packaged proximityctl status on alpha's bus"
  hidden "$extracted/usr/bin/proximityctl" peers --bus "$alpha" | tee "$run/peers.txt"
  grep -qF "$bravo_id" "$run/peers.txt" || fail "proximityctl peers on alpha does not list bravo"
}

# --- a fresh Debian 12 root --------------------------------------------------------------------------
# in_root COMMAND...: COMMAND in the root, with a clean environment.
in_root() {
  chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LC_ALL=C.UTF-8 \
    DEBIAN_FRONTEND=noninteractive "$@"
}
# apt_in_root ARGS...: apt-get in the root, quiet, answering yes.
apt_in_root() { in_root apt-get -y -q -o Dpkg::Use-Pty=0 "$@"; }

fresh_root() {
  local base="$cache/bookworm-minbase.tar"
  if [ ! -s "$base" ]; then
    echo "debootstrap --variant=minbase bookworm from $mirror (cached in $base)"
    local staging="$work/debootstrap"
    debootstrap --variant=minbase bookworm "$staging" "$mirror" > "$work/debootstrap.log" 2>&1 \
      || { tail -n 30 "$work/debootstrap.log"; return 1; }
    mkdir -p "$cache"
    tar -C "$staging" -cf "$base.part" . && mv "$base.part" "$base"
    rm -rf "$staging"
  fi
  mkdir -p "$root"
  tar -C "$root" -xf "$base"
  cp /etc/resolv.conf "$root/etc/resolv.conf"
  echo "deb $mirror bookworm main" > "$root/etc/apt/sources.list"
  mount -t proc proc "$root/proc"
  apt_in_root update > /dev/null || return 1
  # Nothing of the package's in the fresh root: what purge must come back to.
  in_root find / -xdev -name '*proximity*' > "$work/before.txt"
  [ ! -s "$work/before.txt" ] || fail "the fresh root already has: $(cat "$work/before.txt")"
}

# An older version of the same package, for the upgrade: the same files, version VERSION~old1.
old_deb="$work/older.deb"   # named so that the purge check's search for *proximity* does not find it
make_old() {
  dpkg-deb -R "$deb" "$work/old"
  sed -i "s/^Version: .*/Version: ${version}~old1/" "$work/old/DEBIAN/control"
  dpkg-deb -Zgzip -z1 -b "$work/old" "$old_deb" > /dev/null
  rm -rf "$work/old"
}

installs() {
  make_old || return 1
  cp "$old_deb" "$root/tmp/older.deb"
  apt_in_root install /tmp/older.deb > "$work/install.log" 2>&1 || { tail -n 30 "$work/install.log"; return 1; }
  grep -E '^(Setting up|Unpacking) ' "$work/install.log" | wc -l | xargs echo "packages set up and unpacked:"
  in_root dpkg-query -W -f='${Status} ${Version}\n' proximityd | grep -qx "install ok installed ${version}~old1" \
    || fail "proximityd ${version}~old1 is not installed"
  local file
  for file in "${expected_files[@]}"; do
    [ -e "$root$file" ] || fail "$file did not land"
  done
  in_root getent passwd proximityd || fail "no user proximityd"
  in_root getent group proximityd || fail "no group proximityd"
  in_root proximityctl --help | grep -q doctor || fail "proximityctl --help in the root"
  in_root proximityd check-config /etc/proximityd/proximityd.yaml || fail "check-config in the root"
  # Enabled on install, with its D-Bus alias; the fleet service not; no user unit for anyone.
  [ -L "$root/etc/systemd/system/multi-user.target.wants/proximityd.service" ] || fail "proximityd.service is not enabled"
  [ -L "$root/etc/systemd/system/dbus-org.proximityd.service" ] || fail "no dbus-org.proximityd.service alias"
  [ ! -e "$root/etc/systemd/system/multi-user.target.wants/proximity-fleet.service" ] || fail "proximity-fleet.service is enabled"
  ! ls "$root"/etc/systemd/user/*.wants/proximityctl-consume.service 2> /dev/null || fail "proximityctl-consume.service is enabled for every user"
  # What 0.2.0 did: the user unit enabled for every user. The upgrade must undo it.
  # (deb-systemd-helper --user enable would do it on a first install only: the link, as
  # deb-systemd-helper's state already lists it.)
  mkdir -p "$root/etc/systemd/user/graphical-session.target.wants"
  ln -s /usr/lib/systemd/user/proximityctl-consume.service \
    "$root/etc/systemd/user/graphical-session.target.wants/proximityctl-consume.service"
}

# The units as installed, through the root's own systemd-analyze.
units_verify() {
  local unit out exposure
  for unit in proximityd.service proximity-fleet.service; do
    out="$(in_root systemd-analyze verify --man=no "/lib/systemd/system/$unit" 2>&1)" || fail "verify $unit: $out"
    [ -z "$out" ] || fail "verify $unit says: $out"
    out="$(in_root systemd-analyze security --offline=yes --no-pager "/lib/systemd/system/$unit" 2>&1)" || fail "security $unit: $out"
    exposure="$(grep -o 'Overall exposure level for [^:]*: [0-9.]*' <<< "$out" | awk '{ print $NF }')"
    echo "$unit: exposure $exposure"
    awk -v e="$exposure" 'BEGIN { exit !(e != "" && e <= 1.5) }' || fail "$unit's exposure is $exposure, above 1.5"
  done
}

upgrades() {
  # An admin's edit, and state the node keeps.
  echo "name: kitchen-node   # edited" >> "$root/etc/proximityd/proximityd.yaml"
  local edited
  edited="$(sha256sum < "$root/etc/proximityd/proximityd.yaml")"
  mkdir -p "$root/var/lib/proximityd"
  echo '{"kept": true}' > "$root/var/lib/proximityd/kept-by-the-node.json"
  in_root chown -R proximityd:proximityd /var/lib/proximityd
  cp "$deb" "$root/tmp/current.deb"
  apt_in_root install /tmp/current.deb > "$work/upgrade.log" 2>&1 || { tail -n 30 "$work/upgrade.log"; return 1; }
  grep -E "Unpacking proximityd \($version\) over \(${version}~old1\)" "$work/upgrade.log" || fail "not an upgrade: $(cat "$work/upgrade.log")"
  in_root dpkg-query -W -f='${Status} ${Version}\n' proximityd | grep -qx "install ok installed $version" \
    || fail "proximityd $version is not installed"
  [ "$(sha256sum < "$root/etc/proximityd/proximityd.yaml")" = "$edited" ] || fail "the edited config was not kept"
  [ -s "$root/var/lib/proximityd/kept-by-the-node.json" ] || fail "the state directory was not kept"
  [ "$(in_root proximityd --version)" = "$version" ] || fail "the upgraded proximityd is not $version"
  ! ls "$root"/etc/systemd/user/*.wants/proximityctl-consume.service 2> /dev/null || fail "the upgrade left the user unit enabled for every user"
}

removes() {
  apt_in_root remove proximityd > "$work/remove.log" 2>&1 || { tail -n 30 "$work/remove.log"; return 1; }
  in_root dpkg-query -W -f='${Status}\n' proximityd | grep -qx "deinstall ok config-files" || fail "not in config-files state"
  local file
  for file in /usr/bin/proximityd /usr/bin/proximityctl /usr/bin/proximity-fleet /lib/systemd/system/proximityd.service; do
    [ ! -e "$root$file" ] || fail "$file is still there after remove"
  done
  [ -s "$root/etc/proximityd/proximityd.yaml" ] || fail "remove took the config"
  [ -s "$root/var/lib/proximityd/kept-by-the-node.json" ] || fail "remove took the state"
}

purges() {
  apt_in_root purge proximityd > "$work/purge.log" 2>&1 || { tail -n 30 "$work/purge.log"; return 1; }
  if in_root dpkg-query -W -f='${Status}\n' proximityd 2>/dev/null | grep -q .; then
    in_root dpkg-query -W -f='${Status}\n' proximityd | grep -qx "unknown ok not-installed" || fail "dpkg still knows proximityd"
  fi
  in_root find / -xdev -name '*proximity*' > "$work/after.txt"
  [ ! -s "$work/after.txt" ] || fail "left behind: $(cat "$work/after.txt")"
  [ ! -e "$root/etc/proximityd" ] && [ ! -e "$root/var/lib/proximityd" ] || fail "config or state left behind"
  # The user and group stay, as Debian does for system users (docs/install.md).
  in_root getent passwd proximityd > /dev/null || fail "the user went, which Debian does not do"
}

# The root booted under systemd: the package installed again, proximityd.service active, and the
# packaged proximityctl reads the node's status on that machine's system bus.
boots() {
  apt_in_root install /tmp/current.deb > "$work/reinstall.log" 2>&1 || { tail -n 30 "$work/reinstall.log"; return 1; }
  umount "$root/proc"
  # No Bluetooth here: the node serves on the bus and waits for an adapter. Its log says so.
  local machine="proximityd-test-$$"
  systemd-nspawn --quiet --register=no --keep-unit --machine="$machine" -D "$root" --boot \
    > "$work/boot.log" 2>&1 < /dev/null &
  booted=$!
  local leader=""
  find_leader() {
    ! kill -0 "$booted" 2>/dev/null && return 2
    leader="$(pgrep -P "$booted" -x systemd | head -n 1)"
    [ -n "$leader" ]
  }
  wait_until 60 "the container's systemd" find_leader || { cat "$work/boot.log"; return 1; }
  in_machine() { nsenter --target "$leader" --all -- /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LC_ALL=C.UTF-8 "$@"; }
  node_active() { in_machine systemctl is-active --quiet proximityd.service; }
  wait_until 120 "proximityd.service to be active" node_active || {
    in_machine systemctl --no-pager status proximityd.service dbus.service; cat "$work/boot.log"; return 1; }
  in_machine systemctl is-active proximityd.service
  in_machine proximityctl status || fail "proximityctl status on the machine's system bus"
  local fleet
  fleet="$(in_machine systemctl is-enabled proximity-fleet.service || true)"
  [ "$fleet" = disabled ] || fail "proximity-fleet.service is $fleet, not disabled"
  # An upgrade on the running box restarts the node, which keeps its identity (its state).
  local identity pid
  identity="$(in_machine proximityctl status | awk '/^Identifier:/ { print $2 }')"
  pid="$(in_machine systemctl show -P MainPID proximityd.service)"
  dpkg-deb -R "$deb" "$work/newer"
  sed -i "s/^Version: .*/Version: ${version}+newer1/" "$work/newer/DEBIAN/control"
  # Not in /tmp: the booted machine has a tmpfs there.
  dpkg-deb -Zgzip -z1 -b "$work/newer" "$root/root/newer.deb" > /dev/null
  rm -rf "$work/newer"
  in_machine apt-get install -y -q -o Dpkg::Use-Pty=0 /root/newer.deb > "$work/boot-upgrade.log" 2>&1 \
    || { tail -n 30 "$work/boot-upgrade.log"; return 1; }
  wait_until 60 "proximityd.service to be active after the upgrade" node_active
  local after
  after="$(in_machine systemctl show -P MainPID proximityd.service)"
  [ "$after" != "$pid" ] || fail "the upgrade did not restart proximityd.service (MainPID $pid)"
  wait_until 30 "the upgraded node on the bus" in_machine proximityctl status > /dev/null
  [ "$(in_machine proximityctl status | awk '/^Identifier:/ { print $2 }')" = "$identity" ] \
    || fail "the node's identity changed over the upgrade"
  echo "upgraded on the running box: MainPID $pid → $after, identity $identity kept"
  # Purge on the running box stops the node and takes its state.
  in_machine apt-get purge -y -q -o Dpkg::Use-Pty=0 proximityd > "$work/boot-purge.log" 2>&1 \
    || { tail -n 30 "$work/boot-purge.log"; return 1; }
  ! in_machine systemctl is-active --quiet proximityd.service || fail "proximityd.service still active after purge"
  [ ! -e "$root/var/lib/proximityd" ] && [ ! -e "$root/etc/proximityd" ] || fail "purge left state or config"
  in_machine systemctl poweroff > /dev/null 2>&1
  timeout 60 tail --pid="$booted" -f /dev/null
  wait "$booted" 2>/dev/null
  booted=""
}

started=$SECONDS
echo "== package tests: $deb"
check "lintian reports no error" lintian_clean
check "dpkg-deb -c lists every file; conffiles, version and dependencies" lists_every_file
check "man pages: no warning, no stray escape, examples as typed, every cited document shipped" man_pages
check "no file refers to the toolchain ($toolchain) or needs a Swift library" no_toolchain_references
check "with the toolchain hidden: --version is $version, the shipped conffile checks, proximityctl --help" runs_without_toolchain
check "with the toolchain hidden: two packaged nodes on bluez-sim, alpha identifies bravo" identifies_a_peer
root_started=$SECONDS
if check "a fresh Debian 12 root (debootstrap minbase)" fresh_root; then
  check "apt-get install (an older version): files, user and group, enabled units, proximityctl --help" installs
  check "the installed units pass systemd-analyze verify, exposure 1.5 at most" units_verify
  check "upgrade to $version keeps the edited config and the state" upgrades
  check "remove keeps the config and the state" removes
  check "purge leaves nothing behind" purges
  check "booted under systemd (systemd-nspawn): proximityd.service active, proximityctl status; upgrade restarts it, purge stops it" boots
fi
echo "package tests: $((SECONDS - started)) s in all, $((SECONDS - root_started)) s of them in the Debian 12 root"
((${#failures[@]} == 0)) || printf 'failed: %s\n' "${failures[@]}"
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
