#!/usr/bin/env python3
"""What PyTorch reaches on this GPU for the curriculum's shapes: the library figures the docs
compare against, measured by the project itself (run where PyTorch and a GPU are, e.g. the H100).

  python3 scripts/torch_baselines.py [--out results/h100/torch_baselines.json] [--quick]

Cases (median of CUDA-event-timed runs after warm-ups, inputs fixed, nothing allocated in the
timed region except what the PyTorch call itself allocates):
  - copy: a 1 GiB device-to-device copy (the bandwidth ceiling; bytes read + written);
  - sdpa_<backend>: torch.nn.functional.scaled_dot_product_attention in bf16, B 8, H 16, with
    the flash (FlashAttention-2) and cudnn backends forced, at day05's shapes, causal and not;
    TFLOP/s count 4 B H S^2 D, half of it when causal (as day05 does);
  - sdpa_bwd_<backend>: the same call's backward alone (torch.autograd.grad of the output with a
    fixed dO, the forward done once outside the timed region), at S 2048 D 64 and S 4096 / 8192
    D 128, causal and not; TFLOP/s count the backward's five GEMMs, 10 B H S^2 D (2.5x the
    forward's), half of it when causal;
  - sdpa_step_<backend>: forward plus backward of one layer (B 8, H 16, S 2048, D 128, causal),
    the training step of day05's attention; 14 B H S^2 D, half of it causal;
  - layernorm / rmsnorm: torch.nn.functional.layer_norm / rms_norm at day07's shapes, fp32 and
    bf16; GB/s count x read once and y written once;
  - cumsum / sum: torch.cumsum (CUB's scan) and torch.sum at 2^28 fp32, day06's size.
Each case also gives its % of the copy ceiling measured in the same run, where that applies.
"""
import argparse
import datetime
import json
import os
import subprocess
import sys


