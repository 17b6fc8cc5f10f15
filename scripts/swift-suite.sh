# The whole Swift suite, as scripts/test.sh, scripts/flaky.sh and .ci/run run it (sourced; the
# tests must be built: swift build --build-tests).
#   run_swift_suite [SWIFT TEST ARGUMENTS]   returns non-zero if any test failed
# Two passes: every test in parallel except the suites named …RealTimeTests (their bounds are read
# off the wall clock), then those alone, one at a time (--no-parallel), so that the rest of the
# suite does not stretch their clock. Tests that need real time get it this way, not by longer
# timeouts (docs/architecture.md, "Tests and time").
PROXIMITYD_REAL_TIME_SUITES='RealTimeTests'
run_swift_suite() {
  local status=0
  swift test --skip-build --disable-xctest --skip "$PROXIMITYD_REAL_TIME_SUITES" "$@" || status=$?
  swift test --skip-build --disable-xctest --no-parallel --filter "$PROXIMITYD_REAL_TIME_SUITES" "$@" || status=$?
  return "$status"
}
