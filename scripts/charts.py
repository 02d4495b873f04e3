#!/usr/bin/env python3
"""Turns a results folder (results/<gpu>/*.json) into PNG charts in <folder>/charts/.

  scripts/charts.py [results/h100]

One chart per results file:
  - a day's table: one horizontal bar per GPU row, as % of the copy ceiling measured in the same
    run when the row has one (memory-bound kernels), else as the ratio to the library row it is
    compared with (x cuBLAS, x cuDNN, ...), else TFLOP/s;
  - a sweep (*_sweep.json): one line per variant, GB/s (or ms when there is no GB/s) against the
    problem size, in the order the sizes were run; a GEMM sweep (rows compared with a library)
    shows each own variant's ratio to its library row instead.
matplotlib is an optional dependency (scripts/setup.sh --charts installs Debian's
python3-matplotlib); without it this script says so and exits 0, so nothing else depends on it.
"""
import json
import os
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent


def import_matplotlib():
    try:
        import matplotlib
    except ImportError:
        # Debian's python3-matplotlib lives with /usr/bin/python3; use it if this interpreter
        # is another one (a virtualenv or pyenv python).
        system = "/usr/bin/python3"
        if os.path.exists(system) and os.path.realpath(sys.executable) != os.path.realpath(system) \
                and not os.environ.get("GPU100_CHARTS_REEXEC"):
            os.environ["GPU100_CHARTS_REEXEC"] = "1"
            os.execv(system, [system, __file__] + sys.argv[1:])
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def gpu_rows(cases):
    """The rows measured on the GPU (the CPU reference rows have speedup 1 and no ceiling)."""
    return [c for c in cases if c.get("ms") is not None and not c["variant"].startswith("cpu")]


def label(case, shapes, precisions):
    text = case["variant"]
    extra = []
    if len(precisions) > 1:
        extra.append(case.get("precision") or "")
    if len(shapes) > 1:
        extra.append(case.get("shape") or "")
    extra = [e for e in extra if e]
    return text + (" (" + ", ".join(extra) + ")" if extra else "")


def bar_chart(plt, data, out):
    rows = gpu_rows(data["cases"])
    if not rows:
        return False
    pct = [c for c in rows if c.get("pct_of_ceiling") is not None]
    ratio = [c for c in rows if c.get("ratio_vs_library") is not None]
    tflops = [c for c in rows if c.get("tflops") is not None]
    if len(pct) >= max(len(ratio), 1):
        rows, key, xlabel = pct, "pct_of_ceiling", "% of the copy ceiling measured in the same run"
    elif ratio:
        rows, key = ratio, "ratio_vs_library"
        libs = sorted({c.get("library") or "library" for c in ratio})
        xlabel = "speed relative to " + ", ".join(libs) + " (1.0 = the library)"
    elif tflops:
        rows, key, xlabel = tflops, "tflops", "TFLOP/s"
    else:
        return False
    shapes = {c.get("shape") for c in rows}
    precisions = {c.get("precision") for c in rows}
    labels = [label(c, shapes, precisions) for c in rows]
    values = [c[key] for c in rows]
    colors = ["#4c72b0" if c.get("ok", True) is not False else "#c44e52" for c in rows]
    fig, ax = plt.subplots(figsize=(9, 0.32 * len(rows) + 1.4))
    y = range(len(rows))
    ax.barh(list(y), values, color=colors)
    ax.set_yticks(list(y))
    ax.set_yticklabels(labels, fontsize=8)
    ax.invert_yaxis()
    if key == "pct_of_ceiling":
        ax.axvline(100, color="gray", linestyle="--", linewidth=1)
    elif key == "ratio_vs_library":
        ax.axvline(1.0, color="gray", linestyle="--", linewidth=1)
    for i, v in enumerate(values):
        ax.text(v, i, f" {v:.1f}%" if key == "pct_of_ceiling" else f" {v:.2f}", va="center",
                fontsize=7)
    ax.set_xlabel(xlabel)
    ax.set_title(f"{data['day']} on {data['gpu']} (commit {data['git']})", fontsize=10)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return True


def torch_lines(ax, folder, model, shapes):
    """PyTorch on the same GPU (scripts/torch_mc_resnet18.py), dashed, where its batches match."""
    path = folder / "mc_resnet18_vs_torch.json"
    if not path.exists():
        return
    torch = json.loads(path.read_text())
    batches = [s.split()[0] for s in shapes]  # "N=32"
    modes = []
    for t in torch.get("timings", []):
        if t["model"] == model and t["status"] == "ok" and t["mode"] not in modes:
            modes.append(t["mode"])
    for mode in modes:
        pts = sorted((batches.index(f"N={t['batch']}"), t["images_per_s"]) for t in torch["timings"]
                     if t["model"] == model and t["mode"] == mode and t["status"] == "ok"
                     and f"N={t['batch']}" in batches)
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], linestyle="--", marker="x",
                    markersize=4, label=f"PyTorch {mode}")


