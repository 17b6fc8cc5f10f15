# CPU hogs: busy loops that load the machine while a test run shows it does not depend on an idle
# one. Sourced by scripts/flaky.sh (which .ci/run runs under two of them).
#   start_cpu_hogs N    starts N busy loops (one per core for a full load), their PIDs kept
#   stop_cpu_hogs       stops them by those PIDs (safe to call twice, and from an EXIT trap)
cpu_hog_pids=()
start_cpu_hogs() {
  local i
  for ((i = 0; i < $1; i++)); do
    bash -c 'while :; do :; done' &
    cpu_hog_pids+=($!)
  done
  echo "cpu hogs: ${#cpu_hog_pids[@]} busy loops running (PIDs ${cpu_hog_pids[*]})" >&2
}
stop_cpu_hogs() {
  ((${#cpu_hog_pids[@]})) || return 0
  kill "${cpu_hog_pids[@]}" 2>/dev/null || true
  wait "${cpu_hog_pids[@]}" 2>/dev/null || true
  cpu_hog_pids=()
}
