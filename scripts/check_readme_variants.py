#!/usr/bin/env python3
"""Two checks that keep a variant's name written once, in its registry:
  - each day README's variants tables name the registry's variants, all of them, in the
    registry's order (the lesson order);
  - no file of a day's driver (main.cpp and the files beside it on common/harness.hpp) quotes a
    registered name: drivers select rows by tag or by registry field, so a new variant cannot
    silently miss a sweep or a comparison.
The registry is read from the day's binary (`--list`, which needs no GPU); the README's names are
the backticked names in the first column of its variants tables (the tables whose first header
cell is "variant" or "implementation").

  python3 scripts/check_readme_variants.py [BUILD_DIR]      (ctest: common.readme_variants)
"""
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent


def registry(binary):
    out = subprocess.run([str(binary), "--list"], capture_output=True, text=True, check=True).stdout
    names = []
    for line in out.splitlines():
        if "[mine/" in line:
            continue  # a learner's own variant (mine/*.cu): not in the README's tables
        first = line.split()[0] if line.split() else ""
        if "_" in first and re.fullmatch(r"[a-z0-9_]+", first):  # section headers have no '_'
            names.append(first)
    return names


def readme_names(readme, known):
    seen = []
    in_table = False  # inside a variants table
    header = True     # the next table line is a header
    for line in readme.read_text().splitlines():
        if not line.startswith("|"):
            in_table, header = False, True
            continue
        cells = line.split("|")
        if len(cells) < 3:
            continue
        if header:
            in_table = cells[1].strip().lower().startswith(("variant", "implementation"))
            header = False
            continue
        if not in_table:
            continue
        for name in re.findall(r"`([a-z0-9_]+)`", cells[1]):
            if name in known and name not in seen:
                seen.append(name)
    return seen


def main():
    build = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "build"
    bad = 0
    checked = 0
    for day in sorted(ROOT.glob("day[0-9][0-9]_*")) + sorted(ROOT.glob("capstone_*")):
        binary = build / day.name / day.name
        if not binary.exists():
            continue  # a day this build left out
        names = registry(binary)
        listed = readme_names(day / "README.md", set(names))
        checked += 1
        missing = [n for n in names if n not in listed]
        if missing:
            print(f"{day.name}/README.md: no variants-table row for {', '.join(missing)}")
            bad += 1
        for path in sorted(day.glob("*.cpp")):  # the driver's files: those on the day harness
            driver = path.read_text()
            if '"common/harness.hpp"' not in driver:
                continue
            quoted = [n for n in names if f'"{n}"' in driver]
            if quoted:
                print(f"{day.name}/{path.name} quotes registered names: {', '.join(quoted)} "
                      "(select by tag or registry field instead)")
                bad += 1
        order = [n for n in names if n in listed]
        if listed != order:
            print(f"{day.name}/README.md: table order {' '.join(listed)}\n"
                  f"  registry order     {' '.join(order)}")
            bad += 1
    if bad:
        return 1
    print(f"check_readme_variants: {checked} days: README tables name every registered variant, "
          "in order; no driver quotes one")
    return 0


if __name__ == "__main__":
    sys.exit(main())
