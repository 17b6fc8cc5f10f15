#!/usr/bin/env bash
# Runs the whole Swift suite again and again and lists every test that ever failed: the way to
# find a test that fails by timing, and to show that none does.
#
#   scripts/flaky.sh [--runs N] [--load | --load-only] [--hogs N] [--keep DIR] [-- SWIFT TEST ARGUMENTS]
#     --runs N      how many runs of each kind (default 3)
#     --load        each run twice: once on a quiet machine, once with two CPU hogs, one per core
#                   (busy loops, started before the run and stopped by their PIDs after it)
#     --load-only   only the runs under the CPU hogs
#     --hogs N      how many CPU hogs a loaded run has (default 2); more, to hunt for a rare failure
#     --keep DIR    keep every run's output in DIR (default: a temporary folder, removed)
#     -- ARGS       passed to swift test (e.g. --filter MQTTReportTests)
#
# It builds the tests once (swift build --build-tests), then runs the suite as scripts/test.sh
# does (scripts/swift-suite.sh: two passes, the …RealTimeTests suites alone in the second). Each
# run prints one line: its kind, its time, and the tests that failed (with what they recorded).
# At the end: one line per test that failed in any run, with how often and under which kind, and
# "N passed, N failed" counting runs. Exits 1 if any run failed.
#
# Examples:
#   scripts/flaky.sh --runs 10 --load          20 runs: 10 quiet, 10 under load
#   scripts/flaky.sh --runs 5 --load-only -- --filter NodeIdentificationTests
set -euo pipefail
cd "$(dirname "$0")/.."

runs=3
kinds=(quiet)
keep=""
test_args=()
hogs=2
usage() { echo "usage: scripts/flaky.sh [--runs N] [--load | --load-only] [--hogs N] [--keep DIR] [-- SWIFT TEST ARGUMENTS]${1:+ ($1)}" >&2; exit 64; }
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) [ $# -ge 2 ] && [[ $2 =~ ^[1-9][0-9]*$ ]] || usage "--runs takes a positive number"; runs=$2; shift ;;
    --load) kinds=(quiet loaded) ;;
    --load-only) kinds=(loaded) ;;
    --hogs) [ $# -ge 2 ] && [[ $2 =~ ^[1-9][0-9]*$ ]] || usage "--hogs takes a positive number"; hogs=$2; shift ;;
    --keep) [ $# -ge 2 ] && [ -n "$2" ] || usage "--keep needs a folder"; keep=$2; shift ;;
    -h|--help) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    --) shift; test_args=("$@"); break ;;
    *) usage "unknown argument '$1'" ;;
  esac
  shift
done

source scripts/setup.sh
source scripts/cpu-hogs.sh
source scripts/swift-suite.sh
swift build --build-tests

if [ -n "$keep" ]; then
  mkdir -p "$keep"; logs=$(realpath "$keep")
else
  logs=$(mktemp -d /tmp/proximityd-flaky.XXXXXX)
fi
trap 'stop_cpu_hogs; [ -n "$keep" ] || rm -rf "$logs"' EXIT
trap 'exit 130' INT TERM

passed=0
failed=0
failures="$logs/failures"   # one line per failed test per run: KIND<TAB>TEST
: > "$failures"
for run in $(seq "$runs"); do
  for kind in "${kinds[@]}"; do
    log="$logs/run$run-$kind.log"
    [ "$kind" = quiet ] || start_cpu_hogs "$hogs"
    started=$SECONDS
    status=0
    # The whole suite as scripts/test.sh runs it (its two passes), or the tests the arguments name.
    if ((${#test_args[@]})); then
      swift test --skip-build --disable-xctest "${test_args[@]}" > "$log" 2>&1 || status=$?
    else
      run_swift_suite > "$log" 2>&1 || status=$?
    fi
    stop_cpu_hogs
    # Swift Testing's own lines: ✘ Test "display name" failed after … / ✘ Test name() failed after …
    names=$(sed -n 's/^.*✘ Test \(.*\) failed after .*$/\1/p' "$log" | grep -v '^run with' | sort -u || true)
    summary=$(grep -E '(✔|✘) Test run with' "$log" | sed 's/^[^T]*Test run with //; s/ suites\{0,1\} / suites /' | paste -sd';' - || true)
    if [ "$status" = 0 ] && [ -z "$names" ]; then
      passed=$((passed + 1))
      printf 'run %d %-6s ok      %4d s  %s\n' "$run" "$kind" $((SECONDS - started)) "$summary"
    else
      failed=$((failed + 1))
      [ -n "$names" ] || names="(exit $status, no failed test named: $(tail -n 1 "$log"))"
      printf 'run %d %-6s FAILED  %4d s  %s\n' "$run" "$kind" $((SECONDS - started)) "$summary"
      while IFS= read -r name; do
        printf '    %s\n' "$name"
        printf '%s\t%s\n' "$kind" "$name" >> "$failures"
      done <<< "$names"
      # What each failed test recorded, so that a CI log says why without the run's log.
      grep -A3 'recorded an issue' "$log" | cut -c1-400 | head -n 60 | sed 's/^/      /' || true
    fi
  done
done

echo
if [ -s "$failures" ]; then
  echo "tests that failed (times, kind of run):"
  sort "$failures" | uniq -c | sort -rn | awk -F'\t' '{ split($1, a, " "); printf "  %s× %-6s %s\n", a[1], a[2], $2 }'
else
  echo "no test failed in $((passed + failed)) runs"
fi
[ -z "$keep" ] || echo "logs: $logs"
echo "flaky: $passed passed, $failed failed"
[ "$failed" = 0 ]
