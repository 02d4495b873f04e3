#!/usr/bin/env bash
# Writes your own variant of a day: <day folder>/mine/<name>.cu, from the day's template
# (<day folder>/mine_template.cu.in), a correct and simple kernel with the day's signature and
# rules in its header. The build picks the file up by itself: the day's binary lists and runs it
# (--variant <name>) and `ctest -R <day>` checks it with test cases named after it.
#   scripts/new_variant.sh day02 my_add        (the day's number or its folder name)
# Exit status: 0 written, 2 bad arguments (unknown day, a day without a template, a bad or taken
# name, a file that exists already).
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
  echo "usage: scripts/new_variant.sh DAY NAME   (e.g. scripts/new_variant.sh day02 my_add)" >&2
  exit 2
}
[ $# -eq 2 ] || usage
day_arg=$1 name=$2

folders=(${day_arg}_*/)
if [ -d "$day_arg" ]; then
  folder=${day_arg%/}
elif [ ${#folders[@]} -eq 1 ] && [ -d "${folders[0]}" ]; then
  folder=${folders[0]%/}
else
  echo "new_variant: no day folder matches '$day_arg' (try day02 or day06_scan)" >&2
  exit 2
fi
template=$folder/mine_template.cu.in
if [ ! -f "$template" ]; then
  echo "new_variant: $folder has no learner template yet ($template)" >&2
  exit 2
fi
if ! [[ "$name" =~ ^[a-z][a-z0-9_]{0,39}$ ]]; then
  echo "new_variant: '$name' must be lower case letters, digits and _, starting with a letter" >&2
  exit 2
fi
# A registry entry starts with its name: {"v1_naive", ...
if grep -qE "\{\s*\"$name\"" "$folder"/*.cpp "$folder"/*.cu 2>/dev/null; then
  echo "new_variant: '$name' is already a name in $folder; pick another" >&2
  exit 2
fi
out=$folder/mine/$name.cu
if [ -e "$out" ]; then
  echo "new_variant: $out exists already" >&2
  exit 2
fi
mkdir -p "$folder/mine"
sed "s/@NAME@/$name/g" "$template" >"$out"
echo "wrote $out"
echo "next: cmake --build build && ctest --test-dir build -R \"${folder%%_*}.mine $name\""
echo "      build/$folder/$folder --variant $name"
