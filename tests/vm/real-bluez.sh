#!/bin/bash
# The real-BlueZ suite: proximityd on bluetoothd 5.66 with btvirt controllers, inside the guest of
# scripts/bluez-vm (3 controllers, dbus/org.proximityd.conf installed as the system bus policy).
# Run it with scripts/test-real-bluez.sh. Every check goes through the guest's system bus with
# busctl, as a user would; each wait polls a condition with a timeout.
#
#   1. three nodes, one per adapter (hci0..hci2) on one bus, identify each other: each learns each
#      peer once, by one GATT read or from the peer's hello (one link per pair); time-to-identify
#      is measured; each advertises its measured power, which bluetoothd shows the others
#   2. bluetoothd stopped and started: every node registers again, the peers are found again, and
#      nobody connects again
#   3. a node killed with SIGKILL and restarted keeps its identity and connects to nobody
#   4. the adapter powered off, and every advertising instance taken: a clear state on the bus and
#      in the log, and recovery once the cause is gone
#   5. proximityctl doctor on a healthy box, with bluetoothd stopped and with a controller down
#   6. the bus policy: root runs proximityd; nobody reads (alerts too), but is refused every state-changing
#      call and the name
#   7. (after the nodes are stopped) a foreign peer, tests/vm/foreign_peer.py: only the identity
#      characteristic, no hello; a fresh node reads it, within a bound from its start (measured)
#   8. two fresh keyed nodes (one fleet key made in the guest by proximityctl) identify each other
#      with the trusted protocol: each lists the other, verified in peers.json; no name on the air
#   9. phone enrollment: proximityctl irks enroll on a fresh node (hci0), and a phone (hci2 with LE
#      privacy, tests/vm/phone.py) that pairs: the node holds the phone's IRK, the bond is removed
#  10. (last) a controller of a btvirt of its own unplugged and plugged back: node3's Health says
#      recovering, then ok, the same daemon
#
# Environment: PROXIMITYD_BIN (directory of proximityd and proximityctl, default .build/debug),
# REAL_BLUEZ_RESULTS (file to write time-to-identify figures to, optional; keyed nodes' as
# keyed_time_to_identify), REAL_BLUEZ_ONLY (9 or 10: that section alone, for work on it).
set -uo pipefail

BIN=$(realpath "${PROXIMITYD_BIN:-.build/debug}")
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BTCTL=${PROXIMITYD_VM_BLUETOOTHD_CTL:?run this inside scripts/bluez-vm}
# Logs and state: REAL_BLUEZ_WORK (in the repository, so they reach the host), else /tmp.
WORK=${REAL_BLUEZ_WORK:-$(mktemp -d /tmp/real-bluez.XXXXXX)}
mkdir -p "$WORK"
GENERAL=b89491c9-43dd-4d75-bf16-dff381aed967
FAILURES=0
NODES=(0 1 2)

say() { printf '\n== %s\n' "$*"; }
pass() { echo "ok   $*"; }
fail() { echo "FAIL $*"; FAILURES=$((FAILURES + 1)); }
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }

# wait_for SECONDS DESCRIPTION COMMAND...: polls COMMAND every 0.2 s.
wait_for() {
    local timeout=$1 what=$2
    shift 2
    local end=$(($(date +%s) + timeout))
    while (($(date +%s) < end)); do
        "$@" >/dev/null 2>&1 && return 0
        sleep 0.2
    done
    fail "$what (not within ${timeout} s)"
    return 1
}

name_of() { if [ "$1" = 0 ]; then echo org.proximityd; else echo "org.proximityd.hci$1"; fi; }
node_call() { local i=$1; shift; busctl --system call "$(name_of "$i")" /org/proximityd org.proximityd.Node1 "$@"; }
node_prop() { busctl --system get-property "$(name_of "$1")" /org/proximityd org.proximityd.Node1 "$2"; }
bare() { sed -e 's/^[a-z]* //' -e 's/"//g'; }
adapter_address() { busctl --system get-property org.bluez "/org/bluez/hci$1" org.bluez.Adapter1 Address | bare; }
count() { grep -c -- "$2" "$WORK/node$1.log" 2>/dev/null || true; }

