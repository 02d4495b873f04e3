#!/usr/bin/env bash
# The sanitizer suite: every day's GPU test binary under compute-sanitizer's memcheck, racecheck,
# synccheck and initcheck, at small sizes, in parallel (one background job per binary, which runs
# its tools in turn). Prints one line per binary and tool and exits non-zero on any error.
#   scripts/sanitize.sh [LOGDIR] [BUILD_DIR]        (defaults: build/sanitize, build)
# Environment: SANITIZE_TOOLS ("memcheck racecheck synccheck initcheck"), SANITIZE_ONLY (a regex
# on the binary name, e.g. "day05|capstone"), SANITIZE_TIMEOUT (seconds per tool run, 400) and
# GPU100_TEST_MAX_N (70000: the tools slow kernels 10-100x, so the tests keep their small sizes).
set -uo pipefail
cd "$(dirname "$0")/.."
logs=${1:-build/sanitize}
build=${2:-build}
mkdir -p "$logs"
rm -f "$logs"/*.result
if ! command -v compute-sanitizer >/dev/null 2>&1; then
  echo "sanitize: compute-sanitizer not found, skipped"
  exit 0
fi
tools=${SANITIZE_TOOLS:-memcheck racecheck synccheck initcheck}
export GPU100_TEST_MAX_N=${GPU100_TEST_MAX_N:-70000}
export GPU100_SANITIZE=1  # the tests skip the cuDNN rows (see common/catch.hpp)

sanitize_one() {
  local bin=$1 tool log rc errs bad=0
  for tool in $tools; do
    log="$logs/sanitize_$(basename "$bin")_$tool.log"
    # API errors are provoked on purpose by the error-path tests (and checked there), and the
    # [timing] tests (large shapes against the libraries) are left to the plain ctest run.
    timeout "${SANITIZE_TIMEOUT:-400}" compute-sanitizer --tool "$tool" --report-api-errors no \
      --error-exitcode 99 "$bin" '~[timing]' >"$log" 2>&1
    rc=$?
    errs=$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$log" | tail -n1)
    echo "sanitize $(basename "$bin") $tool: rc $rc, ${errs:-no summary}" >>"$log.result"
    [ $rc -eq 0 ] || bad=1
  done
  return $bad
}

status=0
pids=()
for bin in "$build"/*/*_tests_gpu; do
  if [ -n "${SANITIZE_ONLY:-}" ] && ! [[ "$(basename "$bin")" =~ $SANITIZE_ONLY ]]; then continue; fi
  sanitize_one "$bin" &
  pids+=($!)
done
for pid in "${pids[@]}"; do wait "$pid" || status=1; done
cat "$logs"/*.result 2>/dev/null | sort
exit $status
