#!/usr/bin/env bash
# On a machine with a GPU: the builds a learner may run, each built and then checked by the whole
# ctest. A build for an older target run on a newer GPU (e.g. 80-virtual on an H100: PTX the
# driver compiles at load time) runs exactly the code the older GPU gets, so this checks the
# fallback paths and the skips on one machine. The builds (BUILD names):
#   setup       the README's Quick start: ./scripts/setup.sh with no flags, into build/ (it picks
#               the GPU's own architecture and fetches the cuDNN frontend where it can)
#   90a         CMAKE_CUDA_ARCHITECTURES=90a with the cuDNN frontend (the H100/H200 build; the
#               headers setup.sh unpacked into .whl/), into build-arch-90a/
#   80-virtual, 75-virtual, or any other CMAKE_CUDA_ARCHITECTURES value, into build-arch-<value>/
#   scripts/arch_builds.sh [OUT] [BUILD ...]   (defaults: results/<gpu>/arch_builds.txt;
#                                               setup 90a 80-virtual 75-virtual)
# For each build OUT gets the commit, the configuration (architectures, cuDNN and its frontend),
# the warning count, ctest's summary line, and every test it skipped or failed, with the reason
# each skipped test printed (from ctest's LastTest.log). OUT is rewritten when it holds another
# commit's runs and appended to when it holds this commit's, so the builds may run in separate
# calls. SANITIZE_DAY06="80-virtual ..." also runs day06's GPU tests under memcheck and racecheck
# in those builds. GPU100_GIT names the commit (default: git describe). CTEST_JOBS sets ctest -j.
# ARCH_PHASE=build only builds (each build's time kept in its folder), ARCH_PHASE=test then runs
# the ctest of builds made so and records them as one run would (default: both, one build after
# the other), for machines whose calls are too short for a build and its ctest together.
# CTEST_GPUS="0,1,2,3" spreads each build's GPU tests over those GPUs: the CPU tests run in one
# ctest process as usual, and the GPU tests are dealt out one at a time to a worker per GPU, each
# seeing only its own (CUDA_VISIBLE_DEVICES); the summary adds the parts up. The tests that need
# two GPUs then skip (each worker sees one). A GPU may be named more than once: CTEST_GPUS=0,0,0,0,0,0
# runs six workers on one GPU (each GPU test's memory is small beside an H100's or H200's; on one
# H200 the 90a ctest took 153 s with six, against 210-239 s with three). Skip reasons come from each
# part's JUnit file (ctest --output-junit), as the parts would overwrite each other's LastTest.log.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-}
shift || true
builds=("$@")
[ ${#builds[@]} -gt 0 ] || builds=(setup 90a 80-virtual 75-virtual)
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n1)
if [ -z "$gpu" ]; then
  echo "arch_builds: no GPU found (nvidia-smi): this script runs the GPU tests" >&2
  exit 3
fi
if [ -z "$out" ]; then
  slug=$(printf '%s' "$gpu" | tr 'A-Z' 'a-z' | sed -E 's/nvidia|geforce|[0-9]+gb|hbm[0-9a-z]*|pcie|sxm[0-9]*//g; s/[^a-z0-9]+/-/g; s/^-+|-+$//g')
  out="results/${slug:-unknown-gpu}/arch_builds.txt"
fi
mkdir -p "$(dirname "$out")"
commit=${GPU100_GIT:-$(git describe --always --dirty 2>/dev/null || echo unknown)}
header="## commit $commit"
if ! grep -qx "$header" "$out" 2>/dev/null; then
  {
    echo "$header"
    echo "gpu: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -n1)"
    echo "Each build is checked by the whole ctest; 'reason' lines are what the skipped tests printed."
  } >"$out"
fi
# The JIT-compiled code of the PTX builds is cached between test processes.
export CUDA_CACHE_MAXSIZE=${CUDA_CACHE_MAXSIZE:-4294967296}
jobs=$(nproc 2>/dev/null || echo 4)
ctest_jobs=${CTEST_JOBS:-6}
status=0
# The output ctest printed for each failed or timed-out test: the lines after its result line, up
# to the next test's, at most 60 per test, each prefixed with "  | ".
failed_output() {
  awk '/[*][*][*](Failed|Timeout)|[*][*][*]Exception/ { on = 1; n = 0; print "  | " $0; next }
       on && (/^ *Start +[0-9]+:/ || /^ *[0-9]+\/[0-9]+ Test +#/ || /tests passed|tests failed/) { on = 0 }
       on && n < 60 { print "  | " $0; n++ }' "$1"
}
phase=${ARCH_PHASE:-all}
case "$phase" in all | build | test) ;; *)
  echo "arch_builds: ARCH_PHASE must be all, build or test (got '$phase')" >&2
  exit 2
  ;;
