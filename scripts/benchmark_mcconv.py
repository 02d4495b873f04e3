#!/usr/bin/env python3
"""The capstone's original benchmark: a PyTorch MC-ResNet18 (RGB 3 x 416 x 544, depth 1 x 416 x 544,
15 classes) with its dual layers run three ways, at batch 1 and 32 to 512, in bf16:

  sequential   MCResNet18Torch, every MCConv2d as two F.conv2d (cuDNN), eval mode, bf16 weights and
               activations, channels_last, cudnn.benchmark on;
  custom       the same model with use_custom_kernel=True: only the dual layers swapped for
               torch.ops.gpu100.dual_conv2d (the stem's 3- and 1-channel pair stays on F.conv2d:
               the bf16 kernels need C % 8 == 0); BN, ReLU, the pools and the FC stay PyTorch's;
  sequential_folded   the model after fuse_bn(): every BatchNorm folded into its convolution's
               weights and bias, F.conv2d (cuDNN) then PyTorch's add and ReLU;
  custom_fused the folded model with use_custom_kernel=True: each dual layer one
               gpu100::dual_conv2d with its bias, residual and ReLU in the epilogue;
  gpu100_net   the whole forward on the project's kernels, gpu100_torch.MCResNet18 (BN folded,
               the epilogues fused; fp32 NCHW images in), in its trunk modes, called eagerly (it
               replays its own CUDA graph) and, with --graph, captured in a torch.cuda.graph
               (gpu100_net_torch_graph_<trunks>).
With --compile, torch.compile(fullgraph=True) of the custom and custom_fused models at
--compile-batches (their operators traced through their Meta functions), against the same model
in eager mode.
With --binary, capstone_mc_resnet18 times its own bf16 rows at batch 1 and 32 in the same
session: the whole-network operator is set beside the C++ binary's best.

Every mode's logits are checked against the sequential model's (rel L2 <= 3e-2, bf16) before it
is timed. Times: as the project's timer takes them (the L2 flushed before each call, outside
the events), the median of CUDA-event-timed calls after warm-ups, iterations cut so a point takes
about --max-seconds.

  python3 scripts/benchmark_mcconv.py [--out results/h100/mcconv_benchmark.json]
      [--batches 1,32,64,128,256,512] [--binary build/capstone_dual_conv/capstone_mc_resnet18]
      [--compile --compile-batches 1,32] [--graph]
Exit: 0 every check passed, 1 a check failed, 2 bad setup (no PyTorch, no extension), 3 no GPU.
"""
import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "capstone_dual_conv", "torch"))
from torch_baselines import git_describe  # noqa: E402

H, W, CLASSES = 416, 544, 15
TOL = 3e-2


def parse_list(text):
    return [int(v) for v in text.split(",") if v.strip()]


_FLUSH = None


