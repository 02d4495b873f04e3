#!/usr/bin/env bash
# Compile-only check that every day still builds for older GPU architectures, so no day can
# regress to Hopper-only code: each architecture is configured and built, every target, into its
# own folder build-arch-<arch>/, with warnings as errors (host and device). No GPU is needed.
#   scripts/check_archs.sh                 # 75 (T4) and 89 (RTX 40xx / L4), the CI's check
#   scripts/check_archs.sh 75 80 86 89 90  # any list of CMAKE_CUDA_ARCHITECTURES values
#   scripts/check_archs.sh --cpu-tests 75  # also run that build's CPU tests (ctest -L cpu)
#   scripts/check_archs.sh --cuda-only 89  # compile only the CUDA sources (.cu), no links: the host
#                                          # C++ does not depend on the architecture, and a full
#                                          # build of another one (the CI's 75) compiles it all
#   scripts/check_archs.sh --no-cudnn-frontend 75  # build as a machine without the cuDNN
#                                          # frontend's headers would (-DGPU100_CUDNN_FRONTEND=OFF)
# Needs what scripts/setup.sh installs (CMake, ninja, Catch2, fmt) and the CUDA Toolkit.
set -euo pipefail
cd "$(dirname "$0")/.."
cpu_tests=0
cuda_only=0
frontend=ON
archs=()
for a in "$@"; do
  case "$a" in
    --cpu-tests) cpu_tests=1 ;;
    --cuda-only) cuda_only=1 ;;
    --no-cudnn-frontend) frontend=OFF ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
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
    -DGPU100_WERROR=ON -DGPU100_CUDNN_FRONTEND="$frontend" > "$dir/configure.log" 2>&1 ||
    { cat "$dir/configure.log"; exit 1; }
  if [ "$cuda_only" -eq 1 ]; then
    # Every object compiled from a .cu file, for this architecture, with its warnings as errors.
    mapfile -t cu_objects < <(ninja -C "$dir" -t targets all | sed -nE 's/^([^:]+\.cu\.o): .*/\1/p')
    [ ${#cu_objects[@]} -gt 0 ] || { echo "check_archs: no CUDA objects in $dir" >&2; exit 1; }
    ninja -C "$dir" -j "$jobs" "${cu_objects[@]}"
  else
    cmake --build "$dir" -j "$jobs"
  fi
  if [ "$cpu_tests" -eq 1 ]; then
    # Not common.learner_scaffold: it builds its own copy of the tree for 75-virtual whatever this
    # build's architecture, the same check the main build's ctest runs.
    ctest --test-dir "$dir" -L cpu -E '^common\.learner_scaffold$' -j "$jobs" --output-on-failure
  fi
  what=built
  [ "$cuda_only" -eq 0 ] || what="compiled (CUDA sources)"
  printf 'check_archs: %s %s with no errors or warnings in %d s\n' "$arch" "$what" \
    $(( $(date +%s) - start ))
done
