#!/usr/bin/env python3
"""Compares two sets of results JSON (e.g. the committed results/h100 and a fresh run): for every
file in OLD, which rows (variant, precision, shape) are missing or new in NEW, and each timed row's
median time NEW / OLD. Rows outside the band (default 5%) are listed; the exit status is 1 when a
row is missing or a checked row failed in NEW.

  python3 scripts/compare_results.py OLD_DIR NEW_DIR [--band 0.05]

Only the Python 3 standard library is used.
"""
import argparse
import json
import pathlib
import sys


def rows(path):
    data = json.loads(path.read_text())
    return {(c["variant"], c["precision"], c["shape"]): c for c in data["cases"]}, data


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old", type=pathlib.Path)
    parser.add_argument("new", type=pathlib.Path)
    parser.add_argument("--band", type=float, default=0.05, help="relative band on the time")
    args = parser.parse_args()
    bad = 0
    for old_path in sorted(args.old.glob("*.json")):
        new_path = args.new / old_path.name
        if not new_path.exists():
            continue  # not a results file of this run (e.g. another script's)
        old, old_data = rows(old_path)
        new, new_data = rows(new_path)
        if "cases" not in old_data:
            continue
        missing = [k for k in old if k not in new]
        added = [k for k in new if k not in old]
        failed = [k for k, c in new.items() if c.get("ok") is False]
        ratios, outside = [], []
        for k, c in old.items():
            n = new.get(k)
            if not n or not c.get("ms") or not n.get("ms"):
                continue
            r = n["ms"] / c["ms"]
            ratios.append(r)
            if abs(r - 1) > args.band:
                outside.append((k, c["ms"], n["ms"], r))
        line = (f"{old_path.name}: {len(new)} rows vs {len(old)}; {len(missing)} missing, "
                f"{len(added)} new, {len(failed)} failed; median ms new/old ")
        if ratios:
            s = sorted(ratios)
            line += f"{s[len(s) // 2]:.3f} (range {s[0]:.3f} to {s[-1]:.3f}); "
        line += f"{len(outside)} outside +-{args.band:.0%}"
        print(line)
        for k in missing:
            print(f"  missing: {k}")
        for k in added:
            print(f"  new: {k}")
        for k in failed:
            print(f"  FAILED: {k}")
        for k, o, n, r in outside:
            print(f"  {k[0]} [{k[1]}] {k[2]}: {o:.4g} -> {n:.4g} ms ({r:.3f})")
        bad += len(missing) + len(failed)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
