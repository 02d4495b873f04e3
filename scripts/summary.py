#!/usr/bin/env python3
"""One-screen summary of a results folder: per day, the best kernel and how close it is to the
ceiling or to the library, and whether every verified row passed.

  scripts/summary.py [results/h100]

Per results file: the best own kernel's % of the copy ceiling (for the capstone, of its bytes floor;
library and floor rows excluded), the best ratio to each library row a day compares with, and,
where no library row exists, the best TFLOP/s (attention). Only the Python 3 standard library is
used.
"""
import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent


def summarize(path):
    data = json.loads(path.read_text())
    cases = [c for c in data["cases"] if c.get("ms") is not None or c.get("tflops") is not None]
    checked = [c for c in data["cases"] if c.get("ok") is not None]
    failed = [c["variant"] for c in checked if not c["ok"]]
    libraries = {c["library"] for c in data["cases"] if c.get("library")}
    gpu_rows = [c for c in cases
                if not c["variant"].startswith(("cpu", "h2d", "d2h", "fp32_fma", "bytes_floor", "cudnn", "cublas", "cub_"))
                and c["variant"] not in libraries and c.get("ok") is not False]
    parts = []
    best_pct = max((c for c in gpu_rows if c.get("pct_of_ceiling") is not None and c.get("gbps")),
                   key=lambda c: c["pct_of_ceiling"], default=None)
    if best_pct is not None:
        what = "bytes floor" if data["day"].startswith("capstone") else "copy ceiling"
        parts.append(f"{best_pct['variant']} ({best_pct['precision']}) {best_pct['pct_of_ceiling']:.1f}% of the {what}")
    best_ratio = {}
    for c in gpu_rows:
        r = c.get("ratio_vs_library")
        if r is None or c.get("ok") is False:
            continue
        key = c["library"]
        if key not in best_ratio or r > best_ratio[key]["ratio_vs_library"]:
            best_ratio[key] = c
    for _, c in sorted(best_ratio.items()):
        parts.append(f"{c['variant']} ({c['precision']}) {c['ratio_vs_library']:.2f}x {c['library']}")
    if not best_ratio or data["day"].startswith("day05"):
        best_tflops = max((c for c in gpu_rows if c.get("tflops") is not None),
                          key=lambda c: c["tflops"], default=None)
        if best_tflops is not None and best_pct is None:
            parts.append(f"{best_tflops['variant']} ({best_tflops['precision']}) {best_tflops['tflops']:.1f} TFLOP/s")
    verdict = "PASS" if not failed else "FAIL (" + ", ".join(failed) + ")"
    return path.stem, data["git"], "; ".join(parts) or "-", f"{len(checked) - len(failed)}/{len(checked)} {verdict}"


def main():
    folder = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "results" / "h100"
    # The binaries' results (they carry "day"); torch_baselines.json is PyTorch's, not a day's.
    files = sorted(p for p in folder.glob("*.json")
                   if not p.stem.endswith("_sweep") and "day" in json.loads(p.read_text()))
    if not files:
        if any(folder.glob("*_sweep.json")):  # a sweep-only run (BENCH_ONLY): nothing to sum up
            print(f"only size sweeps in {folder}: no summary rows")
            return 0
        print(f"no results in {folder}", file=sys.stderr)
        return 1
    rows = [summarize(p) for p in files]
    first = json.loads(files[0].read_text())
    print(f"{first['gpu']} ({first['cuda']}), {folder}")
    w = max(len(r[0]) for r in rows)
    for day, git, best, verdict in rows:
        print(f"  {day:<{w}}  {verdict:<14}  {best}  [{git}]")
    return 0 if all(r[3].split()[1] == "PASS" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
