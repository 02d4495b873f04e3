#!/usr/bin/env bash
# The whole check on a machine with a GPU, in one command: configure and build (release), run
# every test, run the GPU test binaries under compute-sanitizer (memcheck, racecheck, synccheck,
# initcheck), then the benchmarks. Logs go to LOGDIR (default build/gpu_check); the benchmark JSON
# to RESULTS (default: results/<gpu-name>, chosen by bench_all.sh).
#   [GPU100_CMAKE_ARGS=...] scripts/gpu_check.sh [LOGDIR] [RESULTS] [all|test|bench]
# "test" stops after the sanitizers, "bench" only runs the benchmarks (on an existing build).
set -uo pipefail
cd "$(dirname "$0")/.."
logs=${1:-build/gpu_check}
results=${2:-}
phase=${3:-all}
mkdir -p "$logs"
summary="$logs/summary.txt"
: >"$summary"
rm -f "$logs"/*.result  # per-tool results of an earlier run in the same folder
note() { printf '%s\n' "$*" | tee -a "$summary"; }

nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader >"$logs/gpu.txt" 2>&1
note "gpu: $(cat "$logs/gpu.txt")"

jobs=$(nproc 2>/dev/null || echo 4)
ctest_rc=0
san_rc=0
if [ "$phase" != bench ]; then
# Extra configure options, e.g. GPU100_CMAKE_ARGS=-DCMAKE_CUDA_ARCHITECTURES=90a (Hopper wgmma).
# shellcheck disable=SC2086
if ! ./scripts/setup.sh --no-install ${GPU100_CMAKE_ARGS:-} >"$logs/build.log" 2>&1; then
  note "build: FAILED (see build.log)"; tail -n 40 "$logs/build.log"; exit 1
fi
warnings=$(grep -ci 'warning' "$logs/build.log" || true)
note "build: ok, $warnings warning lines"

ctest --test-dir build --output-on-failure -j 4 >"$logs/ctest.log" 2>&1
ctest_rc=$?
note "ctest: $(grep -E 'tests passed|tests failed' "$logs/ctest.log" | tail -n1) (rc $ctest_rc)"
grep -E '\(Failed\)|\(Skipped\)|Not Run' "$logs/ctest.log" | sed 's/^/  /' | tee -a "$summary"

if command -v compute-sanitizer >/dev/null 2>&1; then
  # One binary per background job (each runs its four tools in turn); the GPU has room for all.
  sanitize_one() {
    local bin=$1 tool log rc errs bad=0
    for tool in memcheck racecheck synccheck initcheck; do
      log="$logs/sanitize_$(basename "$bin")_$tool.log"
      # API errors are provoked on purpose by the error-path tests (and checked there).
      # Small sizes (GPU100_TEST_MAX_N) and no timing tests: the tools slow kernels 10-100x.
      GPU100_TEST_MAX_N=70000 timeout 400 compute-sanitizer --tool "$tool" --report-api-errors no \
        --error-exitcode 99 "$bin" '~[timing]' >"$log" 2>&1
      rc=$?
      errs=$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$log" | tail -n1)
      echo "sanitize $(basename "$bin") $tool: rc $rc, ${errs:-no summary}" >>"$log.result"
      [ $rc -eq 0 ] || bad=1
    done
    return $bad
  }
  pids=()
  for bin in build/*/*_tests_gpu; do
    sanitize_one "$bin" &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" || san_rc=1; done
  cat "$logs"/*.result | sort | tee -a "$summary"
else
  note "sanitize: compute-sanitizer not found, skipped"
fi

fi

bench_rc=0
if [ "$phase" != test ]; then
./scripts/bench_all.sh ${results:+"$results"} >"$logs/bench.log" 2>&1
bench_rc=$?
note "bench: rc $bench_rc"
grep -E '^verdict|^copy ceiling|FAILED' "$logs/bench.log" | sed 's/^/  /' | tee -a "$summary"
fi

[ $ctest_rc -eq 0 ] && [ $san_rc -eq 0 ] && [ $bench_rc -eq 0 ]