esac
for b in "${builds[@]}"; do
  start=$(date +%s)
  if [ "$b" = setup ]; then
    dir=build
    what="setup (./scripts/setup.sh, no flags)"
  else
    dir="build-arch-$b"
    what="CMAKE_CUDA_ARCHITECTURES=$b"
  fi
  if [ "$phase" = test ]; then
    # The build made by an ARCH_PHASE=build run of this commit.
    built_commit=
    read -r built built_commit 2>/dev/null <"$dir/arch_build_seconds"
    if [ "$built_commit" != "$commit" ]; then
      echo "$what: no ARCH_PHASE=build run of this build at $commit in $dir/" | tee -a "$out"
      status=1
      continue
    fi
    ok=1
  elif [ "$b" = setup ]; then
    ok=0
    ./scripts/setup.sh >"$dir.setup.log" 2>&1 && ok=1
    mkdir -p "$dir" && mv "$dir.setup.log" "$dir/build.log"
  else
    mkdir -p "$dir"
    # The cuDNN frontend's headers, as the set-up build gets them, when no set-up build ran first.
    if [ ! -e .whl/cudnn_frontend/include/cudnn_frontend.h ]; then
      ./scripts/setup.sh --frontend-only >"$dir/setup.log" 2>&1 || true
    fi
    ok=0
    { cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="$b" &&
      cmake --build "$dir" -j "$jobs"; } >"$dir/build.log" 2>&1 && ok=1
  fi
  if [ "$ok" -eq 0 ]; then
    echo "$what: build FAILED (see $dir/build.log)" | tee -a "$out"
    tail -n 30 "$dir/build.log"
    status=1
    continue
  fi
  if [ "$phase" != test ]; then
    built=$(( $(date +%s) - start ))
    rm -f "$dir/arch_build_seconds"
    if [ "$phase" = build ]; then
      echo "$built $commit" >"$dir/arch_build_seconds"
      echo "$what: built in ${built} s (ARCH_PHASE=build; ARCH_PHASE=test records it)"
      continue
    fi
  fi
  # What the configure step found (Dependencies.cmake's status lines).
  archs=$(grep -m1 -oE 'architectures [^ ]+' "$dir/build.log" | awk '{print $2}')
  cudnn=$(grep -qE 'gpu100: cuDNN found' "$dir/build.log" && echo found || echo "not found")
  frontend=$(grep -qE 'gpu100: cuDNN frontend found' "$dir/build.log" && echo found || echo "not found")
  warnings=$(grep -ci 'warning' "$dir/build.log" || true)
  start=$(date +%s)
  rm -f "$dir"/ctest.part-* "$dir"/ctest.queue*
  if [ -z "${CTEST_GPUS:-}" ]; then
    ctest --test-dir "$dir" --output-on-failure -j "$ctest_jobs" >"$dir/ctest.log" 2>&1 || status=1
  else
    # The CPU tests in one ctest process; the GPU tests dealt out one at a time, from a queue in
    # ctest's order, to one worker per GPU (each worker's ctest sees only its GPU), so that a
    # worker that drew a long test does not hold the others back.
    IFS=, read -ra gpu_list <<<"$CTEST_GPUS"
    queue="$dir/ctest.queue"
    ctest --test-dir "$dir" -N -L gpu | sed -nE 's/^ *Test +#([0-9]+):.*/\1/p' >"$queue"
    ctest --test-dir "$dir" --output-on-failure -j "$ctest_jobs" -LE gpu \
      --output-junit ctest.part-cpu.xml >"$dir/ctest.part-cpu.log" 2>&1 &
    pids=($!)
    for k in "${!gpu_list[@]}"; do
      (
        rc=0
        while :; do
          n=$(flock "$queue.lock" sh -c 'n=$(head -n 1 "$1"); [ -z "$n" ] || sed -i 1d "$1"; echo "$n"' _ "$queue")
          [ -n "$n" ] || break
          CUDA_VISIBLE_DEVICES=${gpu_list[$k]} ctest --test-dir "$dir" --output-on-failure -I "$n,$n" \
            --output-junit "ctest.part-gpu$n.xml" >>"$dir/ctest.part-gpu$k.log" 2>&1 || rc=1
        done
        exit $rc
      ) &
      pids+=($!)
    done
    for pid in "${pids[@]}"; do wait "$pid" || status=1; done
    # One log, and one summary line in ctest's words for the parts together.
    {
      cat "$dir"/ctest.part-*.log
      # ctest writes "100% tests passed out of N" when none failed (some versions add ", 0 tests
      # failed"), and "P% tests passed, F tests failed out of N" otherwise.
      awk '/tests passed.* out of [0-9]+$/ { n += $NF; if ($0 ~ /tests? failed/) f += $4 }
           END { if (n > 0) printf "%d%% tests passed, %d tests failed out of %d (GPU tests by %d workers, CUDA_VISIBLE_DEVICES %s)\n",
                 int(100 * (n - f) / n), f, n, '"${#gpu_list[@]}"', "'"$CTEST_GPUS"'" }' "$dir"/ctest.part-*.log
    } >"$dir/ctest.log"
  fi
  tested=$(( $(date +%s) - start ))
  {
    echo "$what at $commit: CMAKE_CUDA_ARCHITECTURES=${archs:-?}, cuDNN $cudnn, cuDNN frontend $frontend;" \
      "built in ${built} s, $warnings warning lines; ctest in ${tested} s:" \
      "$(grep -E 'tests passed|tests failed' "$dir/ctest.log" | tail -n1)"
    grep -E '\((Failed|Skipped|Timeout)\)|Not Run' "$dir/ctest.log" | sed 's/^[[:space:]]*/  /' | sort -n
    # The five slowest tests (where ctest's time goes: the GPU tests run one at a time).
    echo "  slowest: $(awk '/Test +#[0-9]+: .* sec$/ { t = $(NF - 1); sub(/.*Test +#[0-9]+: /, "");
      sub(/ \.+.*$/, ""); print t " s " $0 }' "$dir/ctest.log" | sort -rn | head -n 5 |
      paste -sd ';' - | sed 's/;/; /g')"
    # What each failed test printed (ctest --output-on-failure), up to 60 lines a test, so that a
    # failure can be read from OUT alone (the build folder stays on the machine that ran it).
    failed_output "$dir/ctest.log"
    # Each skip's reason, as the skipped test printed it.
    { grep -hoE 'GPU100_SKIP: .*' "$dir/Testing/Temporary/LastTest.log" 2>/dev/null
      [ -z "${CTEST_GPUS:-}" ] || cat "$dir"/ctest.part-*.xml 2>/dev/null | grep -oE 'GPU100_SKIP: [^<]*' |
        sed "s/&apos;/'/g; s/&quot;/\"/g; s/&lt;/</g; s/&gt;/>/g; s/&amp;/\&/g"; } | sort -u |
      sed 's/^GPU100_SKIP: /  reason: /'
  } | tee -a "$out"
  if [[ " ${SANITIZE_DAY06:-} " == *" $b "* ]]; then
    SANITIZE_ONLY=day06 SANITIZE_TOOLS="memcheck racecheck" ./scripts/sanitize.sh "$dir/sanitize" "$dir" |
      sed "s/^/  [$b] /" | tee -a "$out"
    [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
  fi
done
exit $status