start_node() { # NODE [STATE-DIR LOG [OPTION...]]: proximityd on hciNODE, with its own state and log unless given (NODE_NAME: its --name)
    local i=$1 state=${2:-$WORK/state$1} log=${3:-$WORK/node$1.log} name=${NODE_NAME:-node$1}
    shift $(($# < 3 ? $# : 3))
    "$BIN/proximityd" run --bus system --adapter "hci$i" --bus-name "$(name_of "$i")" --state-dir "$state" \
        --name "$name" --power-on --log-level debug "$@" 2>>"$log" &
    echo $! >"$WORK/node$i.pid"
    wait_for 60 "node$i owns $(name_of "$i")" node_prop "$i" Identifier
}

stop_node() {
    local i=$1 pid
    pid=$(cat "$WORK/node$i.pid")
    kill -TERM "$pid" 2>/dev/null
    wait "$pid"
    local status=$?
    rm -f "$WORK/node$i.pid"
    [ "$status" = 0 ] || fail "node$i exited with $status on SIGTERM"
}

has_identities() { # NODE ID...: GetIdentities lists every ID
    local out
    out=$(node_call "$1" GetIdentities) || return 1
    shift
    for id in "$@"; do [[ $out == *"\"$id\""* ]] || return 1; done
}

sees_device() { # NODE ADDRESS: BlueZ shows ADDRESS under the node's adapter, advertising the general UUID
    busctl --system get-property org.bluez "/org/bluez/hci$1/dev_${2//:/_}" org.bluez.Device1 UUIDs 2>/dev/null | grep -qi "$GENERAL"
}

device_prop() { # ADAPTER ADDRESS PROPERTY: the value of Device1.PROPERTY as hciADAPTER sees ADDRESS (empty when absent)
    busctl --system get-property org.bluez "/org/bluez/hci$1/dev_${2//:/_}" org.bluez.Device1 "$3" 2>/dev/null
}

forget_devices() { # bluetoothd forgets every device on every adapter
    local dev a
    for a in "${NODES[@]}"; do
        for dev in $(busctl --system tree org.bluez --list 2>/dev/null | grep "^/org/bluez/hci$a/dev_[0-9A-F_]*$"); do
            busctl --system call org.bluez "/org/bluez/hci$a" org.bluez.Adapter1 RemoveDevice o "$dev" >/dev/null 2>&1
        done
    done
    wait_for 30 "bluetoothd forgets every device" bash -c '! busctl --system tree org.bluez --list | grep -q /dev_'
}

cleanup() {
    for i in "${NODES[@]}"; do [ -f "$WORK/node$i.pid" ] && kill -TERM "$(cat "$WORK/node$i.pid")" 2>/dev/null; done
    [ -n "${HOG:-}" ] && kill -TERM "$HOG" 2>/dev/null
    [ -n "${FOREIGN:-}" ] && kill -TERM "$FOREIGN" 2>/dev/null
    wait 2>/dev/null
}
trap cleanup EXIT

declare -A ID ADDR
for i in "${NODES[@]}"; do ADDR[$i]=$(adapter_address "$i"); done
echo "adapters: hci0 ${ADDR[0]}, hci1 ${ADDR[1]}, hci2 ${ADDR[2]}; bluetoothd $(/usr/libexec/bluetooth/bluetoothd --version 2>/dev/null)"
# REAL_BLUEZ_ONLY=9 (or 10) runs section 9 (or 10) alone (for work on it: a guest of about 40 s
# instead of 5 minutes).
if [ -z "${REAL_BLUEZ_ONLY:-}" ]; then

# ---------------------------------------------------------------------------------------------
say "1. three nodes on hci0..hci2 identify each other, a pair at a time"
# btvirt on Debian's 6.1 kernel panics (hci_chan_del: list corruption, from bluetoothd's
# l2cap_sock_release) when one emulated controller holds two LE links at once, which three nodes
# identifying each other at the same moment always make. So the pairs meet one at a time; at the
# end all three run together on their caches.
declare -A IDENTIFIED_AT
pair() { # A B: B starts while A runs; both must identify each other
    local a=$1 b=$2 t0
    t0=$(now)
    start_node "$b"
    ID[$b]=$(node_prop "$b" Identifier | bare)
    local end=$(($(date +%s) + 120)) done_a="" done_b=""
    while (($(date +%s) < end)) && { [ -z "$done_a" ] || [ -z "$done_b" ]; }; do
        [ -z "$done_a" ] && has_identities "$a" "${ID[$b]}" && done_a=$(elapsed "$t0" "$(now)")
        [ -z "$done_b" ] && has_identities "$b" "${ID[$a]}" && done_b=$(elapsed "$t0" "$(now)")
        sleep 0.2
    done
    if [ -n "$done_a" ] && [ -n "$done_b" ]; then
        pass "node$a and node$b identified each other: node$a in $done_a s, node$b in $done_b s"
        IDENTIFIED_AT["$a-$b"]=$done_a
        IDENTIFIED_AT["$b-$a"]=$done_b
    else
        fail "node$a and node$b did not identify each other: node$a $(node_call "$a" GetIdentities), node$b $(node_call "$b" GetIdentities)"
    fi
}
start_node 0
ID[0]=$(node_prop 0 Identifier | bare)
pair 0 1
stop_node 1
pair 0 2
stop_node 0
pair 2 1
start_node 0
for i in "${NODES[@]}"; do
    others=()
    for j in "${NODES[@]}"; do [ "$j" != "$i" ] && others+=("${ID[$j]}"); done
    has_identities "$i" "${others[@]}" && pass "node$i knows both peers by their identities" \
        || fail "node$i: $(node_call "$i" GetIdentities)"
    reads=$(count "$i" "identified a peer")
    hellos=$(count "$i" "a peer introduced itself")
    attempts=$(count "$i" "connecting to identify a peer")
    [ $((reads + hellos)) = 2 ] && pass "node$i learnt 2 identities in all: $reads read, $hellos from a hello ($attempts connection attempts)" \
        || fail "node$i learnt $reads + $hellos identities"
    wait_for 60 "node$i advertises" bash -c "busctl --system get-property $(name_of "$i") /org/proximityd org.proximityd.Node1 Advertising | grep -q true" &&
        pass "node$i advertises"
done
# Each node advertises its measured power, -59 (0xFFFF: 50 58 01 c5, docs/ranging.md), and the
# others' bluetoothd show it in Device1.ManufacturerData.
shows_power() { # NODE ADDRESS
    busctl --system get-property org.bluez "/org/bluez/hci$1/dev_${2//:/_}" org.bluez.Device1 ManufacturerData 2>/dev/null |
        grep -q "65535 ay 4 80 88 1 197"
}
for i in "${NODES[@]}"; do
    for j in "${NODES[@]}"; do
        [ "$i" = "$j" ] && continue
        wait_for 60 "hci$j shows node$i's measured power" shows_power "$j" "${ADDR[$i]}" &&
            pass "hci$j shows node$i's advertised measured power (0xFFFF: 50 58 01 c5)"
    done
done
# An open node advertises its name (LocalName), and bluetoothd shows it to the others as the
# device's Name: the control for section 8, where a keyed node advertises none. Over a link
# bluetoothd also reads the peer's GAP Device Name (the adapter's "BlueZ 5.66" here), and a
# controller that linked to the node after its last advertisement was heard shows that one
# instead (seen once in CI, on one pair of six): the control asks that some other controller
# shows each node's advertised name.
shows_name() { [ "$(device_prop "$1" "$2" Name | bare)" = "$3" ]; }
shown_by_another() {
    local j
    for j in "${NODES[@]}"; do
        [ "$j" = "$1" ] && continue
        if shows_name "$j" "${ADDR[$1]}" "node$1"; then SHOWN_BY=$j; return 0; fi
    done
    return 1
}
for i in "${NODES[@]}"; do
    wait_for 30 "another controller shows node$i's advertised name" shown_by_another "$i" &&
        pass "hci$SHOWN_BY shows node$i's advertised name (Device1.Name node$i)"
done
if [ -n "${REAL_BLUEZ_RESULTS:-}" ]; then
    for key in "${!IDENTIFIED_AT[@]}"; do echo "time_to_identify $key ${IDENTIFIED_AT[$key]}"; done >>"$REAL_BLUEZ_RESULTS"
fi
# btvirt reports RSSI 127, HCI's "not available": no sample, so nothing is ranged (ranging is
# tested on bluez-sim).
ranging=$(node_call 0 GetRanging)
[ "$ranging" = "a{ss} 0" ] && pass "RSSI 127 (not available) is not taken for a sample: nothing ranged" \
    || fail "node0 ranges peers from RSSI 127: $ranging"

# ---------------------------------------------------------------------------------------------
say "2. bluetoothd stopped and started"
declare -A READY READS
for i in "${NODES[@]}"; do READY[$i]=$(count "$i" "adapter ready"); READS[$i]=$(count "$i" "connecting to identify a peer"); done
"$BTCTL" stop
for i in "${NODES[@]}"; do
    wait_for 30 "node$i notices bluetoothd left (Advertising false)" bash -c "busctl --system get-property $(name_of "$i") /org/proximityd org.proximityd.Node1 Advertising | grep -q false"
    # The watchdog (docs/reliability.md): Health says why while bluetoothd is away.
    health=$(node_prop "$i" Health) detail=$(node_prop "$i" HealthDetail)
    [ "$health" = 's "recovering"' ] && [[ $detail == *"bluetoothd went away"* ]] &&
        pass "node$i: Health recovering ($detail)" || fail "node$i: Health $health ($detail) with bluetoothd stopped"
done
"$BTCTL" start
for i in "${NODES[@]}"; do
    wait_for 60 "node$i registers again after the restart" bash -c "busctl --system get-property $(name_of "$i") /org/proximityd org.proximityd.Node1 Advertising | grep -q true"
    [ "$(count "$i" "adapter ready")" -gt "${READY[$i]}" ] && pass "node$i set up again on the new bluetoothd" || fail "node$i did not set up again"
    wait_for 60 "node$i: Health ok again" bash -c "[ \"\$(busctl --system get-property $(name_of "$i") /org/proximityd org.proximityd.Node1 Health)\" = 's \"ok\"' ]" &&
        pass "node$i: Health ok again, the daemon never restarted (pid $(cat "$WORK/node$i.pid") still running: $(kill -0 "$(cat "$WORK/node$i.pid")" && echo yes))"
done
for i in "${NODES[@]}"; do
    for j in "${NODES[@]}"; do
        [ "$i" = "$j" ] && continue
        wait_for 90 "hci$i sees node$j again" sees_device "$i" "${ADDR[$j]}" && pass "hci$i sees node$j (${ADDR[$j]}) again"
    done
done
for i in "${NODES[@]}"; do
    [ "$(count "$i" "connecting to identify a peer")" = "${READS[$i]}" ] && pass "node$i connected to nobody again" \
        || fail "node$i connected again after the restart"
done

# ---------------------------------------------------------------------------------------------
say "3. node1 killed with SIGKILL and restarted"
kill -KILL "$(cat "$WORK/node1.pid")"
wait "$(cat "$WORK/node1.pid")" 2>/dev/null
mv "$WORK/node1.log" "$WORK/node1.log.before"
: >"$WORK/node1.log"
start_node 1
[ "$(node_prop 1 Identifier | bare)" = "${ID[1]}" ] && pass "node1 kept its identity ${ID[1]}" || fail "node1's identity changed"
has_identities 1 "${ID[0]}" "${ID[2]}" && pass "node1 knows its peers from peers.json" || fail "node1 lost its peers"
wait_for 60 "node1 discovers again" bash -c "busctl --system get-property org.proximityd.hci1 /org/proximityd org.proximityd.Node1 Discovering | grep -q true"
for j in 0 2; do wait_for 60 "hci1 sees node$j" sees_device 1 "${ADDR[$j]}"; done
[ "$(count 1 "connecting to identify a peer")" = 0 ] && pass "node1 connected to nobody after the restart" || fail "node1 connected again"

# ---------------------------------------------------------------------------------------------
say "4a. the adapter powered off, then on"
busctl --system set-property org.bluez /org/bluez/hci2 org.bluez.Adapter1 Powered b false
wait_for 30 "node2 shows Advertising false" bash -c "busctl --system get-property org.proximityd.hci2 /org/proximityd org.proximityd.Node1 Advertising | grep -q false" &&
    pass "node2: Advertising false with the adapter off"
wait_for 10 "node2 logs the adapter off" grep -q "the adapter was powered off" "$WORK/node2.log" && pass "node2 logs: the adapter was powered off"
"$BIN/proximityctl" doctor --adapter hci2 --bus-name org.proximityd.hci2 >"$WORK/doctor-off.txt" 2>&1
grep -q "FAIL    adapter hci2: .* is powered off" "$WORK/doctor-off.txt" && pass "doctor: adapter hci2 powered off, with a fix" \
    || fail "doctor did not report hci2 off: $(cat "$WORK/doctor-off.txt")"
busctl --system set-property org.bluez /org/bluez/hci2 org.bluez.Adapter1 Powered b true
wait_for 60 "node2 advertises again after power on" bash -c "busctl --system get-property org.proximityd.hci2 /org/proximityd org.proximityd.Node1 Advertising | grep -q true" &&
    pass "node2 advertises again"

say "4b. every advertising instance taken"
stop_node 2
: >"$WORK/hog.out"
/usr/bin/python3 "$HERE/adv_hog.py" hci2 >"$WORK/hog.out" 2>&1 &
HOG=$!
wait_for 60 "the hog takes the instances" grep -q "hogging" "$WORK/hog.out"
echo "hog: $(tr '\n' ' ' <"$WORK/hog.out")"
echo "LEAdvertisingManager1 on hci2: $(busctl --system get-property org.bluez /org/bluez/hci2 org.bluez.LEAdvertisingManager1 ActiveInstances SupportedInstances | tr '\n' ' ')"
start_node 2
wait_for 60 "node2 says it cannot register" grep -q "cannot register the advertisement or the GATT application; trying again" "$WORK/node2.log" &&
    pass "node2 logs: $(grep -o 'cannot register[^"]*trying again in [0-9]* s' "$WORK/node2.log" | head -1) ($(grep -o 'error=[^ ]*.*' "$WORK/node2.log" | grep -m1 -o 'Maximum advertisements reached\|Failed[^ ]*' || true))"
node_prop 2 Advertising | grep -q false && pass "node2: Advertising false while the instances are taken" || fail "node2 claims to advertise"
"$BIN/proximityctl" doctor --adapter hci2 --bus-name org.proximityd.hci2 >"$WORK/doctor-full.txt" 2>&1
grep -q "FAIL    advertising: no advertising instance free" "$WORK/doctor-full.txt" && pass "doctor: no advertising instance free, with a fix" \
    || fail "doctor did not report the instances: $(cat "$WORK/doctor-full.txt")"
kill -TERM "$HOG"
wait "$HOG" 2>/dev/null
HOG=
wait_for 90 "node2 advertises once instances are free" bash -c "busctl --system get-property org.proximityd.hci2 /org/proximityd org.proximityd.Node1 Advertising | grep -q true" &&
    pass "node2 advertises once the instances are free"

# ---------------------------------------------------------------------------------------------
say "5. proximityctl doctor"
"$BIN/proximityctl" doctor >"$WORK/doctor.txt" 2>&1
status=$?
cat "$WORK/doctor.txt"
[ "$status" = 0 ] && pass "doctor: healthy box, exit 0" || fail "doctor exit $status on a healthy box"
grep -q "^ok      bluetoothd: org.bluez is :.*, version 5\." "$WORK/doctor.txt" && pass "doctor reports bluetoothd's version" || fail "doctor: no bluetoothd version"
grep -q "^ok      policy: .*org.proximityd.conf is installed" "$WORK/doctor.txt" && pass "doctor finds the policy" || fail "doctor: no policy"
"$BTCTL" stop
"$BIN/proximityctl" doctor >"$WORK/doctor-nobtd.txt" 2>&1
status=$?
cat "$WORK/doctor-nobtd.txt"
[ "$status" = 1 ] && grep -q "^FAIL    bluetoothd: org.bluez is not on the bus" "$WORK/doctor-nobtd.txt" &&
    grep -q "^ok      controllers: hci0" "$WORK/doctor-nobtd.txt" && pass "doctor: bluetoothd stopped (the kernel still lists the controllers)" \
    || fail "doctor with bluetoothd stopped"
"$BTCTL" start
wait_for 60 "node0 registers again" bash -c "busctl --system get-property org.proximityd /org/proximityd org.proximityd.Node1 Advertising | grep -q true"
btmgmt --index 1 power off >/dev/null 2>&1
"$BIN/proximityctl" doctor --adapter hci1 --bus-name org.proximityd.hci1 >"$WORK/doctor-down.txt" 2>&1
cat "$WORK/doctor-down.txt"
grep -q "^FAIL    controller hci1: .* is down" "$WORK/doctor-down.txt" && pass "doctor: controller hci1 down, with a fix" \
    || fail "doctor with hci1 down"
btmgmt --index 1 power on >/dev/null 2>&1

# ---------------------------------------------------------------------------------------------
say "6. the bus policy, as nobody"
as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups -- "$@"; }
as_nobody busctl --system introspect org.proximityd /org/proximityd >/dev/null 2>&1 && pass "nobody introspects" || fail "nobody cannot introspect"
as_nobody busctl --system get-property org.proximityd /org/proximityd org.proximityd.Node1 Identifier >/dev/null 2>&1 &&
    pass "nobody reads Identifier" || fail "nobody cannot read"
