#!/usr/bin/env python3
"""capstone_mc_resnet18 against PyTorch on this GPU: are its logits right, and how fast is
PyTorch at the same work. Run where PyTorch and a GPU are (the H100), after building the binary:

  python3 scripts/torch_mc_resnet18.py [--out results/h100/mc_resnet18_vs_torch.json]
      [--binary build/capstone_dual_conv/capstone_mc_resnet18] [--skip-check] [--skip-timing]
      [--skip-compile] [--batches 1,8,32,64,128,256,512] [--resnet18-batches 1,4,8,16,32,64]
      [--compile-batches 1,32] [--compile-precisions bf16,tf32] [--layer-batch 32]
      [--check-n 2] [--seed 1] [--iters 50] [--warmup 10] [--models mc_resnet18,resnet18]

1. Check (per model: mc_resnet18 at 416 x 544, resnet18 at 224 x 224): random weights
   (export_weights.randomize) and a random input batch (uniform [-1, 1]) are written as tensor
   files; the binary runs each row on its own (own_<fp32|tf32|bf16>_<sequential|streams|dual>:
   --precision/--trunks/--variant; cudnn_<fp32|tf32|bf16>: --variant) and its "logits" are compared
   with PyTorch's in float64 on the GPU: rel L2 = ||got - ref|| / ||ref||, tolerances fp32 1e-4,
   tf32 5e-3, bf16 3e-2. PyTorch's own fp32, TF32 and bf16 (the timed bf16 model below) logits get
   the same measure, for scale; only the binary's rows decide the exit code.
2. Timing of PyTorch (no binary needed), its fastest path in each precision: eager fp32 (TF32
   off) and eager TF32; each of fp32, TF32 and bf16 with BN folded into the convs and the model
   and inputs channels_last, replayed in a CUDA graph (bf16 also eager); and torch.compile
   (max-autotune-no-cudagraphs) of the folded channels_last model replayed in a CUDA graph, in
   the precisions of --compile-precisions (bf16 and TF32), at --compile-batches.
   Median of CUDA-event-timed runs after warm-ups; iterations are cut so that one point takes about
   --max-seconds. cudnn.benchmark is on. FLOPs = 2 x the MACs of the convs and the FC.
3. Per layer (--layer-batch, default 32; 0 skips it): MC-ResNet18's four 3x3 stride-1 layers
   (l1 64 channels at 104 x 136 ... l4 512 at 13 x 17) as one F.conv2d each, channels_last,
   through cuDNN (cudnn.benchmark) in bf16 and TF32: the per-layer library figures the binary's
   --layers rows are set beside.
4. One JSON file (--out, written again after each part) and a summary on stdout.
--skip-timing skips the eager and graph modes, --skip-compile the compiled one. On the H100 the
check and those modes took about 6 minutes and the compiled mode (4 compiles) about 7: where a
command has a 10-minute limit, run the compile part on its own, into its own file
(--skip-check --skip-timing --out results/h100/mc_resnet18_vs_torch_compile.json).
Exit: 0 every checked row passed, 1 a row failed, 2 bad setup (no binary, no PyTorch), 3 no GPU.
"""
import argparse
import copy
import datetime
import gc
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_baselines import git_describe  # noqa: E402  (the script's own folder, just added)

try:
    import numpy as np
    from tensor_file import read_tensor_file, write_tensor_file
    import torch
    import torch.nn as nn
    import torchvision
    from torch.nn.utils.fusion import fuse_conv_bn_eval
    from torchvision.models.resnet import BasicBlock, ResNet
    from export_weights import build_model, export, randomize
    IMPORT_ERROR = None
except ImportError as e:  # reported by main(), so that --help works anywhere
    IMPORT_ERROR = e

SIZES = {"mc_resnet18": (416, 544), "resnet18": (224, 224)}
TRUNKS = {"mc_resnet18": ("sequential", "streams", "dual"), "resnet18": ("sequential",)}
PRECISIONS = ("fp32", "tf32", "bf16")
TOLERANCES = {"fp32": 1e-4, "tf32": 5e-3, "bf16": 3e-2}
# The summary's column titles of the timed modes (the JSON has the full names).
MODE_LABELS = {"eager_fp32": "eager fp32", "eager_tf32": "eager tf32",
               "fp32_cl_folded_graph": "fp32 + graph", "tf32_cl_folded_graph": "tf32 + graph",
               "bf16_cl_folded": "bf16 folded", "bf16_cl_folded_graph": "bf16 + graph",
               "compile_bf16_cl_folded_graph": "compile + graph",
               "compile_tf32_cl_folded_graph": "tf32 compile", "compile_fp32_cl_folded_graph":
               "fp32 compile"}
