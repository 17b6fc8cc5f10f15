#!/usr/bin/env bash
# The node's throughput benchmark: one proximityd fed by bluez-sim with RSSI updates from many
# devices (200 iBeacons within 5 m advertising every 35 ms: 5,000 updates a second), its table
# capped. Reports the updates delivered on the box bus, proximityd's CPU use (% of one core) and
# peak RSS over the measured window, and its table's size, against the targets (< 25% of one
# core, < 50 MB).
#
# Usage: benchmarks/run-node-bench.sh [--json] [bluez-sim bench options...]
#        benchmarks/run-node-bench.sh --baseline REF [--rounds N] [--json] [bluez-sim bench options...]
#        benchmarks/run-node-bench.sh --irk-comparison N [--rotation S] [--rounds N]
#        benchmarks/run-node-bench.sh --hearings-comparison [--rounds N]
#   e.g. benchmarks/run-node-bench.sh --devices 400 --interval 0.02 --seconds 30 --max-peers 200
#        benchmarks/run-node-bench.sh --baseline 8965b2f --rounds 3
#        benchmarks/run-node-bench.sh --irk-comparison 100 --rotation 10
#
# --irk-comparison N measures this tree's proximityd twice per round at the same 5,000 updates/s:
# on the 200 iBeacons (the baseline), and on 200 phones advertising from resolvable private
# addresses that change every --rotation seconds (default 60), the node knowing the IRKs of N of
# them (bluez-sim bench --irks N): the cost of resolving every new address against N keys.
#
# --hearings-comparison measures this tree's proximityd twice per round at the same 5,000 updates/s,
# publishing to a private Mosquitto on 127.0.0.1 (started here): with mqtt.hearings off (the
# baseline: its peer reports only) and on (also P/hearings, once a second). It prints the CPU and
# peak RSS of each side, the difference in per cent (the goal: at most +10 %), and the bytes a
# second the node's hearings took on the broker (mosquitto_sub counts them).
#
# --baseline REF (a commit or ref) also measures REF's proximityd. REF is checked out in a detached
# git worktree outside the repository, ${XDG_CACHE_HOME:-~/.cache}/proximityd-bench/SHA, and its
# proximityd product built there with its own scratch path; both are reused by later runs. The
# bench then runs alternately on the baseline and on this tree's proximityd (baseline first),
# --rounds times each (2 by default), all driven by this tree's bluez-sim with the same options. It
# prints each run's figures, the mean CPU % and peak RSS of each side, and current - baseline. With
# --json it prints one JSON object holding both sides instead.
#
# Builds in release mode with its own scratch directory, .build-release, so it never touches .build.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
case "${1:-}" in -h|--help) sed -n '2,34p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac

die() { echo "run-node-bench.sh: $*" >&2; exit 64; }

baseline="" rounds=2 rounds_given=0 json=0 irk_comparison="" rotation=60 hearings_comparison=0
bench_args=()
while [ $# -gt 0 ]; do
    case "$1" in
        --baseline) [ $# -ge 2 ] || die "--baseline needs a commit or ref"; baseline="$2"; shift 2 ;;
        --baseline=*) baseline="${1#*=}"; shift ;;
        --rounds) [ $# -ge 2 ] || die "--rounds needs a number"; rounds="$2"; rounds_given=1; shift 2 ;;
        --rounds=*) rounds="${1#*=}"; rounds_given=1; shift ;;
        --json) json=1; shift ;;
        --irk-comparison) [ $# -ge 2 ] || die "--irk-comparison needs a number of IRKs"; irk_comparison="$2"; shift 2 ;;
        --rotation) [ $# -ge 2 ] || die "--rotation needs seconds"; rotation="$2"; shift 2 ;;
        --hearings-comparison) hearings_comparison=1; shift ;;
        *) bench_args+=("$1"); shift ;;
    esac
done
[ -n "$baseline" ] || [ -n "$irk_comparison" ] || [ "$hearings_comparison" = 1 ] || [ "$rounds_given" = 0 ] \
    || die "--rounds needs --baseline, --irk-comparison or --hearings-comparison"
