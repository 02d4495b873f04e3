#!/usr/bin/env bash
# On a machine with a GPU: builds the project for several CUDA architectures, each into its own
# build-arch-<arch>/, and runs the whole ctest in each. A build for an older target run on a newer
# GPU (e.g. 80-virtual on an H100: PTX the driver compiles at load time) runs exactly the code the
# older GPU gets, so this checks the fallback paths and the skips on one machine.
#   scripts/arch_builds.sh [OUT] [ARCH ...]    (defaults: results/<gpu>/arch_builds.txt;
#                                                75-virtual 80-virtual 90a)
# OUT gets, per architecture, the build's warning count, ctest's summary line and the tests it
# skipped or failed, with the reason each skipped test printed (from ctest's LastTest.log).
# SANITIZE_DAY06="80-virtual ..." also runs day06's GPU tests under memcheck and racecheck in
# those builds. GPU100_GIT names the commit in OUT (default: git describe).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-}
shift || true
archs=("$@")
[ ${#archs[@]} -gt 0 ] || archs=(75-virtual 80-virtual 90a)
if [ -z "$out" ]; then
  gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n1)
  if [ -z "$gpu" ]; then
    echo "arch_builds: no GPU found (nvidia-smi): this script runs the GPU tests" >&2
    exit 3
  fi
  slug=$(printf '%s' "$gpu" | tr 'A-Z' 'a-z' | sed -E 's/nvidia|geforce|[0-9]+gb|hbm[0-9a-z]*|pcie|sxm[0-9]*//g; s/[^a-z0-9]+/-/g; s/^-+|-+$//g')
  out="results/${slug:-unknown-gpu}/arch_builds.txt"
fi
mkdir -p "$(dirname "$out")"
# The JIT-compiled code of the PTX builds is cached between test processes.
export CUDA_CACHE_MAXSIZE=${CUDA_CACHE_MAXSIZE:-4294967296}
jobs=$(nproc 2>/dev/null || echo 4)
status=0
{
  echo "## commit ${GPU100_GIT:-$(git describe --always --dirty 2>/dev/null || echo unknown)}, $(date -u +%Y-%m-%d)"
  echo "gpu: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -n1)"
} >>"$out"
for arch in "${archs[@]}"; do
  dir="build-arch-$arch"
  mkdir -p "$dir"
  start=$(date +%s)
  if ! { cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="$arch" &&
         cmake --build "$dir" -j "$jobs"; } >"$dir/build.log" 2>&1; then
    echo "CMAKE_CUDA_ARCHITECTURES=$arch: build FAILED (see $dir/build.log)" | tee -a "$out"
    tail -n 30 "$dir/build.log"
    status=1
    continue
  fi
  warnings=$(grep -ci 'warning' "$dir/build.log" || true)
  built=$(( $(date +%s) - start ))
  ctest --test-dir "$dir" --output-on-failure -j 4 >"$dir/ctest.log" 2>&1 || status=1
  {
    echo "CMAKE_CUDA_ARCHITECTURES=$arch: built in ${built} s, $warnings warning lines; ctest: $(grep -E 'tests passed|tests failed' "$dir/ctest.log" | tail -n1)"
    grep -E '\(Failed\)|\(Skipped\)|Not Run' "$dir/ctest.log" | sed 's/^[[:space:]]*/  /'
    # Each skip's reason, as the skipped test printed it.
    grep -hoE 'GPU100_SKIP: .*' "$dir/Testing/Temporary/LastTest.log" 2>/dev/null | sort -u |
      sed 's/^GPU100_SKIP: /  reason: /'
  } | tee -a "$out"
  if [[ " ${SANITIZE_DAY06:-} " == *" $arch "* ]]; then
    SANITIZE_ONLY=day06 SANITIZE_TOOLS="memcheck racecheck" ./scripts/sanitize.sh "$dir/sanitize" "$dir" |
      sed "s/^/  [$arch] /" | tee -a "$out"
    [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
  fi
done
echo >>"$out"
exit $status