as_nobody busctl --system call org.proximityd /org/proximityd org.proximityd.Node1 GetRanging >/dev/null 2>&1 &&
    pass "nobody calls GetRanging" || fail "nobody cannot call GetRanging"
busctl --system call org.proximityd /org/proximityd org.proximityd.RegionMonitor1 StartMonitoring 'sa{sv}' fleet 1 Kind s node >/dev/null &&
    pass "root starts monitoring a region" || fail "root cannot StartMonitoring"
as_nobody busctl --system call org.proximityd /org/proximityd org.proximityd.RegionMonitor1 GetMonitoredRegions 2>&1 | grep -q '"/org/proximityd/regions/fleet"' &&
    pass "nobody lists the regions" || fail "nobody cannot call GetMonitoredRegions"
as_nobody busctl --system call org.proximityd /org/proximityd org.proximityd.RegionMonitor1 RequestState s fleet 2>&1 | grep -q '^s "' &&
    pass "nobody asks a region's state" || fail "nobody cannot call RequestState"
busctl --system call org.proximityd /org/proximityd org.proximityd.AlertManager1 AddAlert 'sa{sv}' door 2 Title s Door Match 'a{sv}' 0 >/dev/null &&
    pass "root adds an alert" || fail "root cannot AddAlert"
as_nobody busctl --system call org.proximityd /org/proximityd org.proximityd.AlertManager1 GetDefinitions 2>&1 | grep -q '"door"' &&
    pass "nobody reads the alerts' definitions" || fail "nobody cannot call GetDefinitions"