[ "$hearings_comparison" = 0 ] || { [ -z "$baseline" ] && [ -z "$irk_comparison" ]; } || die "--hearings-comparison is a separate run"
[ -z "$baseline" ] || [ -z "$irk_comparison" ] || die "--irk-comparison and --baseline are separate runs"
[ -z "$irk_comparison" ] || case "$irk_comparison" in ''|*[!0-9]*|0) die "--irk-comparison must be a positive integer" ;; esac
[ -z "$baseline" ] || case "$rounds" in ''|*[!0-9]*|0) die "--rounds must be a positive integer" ;; esac

if ! command -v swift >/dev/null 2>&1 && [ -x /opt/swift/usr/bin/swift ]; then
    export PATH="/opt/swift/usr/bin:$PATH"
fi

# The baseline first: a bad REF fails before anything is built.
if [ -n "$baseline" ]; then
    base_sha="$(git rev-parse --verify --quiet "$baseline^{commit}")" || die "--baseline: $baseline is not a commit"
    base_tree="${XDG_CACHE_HOME:-$HOME/.cache}/proximityd-bench/$base_sha"
    if [ ! -e "$base_tree/.git" ]; then
        echo "== checking out $baseline ($base_sha) in $base_tree" >&2
        mkdir -p "$(dirname "$base_tree")"
        # --force: a worktree registered at this path whose directory was deleted is added again.
        git worktree add --force --detach "$base_tree" "$base_sha" >&2
    fi
    [ "$(git -C "$base_tree" rev-parse HEAD)" = "$base_sha" ] || die "$base_tree is not at $base_sha; remove it and run again"
    # An older commit may not have Package.resolved: build it with this tree's dependency versions.
    if [ ! -e "$base_tree/Package.resolved" ] && [ -e Package.resolved ]; then
        cp Package.resolved "$base_tree/Package.resolved"
    fi
    echo "== building $baseline's proximityd (release, $base_tree/.build-release)" >&2
    (cd "$base_tree" && swift build -c release --scratch-path .build-release --product proximityd >&2)
    base_bin="$(cd "$base_tree" && swift build -c release --scratch-path .build-release --show-bin-path)"
fi

echo "== building proximityd and bluez-sim (release, .build-release)" >&2
swift build -c release --scratch-path .build-release --product proximityd >&2
swift build -c release --scratch-path .build-release --product bluez-sim >&2
bin="$(swift build -c release --scratch-path .build-release --show-bin-path)"

defaults=(--devices 200 --interval 0.035 --seconds 20 --warm-up 3 --max-peers 100)
echo "== 200 devices, 5,000 RSSI updates/s offered, table capped at 100, 3 s warm-up, 20 s measured" >&2
if [ -n "$irk_comparison" ]; then
    field() { sed -n "s/.*\"$2\": \(-\{0,1\}[0-9.]*\).*/\1/p" <<<"$1"; }
    declare -A cpu_sum=() rss_max=()
    for ((round = 1; round <= rounds; round++)); do
        for side in beacons irks; do
            extra=()
            [ "$side" = irks ] && extra=(--irks "$irk_comparison" --rotation "$rotation")
            echo "== round $round of $rounds: $side" >&2
            out="$(tail -n 1 <<<"$("$bin/bluez-sim" bench --proximityd "$bin/proximityd" "${defaults[@]}" "${extra[@]}" ${bench_args[@]+"${bench_args[@]}"} --json)")"
            cpu="$(field "$out" proximityd_cpu_percent)" rss="$(field "$out" proximityd_peak_rss_mb)"
            [ -n "$cpu" ] && [ -n "$rss" ] || die "no proximityd figures in bluez-sim's output: $out"
            echo "round $round, $side: proximityd CPU $cpu% of one core, peak RSS $rss MB, table $(field "$out" proximityd_table) peers," \
                 "$(field "$out" updates_per_second) updates/s delivered"
            cpu_sum[$side]="$(awk -v a="${cpu_sum[$side]:-0}" -v b="$cpu" 'BEGIN { print a + b }')"
            rss_max[$side]="$(awk -v a="${rss_max[$side]:-0}" -v b="$rss" 'BEGIN { print (b > a ? b : a) }')"
        done
    done
    echo
    echo "mean CPU and highest peak RSS of $rounds runs each (targets: CPU < 25% of one core, peak RSS < 50 MB):"
    for side in beacons irks; do
        label="200 iBeacons (baseline)"
        [ "$side" = irks ] && label="200 phones, $irk_comparison IRKs, rotation ${rotation} s"
        printf '  %-45s CPU %6.2f%%   peak RSS %6s MB\n' "$label" "$(awk -v s="${cpu_sum[$side]}" -v n="$rounds" 'BEGIN { print s / n }')" "${rss_max[$side]}"
    done
    exit 0