TAIL_LINES = 12  # lines of the binary's output kept for a row that did not pass


# ---------------------------------------------------------------- setup and models

def parse_batches(text):
    """'1,8,32' -> [1, 8, 32]; '' -> []."""
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma list of integers: {text!r}")
    if any(v < 1 for v in values):
        raise argparse.ArgumentTypeError(f"batch sizes must be >= 1: {text!r}")
    return values


def parse_precisions(text):
    values = [v for v in text.split(",") if v]
    if not values or any(v not in PRECISIONS for v in values):
        raise argparse.ArgumentTypeError(f"precisions are fp32, tf32 and bf16: {text!r}")
    return values


def parse_models(text):
    models = [m for m in text.split(",") if m]
    bad = [m for m in models if m not in ("mc_resnet18", "resnet18")]
    if not models or bad:
        raise argparse.ArgumentTypeError(
            f"models are mc_resnet18 and resnet18, comma-separated (got {text!r})")
    return models


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--binary", default="build/capstone_dual_conv/capstone_mc_resnet18")
    p.add_argument("--out", default="results/h100/mc_resnet18_vs_torch.json")
    p.add_argument("--batches", type=parse_batches, default="1,8,32,64,128,256,512",
                   help="MC-ResNet18 timing batches (416 x 544)")
    p.add_argument("--resnet18-batches", type=parse_batches, default="1,4,8,16,32,64",
                   help="ResNet-18 timing batches (224 x 224)")
    p.add_argument("--compile-batches", type=parse_batches, default="1,32",
                   help="batches of the torch.compile mode (both models)")
    p.add_argument("--compile-precisions", type=parse_precisions, default="bf16,tf32",
                   help="precisions of the torch.compile mode (bf16, tf32, fp32)")
    p.add_argument("--models", type=parse_models, default="mc_resnet18,resnet18",
                   help="the models timed (mc_resnet18, resnet18; the check covers both)")
    p.add_argument("--layer-batch", type=int, default=32,
                   help="batch of the per-layer cuDNN timings (0: skip them)")
    p.add_argument("--check-n", type=int, default=2, help="batch of the logits check")
    p.add_argument("--seed", type=int, default=1, help="weights: seed; inputs: seed + 1")
    p.add_argument("--iters", type=int, default=50, help="timed runs per point (at most)")
    p.add_argument("--warmup", type=int, default=10, help="warm-up runs per point (at most)")
    p.add_argument("--max-seconds", type=float, default=2.0,
                   help="cut iters (to >= 5) and warm-ups so that a point takes about this")
    p.add_argument("--row-timeout", type=int, default=300, help="seconds per binary run")
    p.add_argument("--workdir", help="tensor files go here and stay (default: a temp folder)")
    p.add_argument("--skip-check", action="store_true")
    p.add_argument("--skip-timing", action="store_true", help="skip the eager and graph modes")
    p.add_argument("--skip-compile", action="store_true")
    p.add_argument("--merge", action="store_true",
                   help="keep the checks and timings an earlier run wrote to --out that this run "
                        "does not redo (the compile part runs in a call of its own)")
    return p.parse_args()


def set_tf32(on):
    torch.backends.cuda.matmul.allow_tf32 = on
    torch.backends.cudnn.allow_tf32 = on


def make_inputs(model_name, n, h, w, seed):
    """The model's inputs by the spec's names, float32 on the CPU, uniform [-1, 1], seeded."""
    gen = torch.Generator(device="cpu").manual_seed(seed)
    channels = {"rgb": 3, "depth": 1} if model_name == "mc_resnet18" else {"image": 3}
    return {name: torch.rand(n, c, h, w, generator=gen) * 2 - 1 for name, c in channels.items()}