def git_describe():
    env = os.environ.get("GPU100_GIT")
    if env:
        return env
    try:
        return subprocess.check_output(["git", "describe", "--always", "--dirty"], text=True,
                                       stderr=subprocess.DEVNULL).strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="results/h100/torch_baselines.json")
    parser.add_argument("--quick", action="store_true", help="fewer repeats (a smoke run)")
    args = parser.parse_args()
    try:
        import torch
        import torch.nn.functional as F
    except ImportError:
        print("torch_baselines: PyTorch is not installed here (pip install torch)", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("torch_baselines: no CUDA GPU found", file=sys.stderr)
        return 3
    from torch.nn.attention import SDPBackend, sdpa_kernel

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device("cuda")
    warmup, iters = (2, 5) if args.quick else (10, 50)

    def time_ms(fn, heavy=False):
        # Each timed run behind about 200 us of GPU spin (torch.cuda._sleep), so that the start
        # event is not taken while the GPU waits for the host to dispatch fn: a short kernel's
        # time would otherwise carry its Python call's host time.
        n = max(5, iters // 2) if heavy else iters
        for _ in range(warmup):
            fn()
        torch.cuda.synchronize()
        times = []
        for _ in range(n):
            start = torch.cuda.Event(enable_timing=True)
            stop = torch.cuda.Event(enable_timing=True)
            if hasattr(torch.cuda, "_sleep"):
                torch.cuda._sleep(400_000)
            start.record()
            fn()
            stop.record()
            stop.synchronize()
            times.append(start.elapsed_time(stop))
        times.sort()
        return times[len(times) // 2], times[0]

    cases = []

    def add(name, ms, ms_min, gbytes=None, gflop=None, note=None):
        row = {"case": name, "ms": round(ms, 4), "ms_min": round(ms_min, 4)}
        if gbytes is not None:
            row["gbps"] = round(gbytes / (ms * 1e-3), 1)
        if gflop is not None:
            row["tflops"] = round(gflop / (ms * 1e-3) / 1e3, 1)
        if note:
            row["note"] = note
        cases.append(row)
        print(f"{name:<40} {ms:9.4f} ms" + (f" {row['gbps']:8.1f} GB/s" if "gbps" in row else "")
              + (f" {row['tflops']:7.1f} TFLOP/s" if "tflops" in row else ""), flush=True)
        return row

    # The copy ceiling: 1 GiB read + 1 GiB written.
    src = torch.empty(1 << 28, dtype=torch.float32, device=dev).uniform_(-1, 1)
    dst = torch.empty_like(src)
    ms, mn = time_ms(lambda: dst.copy_(src))
    ceiling = add("copy_1GiB", ms, mn, gbytes=2 * src.numel() * 4 / 1e9)["gbps"]
    del dst

    # Attention (day05): bf16, B 8, H 16.
    for s, d in [(1024, 64), (2048, 64), (4096, 128)]:
        q, k, v = (torch.randn(8, 16, s, d, device=dev, dtype=torch.bfloat16) for _ in range(3))
        for causal in (False, True):
            flop = 4 * 8 * 16 * s * s * d * (0.5 if causal else 1.0)
            for name, backend in (("flash", SDPBackend.FLASH_ATTENTION),
                                  ("cudnn", SDPBackend.CUDNN_ATTENTION)):
                label = f"sdpa_{name}_bf16_S{s}_D{d}" + ("_causal" if causal else "")
                try:
                    with sdpa_kernel([backend]):
                        ms, mn = time_ms(lambda: F.scaled_dot_product_attention(
                            q, k, v, is_causal=causal), heavy=s >= 4096)
                    add(label, ms, mn, gflop=flop / 1e9)
                except RuntimeError as e:  # a backend this build or GPU lacks
                    cases.append({"case": label, "ms": None, "note": f"not run: {str(e)[:120]}"})
        del q, k, v

    # Attention backward (day05), bf16, B 8, H 16: the gradients of Q, K and V from a fixed dO.
    backends = (("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION))
    for s, d in [(2048, 64), (4096, 128), (8192, 128)]:
        q, k, v = (torch.randn(8, 16, s, d, device=dev, dtype=torch.bfloat16, requires_grad=True)
                   for _ in range(3))
        dout = torch.randn(8, 16, s, d, device=dev, dtype=torch.bfloat16)
        for causal in (False, True):
            flop = 10 * 8 * 16 * s * s * d * (0.5 if causal else 1.0)
            for name, backend in backends:
                label = f"sdpa_bwd_{name}_bf16_S{s}_D{d}" + ("_causal" if causal else "")
                try:
                    with sdpa_kernel([backend]):
                        out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                        ms, mn = time_ms(lambda: torch.autograd.grad(
                            out, (q, k, v), dout, retain_graph=True), heavy=s >= 4096)
                    add(label, ms, mn, gflop=flop / 1e9)
                except RuntimeError as e:  # a backend this build or GPU lacks
                    cases.append({"case": label, "ms": None, "note": f"not run: {str(e)[:120]}"})
                out = None
        del q, k, v, dout
    # One layer's training step: forward and backward, B 8, H 16, S 2048, D 128, causal.
    s, d = 2048, 128
    q, k, v = (torch.randn(8, 16, s, d, device=dev, dtype=torch.bfloat16, requires_grad=True)
               for _ in range(3))
    dout = torch.randn(8, 16, s, d, device=dev, dtype=torch.bfloat16)
    for name, backend in backends:
        label = f"sdpa_step_{name}_bf16_S{s}_D{d}_causal"

        def step():
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return torch.autograd.grad(out, (q, k, v), dout)

        try:
            with sdpa_kernel([backend]):
                ms, mn = time_ms(step)
            add(label, ms, mn, gflop=14 * 8 * 16 * s * s * d * 0.5 / 1e9)
        except RuntimeError as e:
            cases.append({"case": label, "ms": None, "note": f"not run: {str(e)[:120]}"})
    del q, k, v, dout

    # Normalisation (day07).
    for rows, cols in [(32768, 4096), (65536, 768)]:
        for dtype, tag in ((torch.float32, "fp32"), (torch.bfloat16, "bf16")):
            x = torch.randn(rows, cols, device=dev, dtype=dtype)
            w = torch.randn(cols, device=dev, dtype=dtype)
            b = torch.randn(cols, device=dev, dtype=dtype)
            gb = 2 * x.numel() * x.element_size() / 1e9
            ms, mn = time_ms(lambda: F.layer_norm(x, (cols,), w, b, 1e-5))
            row = add(f"layernorm_{tag}_{rows}x{cols}", ms, mn, gbytes=gb)
            row["pct_of_copy"] = round(100 * row["gbps"] / ceiling, 1)
            ms, mn = time_ms(lambda: F.rms_norm(x, (cols,), w, 1e-5))
            row = add(f"rmsnorm_{tag}_{rows}x{cols}", ms, mn, gbytes=gb)
            row["pct_of_copy"] = round(100 * row["gbps"] / ceiling, 1)
            del x

    # Scan and reduction (day06): 2^28 fp32.
    out = torch.empty_like(src)
    ms, mn = time_ms(lambda: torch.cumsum(src, 0, out=out))
    row = add("cumsum_2^28_fp32", ms, mn, gbytes=2 * src.numel() * 4 / 1e9)
    row["pct_of_copy"] = round(100 * row["gbps"] / ceiling, 1)
    ms, mn = time_ms(lambda: torch.sum(src))
    row = add("sum_2^28_fp32", ms, mn, gbytes=src.numel() * 4 / 1e9)
    row["pct_of_copy"] = round(100 * row["gbps"] / ceiling, 1)

    result = {
        "source": "scripts/torch_baselines.py",
        "gpu": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(),
        "git": git_describe(),
        "timestamp": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "timing": f"median of {iters} CUDA-event-timed runs after {warmup} warm-ups",
        "cases": cases,
    }
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
        f.write("\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
