#!/usr/bin/env python3
"""Regenerates the results tables in LOG.md (and the day READMEs) from results/<gpu>/*.json.

Every table in a Markdown file sits between two markers naming its JSON file:

    <!-- results: results/h100/day02_vector_add.json -->
    ... generated table ...
    <!-- /results -->

A marker ending in " sweep" (<!-- results: PATH sweep -->) gives one row per size instead, and one
ending in " throughput" one row per variant with its images/s at each batch size (the networks).
" layers" gives the networks' time per layer kind (capstone_mc_resnet18 --layers rows), and
" ladder", with a folder for PATH, one row per results file in it (in name order): the networks'
best times at each step of their optimisation.
" mcconv" renders scripts/benchmark_mcconv.py's file (the PyTorch model with and without the
custom dual kernel, and the whole-network operator). " gpus" renders capstone_mc_resnet18 --gpus
(one row per multi-GPU row and batch: images/s, the speed-up over GPU 0 alone and the scaling
efficiency) and " allreduce" capstone_allreduce (bus bandwidth per size, variant and type, and
the rings against NCCL). For scripts/torch_mc_resnet18.py's file, " torch-checks" gives the logits cross-check,
" torch-layers" cuDNN's time on each 3x3 layer alone, and " torch-<model>" PyTorch's images/s per
mode and batch size.

  scripts/gen_log.py           rewrite the tables in place
  scripts/gen_log.py --check   exit 1 if any table differs from its JSON (CI runs this as a test)

Only the Python 3 standard library is used.
"""
import argparse
import difflib
import json
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
FILES = ["LOG.md", "README.md"] + sorted(str(p.relative_to(ROOT)) for p in
                                        list(ROOT.glob("*/README.md")) + list(ROOT.glob("*/*/README.md")))
BLOCK = re.compile(r"(<!-- results: (?P<path>[^ ]+)(?P<mode> sweep| throughput| layers| ladder| torch-checks| mcconv| gpus| allreduce| torch-[a-z0-9_]+)? -->\n)(?P<body>.*?)(<!-- /results -->)", re.S)

COLUMNS = [
    ("variant", "variant", "{}"),
    ("precision", "precision", "{}"),
    ("shape", "shape", "{}"),
    ("ms", "median ms", "{:.4f}"),
    ("gbps", "GB/s", "{:.1f}"),
    ("tflops", "TFLOP/s", "{:.2f}"),
    ("pct_of_ceiling", "% of ceiling", "{:.1f}%"),
    ("speedup_vs_cpu", "x CPU", "{:.1f}"),
    ("ratio_vs_library", "x library", "{:.2f}"),
    ("max_abs_err", "max abs err", "{:.1e}"),
    ("err_over_tol", "err/tol", "{:.2f}"),
    ("ok", "check", None),
]


def cell(case, key, fmt):
    value = case.get(key)
    if key == "ok":
        return "-" if value is None else ("PASS" if value else "FAIL")
    if value is None:
        return "-"
    if key == "ratio_vs_library" and case.get("library"):
        return fmt.format(value) + " vs " + case["library"]
    return fmt.format(value) if fmt != "{}" else str(value)


def header(data, json_path):
    return (f"Measured on {data['gpu']} ({data['cuda']}), {data['timestamp']}, commit `{data['git']}`; "
            f"copy ceiling in the same run: {data['ceiling_gbps']:.1f} GB/s. Source: `{json_path}`.")