fi
if [ "$hearings_comparison" = 1 ]; then
    command -v mosquitto >/dev/null || die "--hearings-comparison needs mosquitto (apt install mosquitto mosquitto-clients)"
    field() { sed -n "s/.*\"$2\": \(-\{0,1\}[0-9.]*\).*/\1/p" <<<"$1"; }
    work="$(mktemp -d)"
    port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
    printf 'listener %s 127.0.0.1\nallow_anonymous true\npersistence false\n' "$port" >"$work/mosquitto.conf"
    mosquitto -c "$work/mosquitto.conf" >"$work/mosquitto.log" 2>&1 &
    broker=$!
    trap 'kill "$broker" 2>/dev/null; kill "${sub:-}" 2>/dev/null; rm -rf "$work"' EXIT
    for _ in $(seq 50); do mosquitto_sub -p "$port" -t probe -W 1 -C 1 >/dev/null 2>&1 && break; [ $? = 27 ] && break; sleep 0.1; done
    declare -A cpu_sum=() rss_max=()
    bytes=0 seconds_counted=0
    for ((round = 1; round <= rounds; round++)); do
        for side in off on; do
            echo "== round $round of $rounds: hearings $side" >&2
            : >"$work/hearings"
            mosquitto_sub -p "$port" -t 'proximityd/bench/hearings' >"$work/hearings" 2>/dev/null &
            sub=$!
            out="$(tail -n 1 <<<"$("$bin/bluez-sim" bench --proximityd "$bin/proximityd" "${defaults[@]}" --mqtt "mqtt://127.0.0.1:$port" \
                --hearings "$([ "$side" = on ] && echo true || echo false)" ${bench_args[@]+"${bench_args[@]}"} --json)")"
            kill "$sub" 2>/dev/null; wait "$sub" 2>/dev/null || true
            cpu="$(field "$out" proximityd_cpu_percent)" rss="$(field "$out" proximityd_peak_rss_mb)"
            [ -n "$cpu" ] && [ -n "$rss" ] || die "no proximityd figures in bluez-sim's output: $out"
            heard="$(wc -c <"$work/hearings")" messages="$(wc -l <"$work/hearings")"
            echo "round $round, hearings $side: proximityd CPU $cpu% of one core, peak RSS $rss MB, table $(field "$out" proximityd_table) peers," \
                 "$(field "$out" updates_per_second) updates/s delivered; P/hearings $messages messages, $heard bytes"
            if [ "$side" = on ]; then bytes=$((bytes + heard)); seconds_counted=$((seconds_counted + messages)); fi
            cpu_sum[$side]="$(awk -v a="${cpu_sum[$side]:-0}" -v b="$cpu" 'BEGIN { print a + b }')"
            rss_max[$side]="$(awk -v a="${rss_max[$side]:-0}" -v b="$rss" 'BEGIN { print (b > a ? b : a) }')"
        done
    done
    echo
    echo "mean CPU and highest peak RSS of $rounds runs each, publishing to Mosquitto (goal: hearings on at most +10 % on each):"
    for side in off on; do
        printf '  %-30s CPU %6.2f%%   peak RSS %6s MB\n' "hearings $side" "$(awk -v s="${cpu_sum[$side]}" -v n="$rounds" 'BEGIN { print s / n }')" "${rss_max[$side]}"
    done
    awk -v a="${cpu_sum[on]}" -v b="${cpu_sum[off]}" -v ra="${rss_max[on]}" -v rb="${rss_max[off]}" \
        'BEGIN { printf "  %-30s CPU %+6.1f %%   peak RSS %+6.1f %%\n", "on against off", (a / b - 1) * 100, (ra / rb - 1) * 100 }'
    [ "$seconds_counted" -gt 0 ] && awk -v b="$bytes" -v m="$seconds_counted" \
        'BEGIN { printf "  P/hearings: %.0f bytes a message (about one a second: %.0f B/s for the node)\n", b / m, b / m }'
    exit 0