as_nobody busctl --system call org.proximityd /org/proximityd org.proximityd.AlertManager1 GetAlerts 2>&1 | grep -q '^ao ' &&
    pass "nobody lists the alert targets" || fail "nobody cannot call GetAlerts"
as_nobody busctl --system call org.proximityd /org/proximityd org.proximityd.EventLog1 GetEvents tdu 0 0 10 2>&1 | grep -q '^a(tdssa{ss}) ' &&
    pass "nobody reads the event log" || fail "nobody cannot call GetEvents"
as_nobody busctl --system call org.proximityd /org/proximityd org.proximityd.Profile1 GetRules 2>&1 | grep -q '^a{ss} ' &&
    pass "nobody reads the rules" || fail "nobody cannot call GetRules"
for call in "set-property org.proximityd /org/proximityd org.proximityd.Node1 ClearInterval d 5" \
    "call org.proximityd /org/proximityd org.proximityd.AlertManager1 AddAlert sa{sv} x 1 Match a{sv} 0" \
    "call org.proximityd /org/proximityd org.proximityd.AlertManager1 RemoveAlert s door" \
    "call org.proximityd /org/proximityd org.proximityd.AlertManager1 Accept o /org/proximityd/alerts/door/x" \
    "call org.proximityd /org/proximityd org.proximityd.AlertManager1 RegisterStrategy os /x crowd" \
    "call org.proximityd /org/proximityd org.proximityd.Profile1 UpdateAttribute ss a.x 1" \
    "call org.proximityd /org/proximityd org.proximityd.Profile1 AddRule ss r {}" \
    "call org.proximityd /org/proximityd org.proximityd.Profile1 TrackBeacon sssya{ss} u 1 2 2 0" \
    "call org.proximityd /org/proximityd org.proximityd.Node1 SetMeasuredPower sn x -- -60" \
    "call org.proximityd /org/proximityd org.proximityd.Node1 ResetMeasuredPower s x" \
    "call org.proximityd /org/proximityd org.proximityd.Node1 Reload" \
    "call org.proximityd /org/proximityd org.proximityd.RegionMonitor1 StartMonitoring sa{sv} x 0" \
    "call org.proximityd /org/proximityd org.proximityd.RegionMonitor1 StopMonitoring s fleet" \
    "call org.proximityd /org/proximityd org.proximityd.RegionMonitor1 StopMonitoringAll"; do
    # shellcheck disable=SC2086
    out=$(as_nobody busctl --system $call 2>&1)
    [[ $out == *"Access denied"* ]] && pass "nobody is denied: busctl $call" || fail "nobody not denied ($out): busctl $call"
done
node_prop 0 ClearInterval | grep -q "^d 10$" && pass "ClearInterval unchanged" || fail "ClearInterval changed"
busctl --system call org.proximityd /org/proximityd org.proximityd.RegionMonitor1 GetMonitoredRegions | grep -q '^ao 1 "/org/proximityd/regions/fleet"$' &&
    pass "the regions unchanged" || fail "the regions changed: $(busctl --system call org.proximityd /org/proximityd org.proximityd.RegionMonitor1 GetMonitoredRegions)"
busctl --system call org.proximityd /org/proximityd org.proximityd.AlertManager1 GetDefinitions | grep -q '^a{sa{sv}} 1 "door"' &&
    pass "the alerts unchanged" || fail "the alerts changed: $(busctl --system call org.proximityd /org/proximityd org.proximityd.AlertManager1 GetDefinitions)"
mkdir -p "$WORK/nobody" && chmod 777 "$WORK/nobody"
out=$(as_nobody "$BIN/proximityd" run --bus system --bus-name org.proximityd.rogue --state-dir "$WORK/nobody/state" 2>&1)
status=$?
[ "$status" = 69 ] && [[ $out == *"not allowed to own org.proximityd.rogue"* ]] && pass "nobody cannot own org.proximityd.rogue (exit 69)" \
    || fail "nobody owning a name: exit $status: $out"

# A member of group proximityd (the systemd unit's user) may own the name. The guest's /etc is
# writable; the bus reads the group when it reloads its configuration. The member runs on an
# adapter that does not exist: on hci0 this fresh node would connect at once to node1 and node2
# (BlueZ knows them), and those Connects outlive it: the kernel holds them while node0 discovers
# and makes both links the moment node0 stops, two links on one btvirt controller (section 7).
if groupadd --system proximityd && useradd --system --no-create-home -g proximityd proximityd-test; then
    busctl --system call org.freedesktop.DBus /org/freedesktop/DBus org.freedesktop.DBus ReloadConfig >/dev/null
    mkdir -p "$WORK/member" && chown proximityd-test:proximityd "$WORK/member"
    setpriv --reuid=proximityd-test --regid=proximityd --init-groups -- "$BIN/proximityd" run --bus system \
        --bus-name org.proximityd.member --adapter hci7 --state-dir "$WORK/member/state" 2>"$WORK/member.log" &
    member=$!
    wait_for 60 "a member of group proximityd owns org.proximityd.member" \
        busctl --system get-property org.proximityd.member /org/proximityd org.proximityd.Node1 Identifier &&
        pass "a member of group proximityd owns org.proximityd.member"
    kill -TERM "$member" 2>/dev/null
    wait "$member"