def sweep_chart(plt, data, out):
    rows = gpu_rows(data["cases"])
    if not rows:
        return False
    use_gbps = all(c.get("gbps") is not None for c in rows)
    # The networks' sweeps: images/s against the batch size.
    use_images = all("images/s" in (c.get("metrics") or {}) for c in rows)
    for c in rows:
        if use_images:
            c["images/s"] = c["metrics"]["images/s"]
    key, ylabel = ("gbps", "GB/s") if use_gbps else ("ms", "median ms")
    if use_images:
        key, ylabel = "images/s", "images/s"
    # A GEMM sweep: each own variant's ratio to its library row (x cuBLAS) per size.
    use_ratio = not use_gbps and not use_images and any(
        c.get("ratio_vs_library") is not None for c in rows)
    if use_ratio:
        rows = [c for c in rows if c.get("ratio_vs_library") is not None]
        key, ylabel = "ratio_vs_library", "x library (above 1: faster)"
    shapes = []
    for c in rows:
        if c["shape"] not in shapes:
            shapes.append(c["shape"])
    fig, ax = plt.subplots(figsize=(10, 6) if use_images else (9, 4.5))
    if use_images:  # up to 17 lines: 20 distinct colours
        ax.set_prop_cycle(color=list(plt.cm.tab20.colors))
    variants = []
    for c in rows:
        name = c["variant"] + (" " + c["precision"] if c.get("precision") else "")
        if name not in variants:
            variants.append(name)
    for name in variants:
        xs, ys = [], []
        for c in rows:
            if c["variant"] + (" " + c["precision"] if c.get("precision") else "") == name:
                xs.append(shapes.index(c["shape"]))
                ys.append(c[key])
        ax.plot(xs, ys, marker="o", markersize=3, label=name)
    if use_images:
        torch_lines(ax, out.parent.parent, out.stem.replace("_sweep", ""), shapes)
    ax.set_xticks(range(len(shapes)))
    ax.set_xticklabels([re.sub(r"^n=", "", s.split()[0] if use_images else s) for s in shapes],
                       rotation=45, ha="right", fontsize=7)
    if use_ratio:
        ax.axhline(1.0, color="gray", linestyle="--", linewidth=1, label="the library")
    if key == "gbps" and data.get("ceiling_gbps"):
        ax.axhline(data["ceiling_gbps"], color="gray", linestyle="--", linewidth=1,
                   label="copy ceiling")
    if key in ("ms", "images/s"):
        ax.set_yscale("log")
    ax.set_ylabel(ylabel)
    ax.set_title(f"{data['day']} sweep on {data['gpu']} (commit {data['git']})", fontsize=10)
    ax.legend(fontsize=6, ncol=2 if use_images else 1)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return True


def mcconv_chart(plt, data, out):
    """scripts/benchmark_mcconv.py's file: images/s per batch size, one line per mode."""
    rows = [r for r in data["rows"] if r.get("status") == "ok"]
    if not rows:
        return False
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for mode in dict.fromkeys(r["mode"] for r in rows):
        pts = sorted((r["batch"], r["images_per_s"]) for r in rows if r["mode"] == mode)
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=mode)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("batch (416 x 544, RGB + depth)")
    ax.set_ylabel("images/s")
    ax.set_title(f"MC-ResNet18 from PyTorch, {data['precision']}, {data['gpu']}")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return True


def main():
    folder = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ROOT / "results" / "h100")
    if not folder.is_absolute():
        folder = pathlib.Path.cwd() / folder
    plt = import_matplotlib()
    if plt is None:
        print("charts: matplotlib not found (scripts/setup.sh --charts installs it); no charts made")
        return 0
    out_dir = folder / "charts"
    out_dir.mkdir(exist_ok=True)
    made = 0
    for path in sorted(folder.glob("*.json")):
        data = json.loads(path.read_text())
        out = out_dir / (path.stem + ".png")
        if path.stem == "mcconv_benchmark":
            if mcconv_chart(plt, data, out):
                made += 1
                print(f"charts: {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}")
            continue
        if "day" not in data:  # not a binary's results (torch_baselines.json)
            continue
        draw = sweep_chart if path.stem.endswith("_sweep") else bar_chart
        if draw(plt, data, out):
            made += 1
            print(f"charts: {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}")
    print(f"charts: {made} charts in {out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
