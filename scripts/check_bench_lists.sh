#!/usr/bin/env bash
# Every line of every day's bench.list must parse: each is run with --list appended, which checks
# the arguments and exits before any GPU work, so this runs without a GPU (ctest: common.bench_lists).
#   scripts/check_bench_lists.sh [BUILD_DIR]     (default: build)
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
status=0
for list in */bench.list; do
  day=$(dirname "$list")
  [ -x "$build/$day/$day" ] || continue  # a day this build left out (GPU100_DAYS)
  while read -r name args; do
    case "$name" in "" | "#"*) continue ;; esac
    bin=$day  # "<name> @binary args": another binary of the same folder
    case "$args" in "@"*) read -r bin args <<<"$args"; bin=${bin#@} ;; esac
    [ -x "$build/$day/$bin" ] || continue  # a binary this build leaves out (no NCCL: multi_gpu/)
    # shellcheck disable=SC2086
    if ! err=$("$build/$day/$bin" $args --list 2>&1 >/dev/null); then
      echo "check_bench_lists: $list: $name: $err"
      status=1
    elif [ -n "$err" ]; then
      echo "check_bench_lists: $list: $name prints a notice (an old flag spelling?): $err"
      status=1
    fi
  done <"$list"
done
[ $status -eq 0 ] && echo "check_bench_lists: every bench.list line parses"
exit $status