else
    fail "cannot create group proximityd in the guest"
fi

# ---------------------------------------------------------------------------------------------
say "shutdown"
for i in "${NODES[@]}"; do stop_node "$i"; done
for i in "${NODES[@]}"; do
    grep -q "unregistered the advertisement and the GATT application" "$WORK/node$i.log" && pass "node$i unregistered on SIGTERM" \
        || fail "node$i did not unregister"
done

# ---------------------------------------------------------------------------------------------
say "7. a foreign peer: the identity characteristic only, no hello"
# A peripheral that is not proximityd (tests/vm/foreign_peer.py): it advertises the general
# service and serves only the identity characteristic; it never writes a hello and never connects.
# A fresh node (new state, so a new identity and no peers) meets it alone, the other nodes being
# stopped. Who connects is a coin per pair of addresses (PairHashOrdering for open nodes: FNV-1a
# of the two addresses in order, flipped by which is lower; connects_first below computes it):
# a node the coin picks connects at once; the other first waits the scheduler's yield time (30 s)
# for a hello that never comes, then connects. 7a and 7b are two pairs, each checked against its
# coin.
# Bounds, from the node's start (docs/real-bluez.md, "A foreign peer"): 15-31 s measured for 7a
# (the node's start, the peer's start, up to 10.24 s for the kernel's discovery window to end
# before a connection is made, the read, 2 s of Disconnect); 45 s leaves half as much again for a
# busy host; one first attempt that stalls the whole 30 s of BlueZ's ATT timeout adds 45 s (it was
# seen once in a CI run, 2026-11-28: 82 s in 7b), a second fails the check.
# 7b: the same and the 30 s yield. A failed attempt is shown even when the time is within bound.
FOREIGN_BOUND=45
FOREIGN_YIELD_BOUND=75
FOREIGN_STALL_ALLOWANCE=45
connects_first() { # OWN PEER: 1 when a node at address OWN connects to PEER at once, else 0
    /usr/bin/python3 - "$1" "$2" <<'PY'
import sys
own, peer = sys.argv[1].upper(), sys.argv[2].upper()
lower = own < peer
h = 0xCBF29CE484222325
for b in ((own + "|" + peer) if lower else (peer + "|" + own)).encode():
    h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
print(1 if lower != (h >> 63 == 1) else 0)
PY
}
foreign() { # NODE PEER: a fresh node on hciNODE identifies the foreign peer on hciPEER
    local n=$1 p=$2 bound t0 fid took log out first
    first=$(connects_first "${ADDR[$n]}" "${ADDR[$p]}")
    if [ "$first" = 1 ]; then bound=$FOREIGN_BOUND; else bound=$FOREIGN_YIELD_BOUND; fi
    echo "node$n (${ADDR[$n]}) and the peer (${ADDR[$p]}): the coin says node$n $([ "$first" = 1 ] && echo connects at once || echo waits for a hello first)"
    log="$WORK/foreign-node$n.log" out="$WORK/foreign$p.out"
    fid=$(cat /proc/sys/kernel/random/uuid)
    # A clean slate: bluetoothd forgets every device (their cached services, and any link or
    # pending connection with them), so the fresh node meets a peer it has never seen and has
    # nothing else to connect to: a second link on a btvirt controller is what breaks the ATT
    # exchange (docs/real-bluez.md).
    forget_devices || return 1
    t0=$(now)
    start_node "$n" "$WORK/foreign-state$n" "$log" || return 1
    # btvirt reports an advertiser only when a scanner or the advertiser switches on
    # (scripts/vm/README.md): the peer starts advertising once the node scans.
    wait_for 60 "node$n discovers" bash -c "busctl --system get-property $(name_of "$n") /org/proximityd org.proximityd.Node1 Discovering | grep -q true"
    /usr/bin/python3 "$HERE/foreign_peer.py" "hci$p" "$fid" >"$out" 2>&1 &
    FOREIGN=$!
    wait_for 60 "the foreign peer advertises on hci$p" grep -q "advertising$" "$out" &&
        pass "the foreign peer on hci$p (${ADDR[$p]}) advertises, identity $fid"
    # Waits past the bound, to report the time even when it is over.
    if wait_for 150 "node$n identifies the foreign peer" has_identities "$n" "$fid"; then
        took=$(elapsed "$t0" "$(now)")
        local reads failed yielded
        reads=$(grep -c "identified a peer" "$log")
        failed=$(grep -c "identification failed" "$log")
        yielded=$(grep -c "the peer did not introduce itself" "$log")
        # One stalled first attempt (the emulated controller's, shown below) may add its 30 s ATT
        # timeout and the retry: 45 s more; a second is a failure whatever the time.
        local allowed=$bound
        [ "$failed" = 1 ] && allowed=$((bound + FOREIGN_STALL_ALLOWANCE))
        awk -v t="$took" -v b="$allowed" -v f="$failed" 'BEGIN { exit !(t <= b && f <= 1) }' &&
            pass "node$n identified the foreign peer by reading it, $took s after its start (bound $allowed s; $reads read, $failed failed attempts, $yielded yield run out)" ||
            fail "node$n identified the foreign peer $took s after its start, over the bound of $allowed s or after more than one failed attempt ($failed failed attempts, $yielded yield run out)"
        grep "identification failed" "$log" | sed 's/^/     /'
        [ "$reads" = 1 ] || fail "node$n logged $reads reads of the foreign peer"
        if [ "$first" = 1 ]; then
            [ "$yielded" = 0 ] && pass "node$n (the coin's choice) connected without waiting for a hello" || fail "node$n waited for a hello though the coin picks it"
            echo "$took" >"$WORK/foreign-first"
        else
            [ "$yielded" = 1 ] && pass "node$n (not the coin's choice) waited for a hello, then connected" || fail "node$n: $yielded yields run out"
        fi
        echo "$took" >"$WORK/foreign-took$n"
    else
        echo none >"$WORK/foreign-took$n"
        grep "identif\|connect" "$log" | tail -n 20
    fi
    kill -TERM "$FOREIGN" 2>/dev/null
    wait "$FOREIGN" 2>/dev/null
    FOREIGN=
    echo "foreign peer: $(tr '\n' ' ' <"$out")"
    stop_node "$n"
}
say "7a. a fresh node on hci0 and the foreign peer on hci1"
foreign 0 1
say "7b. a fresh node on hci2 and the foreign peer on hci1"
foreign 2 1
# Only a node that connected at once goes with the time-to-identify figures: a yield's 30 s are by
# design.
if [ -n "${REAL_BLUEZ_RESULTS:-}" ]; then
    echo "time_to_identify 0-foreign $(cat "$WORK/foreign-first" 2>/dev/null || echo none)" >>"$REAL_BLUEZ_RESULTS"
fi
echo "foreign peer: identified $(cat "$WORK/foreign-took0" 2>/dev/null || echo -) s after node0's start (7a), $(cat "$WORK/foreign-took2" 2>/dev/null || echo -) s after node2's (7b)"