def fold_bn(model):
    """Folds every BatchNorm2d of torchvision's ResNet stem, BasicBlocks and downsample branches
    into the conv before it (fuse_conv_bn_eval: W' = W g / sqrt(v + eps), b' = beta - m g /
    sqrt(v + eps)) and puts nn.Identity in its place. The model must be in eval mode."""
    for m in list(model.modules()):
        if not isinstance(m, (ResNet, BasicBlock)):
            continue
        for conv_name, bn_name in (("conv1", "bn1"), ("conv2", "bn2")):
            conv, bn = getattr(m, conv_name, None), getattr(m, bn_name, None)
            if isinstance(conv, nn.Conv2d) and isinstance(bn, nn.BatchNorm2d):
                setattr(m, conv_name, fuse_conv_bn_eval(conv, bn))
                setattr(m, bn_name, nn.Identity())
        ds = getattr(m, "downsample", None)
        if isinstance(ds, nn.Sequential) and len(ds) == 2 and isinstance(ds[1], nn.BatchNorm2d):
            ds[0], ds[1] = fuse_conv_bn_eval(ds[0], ds[1]), nn.Identity()
    left = [name for name, m in model.named_modules() if isinstance(m, nn.BatchNorm2d)]
    if left:
        raise ValueError(f"fold_bn: {len(left)} BatchNorm2d left unfolded, e.g. {left[0]}")
    return model


def fp32_cl_model(model):
    """The timed fp32 / TF32 model: BN folded, fp32 weights, channels_last."""
    return fold_bn(model).to(memory_format=torch.channels_last)


def bf16_model(model):
    """The timed bf16 model: BN folded, bf16 weights, channels_last."""
    folded = fold_bn(copy.deepcopy(model).eval())
    return folded.to(dtype=torch.bfloat16, memory_format=torch.channels_last)


def flops_per_image(model, inputs):
    """2 x the MACs of every Conv2d and Linear in one forward of `inputs`, per image."""
    macs = 0

    def conv_hook(m, args, out):
        nonlocal macs
        macs += out.numel() * (m.in_channels // m.groups) * m.kernel_size[0] * m.kernel_size[1]

    def linear_hook(m, args, out):
        nonlocal macs
        macs += out.numel() * m.in_features

    hooks = [m.register_forward_hook(conv_hook if isinstance(m, nn.Conv2d) else linear_hook)
             for m in model.modules() if isinstance(m, (nn.Conv2d, nn.Linear))]
    try:
        with torch.no_grad():
            model(*inputs)
    finally:
        for h in hooks:
            h.remove()
    return 2.0 * macs / next(iter(inputs)).shape[0]


# ---------------------------------------------------------------- 1. the logits check

def torch_logits(model, inputs, dtype, channels_last=False):
    """The model's logits on the GPU at `dtype`, as float64 numpy (the model is copied)."""
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    m = copy.deepcopy(model).to("cuda", dtype=dtype, memory_format=fmt)
    xs = [x.to("cuda", dtype=dtype).contiguous(memory_format=fmt) for x in inputs.values()]
    with torch.no_grad():
        out = m(*xs)
    return out.to(torch.float64).cpu().numpy()


def rel_l2(got, ref):
    """||got - ref|| / ||ref|| in float64; None when got holds NaN or Inf."""
    got = np.asarray(got, dtype=np.float64)
    if not np.all(np.isfinite(got)):
        return None
    return float(np.linalg.norm(got - ref) / np.linalg.norm(ref))


def torch_rows(model_name, model, inputs, ref):
    """PyTorch's own error against its float64 logits, for scale (they decide nothing)."""
    rows = []
    for row, precision in (("torch_fp32", "fp32"), ("torch_tf32", "tf32"),
                           ("torch_bf16_folded_cl", "bf16")):
        set_tf32(precision == "tf32")
        if precision == "bf16":
            got = torch_logits(bf16_model(model), inputs, torch.bfloat16, channels_last=True)
        else:
            got = torch_logits(model, inputs, torch.float32)
        err = rel_l2(got, ref)
        ok = err is not None and err <= TOLERANCES[precision]
        rows.append({"model": model_name, "row": row, "source": "torch", "precision": precision,
                     "trunks": None, "rel_l2": err, "tol": TOLERANCES[precision], "pass": ok,
                     "status": "pass" if ok else "fail"})
    set_tf32(False)
    return rows


def binary_rows(model_name):
    """(row name, precision, trunks, the flags that select it) for each row the binary has."""
    # --variant too: --precision and --trunks alone also select the cuDNN row of that precision.
    rows = [(f"own_{p}_{t}", p, t, ["--precision", p, "--trunks", t, "--variant", f"own_{p}_{t}"])
            for p in PRECISIONS for t in TRUNKS[model_name]]
    rows += [(f"cudnn_{p}", p, None, ["--variant", f"cudnn_{p}"]) for p in PRECISIONS]
    return rows


def run_binary(cmd, timeout):
    """Runs cmd; returns (exit code or None, its stdout + stderr, seconds)."""
    start = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, errors="replace",
                              timeout=timeout)
        rc, text = proc.returncode, proc.stdout + proc.stderr
    except subprocess.TimeoutExpired:
        rc, text = None, f"timed out after {timeout} s"
    except OSError as e:
        rc, text = None, f"could not run: {e}"
    return rc, text, time.perf_counter() - start


