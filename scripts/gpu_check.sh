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

./scripts/sanitize.sh "$logs" build | tee -a "$summary"
san_rc=${PIPESTATUS[0]}

fi

bench_rc=0
if [ "$phase" != test ]; then
./scripts/bench_all.sh ${results:+"$results"} >"$logs/bench.log" 2>&1
bench_rc=$?
note "bench: rc $bench_rc"
grep -E '^verdict|^copy ceiling|FAILED' "$logs/bench.log" | sed 's/^/  /' | tee -a "$summary"
fi

[ $ctest_rc -eq 0 ] && [ $san_rc -eq 0 ] && [ $bench_rc -eq 0 ]