# ---------------------------------------------------------------------------------------------
say "8. two keyed nodes (one fleet key) identify each other with the trusted protocol"
# Two fresh nodes (new state: new identities, no peers.json, so nothing learnt the open way
# before) on hci0 and hci1 with the same fleet key, made in the guest with the package's
# proximityctl. They meet as a pair of section 1 does, bluetoothd having forgotten every device
# first (section 7): the one the fleet key's coin picks connects, reads the other's challenge,
# writes its 60-byte hello sealed to it and reads the 44-byte answer; the other learns it from the
# hello.
# Both must list the other in GetIdentities and hold it verified in peers.json (Peer1.Verified
# comes from the same record, but btvirt's RSSI 127 makes no sample, so no Peer1 object exists on
# real BlueZ). Their advertisements carry no name: they run as keyed0 and keyed1, names never
# advertised in this guest, so bluetoothd's cache of earlier names cannot stand in for them.
KEYED_BOUND=120
keyed() {
    local keydir key config out status t0 done0="" done1="" end i j started=$(now)
    keydir=$(mktemp -d /tmp/fleet.XXXXXX)
    key=$keydir/fleet.key config=$WORK/keyed.yaml
    "$BIN/proximityctl" fleet-key new --output "$key" || { fail "proximityctl fleet-key new --output $key"; return 1; }
    [ "$(stat -c '%a %U %F' "$key")" = "600 root regular file" ] && pass "proximityctl fleet-key new --output: $(stat -c '%a %U' "$key"), $(grep -c '^[0-9a-f]\{64\}$' "$key") key line" \
        || fail "the new key file is $(stat -c '%a %U %F' "$key")"
    printf 'fleet-key: %s\n' "$key" >"$config"
    chmod 640 "$key"
    out=$("$BIN/proximityd" check-config "$config" 2>&1)
    status=$?
    [ "$status" = 65 ] && [[ $out == *"chmod 600 $key"* ]] && pass "check-config refuses the key at mode 640 (exit 65, says chmod 600)" \
        || fail "check-config with the key at mode 640: exit $status: $out"
    chmod 600 "$key"
    out=$("$BIN/proximityd" check-config "$config" 2>&1) && pass "check-config takes the key at mode 600" || fail "check-config: $out"
    forget_devices || return 1
    NODE_NAME=keyed0 start_node 0 "$WORK/keyed-state0" "$WORK/keyed-node0.log" --config "$config" || return 1
    ID[k0]=$(node_prop 0 Identifier | bare)
    wait_for 60 "keyed0 discovers" bash -c "busctl --system get-property org.proximityd /org/proximityd org.proximityd.Node1 Discovering | grep -q true"
    t0=$(now)
    NODE_NAME=keyed1 start_node 1 "$WORK/keyed-state1" "$WORK/keyed-node1.log" --config "$config" || return 1
    ID[k1]=$(node_prop 1 Identifier | bare)
    end=$(($(date +%s) + KEYED_BOUND))
    while (($(date +%s) < end)) && { [ -z "$done0" ] || [ -z "$done1" ]; }; do
        [ -z "$done0" ] && has_identities 0 "${ID[k1]}" && done0=$(elapsed "$t0" "$(now)")
        [ -z "$done1" ] && has_identities 1 "${ID[k0]}" && done1=$(elapsed "$t0" "$(now)")
        sleep 0.2
    done
    if [ -n "$done0" ] && [ -n "$done1" ]; then
        pass "keyed0 and keyed1 identified each other: keyed0 in $done0 s, keyed1 in $done1 s (from keyed1's start)"
        [ -n "${REAL_BLUEZ_RESULTS:-}" ] && printf 'keyed_time_to_identify 0-1 %s\nkeyed_time_to_identify 1-0 %s\n' "$done0" "$done1" >>"$REAL_BLUEZ_RESULTS"
    else
        fail "keyed0 and keyed1 did not identify each other within $KEYED_BOUND s: keyed0 $(node_call 0 GetIdentities), keyed1 $(node_call 1 GetIdentities)"
    fi
    # peers.json: the address, the identity, and verified (proved with the fleet's key).
    for i in 0 1; do
        j=$((1 - i))
        /usr/bin/python3 -c 'import json, sys
p = json.load(open(sys.argv[1]))["peers"].get(sys.argv[2], {})
sys.exit(0 if p.get("identity") == sys.argv[3] and p.get("verified") is True else 1)' "$WORK/keyed-state$i/peers.json" "${ADDR[$j]}" "${ID[k$j]}" &&
            pass "keyed$i holds keyed$j (${ADDR[$j]}) verified" || fail "keyed$i does not hold keyed$j verified: $(cat "$WORK/keyed-state$i/peers.json" 2>&1)"
    done
    for i in 0 1; do
        echo "keyed$i: $(grep -c 'connecting to identify a peer' "$WORK/keyed-node$i.log") connection(s)," \
            "$(grep -c 'verified=true .*identified a peer' "$WORK/keyed-node$i.log") verified answer(s) read," \
            "$(grep -c 'a peer introduced itself' "$WORK/keyed-node$i.log") hello(s) taken"
    done
    grep -h "identification failed\|rejected a peer\|refused\|not of this fleet" "$WORK/keyed-node0.log" "$WORK/keyed-node1.log" | sed 's/^/     /'
    # The advertisements: seen (the general UUID, the power frame), with no name and no identity.
    for i in 0 1; do
        j=$((1 - i))
        # A keyed node's power frame carries its member tag (docs/security.md, "Outsiders' work is
        # bounded"): the first two bytes of HMAC-SHA256 of its address under a key HKDF derives
        # from the fleet key, computed here independently.
        local tag
        tag=$(/usr/bin/python3 - "$key" "${ADDR[$i]}" <<'PY'
import hashlib, hmac, sys
secret = bytes.fromhex([l.strip() for l in open(sys.argv[1]) if l.strip() and not l.startswith("#")][0])
prk = hmac.new(b"proximityd", secret, hashlib.sha256).digest()
derived = hmac.new(prk, b"proximityd member tag v1" + b"\x01", hashlib.sha256).digest()
print(" ".join(str(b) for b in hmac.new(derived, sys.argv[2].upper().encode(), hashlib.sha256).digest()[:2]))
PY
)
        wait_for 30 "hci$j sees keyed$i" sees_device "$j" "${ADDR[$i]}" &&
            wait_for 30 "hci$j shows keyed$i's power frame with its member tag ($tag)" bash -c \
                "busctl --system get-property org.bluez /org/bluez/hci$j/dev_${ADDR[$i]//:/_} org.bluez.Device1 ManufacturerData 2>/dev/null | grep -q '65535 ay 6 80 88 1 197 $tag\$'" &&
            pass "hci$j sees keyed$i's advertisement: the general UUID and the power frame with the member tag for its address ($tag)"
        local name alias data
        name=$(device_prop "$j" "${ADDR[$i]}" Name | bare) alias=$(device_prop "$j" "${ADDR[$i]}" Alias | bare)
        data=$(device_prop "$j" "${ADDR[$i]}" ServiceData)
        [ "$name" != "keyed$i" ] && [ "$alias" != "keyed$i" ] && { [ -z "$data" ] || [ "$data" = "a{sv} 0" ]; } &&
            pass "hci$j shows no name of keyed$i's (Name '${name}', Alias '${alias}') and no identity (ServiceData '${data}')" ||
            fail "keyed$i's advertisement shows it: Name '$name', Alias '$alias', ServiceData '$data'"
    done
    stop_node 0
    stop_node 1
    rm -rf "$keydir"
    echo "section 8 took $(elapsed "$started" "$(now)") s"
}
keyed
fi # REAL_BLUEZ_ONLY