def render_sweep(json_path):
    """One row per shape, a column group per GPU variant: a size sweep at a glance. Memory-bound
    sweeps show ms, GB/s and % of the copy ceiling; sweeps without GB/s (GEMMs) show ms, TFLOP/s
    and the ratio to the library row of the same shape."""
    data = json.loads((ROOT / json_path).read_text())
    variants, shapes, table = [], [], {}
    cases = [c for c in data["cases"] if c["variant"] not in ("cpu_reference", "fp32_fma_peak")]
    if cases and all(c.get("gbps") is None for c in cases):
        cols = [("ms", "ms", "{:.4f}"), ("tflops", "TFLOP/s", "{:.1f}"),
                ("ratio_vs_library", "x library", "{:.2f}")]
    else:
        cols = [("ms", "ms", "{:.4f}"), ("gbps", "GB/s", "{:.1f}"),
                ("pct_of_ceiling", "% of ceiling", "{:.1f}%")]
    for case in data["cases"]:
        if case["variant"] in ("cpu_reference", "fp32_fma_peak"):
            continue
        if case["variant"] not in variants:
            variants.append(case["variant"])
        if case["shape"] not in shapes:
            shapes.append(case["shape"])
        table[(case["shape"], case["variant"])] = case
    lines = [header(data, json_path), "",
             "| shape | " + " | ".join(f"{v} {title}" for v in variants for _, title, _ in cols) + " |",
             "|---|" + "---:|" * (len(cols) * len(variants))]
    for shape in shapes:
        row = []
        for v in variants:
            c = table.get((shape, v), {})
            for key, _, fmt in cols:
                value = c.get(key)
                row.append("-" if value is None else fmt.format(value))
        lines.append(f"| {shape} | " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"


def render_throughput(json_path):
    """One row per variant: images/s at each batch size, then the worst err/tol and the checks."""
    data = json.loads((ROOT / json_path).read_text())
    variants, batches, table = [], [], {}
    cpu = None
    for case in data["cases"]:
        if case["variant"] == "cpu_reference":
            cpu = case
            continue
        if case["variant"].startswith("layers_"):  # the " layers" table's rows
            continue
        n = case["shape"].split()[0]
        if case["variant"] not in variants:
            variants.append(case["variant"])
        if n not in batches:
            batches.append(n)
        table[(case["variant"], n)] = case
    lines = [header(data, json_path), "", "images/s at each batch size (`-`: refused, see the notes)", "",
             "| row | precision | " + " | ".join(batches) + " | worst err/tol | checks |",
             "|---|---|" + "---:|" * len(batches) + "---:|---|"]
    for v in variants:
        cases = [table[(v, n)] for n in batches if (v, n) in table]
        cells = []
        for n in batches:
            c = table.get((v, n), {})
            ips = (c.get("metrics") or {}).get("images/s")
            cells.append("-" if ips is None else f"{ips:,.0f}")
        errs = [c["err_over_tol"] for c in cases if c.get("err_over_tol") is not None]
        checked = [c for c in cases if c.get("ok") is not None]
        passed = sum(1 for c in checked if c["ok"])
        lines.append(f"| {v} | {cases[0]['precision']} | " + " | ".join(cells) +
                     f" | {max(errs):.2f} | {passed}/{len(checked)} PASS |" if errs else
                     f"| {v} | {cases[0]['precision']} | " + " | ".join(cells) + " | - | - |")
    if cpu is not None:
        lines += ["", f"CPU reference (one image, {cpu['shape']}): {cpu['ms']:.0f} ms."]
    notes = sorted({f"- `{c['variant']}` at {c['shape'].split()[0]}: {c['note']}" for c in data["cases"]
                    if c.get("note")})
    if notes:
        lines += [""] + notes
    return "\n".join(lines) + "\n"


def render_layers(json_path):
    """capstone_mc_resnet18 --layers: per precision, one row per layer kind, and per batch size
    its time, share of the forward, TFLOP/s and GB/s of its compulsory bytes (% of the copy
    ceiling)."""
    data = json.loads((ROOT / json_path).read_text())
    groups = {}  # precision -> {"batches": [...], "kinds": [...], (kind, n): case}
    for c in data["cases"]:
        if not c["variant"].startswith("layers_"):
            continue
        prec, kind = c["variant"][len("layers_"):].split(": ", 1)
        n = c["shape"].split()[0]
        g = groups.setdefault(prec, {"batches": [], "kinds": []})
        if n not in g["batches"]:
            g["batches"].append(n)
        if kind not in g["kinds"]:
            g["kinds"].append(kind)
        g[(kind, n)] = c
    lines = [header(data, json_path), "",
             "Time per layer kind: sequential forwards with an event between steps, the median of 5 "
             "for each step. GB/s counts each step's compulsory bytes (its input, residual, weights "
             "and output, once each).", ""]
    for prec, g in groups.items():
        # A stage's 3x3 layer carries cuDNN's figure on one of its convolutions, from the same run.
        lib = any("x cuDNN" in g[k]["metrics"] for k in g if isinstance(k, tuple))
        per_n = 6 if lib else 4
        cols = "".join(f" {n} ms | {n} share | {n} TFLOP/s | {n} GB/s (% of copy) |" +
                       (f" {n} cuDNN TFLOP/s | {n} x cuDNN |" if lib else "") for n in g["batches"])
        lines += [f"**{prec}**", "", "| layer kind | steps |" + cols,
                  "|---|---:|" + "---:|" * per_n * len(g["batches"])]
        for kind in g["kinds"]:
            steps = next(int(g[(kind, n)]["metrics"]["steps"]) for n in g["batches"] if (kind, n) in g)
            cells = []
            for n in g["batches"]:
                c = g.get((kind, n))
                if c is None:
                    cells += ["-"] * per_n
                    continue
                tf = "-" if c.get("tflops") is None else f"{c['tflops']:.1f}"
                gb = "-" if c.get("gbps") is None else f"{c['gbps']:,.0f} ({c['pct_of_ceiling']:.0f}%)"
                cells += [f"{c['ms']:.3f}", f"{c['metrics']['share %']:.1f}%", tf, gb]
                if lib:
                    m = c["metrics"]
                    cells += [f"{m['cuDNN TFLOP/s']:.1f}" if "cuDNN TFLOP/s" in m else "-",
                              f"{m['x cuDNN']:.2f}" if "x cuDNN" in m else "-"]
            name = f"**{kind}**" if kind == "total" else kind
            lines.append(f"| {name} | {steps} | " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


def render_ladder(folder):
    """One row per results file of the folder (name order): the fastest own row per precision at
    N=1 and N=32, bf16 images/s at N=128, and cuDNN's bf16 network at N=32 for scale."""
    # In step order: the leading number of each name, compared as a number (10 after 9).
    def step_no(f):
        head = f.stem.split("_")[0]
        return (int(head) if head.isdigit() else 1 << 30, f.stem)
    files = sorted((ROOT / folder).glob("*.json"), key=step_no)
    def best(data, prefix, n):
        ms = [c["ms"] for c in data["cases"] if c["variant"].startswith(prefix) and c.get("ms")
              and c["shape"].split()[0] == n and c.get("ok")]
        return min(ms) if ms else None
    def fmt(v, f="{:.2f}"):
        return "-" if v is None else f.format(v)
    lines = [f"Each row is one run of `capstone_mc_resnet18` on {json.loads(files[0].read_text())['gpu']}"
             f" at 416x544 (fastest own row of each precision, any trunks mode; ms). Source: `{folder}`.", "",
             "| step | commit | bf16 N=1 | bf16 N=32 | bf16 N=128 images/s | fp32 N=32 | TF32 N=32 | cuDNN bf16 N=32 |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    for f in files:
        data = json.loads(f.read_text())
        step = re.sub(r"^\d+_", "", f.stem).replace("_", " ")
        b128 = best(data, "own_bf16", "N=128")
        lines.append(f"| {step} | `{data['git']}` | {fmt(best(data, 'own_bf16', 'N=1'), '{:.3f}')} | "
                     f"{fmt(best(data, 'own_bf16', 'N=32'))} | {fmt(None if b128 is None else 128e3 / b128, '{:,.0f}')} | "
                     f"{fmt(best(data, 'own_fp32', 'N=32'))} | {fmt(best(data, 'own_tf32', 'N=32'))} | "
                     f"{fmt(best(data, 'cudnn_bf16', 'N=32'))} |")
    return "\n".join(lines) + "\n"


def render_gpus(json_path):
    """capstone_mc_resnet18 --gpus: one row per multi-GPU row and batch size: GPUs, ms, images/s,
    the speed-up over GPU 0 alone timed the same way, and (batch split) the scaling efficiency."""
    data = json.loads((ROOT / json_path).read_text())
    lines = [header(data, json_path), "",
             "| row | batch | GPUs | ms | images/s | x GPU 0 alone | scaling | RGB / depth trunk alone ms | "
             "err/tol | check |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for c in data["cases"]:
        if c["variant"] == "cpu_reference":
            continue
        m = c.get("metrics") or {}
        def f(v, spec):
            return "-" if v is None else spec.format(v)
        lines.append(f"| {c['variant']} | {c['shape'].split()[0]} | {f(m.get('GPUs'), '{:.0f}')} | "
                     f"{f(c.get('ms'), '{:.3f}')} | {f(m.get('images/s'), '{:,.0f}')} | "
                     f"{f(c.get('ratio_vs_library'), '{:.2f}x')} | {f(m.get('scaling %'), '{:.1f}%')} | "
                     f"{f(m.get('RGB trunk alone ms'), '{:.3f}')} / {f(m.get('depth trunk alone ms'), '{:.3f}')} | "
                     f"{f(c.get('err_over_tol'), '{:.2f}')} | "
                     f"{'-' if c.get('ok') is None else ('PASS' if c['ok'] else 'FAIL')} |")
    notes = [f"- `{c['variant']}` at {c['shape'].split()[0]}: {c['note']}" for c in data["cases"]
             if c.get("note")]
    if notes:
        lines += [""] + notes
    return "\n".join(lines) + "\n"


def render_allreduce(json_path):
    """capstone_allreduce: per element type, one row per size: each variant's bus bandwidth (GB/s,
    as nccl-tests defines it) and the rings' ratio to NCCL in the same run."""
    data = json.loads((ROOT / json_path).read_text())
    cases = [c for c in data["cases"] if c["variant"] != "cpu_reference"]
    variants = list(dict.fromkeys(c["variant"] for c in cases))
    rings = [v for v in variants if any(c["variant"] == v and c.get("library") for c in cases)]
    lines = [header(data, json_path), ""]
    for prec in dict.fromkeys(c["precision"] for c in cases):
        table = {(c["shape"], c["variant"]): c for c in cases if c["precision"] == prec}
        shapes = list(dict.fromkeys(c["shape"] for c in cases if c["precision"] == prec))
        lines += [f"**{prec}**", "",
                  "| size | " + " | ".join(f"{v} busbw GB/s" for v in variants) + " | " +
                  " | ".join(f"{v} x NCCL" for v in rings) + " | checks |",
                  "|---|" + "---:|" * (len(variants) + len(rings)) + "---|"]
        for shape in shapes:
            cells, ratios, ok = [], [], True
            for v in variants:
                c = table.get((shape, v), {})
                m = c.get("metrics") or {}
                bw = m.get("busbw GB/s", c.get("gbps"))
                cells.append("-" if bw is None or c.get("ms") is None else f"{bw:,.1f}")
                ok = ok and c.get("ok", True) is not False
            for v in rings:
                r = table.get((shape, v), {}).get("ratio_vs_library")
                ratios.append("-" if r is None else f"{r:.2f}")
            lines.append(f"| {shape} | " + " | ".join(cells + ratios) + f" | {'PASS' if ok else 'FAIL'} |")
        lines.append("")
    notes = sorted({f"- `{c['variant']}`: {c['note']}" for c in cases if c.get("note")})
    if notes:
        lines += notes + [""]
    return "\n".join(lines)


def torch_header(data, json_path):
    return (f"Measured on {data['gpu']} with PyTorch {data['torch']} (CUDA {data['cuda']}, cuDNN "
            f"{data['cudnn']}), {data['timestamp']}, commit `{data['git']}`. Source: `{json_path}`.")


def render_torch_checks(json_path):
    """Relative L2 error of the logits against PyTorch float64, per model, precision and row."""
    data = json.loads((ROOT / json_path).read_text())
    lines = [torch_header(data, json_path), "",
             f"Relative L2 error of the logits of {data['check']['n']} images against PyTorch in float64 "
             "(the same weights and inputs, through the binary's --weights and --input files).", "",
             "| model | row | precision | rel L2 | tolerance | check |", "|---|---|---|---:|---:|---|"]
    for c in data["checks"]:
        err = "-" if c.get("rel_l2") is None else f"{c['rel_l2']:.1e}"
        verdict = c["status"].upper() if c["source"] == "binary" else "(PyTorch, for scale)"
        lines.append(f"| {c['model']} | {c['row']} | {c['precision']} | {err} | {c['tol']:.0e} | {verdict} |")
    return "\n".join(lines) + "\n"


def render_torch_times(json_path, model):
    """PyTorch's images/s on the same GPU: one row per mode, one column per batch size."""
    data = json.loads((ROOT / json_path).read_text())
    times = [t for t in data["timings"] if t["model"] == model]
    modes, batches = [], []
    for t in times:
        if t["mode"] not in modes:
            modes.append(t["mode"])
        if t["batch"] not in batches:
            batches.append(t["batch"])
    batches.sort()
    lines = [torch_header(data, json_path), "",
             "| PyTorch mode | " + " | ".join(f"N={b}" for b in batches) + " |",
             "|---|" + "---:|" * len(batches)]
    for mode in modes:
        cells = []
        for b in batches:
            t = next((t for t in times if t["mode"] == mode and t["batch"] == b), None)
            cells.append("-" if t is None else (f"{t['images_per_s']:,.0f}" if t["status"] == "ok" else t["status"]))
        lines.append(f"| {mode} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def render_torch_layers(json_path):
    """PyTorch's cuDNN on each 3x3 stride-1 layer alone: one row per layer, ms and TFLOP/s per
    precision."""
    data = json.loads((ROOT / json_path).read_text())
    rows = data.get("layers", [])
    precisions = list(dict.fromkeys(r["precision"] for r in rows))
    lines = [torch_header(data, json_path), "",
             "| layer | N | channels | H x W | " + " | ".join(f"{p} ms | {p} TFLOP/s" for p in precisions) + " |",
             "|---|---:|---:|---|" + "---:|---:|" * len(precisions)]
    for layer in dict.fromkeys(r["layer"] for r in rows):
        first = next(r for r in rows if r["layer"] == layer)
        cells = []
        for p in precisions:
            r = next((r for r in rows if r["layer"] == layer and r["precision"] == p), None)
            if r is None or r["status"] != "ok":
                cells += ["-" if r is None else r["status"], "-"]
            else:
                cells += [f"{r['ms']:.4f}", f"{r['tflops']:.1f}"]
        lines.append(f"| {layer} | {first['batch']} | {first['channels']} | {first['h']} x {first['w']} | " +
                     " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def render_mcconv(json_path):
    """The PyTorch MC-ResNet18 per batch: ms per mode, the ratios to the sequential model, and the
    whole-network operator beside the C++ binary's best bf16 row."""
    data = json.loads((ROOT / json_path).read_text())
    rows = data["rows"]
    modes = list(dict.fromkeys(r["mode"] for r in rows))
    lines = [f"Measured on {data['gpu']} with PyTorch {data['torch']} (CUDA {data['cuda']}), "
             f"{data['timestamp']}, commit `{data['git']}`, {data['precision']}, "
             f"{data['size'][0]} x {data['size'][1]}. Source: `{json_path}`.", "",
             "| N | " + " | ".join(f"{m} ms" for m in modes) +
             " | custom vs sequential | custom_fused vs sequential | custom_fused vs"
             " sequential_folded | best gpu100_net vs sequential | checks |",
             "|---:|" + "---:|" * (len(modes) + 4) + "---|"]
    for n in sorted(dict.fromkeys(r["batch"] for r in rows)):
        by = {r["mode"]: r for r in rows if r["batch"] == n}
        ms = {m: by[m]["ms"] for m in modes if m in by and by[m].get("status") == "ok"}
        cells = [f"{ms[m]:.3f}" if m in ms else "-" for m in modes]
        seq = ms.get("sequential")
        nets = [v for m, v in ms.items() if m.startswith("gpu100_net")]
        cells.append(f"{seq / ms['custom']:.2f}x" if seq and "custom" in ms else "-")
        cells.append(f"{seq / ms['custom_fused']:.2f}x" if seq and "custom_fused" in ms else "-")
        fold = ms.get("sequential_folded")
        cells.append(f"{fold / ms['custom_fused']:.2f}x" if fold and "custom_fused" in ms
                     else "-")
        cells.append(f"{seq / min(nets):.2f}x" if seq and nets else "-")
        ok = all(r.get("ok") for r in by.values())
        lines.append(f"| {n} | " + " | ".join(cells) + f" | {'PASS' if ok else 'FAIL'} |")
    if data.get("binary"):
        lines += ["", "| N | whole-network operator, eager | in a torch.cuda.graph | the C++ binary's best bf16 row | operator / binary |",
                  "|---:|---:|---:|---|---:|"]
        for n, rows_b in sorted(data["binary"].items(), key=lambda kv: int(kv[0])):
            best_row = min(rows_b, key=rows_b.get)
            by = {r["mode"]: r for r in rows if r["batch"] == int(n) and r.get("status") == "ok"}
            eager = min(by[m]["ms"] for m in by
                        if m.startswith("gpu100_net") and not m.startswith("gpu100_net_torch_graph"))
            graphs = [by[m]["ms"] for m in by if m.startswith("gpu100_net_torch_graph")]
            graph = min(graphs) if graphs else None
            best_op = min(eager, graph) if graph else eager
            lines.append(f"| {n} | {eager:.3f} | {'-' if graph is None else f'{graph:.3f}'} | "
                         f"{best_row} {rows_b[best_row]:.3f} | {best_op / rows_b[best_row]:.2f} |")
    if data.get("compile"):
        lines += ["", "| N | model | eager ms | torch.compile(fullgraph=True) ms | compiled vs eager |",
                  "|---:|---|---:|---:|---:|"]
        for c in data["compile"]:
            lines.append(f"| {c['batch']} | {c.get('model', 'custom')} | {c['eager_ms']:.3f} | "
                         f"{c['compiled_ms']:.3f} | {c['eager_ms'] / c['compiled_ms']:.2f}x |")
    return "\n".join(lines) + "\n"


def render(json_path):
    data = json.loads((ROOT / json_path).read_text())
    # Columns that are empty for every case are left out.
    cols = [c for c in COLUMNS if c[0] in ("variant", "ok") or any(x.get(c[0]) is not None for x in data["cases"])]
    lines = [
        header(data, json_path),
        "",
        "| " + " | ".join(c[1] for c in cols) + " |",
        "|" + "|".join("---" if c[0] in ("variant", "precision", "shape", "ok") else "---:" for c in cols) + "|",
    ]
    for case in data["cases"]:
        lines.append("| " + " | ".join(cell(case, c[0], c[2]) for c in cols) + " |")
    notes = [f"- `{c['variant']}`: {c['note']}" for c in data["cases"] if c.get("note")]
    if notes:
        lines += [""] + notes
    return "\n".join(lines) + "\n"


def regenerate(text):
    def one(m):
        mode = (m.group("mode") or "").strip()
        if mode == "sweep":
            body = render_sweep(m.group("path"))
        elif mode == "throughput":
            body = render_throughput(m.group("path"))
        elif mode == "layers":
            body = render_layers(m.group("path"))
        elif mode == "ladder":
            body = render_ladder(m.group("path"))
        elif mode == "mcconv":
            body = render_mcconv(m.group("path"))
        elif mode == "gpus":
            body = render_gpus(m.group("path"))
        elif mode == "allreduce":
            body = render_allreduce(m.group("path"))
        elif mode == "torch-checks":
            body = render_torch_checks(m.group("path"))
        elif mode == "torch-layers":
            body = render_torch_layers(m.group("path"))
        elif mode.startswith("torch-"):
            body = render_torch_times(m.group("path"), mode[len("torch-"):])
        else:
            body = render(m.group("path"))
        return m.group(1) + body + m.group(5)

    return BLOCK.sub(one, text)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if a table differs from its JSON")
    args = parser.parse_args()
    stale = []
    for name in FILES:
        path = ROOT / name
        if not path.exists():
            continue
        old = path.read_text()
        try:
            new = regenerate(old)
        except (OSError, KeyError, ValueError) as e:
            print(f"{name}: cannot render a results table: {e}", file=sys.stderr)
            return 1
        if new == old:
            continue
        if args.check:
            stale.append(name)
            sys.stdout.writelines(difflib.unified_diff(old.splitlines(True), new.splitlines(True), name, name + " (from JSON)"))
        else:
            path.write_text(new)
            print(f"updated {name}")
    if stale:
        print(f"\n{', '.join(stale)}: the results tables differ from results/*.json; run scripts/gen_log.py", file=sys.stderr)
        return 1
    if args.check:
        print("results tables agree with the JSON")
    return 0


if __name__ == "__main__":
    sys.exit(main())
