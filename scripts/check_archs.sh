#!/usr/bin/env bash
# Compile-only check that every day still builds for older GPU architectures, so no day can
# regress to Hopper-only code: each architecture is configured and built, every target, into its
# own folder build-arch-<arch>/, with warnings as errors (host and device). No GPU is needed.
#   scripts/check_archs.sh                 # 75 (T4) and 89 (RTX 40xx / L4), the CI's check
#   scripts/check_archs.sh 75 80 86 89 90  # any list of CMAKE_CUDA_ARCHITECTURES values
#   scripts/check_archs.sh --cpu-tests 75  # also run that build's CPU tests (ctest -L cpu)
# Needs what scripts/setup.sh installs (CMake, ninja, Catch2, fmt) and the CUDA Toolkit.
set -euo pipefail
cd "$(dirname "$0")/.."
cpu_tests=0
archs=()
for a in "$@"; do
  case "$a" in
    --cpu-tests) cpu_tests=1 ;;
    -h|--help) sed -n '2,8p' "$0"; exit 0 ;;
    *) archs+=("$a") ;;
  esac
done
[ ${#archs[@]} -gt 0 ] || archs=(75 89)
jobs=$(nproc 2>/dev/null || echo 2)
for arch in "${archs[@]}"; do
  dir="build-arch-${arch//;/_}"
  start=$(date +%s)
  printf 'check_archs: CMAKE_CUDA_ARCHITECTURES=%s into %s/\n' "$arch" "$dir"
  mkdir -p "$dir"
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="$arch" \
    -DGPU100_WERROR=ON > "$dir/configure.log" 2>&1 || { cat "$dir/configure.log"; exit 1; }
  cmake --build "$dir" -j "$jobs"
  if [ "$cpu_tests" -eq 1 ]; then
    ctest --test-dir "$dir" -L cpu -j "$jobs" --output-on-failure
  fi
  printf 'check_archs: %s built with no errors or warnings in %d s\n' "$arch" $(( $(date +%s) - start ))
done