def read_logits(path, shape):
    """(logits, None) from the binary's output file, or (None, why not)."""
    if not os.path.exists(path):
        return None, "no output file"
    try:
        logits = read_tensor_file(path).get("logits")
    except (OSError, ValueError) as e:
        return None, f"bad output file: {e}"
    if logits is None:
        return None, "output file has no tensor 'logits'"
    if logits.shape != shape:
        return None, f"logits shape {list(logits.shape)}, {list(shape)} expected"
    return logits, None


def check_binary_row(args, model_name, row_spec, files, ref):
    """Runs one row of the binary on the check's files and grades its logits.
    status: pass; fail (logits off, or the binary's own check failed: exit 1); rejected (exit 2,
    no logits: the binary refused the row); error (crash, timeout, missing output)."""
    row, precision, trunks, flags = row_spec
    out_path = os.path.join(files["dir"], f"{model_name}_{row}_logits.g100")
    if os.path.exists(out_path):
        os.remove(out_path)
    cmd = [args.binary, "--model", model_name, "--weights", files["weights"],
           "--input", files["input"], "--output", out_path, *flags, "--iters", "2", "--warmup", "1"]
    rc, text, seconds = run_binary(cmd, args.row_timeout)
    logits, why = read_logits(out_path, ref.shape)
    err = rel_l2(logits, ref) if logits is not None else None
    tol = TOLERANCES[precision]
    if logits is not None and err is None:
        why = "non-finite values in the logits"
    if rc == 0 and err is not None and err <= tol:
        status = "pass"
    elif logits is not None and rc in (0, 1):
        status = "fail"
        why = why or ("over tolerance" if err is None or err > tol else "the binary's check failed")
    elif rc == 2 and logits is None:
        status = "rejected"
    else:
        status = "error"
        if rc is None:  # it timed out or could not start
            why = text.strip()
    result = {"model": model_name, "row": row, "source": "binary", "precision": precision,
              "trunks": trunks, "rel_l2": err, "tol": tol, "pass": status == "pass",
              "status": status, "rc": rc, "seconds": round(seconds, 2)}
    if status != "pass":
        result["note"] = why or f"exit {rc}"
        result["output_tail"] = text.strip().splitlines()[-TAIL_LINES:]
    return result


def check_model(args, model_name, workdir):
    """All check rows of one model: PyTorch's own, then the binary's."""
    h, w = SIZES[model_name]
    model = randomize(build_model(model_name), args.seed)
    files = {"dir": workdir, "weights": os.path.join(workdir, f"{model_name}_weights.g100"),
             "input": os.path.join(workdir, f"{model_name}_input_n{args.check_n}.g100")}
    export(model, files["weights"])
    inputs = make_inputs(model_name, args.check_n, h, w, args.seed + 1)
    write_tensor_file(files["input"], [(k, v.numpy()) for k, v in inputs.items()])
    set_tf32(False)
    ref = torch_logits(model, inputs, torch.float64)
    rows = torch_rows(model_name, model, inputs, ref)
    for row_spec in binary_rows(model_name):
        result = check_binary_row(args, model_name, row_spec, files, ref)
        err = "-" if result["rel_l2"] is None else f"{result['rel_l2']:.2e}"
        print(f"check {model_name:<12} {result['row']:<22} {err:>9}  {result['status']}"
              + (f" ({result['note']})" if "note" in result else ""), flush=True)
        rows.append(result)
    return rows