fi
if [ -z "$baseline" ]; then
    [ "$json" = 1 ] && bench_args+=(--json)
    exec "$bin/bluez-sim" bench --proximityd "$bin/proximityd" "${defaults[@]}" ${bench_args[@]+"${bench_args[@]}"}
fi

# A value of bluez-sim's one-line JSON ("key": number).
field() { sed -n "s/.*\"$2\": \(-\{0,1\}[0-9.]*\).*/\1/p" <<<"$1"; }
# Progress lines go to stderr when stdout carries the JSON object.
say() { if [ "$json" = 1 ]; then echo "$*" >&2; else echo "$*"; fi; }

head_sha="$(git rev-parse HEAD)"
if git diff --quiet HEAD -- 2>/dev/null; then current_label="this tree (${head_sha:0:7})"
else current_label="this tree (${head_sha:0:7} with uncommitted changes)"; fi
base_label="baseline $baseline (${base_sha:0:7})"

base_runs=() current_runs=() base_cpu=() base_rss=() current_cpu=() current_rss=()
for ((round = 1; round <= rounds; round++)); do
    for side in baseline current; do
        if [ "$side" = baseline ]; then node="$base_bin/proximityd" label="$base_label"
        else node="$bin/proximityd" label="$current_label"; fi
        echo "== round $round of $rounds: $label" >&2
        out="$("$bin/bluez-sim" bench --proximityd "$node" "${defaults[@]}" ${bench_args[@]+"${bench_args[@]}"} --json)"
        out="$(tail -n 1 <<<"$out")"
        cpu="$(field "$out" proximityd_cpu_percent)" rss="$(field "$out" proximityd_peak_rss_mb)"
        [ -n "$cpu" ] && [ -n "$rss" ] || die "no proximityd figures in bluez-sim's output: $out"
        say "round $round, $label: proximityd CPU $cpu% of one core, peak RSS $rss MB," \
            "table $(field "$out" proximityd_table) peers, $(field "$out" updates_per_second) updates/s delivered"
        if [ "$side" = baseline ]; then base_runs+=("$out") base_cpu+=("$cpu") base_rss+=("$rss")
        else current_runs+=("$out") current_cpu+=("$cpu") current_rss+=("$rss"); fi
    done
done

mean() { printf '%s\n' "$@" | awk '{ s += $1 } END { printf "%.2f", s / NR }'; }
minus() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%+.2f", a - b }'; }
joined() { local IFS=,; echo "$*"; }
base_cpu_mean="$(mean "${base_cpu[@]}")" base_rss_mean="$(mean "${base_rss[@]}")"
current_cpu_mean="$(mean "${current_cpu[@]}")" current_rss_mean="$(mean "${current_rss[@]}")"
cpu_diff="$(minus "$current_cpu_mean" "$base_cpu_mean")" rss_diff="$(minus "$current_rss_mean" "$base_rss_mean")"

if [ "$json" = 1 ]; then
    dirty=true; [ "$current_label" = "this tree (${head_sha:0:7})" ] && dirty=false
    printf '{"rounds": %d, "order": "baseline first", ' "$rounds"
    printf '"baseline": {"ref": "%s", "commit": "%s", "runs": [%s], "mean_cpu_percent": %s, "mean_peak_rss_mb": %s}, ' \
        "$baseline" "$base_sha" "$(joined "${base_runs[@]}")" "$base_cpu_mean" "$base_rss_mean"
    printf '"current": {"commit": "%s", "uncommitted_changes": %s, "runs": [%s], "mean_cpu_percent": %s, "mean_peak_rss_mb": %s}, ' \
        "$head_sha" "$dirty" "$(joined "${current_runs[@]}")" "$current_cpu_mean" "$current_rss_mean"
    printf '"difference": {"cpu_percent": %s, "peak_rss_mb": %s}}\n' "${cpu_diff#+}" "${rss_diff#+}"
else
    echo
    echo "mean of $rounds runs each (targets: CPU < 25% of one core, peak RSS < 50 MB):"
    printf '  %-50s CPU %6s%%   peak RSS %6s MB\n' "$base_label" "$base_cpu_mean" "$base_rss_mean"
    printf '  %-50s CPU %6s%%   peak RSS %6s MB\n' "$current_label" "$current_cpu_mean" "$current_rss_mean"
    printf '  %-50s CPU %6s pt  peak RSS %6s MB\n' "current - baseline" "$cpu_diff" "$rss_diff"
fi
