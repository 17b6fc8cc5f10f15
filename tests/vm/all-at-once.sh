#!/bin/bash
# Three nodes on hci0..hci2, started at the same moment on the real bluetoothd 5.66 in the guest of
# scripts/bluez-vm: do they identify each other, and does the guest's kernel survive? (Before the
# hello, nodes started together made crossing links and two LE links per emulated controller,
# which panicked Debian's 6.1 kernel; tests/vm/real-bluez.sh therefore meets them a pair at a time.)
#   scripts/bluez-vm -n 3 -t 300 --dbus-policy dbus/org.proximityd.conf -e PROXIMITYD_BIN=$bin -- tests/vm/all-at-once.sh
set -uo pipefail
BIN=$(realpath "${PROXIMITYD_BIN:-.build/debug}")
WORK=$(mktemp -d /tmp/all-at-once.XXXXXX)
name_of() { if [ "$1" = 0 ]; then echo org.proximityd; else echo "org.proximityd.hci$1"; fi; }
ids() { busctl --system call "$(name_of "$1")" /org/proximityd org.proximityd.Node1 GetIdentities 2>/dev/null | awk '{print $2}'; }
t0=$(date +%s.%N)
for i in 0 1 2; do
    "$BIN/proximityd" run --bus system --adapter "hci$i" --bus-name "$(name_of "$i")" --state-dir "$WORK/state$i" \
        --name "node$i" --power-on --log-level debug 2>>"$WORK/node$i.log" &
done
status=1
for _ in $(seq 450); do
    if [ "$(ids 0)" = 2 ] && [ "$(ids 1)" = 2 ] && [ "$(ids 2)" = 2 ]; then status=0; break; fi
    sleep 0.2
done
t1=$(date +%s.%N)
for i in 0 1 2; do
    echo "node$i: $(ids "$i") identities; $(grep -c 'identified a peer' "$WORK/node$i.log") read, $(grep -c 'a peer introduced itself' "$WORK/node$i.log") from a hello, $(grep -c 'connecting to identify a peer' "$WORK/node$i.log") connection attempts, $(grep -c 'identification failed' "$WORK/node$i.log") failed"
done
awk -v a="$t0" -v b="$t1" -v s="$status" 'BEGIN { printf "all at once: %s after %.2f s\n", (s == 0 ? "every node knows the other two" : "NOT complete"), b - a }'
kill -TERM $(jobs -p) 2>/dev/null
wait
exit $status