# ---------------------------------------------------------------------------------------------
# One fresh node on hci0 (no fleet key) and the package's proximityctl irks enroll on it: its own
# agent (NoInputNoOutput with --just-works) as bluetoothd's default agent, and a pairable
# advertisement "proximityd node0". The phone is controller hci2 with LE privacy on: it connects
# from a resolvable private address and gives its IRK and identity address in the pairing. It is
# driven by tests/vm/phone.py: an agent of its own (NoInputNoOutput, not the default), discovery
# until hci0 appears, then Device1.Pair(), an outgoing pairing as a phone makes one (LE Secure
# Connections, Just Works: the kernel asks both sides' bluetoothd to confirm; hci0's asks the
# enroll's agent, RequestAuthorization; hci2's, the initiator, confirms by itself). The enroll must
# add the key the phone gave under "phone" (settings.json: most significant byte first) and remove
# the bond. btvirt: hci0's link to hci2 is the only link meanwhile (one per controller, section 7);
# bluetoothd forgets every device first, so that the fresh node tries nobody it only remembers.
#
# The phone's IRK: bluetoothd keeps an adapter's own IRK in /var/lib/bluetooth/ADDR/identity
# ([General] IdentityResolvingKey=32 lowercase hex digits, in the order mgmt's Set Privacy and
# SMP's Identity Information carry it: least significant byte first) only when main.conf has
# Privacy on, for every adapter (seen in this guest: no file here; with Privacy = device the
# file's digits are those of bluetoothd's Set Privacy in btmon). hci2 alone gets privacy with
# btmgmt, which takes the IRK as an argument (else it makes a random one and keeps it nowhere): the
# test chooses it, written as that file would hold it. btmon shows what the pairing carried;
# bluetoothd's bond file on hci0 (its [IdentityResolvingKey] Key=) is copied while it exists.
PHONE_WINDOW=60
phone_enrollment() {
    local state=$WORK/phone-state0 log=$WORK/phone-node0.log out=$WORK/enroll.out phone=$WORK/phone.out
    local bond=/var/lib/bluetooth/${ADDR[0]}/${ADDR[2]} irk t0 opened="" took="" enroll status stored expected on_air rpa key btmon_pid copier
    forget_devices || return 1
    start_node 0 "$state" "$log" || return 1
    wait_for 60 "node0 advertises" bash -c "busctl --system get-property org.proximityd /org/proximityd org.proximityd.Node1 Advertising | grep -q true" || return 1
    # The kernel takes Set Privacy only while the controller is off. btmgmt prints nothing
    # without a terminal (the commands still run): script(1) gives it one.
    mgmt() { script -qec "btmgmt --index 2 $*" /dev/null | tr -d '\r'; }
    irk=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')
    mgmt power off >/dev/null
    mgmt privacy on "$irk" >"$WORK/privacy.out"
    mgmt power on >/dev/null
    mgmt info | grep -q "current settings:.* privacy" && pass "hci2 (the phone) has LE privacy on ($(mgmt info | grep -o 'current settings:.*'))" \
        || { fail "hci2 has no privacy: $(tr '\n' ' ' <"$WORK/privacy.out") $(mgmt info | grep settings | tr '\n' ' ')"; return 1; }
    wait_for 30 "hci2 is powered again" bash -c "busctl --system get-property org.bluez /org/bluez/hci2 org.bluez.Adapter1 Powered | grep -q true" || return 1
    echo "/var/lib/bluetooth/${ADDR[2]}/identity: $([ -f "/var/lib/bluetooth/${ADDR[2]}/identity" ] && echo present || echo none, as expected)"
    btmon >"$WORK/btmon.txt" 2>&1 &
    btmon_pid=$!
    t0=$(now)
    "$BIN/proximityctl" irks enroll phone --just-works --window "$PHONE_WINDOW" --sighting-timeout 0 --bus system >"$out" 2>&1 &
    enroll=$!
    # The bond file lives from the key distribution to the enroll's RemoveDevice (about 0.6 s).
    (while kill -0 "$enroll" 2>/dev/null; do
        grep -qs '^\[IdentityResolvingKey\]' "$bond/info" && cp "$bond/info" "$WORK/bond-info" && break
        sleep 0.02
    done) &
    copier=$!
    wait_for 30 "the enroll opens its window" grep -q "within $PHONE_WINDOW s" "$out" &&
        opened=$(elapsed "$t0" "$(now)") && pass "the enroll opened its window $opened s after the command: $(grep "within $PHONE_WINDOW s" "$out")"
    /usr/bin/python3 "$HERE/phone.py" hci2 "${ADDR[0]}" "$PHONE_WINDOW" >"$phone" 2>&1
    status=$?
    sed 's/^/     phone: /' "$phone"
    [ "$status" = 0 ] && pass "the phone paired: Device1.Pair on hci2 answered" || fail "phone.py exited $status: $(tail -n 1 "$phone")"
    local end=$(($(date +%s) + PHONE_WINDOW + 30))
    while (($(date +%s) < end)) && kill -0 "$enroll" 2>/dev/null; do
        [ -z "$took" ] && grep -q "enrolled" "$out" && took=$(elapsed "$t0" "$(now)")
        sleep 0.2
    done
    [ -z "$took" ] && grep -q "enrolled" "$out" && took=$(elapsed "$t0" "$(now)")
    wait "$enroll"
    status=$?
    wait "$copier" 2>/dev/null
    grep -v "^20[0-9-]*T" "$out" | sed 's/^/     enroll: /'
    [ "$status" = 0 ] && grep -q "^phone enrolled" "$out" &&
        pass "proximityctl irks enroll exited 0: phone enrolled, $took s after the command ($(grep -o 'enrolled after [0-9.]* s' "$out") by its own clock)" ||
        fail "proximityctl irks enroll exited $status (see above)"
    kill -TERM "$btmon_pid" 2>/dev/null
    wait "$btmon_pid" 2>/dev/null
    # What the pairing carried: hci0 saw the phone at a resolvable private address, and the
    # phone's IRK and identity address came in the key distribution.
    rpa=$(grep -A8 "LE Connection Complete\|LE Enhanced Connection Complete" "$WORK/btmon.txt" | grep -m1 -o "Peer address: [0-9A-F:]* (Resolvable)")
    on_air=$(grep -A1 "SMP: Identity Information" "$WORK/btmon.txt" | grep -m1 -o "Identity resolving key: [0-9a-f]*" | awk '{ print $4 }')
    [ -n "$rpa" ] && grep -A1 "SMP: Identity Address Information" "$WORK/btmon.txt" | grep -q "Address: ${ADDR[2]}" &&
        pass "the phone connected from a private address (btmon: $rpa) and gave its identity address ${ADDR[2]}" ||
        fail "btmon shows no connection from a resolvable private address with identity ${ADDR[2]}"
    [ "$on_air" = "$irk" ] && pass "the pairing carried the phone's IRK as btmgmt took it (least significant byte first): $irk" ||
        fail "the pairing carried '${on_air:-nothing}', btmgmt took $irk"
    key=$(awk '/^\[/ { g = $0 } g == "[IdentityResolvingKey]" && /^Key=/ { sub(/^Key=/, ""); print }' "$WORK/bond-info" 2>/dev/null)
    [ "${key,,}" = "$irk" ] && pass "bluetoothd's bond file held [IdentityResolvingKey] Key=$key: the same order, in uppercase" ||
        fail "bluetoothd's bond file (copied: $([ -f "$WORK/bond-info" ] && echo yes || echo no)) held Key='$key'"
    node_prop 0 IRKs | grep -q '"phone" "bus"' && pass "node0's IRKs list phone: $(node_prop 0 IRKs)" || fail "node0's IRKs: $(node_prop 0 IRKs)"
    stored=$(/usr/bin/python3 -c 'import json, sys; print(json.load(open(sys.argv[1])).get("irks", {}).get("phone", ""))' "$state/settings.json" 2>&1)
    expected=$(echo "$irk" | sed 's/../&\n/g' | grep . | tac | tr -d '\n')
    [ "$stored" = "$expected" ] && pass "the node holds the phone's IRK most significant byte first, the bytes' reverse: $stored" ||
        fail "the node holds '$stored'; the phone's IRK, reversed, is $expected"
    [ ! -e "$bond" ] && pass "the bond is gone: no $bond" || fail "the bond stays: $(ls "$bond")"
    echo "phone enrollment: the window $opened s and 'enrolled' $took s after the command (phone.py's Python start included);" \
        "btmon: keys $(awk '/MGMT Command: Pair Device .*\[hci2\]/ { p = $NF } /MGMT Event: New Identity Resolvi.*\[hci0\]/ && p { printf "%.2f", $NF - p }' "$WORK/btmon.txt") s" \
        "and the bond removed $(awk '/MGMT Command: Pair Device .*\[hci2\]/ { p = $NF } /MGMT Command: Unpair Device .*\[hci0\]/ && p { printf "%.2f", $NF - p }' "$WORK/btmon.txt") s after the phone's Pair Device"
    # The phone forgets the box, and its privacy goes off again.
    busctl --system call org.bluez /org/bluez/hci2 org.bluez.Adapter1 RemoveDevice o "/org/bluez/hci2/dev_${ADDR[0]//:/_}" >/dev/null 2>&1
    mgmt power off >/dev/null
    mgmt privacy off >/dev/null
    mgmt power on >/dev/null
    stop_node 0
}
if [ -z "${REAL_BLUEZ_ONLY:-}" ] || [ "$REAL_BLUEZ_ONLY" = 9 ]; then
    say "9. phone enrollment: proximityctl irks enroll, and a phone (hci2 with LE privacy) pairs"
    phone_enrollment || { echo "---- phone-node0 log (tail)"; tail -n 40 "$WORK/phone-node0.log"; }
