#!/usr/bin/env bash
# Runs every built day binary at its default size with --json and writes one file per day.
#   scripts/bench_all.sh [OUTDIR] [BUILD_DIR]
# OUTDIR defaults to results/<gpu-name> (e.g. results/h100), BUILD_DIR to build/.
# Exits non-zero if any binary fails (a verification failure or an error); the others still run.
set -uo pipefail

cd "$(dirname "$0")/.."
if ! nvidia-smi -L >/dev/null 2>&1; then
  echo "bench_all: no GPU found (nvidia-smi -L failed): the benchmarks need an NVIDIA GPU" >&2
  exit 3
fi
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

# Each day lists its runs in <day folder>/bench.list, one per line: <json name> [@binary]
# [arguments...] (the binary is <day folder>/<day folder>, or <day folder>/<binary> when the line
# names one; blank lines and # comments are ignored).
runs=()
for list in */bench.list; do
  day=$(dirname "$list")
  while read -r name args; do
    case "$name" in "" | "#"*) continue ;; esac
    bin=$day
    case "$args" in "@"*) read -r bin args <<<"$args"; bin=${bin#@} ;; esac
    runs+=("$name $day/$bin $args")
  done <"$list"
done
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
  # A line for several GPUs (--gpus N) runs only on a machine with N or more.
  want=$(sed -nE 's/.*--gpus ([0-9]+).*/\1/p' <<<"$args")
  if [ -n "$want" ] && [ "$want" -gt "$(nvidia-smi -L 2>/dev/null | wc -l)" ]; then
    echo "bench_all: $name needs $want GPUs, this machine has $(nvidia-smi -L | wc -l): skipped" >&2
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
