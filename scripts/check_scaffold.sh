#!/usr/bin/env bash
# The learner's flow, end to end, without a GPU: in a temporary copy of the source tree, write a
# variant for day02 and for day06 with scripts/new_variant.sh, configure and build those two days,
# and check that each binary's --list shows the variant and that ctest lists its test cases. The
# source tree is left as it was; the copy is removed. (ctest: common.learner_scaffold)
#   scripts/check_scaffold.sh [CUDA_ARCHITECTURES]       (default 75-virtual: the quickest build)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
archs=${1:-75-virtual}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gpu100-scaffold.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

fail() {
  echo "check_scaffold: $*" >&2
  exit 1
}

# The tracked files and the untracked ones git does not ignore: the tree a learner has. A file
# that is gone by the time it is copied (a deleted tracked file, or a scratch file another test
# was writing) is not part of that tree.
files=$(cd "$root" && git ls-files -z --cached --others --exclude-standard | tr '\0' '\n') ||
  fail "git ls-files failed in $root"
while IFS= read -r f; do
  [ -n "$f" ] || continue
  if ! err=$(cd "$root" && cp --parents -t "$tmp" -- "$f" 2>&1) && [ -e "$root/$f" ]; then
    fail "cannot copy $f into $tmp: $err"
  fi
done <<<"$files"
cd "$tmp"
scripts/new_variant.sh day02 scaffold_add >/dev/null
scripts/new_variant.sh day06 scaffold_sum >/dev/null
generator=()
command -v ninja >/dev/null 2>&1 && generator=(-G Ninja)
cmake -S . -B build "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CUDA_ARCHITECTURES="$archs" -DGPU100_DAYS="day02_vector_add;day06_scan" >build.log 2>&1 ||
  { tail -20 build.log; fail "configure failed"; }
cmake --build build -j "$(nproc)" --target day02_vector_add day02_tests_gpu day06_scan \
  day06_tests_gpu >>build.log 2>&1 || { tail -30 build.log; fail "build failed"; }

for pair in "day02_vector_add day02 scaffold_add" "day06_scan day06 scaffold_sum"; do
  read -r folder day name <<<"$pair"
  "build/$folder/$folder" --list | grep -q "^$name .*\[mine/$name.cu\]" ||
    fail "$folder --list does not show $name"
  count=$(ctest --test-dir build -N -R "^$day\.mine $name:" | grep -c "Test *#") || true
  [ "$count" -ge 3 ] || fail "ctest lists $count test cases for $day's $name (expected 3)"
  echo "check_scaffold: $day: --list shows $name; ctest lists $count test cases for it"
done
# new_variant.sh writes only <day>/mine/<name>.cu: those files exist in the copy, not in the tree.
for f in day02_vector_add/mine/scaffold_add.cu day06_scan/mine/scaffold_sum.cu; do
  [ -f "$tmp/$f" ] || fail "new_variant.sh did not write $f in the copy"
  [ ! -e "$root/$f" ] || fail "$f appeared in the source tree"
done
echo "check_scaffold: the variants were written in the copy only"