fi

# ---------------------------------------------------------------------------------------------
# btvirt 5.66 cannot remove one of its controllers: a vhci controller goes when the process that
# opened /dev/vhci closes it, and btvirt closes them all as it exits. So the controller to unplug
# comes from a btvirt of its own (-L -l1): killing it removes the controller from the kernel (and
# bluetoothd's Adapter1 with it), as a USB dongle pulled out; starting it again adds one back, at
# the lowest free index (hci3 again) with the same address (btdev makes it from its index in the
# process and the kernel's index: 00:AA:01:00:00:03). Its air is its own (btvirt processes do not
# share one), which the watchdog does not need. The node on it must say Health recovering, with
# why, and be ok again with the same pid.
health_is() { [ "$(node_prop "$1" Health 2>/dev/null)" = "s \"$2\"" ]; }
adapter_exists() { busctl --system get-property org.bluez "/org/bluez/hci$1" org.bluez.Adapter1 Address >/dev/null 2>&1; }
unplug_replug() {
    local log=$WORK/btvirt-hci3.log btv addr detail pid
    btvirt -L -l1 >>"$log" 2>&1 &
    btv=$!
    wait_for 60 "hci3 (a btvirt of its own) in bluetoothd" adapter_exists 3 || { kill "$btv"; return 1; }
    addr=$(adapter_address 3)
    start_node 3 "$WORK/state3" "$WORK/node3.log" || { kill "$btv"; return 1; }
    pid=$(cat "$WORK/node3.pid")
    wait_for 60 "node3: Health ok" health_is 3 ok && pass "node3 on hci3 ($addr): Health ok"
    kill -TERM "$btv"
    wait "$btv" 2>/dev/null
    wait_for 30 "node3: Health recovering once hci3 is gone" health_is 3 recovering &&
        detail=$(node_prop 3 HealthDetail) && [[ $detail == *"adapter was removed"* ]] &&
        pass "hci3 unplugged: node3 says recovering ($detail)" || fail "node3 after the unplug: $(node_prop 3 Health) $(node_prop 3 HealthDetail)"
    btvirt -L -l1 >>"$log" 2>&1 &
    btv=$!
    wait_for 60 "hci3 back in bluetoothd" adapter_exists 3 &&
        [ "$(adapter_address 3)" = "$addr" ] && pass "hci3 plugged back, the same address $addr" || fail "hci3 came back as $(adapter_address 3 2>&1)"
    wait_for 60 "node3: Health ok again" health_is 3 ok &&
        node_prop 3 Discovering | grep -q true && kill -0 "$pid" &&
        pass "node3: Health ok again and discovering, the daemon never restarted (pid $pid)" || fail "node3 did not recover"
    stop_node 3
    kill -TERM "$btv"
    wait "$btv" 2>/dev/null
}
if [ -z "${REAL_BLUEZ_ONLY:-}" ] || [ "$REAL_BLUEZ_ONLY" = 10 ]; then
    say "10. a controller unplugged and plugged back: the watchdog (docs/reliability.md)"
    unplug_replug || { echo "---- node3 log (tail)"; tail -n 40 "$WORK/node3.log"; }
fi

if ((FAILURES)); then
    for i in "${NODES[@]}"; do echo "---- node$i log (tail)"; tail -n 40 "$WORK/node$i.log"; done
    for i in 0 2; do [ -f "$WORK/foreign-node$i.log" ] && { echo "---- foreign-node$i log (tail)"; tail -n 40 "$WORK/foreign-node$i.log"; }; done
    for i in 0 1; do [ -f "$WORK/keyed-node$i.log" ] && { echo "---- keyed-node$i log (tail)"; tail -n 60 "$WORK/keyed-node$i.log"; }; done
    echo "real-bluez: $FAILURES check(s) failed"
    exit 1
fi
echo "real-bluez: all checks passed"
