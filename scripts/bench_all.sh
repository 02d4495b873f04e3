#!/usr/bin/env bash
# Runs every built day binary at its default size with --json and writes one file per day.
#   scripts/bench_all.sh [OUTDIR] [BUILD_DIR]
# OUTDIR defaults to results/<gpu-name> (e.g. results/h100), BUILD_DIR to build/.
# Exits non-zero if any binary fails (a verification failure or an error); the others still run.
set -uo pipefail

cd "$(dirname "$0")/.."
build=${2:-build}
if [ -z "${1:-}" ]; then
  gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n1)
  slug=$(printf '%s' "${gpu:-unknown-gpu}" | tr 'A-Z' 'a-z' | sed -E 's/nvidia|geforce|[0-9]+gb|hbm[0-9a-z]*|pcie|sxm[0-9]*//g; s/[^a-z0-9]+/-/g; s/^-+|-+$//g')
  out="results/${slug:-unknown-gpu}"
else
  out=$1
fi
mkdir -p "$out"
# The commit the results come from, recorded in every JSON file.
export GPU100_GIT=${GPU100_GIT:-$(git describe --always --dirty 2>/dev/null || echo unknown)}

# Each entry: <json name> <binary, relative to the build dir> [arguments...]
runs=(
  "day01_rope day01_rope/day01_rope"
  "day01_rope_half_split day01_rope/day01_rope --half-split"
  "day02_vector_add day02_vector_add/day02_vector_add"
  "day02_vector_add_sweep day02_vector_add/day02_vector_add --sweep"
  "day03_vector_add_variants day03_vector_add_variants/day03_vector_add_variants"
  "day03_vector_add_variants_sweep day03_vector_add_variants/day03_vector_add_variants --sweep"
  "day04_matmul day04_matmul/day04_matmul"
  "day06_scan day06_scan/day06_scan"
  "day06_scan_sweep day06_scan/day06_scan --sweep"
)
# Only some days: BENCH_ONLY="day01 day04" scripts/bench_all.sh

status=0
for entry in "${runs[@]}"; do
  read -r name bin args <<<"$entry"
  if [ -n "${BENCH_ONLY:-}" ]; then
    keep=0
    for d in $BENCH_ONLY; do case "$name" in "$d"*) keep=1 ;; esac; done
    [ $keep -eq 1 ] || continue
  fi
  if [ ! -x "$build/$bin" ]; then
    echo "bench_all: $build/$bin not built, skipped" >&2
    continue
  fi
  echo "=== $name ($bin $args)"
  # shellcheck disable=SC2086
  if ! "$build/$bin" $args --json "$out/$name.json"; then
    echo "bench_all: $name FAILED" >&2
    status=1
  fi
done
echo "bench_all: results in $out"
echo
python3 scripts/summary.py "$out" || status=1
exit $status