def time_ms(fn, iters, warmup, max_seconds, torch):
    """The project's timer (common/src/timer.cpp) in Python: before each repeat, a buffer of
    twice the L2's size is written (outside the events) so no call is timed out of a warm cache;
    the median of the CUDA-event times."""
    global _FLUSH
    if _FLUSH is None:
        l2 = torch.cuda.get_device_properties(torch.cuda.current_device()).L2_cache_size
        _FLUSH = torch.empty(2 * max(l2, 1 << 20), dtype=torch.uint8, device="cuda")
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def once():
        _FLUSH.zero_()
        start.record()
        fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end)

    one = once()
    iters = max(5, min(iters, int(max_seconds * 1000 / max(one, 1e-3))))
    times = sorted(once() for _ in range(iters))
    return times[len(times) // 2], iters


def rel_l2(got, ref):
    got, ref = got.double(), ref.double()
    return float((got - ref).norm() / ref.norm())


def run_binary(binary, batches):
    """capstone_mc_resnet18's bf16 rows at these batches: {batch: {row: ms}}."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "b.json")
        cmd = [binary, "--precision", "bf16", "--batch", ",".join(map(str, batches)), "--iters",
               "20", "--json", path]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}: "
                               f"{proc.stdout[-500:]}{proc.stderr[-500:]}")
        data = json.load(open(path))
    out = {}
    for c in data["cases"]:
        if not c["variant"].startswith("own_bf16") or c.get("ms") is None:
            continue
        n = int(c["shape"].split()[0][2:])
        out.setdefault(n, {})[c["variant"]] = c["ms"]
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default="results/h100/mcconv_benchmark.json")
    p.add_argument("--batches", type=parse_list, default=parse_list("1,32,64,128,256,512"))
    p.add_argument("--compile", action="store_true")
    p.add_argument("--compile-batches", type=parse_list, default=parse_list("1,32"))
    p.add_argument("--graph", action="store_true", help="also the network op in a torch graph")
    p.add_argument("--binary", help="capstone_mc_resnet18, to time beside the operator")
    p.add_argument("--iters", type=int, default=30)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--max-seconds", type=float, default=1.5)
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()
    try:
        import torch
        import gpu100_torch
        from gpu100_torch import MCResNet18, MCResNet18Torch
        from export_weights import MCResNet18 as TwoTrunk, randomize
    except (ImportError, FileNotFoundError, OSError) as e:
        print(f"benchmark_mcconv: {e}", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("benchmark_mcconv: no CUDA GPU", file=sys.stderr)
        return 3
    torch.backends.cudnn.benchmark = True
    dev = torch.device("cuda")
    cl = torch.channels_last
    # The weights: export_weights' seeded two-trunk model, loaded into the MCConv2d model.
    two = randomize(TwoTrunk(CLASSES), args.seed)
    model = MCResNet18Torch(CLASSES)
    model.load_trunk_state_dict(two.state_dict())
    model = model.eval().to(dev).to(torch.bfloat16).to(memory_format=cl)
    folded = MCResNet18Torch(CLASSES)
    folded.load_state_dict(model.state_dict())
    folded = folded.eval().to(dev).to(torch.bfloat16).to(memory_format=cl).fuse_bn()
    nets = {t: MCResNet18.from_torch(two, "bf16", t) for t in ("streams", "dual")}
    result = {
        "gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(), "git": git_describe(),
        "timestamp": datetime.datetime.now().isoformat(timespec="seconds"),
        "library": gpu100_torch.library_path(), "size": [H, W], "classes": CLASSES,
        "precision": "bf16", "tolerance_rel_l2": TOL, "rows": [], "binary": {}, "compile": []}
    failed = False

    def save():
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)

    gen = torch.Generator(device="cpu").manual_seed(args.seed + 1)
    for n in args.batches:
        rgb = (torch.rand(n, 3, H, W, generator=gen) * 2 - 1).to(dev)
        depth = (torch.rand(n, 1, H, W, generator=gen) * 2 - 1).to(dev)
        rgb16, depth16 = (t.to(torch.bfloat16).contiguous(memory_format=cl) for t in (rgb, depth))
        modes = {
            "sequential": lambda: model.set_custom_kernel(False)(rgb16, depth16),
            "custom": lambda: model.set_custom_kernel(True)(rgb16, depth16),
            "sequential_folded": lambda: folded.set_custom_kernel(False)(rgb16, depth16),
            "custom_fused": lambda: folded.set_custom_kernel(True)(rgb16, depth16),
        }
        for t, net in nets.items():
            modes[f"gpu100_net_{t}"] = (lambda net=net: net(rgb, depth))
        if args.graph:
            for t, net in nets.items():
                with torch.no_grad():
                    net(rgb, depth)
                    g = torch.cuda.CUDAGraph()
                    with torch.cuda.graph(g):
                        graphed_out = net(rgb, depth)
                modes[f"gpu100_net_torch_graph_{t}"] = (
                    lambda g=g, out=graphed_out: (g.replay(), out)[1])
        ref = None
        for mode, fn in modes.items():
            row = {"batch": n, "mode": mode}
            try:
                with torch.no_grad():
                    out = fn().float()
                    if ref is None:
                        ref = out.clone()
                    row["rel_l2_vs_sequential"] = rel_l2(out, ref)
                    row["ok"] = row["rel_l2_vs_sequential"] <= TOL
                    ms, iters = time_ms(fn, args.iters, args.warmup, args.max_seconds, torch)
                row.update(ms=ms, iters=iters, images_per_s=n * 1000.0 / ms, status="ok")
                failed |= not row["ok"]
            except torch.cuda.OutOfMemoryError:
                row.update(status="out of memory", ok=None)
                torch.cuda.empty_cache()
            result["rows"].append(row)
            print(f"N={n:4d} {mode:24s} " + (f"{row['ms']:9.3f} ms  {row['images_per_s']:9.1f} img/s"
                  f"  rel L2 {row['rel_l2_vs_sequential']:.1e} {'PASS' if row['ok'] else 'FAIL'}"
                  if row["status"] == "ok" else row["status"]), flush=True)
        save()
        del rgb, depth, rgb16, depth16
        torch.cuda.empty_cache()
    if args.compile:
        for n in args.compile_batches:
            rgb16 = (torch.rand(n, 3, H, W, generator=gen) * 2 - 1).to(dev, torch.bfloat16)
            depth16 = (torch.rand(n, 1, H, W, generator=gen) * 2 - 1).to(dev, torch.bfloat16)
            rgb16, depth16 = (t.contiguous(memory_format=cl) for t in (rgb16, depth16))
            for name, m in (("custom", model), ("custom_fused", folded)):
                m.set_custom_kernel(True)
                torch._dynamo.reset()
                compiled = torch.compile(m, fullgraph=True)
                with torch.no_grad():
                    want = m(rgb16, depth16).float()
                    got = compiled(rgb16, depth16).float()
                    eager_ms, _ = time_ms(lambda: m(rgb16, depth16), args.iters, args.warmup,
                                          args.max_seconds, torch)
                    comp_ms, _ = time_ms(lambda: compiled(rgb16, depth16), args.iters,
                                         args.warmup, args.max_seconds, torch)
                row = {"batch": n, "model": name, "eager_ms": eager_ms, "compiled_ms": comp_ms,
                       "rel_l2_vs_eager": rel_l2(got, want), "fullgraph": True}
                row["ok"] = row["rel_l2_vs_eager"] <= TOL
                failed |= not row["ok"]
                result["compile"].append(row)
                print(f"N={n:4d} {name} eager {eager_ms:.3f} ms, torch.compile(fullgraph=True) "
                      f"{comp_ms:.3f} ms, rel L2 {row['rel_l2_vs_eager']:.1e}", flush=True)
                save()
    if args.binary:
        bins = [b for b in (1, 32) if b in args.batches]
        result["binary"] = {str(k): v for k, v in run_binary(args.binary, bins).items()}
        for k, v in result["binary"].items():
            print(f"binary N={k}: " + ", ".join(f"{r} {ms:.3f} ms" for r, ms in v.items()))
    save()
    print(f"wrote {args.out}; {'a check FAILED' if failed else 'every check passed'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