# ---------------------------------------------------------------- 2. PyTorch's timing

# Clock cycles of GPU spin (torch.cuda._sleep) queued before each timed run of one convolution or
# one graph replay: about 200 us (the project's GpuTimer holds 200 us too), so that the GPU is
# still busy when the host has queued fn's kernels and the start event is not taken while the GPU
# waits for PyTorch's dispatch of them. Without it one convolution's time (60-200 us here) carried
# the tens of microseconds its Python call took on the host, which the project's own timings,
# taken inside back-to-back launches, do not carry. The eager network modes run without it: their
# host work per forward is part of what they cost (as for the binary's rows without a graph).
HOLD_CYCLES = 400_000


def hold_gpu():
    """Queue the spin above (where this PyTorch has torch.cuda._sleep)."""
    if hasattr(torch.cuda, "_sleep"):
        torch.cuda._sleep(HOLD_CYCLES)


def time_ms(fn, args, hold=True):
    """(median ms, min ms, timed runs) of fn by CUDA events, as torch_baselines.py times (with
    hold, each timed run behind hold_gpu), warm-ups and runs cut so that the point takes about
    args.max_seconds."""
    fn()  # the first call: cuDNN's algorithm search, a compile
    torch.cuda.synchronize()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    stop.record()
    stop.synchronize()
    budget = max(1, int(args.max_seconds * 1e3 / max(start.elapsed_time(stop), 1e-3)))
    for _ in range(min(args.warmup, max(1, budget // 4))):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(min(args.iters, max(5, budget))):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        if hold:
            hold_gpu()
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    times.sort()
    return times[len(times) // 2], times[0], len(times)


def graph_replay(fn, warmups=3):
    """Captures fn in a CUDA graph after warm-ups on a side stream; returns its replay."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(warmups):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_out = fn()
    return lambda: (graph.replay(), static_out)[1]


def quiet_inductor():
    """Stops max-autotune printing its table of candidate kernels for every conv (hundreds of
    lines); silently, where this torch names the switches otherwise."""
    try:
        from torch._inductor import config, select_algorithm
        config.max_autotune_report_choices_stats = False
        select_algorithm.PRINT_AUTOTUNE = False
    except (ImportError, AttributeError):
        pass


def timing_modes(model, skip_eager, skip_compile, compile_precisions):
    """[(mode, precision, model, compile?, graph?)] in the order they are timed."""
    modes = []
    if not skip_eager:
        folded = bf16_model(model)
        folded32 = fp32_cl_model(model)
        modes += [("eager_fp32", "fp32", model, False, False),
                  ("eager_tf32", "tf32", model, False, False),
                  ("fp32_cl_folded_graph", "fp32", folded32, False, True),
                  ("tf32_cl_folded_graph", "tf32", folded32, False, True),
                  ("bf16_cl_folded", "bf16", folded, False, False),
                  ("bf16_cl_folded_graph", "bf16", folded, False, True)]
    for p in ([] if skip_compile else compile_precisions):
        net = bf16_model(model) if p == "bf16" else fp32_cl_model(model)
        modes.append((f"compile_{p}_cl_folded_graph", p, net, True, True))
    return modes


def timing_inputs(model_name, batch, h, w, precision, channels_last=None):
    """Inputs on the GPU for a timed mode: fp32 NCHW, or channels_last (bf16 always)."""
    channels = (3, 1) if model_name == "mc_resnet18" else (3,)
    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    if channels_last is None:
        channels_last = precision == "bf16"
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    return [torch.empty(batch, c, h, w, device="cuda", dtype=dtype).uniform_(-1, 1)
            .contiguous(memory_format=fmt) for c in channels]


def time_point(args, model_name, mode, batch, flops):
    """One (model, mode, batch) point: a row with ms, images/s and TFLOP/s, or oom / error."""
    name, precision, model, compiled, graphed = mode
    h, w = SIZES[model_name]
    row = {"model": model_name, "mode": name, "precision": precision, "batch": batch,
           "h": h, "w": w}
    set_tf32(precision == "tf32")
    try:
        xs = timing_inputs(model_name, batch, h, w, precision, channels_last="_cl_" in name)
        net = model
        if compiled:
            quiet_inductor()
            torch._dynamo.reset()
            net = torch.compile(model, mode="max-autotune-no-cudagraphs", dynamic=False)
            print(f"  compiling {model_name} batch {batch} (minutes)...", flush=True)
        fn = lambda: net(*xs)  # noqa: E731
        t0 = time.perf_counter()
        if graphed:
            fn = graph_replay(fn)
        if compiled:
            row["setup_s"] = round(time.perf_counter() - t0, 1)
        ms, ms_min, n = time_ms(fn, args, hold=graphed)
        row.update(status="ok", ms=round(ms, 4), ms_min=round(ms_min, 4), iters=n,
                   images_per_s=round(batch / ms * 1e3, 1),
                   tflops=round(flops * batch / (ms * 1e-3) / 1e12, 2))
    except torch.cuda.OutOfMemoryError:
        row["status"] = "oom"
    except Exception as e:  # a mode this build cannot run (compile, capture): recorded
        row.update(status="error", note=f"{type(e).__name__}: {str(e).strip()[:300]}")
    finally:
        xs = net = fn = None  # noqa: F841  (free this point's memory before the next)
        gc.collect()
        torch.cuda.empty_cache()
    set_tf32(False)
    return row


def print_point(row):
    if row["status"] == "ok":
        cell = (f"{row['ms']:9.3f} ms {row['images_per_s']:9.1f} img/s "
                f"{row['tflops']:7.1f} TFLOP/s")
    else:
        cell = row["status"] + (f" ({row['note']})" if "note" in row else "")
    print(f"time  {row['model']:<12} {row['mode']:<30} N={row['batch']:<4} {cell}", flush=True)


def time_model(args, model_name, batches, compile_batches, results):
    """Times every mode of one model over its batches; appends rows to results."""
    h, w = SIZES[model_name]
    model = randomize(build_model(model_name), args.seed).to("cuda")
    flops = flops_per_image(model, timing_inputs(model_name, 1, h, w, "fp32"))
    results["flops_per_image"][model_name] = {"h": h, "w": w, "flops": flops}
    print(f"{model_name} at {h} x {w}: {flops / 1e9:.3f} GFLOP per image", flush=True)
    modes = timing_modes(model, args.skip_timing or not batches,
                         args.skip_compile or not compile_batches, args.compile_precisions)
    for mode in modes:
        oom_at = None
        for batch in (compile_batches if mode[3] else batches):
            if oom_at is not None:  # a larger batch than one that ran out of memory
                row = {"model": model_name, "mode": mode[0], "precision": mode[1], "batch": batch,
                       "h": h, "w": w, "status": "oom", "note": f"not run: batch {oom_at} was oom"}
            else:
                row = time_point(args, model_name, mode, batch, flops)
                oom_at = batch if row["status"] == "oom" else None
            results["timings"].append(row)
            print_point(row)
            write_json(args.out, results)


# ---------------------------------------------------------------- 3. the layers, one at a time

# MC-ResNet18's 3x3 stride-1 layers at 416 x 544: (name, channels, height, width).
LAYERS = (("l1", 64, 104, 136), ("l2", 128, 52, 68), ("l3", 256, 26, 34), ("l4", 512, 13, 17))


def time_layers(args, results):
    """Each layer's convolution alone through cuDNN (F.conv2d, channels_last, cudnn.benchmark),
    in bf16 and TF32, at --layer-batch: rows with ms and TFLOP/s."""
    n = args.layer_batch
    for name, c, h, w in LAYERS:
        flops = 2.0 * n * c * c * 9 * h * w
        for precision in ("bf16", "tf32"):
            set_tf32(precision == "tf32")
            dtype = torch.bfloat16 if precision == "bf16" else torch.float32
            row = {"layer": name, "precision": precision, "batch": n, "channels": c, "h": h,
                   "w": w, "flops": flops}
            try:
                x = torch.empty(n, c, h, w, device="cuda", dtype=dtype).uniform_(-1, 1) \
                    .contiguous(memory_format=torch.channels_last)
                wt = (torch.empty(c, c, 3, 3, device="cuda", dtype=dtype).uniform_(-1, 1) / 24) \
                    .contiguous(memory_format=torch.channels_last)
                ms, ms_min, iters = time_ms(lambda: torch.nn.functional.conv2d(x, wt, padding=1),
                                            args)
                row.update(status="ok", ms=round(ms, 5), ms_min=round(ms_min, 5), iters=iters,
                           tflops=round(flops / (ms * 1e-3) / 1e12, 1))
            except Exception as e:  # recorded, as the timing modes do
                row.update(status="error", note=f"{type(e).__name__}: {str(e).strip()[:300]}")
            finally:
                x = wt = None
                torch.cuda.empty_cache()
            set_tf32(False)
            results["layers"].append(row)
            cell = f"{row['ms']:.4f} ms {row['tflops']:.1f} TFLOP/s" if row["status"] == "ok" \
                else row["status"]
            print(f"layer {name} {precision} N={n}: {cell}", flush=True)
            write_json(args.out, results)


# ---------------------------------------------------------------- 4. the JSON and the summary

def read_previous(path):
    """The results an earlier run wrote to `path` ({} when there are none)."""
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def merge_previous(old, results):
    """--merge: what an earlier run wrote stays unless this run measured it again. A kept check,
    timing or layer row names the run it comes from ("from": that file's git and timestamp), since
    the file's own git and timestamp are this run's."""
    origin = {"git": old.get("git"), "timestamp": old.get("timestamp")}

    def keep(rows):
        return [{**r, "from": r.get("from", origin)} for r in rows]

    if not results["checks"]:
        results["checks"] = keep(old.get("checks", []))
        results["all_checks_pass"] = old.get("all_checks_pass")
    for key in ("flops_per_image",):
        results[key] = {**old.get(key, {}), **results[key]}
    if not results["layers"]:
        results["layers"] = keep(old.get("layers", []))
    redone = {(t["model"], t["mode"], t["batch"]) for t in results["timings"]}
    kept = [t for t in old.get("timings", []) if (t["model"], t["mode"], t["batch"]) not in redone]
    results["timings"] = keep(kept) + results["timings"]


def write_json(path, results):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump(results, f, indent=1)
        f.write("\n")


def new_results(args):
    """The JSON's header: what ran where; checks and timings are filled in as they run."""
    return {
        "source": "scripts/torch_mc_resnet18.py",
        "gpu": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "torchvision": torchvision.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(),
        "git": git_describe(),
        "timestamp": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "binary": args.binary,
        "seed": args.seed,
        "check": {"n": args.check_n, "reference": "PyTorch float64 on the GPU",
                  "metric": "rel_l2 = ||got - ref|| / ||ref||", "tolerances": TOLERANCES},
        "timing": f"median of up to {args.iters} CUDA-event-timed runs after up to {args.warmup} "
                  f"warm-ups, both cut to about {args.max_seconds} s a point (at least 5 runs); "
                  "cudnn.benchmark on; no_grad",
        "flops_per_image": {},
        "checks": [],
        "timings": [],
        "layers": [],
        "all_checks_pass": None,
        "complete": False,
    }


def summary_checks(checks):
    """Lines: per model and precision, each row's rel L2 (or its status), then the failures."""
    lines = ["checks: rel L2 vs PyTorch float64 (binary rows decide; torch_* are for scale)"]
    short = {"sequential": "seq", "streams": "streams", "dual": "dual"}
    for model_name in dict.fromkeys(c["model"] for c in checks):
        for p in PRECISIONS:
            cells = []
            for c in (c for c in checks if c["model"] == model_name and c["precision"] == p):
                label = short.get(c["trunks"]) or c["row"].split("_")[0]
                value = f"{c['rel_l2']:.1e}" if c["rel_l2"] is not None else "-"
                cells.append(f"{label} {value}" + ("" if c["pass"] else f" {c['status'].upper()}"))
            lines.append(f"  {model_name:<12} {p} (tol {TOLERANCES[p]:.0e}): " + ", ".join(cells))
    bad = [c for c in checks if c["source"] == "binary" and not c["pass"]]
    for c in bad[:8]:
        last = c.get("output_tail", [""])[-1:] or [""]
        lines.append(f"  {c['status']}: {c['model']} {c['row']} (exit {c['rc']}): {c['note']}; "
                     f"{last[0][:100]}")
    if len(bad) > 8:
        lines.append(f"  ... and {len(bad) - 8} more rows that did not pass (see the JSON)")
    return lines


def summary_timings(results):
    """Lines: per model, images/s by batch (rows) and mode (columns), then peak TFLOP/s."""
    lines = []
    for model_name, info in results["flops_per_image"].items():
        rows = [r for r in results["timings"] if r["model"] == model_name]
        modes = list(dict.fromkeys(r["mode"] for r in rows))
        if not modes:
            continue
        lines.append(f"PyTorch {model_name} {info['h']}x{info['w']}, images/s "
                     f"({info['flops'] / 1e9:.3f} GFLOP/image):")
        lines.append("  " + f"{'N':>5}" + "".join(f"{MODE_LABELS.get(m, m):>16}" for m in modes))
        for batch in sorted({r["batch"] for r in rows}):
            cells = []
            for m in modes:
                r = next((r for r in rows if r["mode"] == m and r["batch"] == batch), None)
                cells.append("-" if r is None else
                             f"{r['images_per_s']:.1f}" if r["status"] == "ok" else r["status"])
            lines.append("  " + f"{batch:>5}" + "".join(f"{c:>16}" for c in cells))
        peaks = [(m, max((r["tflops"] for r in rows if r["mode"] == m and r["status"] == "ok"),
                         default=None)) for m in modes]
        lines.append("  peak TFLOP/s: " + ", ".join(
            f"{MODE_LABELS.get(m, m)} " + ("-" if t is None else f"{t:.1f}") for m, t in peaks))
    return lines


def print_summary(results):
    lines = [f"== {results['gpu']}, torch {results['torch']}, cuDNN {results['cudnn']}, "
             f"git {results['git']}"]
    if results["checks"]:
        lines += summary_checks(results["checks"])
    lines += summary_timings(results)
    verdict = results["all_checks_pass"]
    lines.append("verdict: " + ("no check run" if verdict is None else
                                "all binary rows pass" if verdict else "a binary row did not pass"))
    print("\n".join(lines))


# ---------------------------------------------------------------- main

def preflight(args):
    """The exit code of a setup problem, or None."""
    if IMPORT_ERROR is not None:
        print(f"torch_mc_resnet18: {IMPORT_ERROR} (needs numpy, torch, torchvision)",
              file=sys.stderr)
        return 2
    runnable = os.path.isfile(args.binary) and os.access(args.binary, os.X_OK)
    if not args.skip_check and not runnable:
        print(f"torch_mc_resnet18: binary not found or not executable: {args.binary} (build it: "
              "cmake --build build --target capstone_mc_resnet18; or --skip-check for PyTorch "
              "timings alone)", file=sys.stderr)
        return 2
    if args.check_n < 1:
        print("torch_mc_resnet18: --check-n must be >= 1", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("torch_mc_resnet18: no CUDA GPU found", file=sys.stderr)
        return 3
    return None


def run_checks(args, results):
    workdir = args.workdir or tempfile.mkdtemp(prefix="mc_resnet18_check_")
    os.makedirs(workdir, exist_ok=True)
    try:
        for model_name in SIZES:
            results["checks"] += check_model(args, model_name, workdir)
            write_json(args.out, results)
    finally:
        if not args.workdir:
            shutil.rmtree(workdir, ignore_errors=True)
    results["all_checks_pass"] = all(c["pass"] for c in results["checks"]
                                     if c["source"] == "binary")


def main():
    args = parse_args()
    code = preflight(args)
    if code is not None:
        return code
    set_tf32(False)
    torch.backends.cudnn.benchmark = True
    results = new_results(args)
    previous = read_previous(args.out) if args.merge else {}
    if not args.skip_check:
        run_checks(args, results)
        write_json(args.out, results)
    if not (args.skip_timing and args.skip_compile):
        with torch.no_grad():
            if "mc_resnet18" in args.models:
                time_model(args, "mc_resnet18", args.batches, args.compile_batches, results)
            if "resnet18" in args.models:
                time_model(args, "resnet18", args.resnet18_batches, args.compile_batches, results)
    if args.layer_batch > 0:
        with torch.no_grad():
            time_layers(args, results)
    results["complete"] = True
    if args.merge:
        merge_previous(previous, results)
    write_json(args.out, results)
    print(f"wrote {args.out}")
    print_summary(results)
    return 1 if results["all_checks_pass"] is False else 0


if __name__ == "__main__":
    sys.exit(main())
