#!/usr/bin/env python3
"""day05's backward rows against PyTorch autograd: a second reference, independent of the binary's.

  python3 scripts/torch_attention_grads.py [--build build]
                                           [--out results/h100/torch_attention_grads.json]

The binary checks every backward row against its own double-precision CPU reference. This script
checks the same outputs against another one: for each awkward shape (B 1, H 2; S = 1, 77, 777 and
1031, none a tile multiple; D = 64 and 128; causal and not) it runs

  day05_self_attention --backward --batch 1 --heads 2 --seq S --head-dim D --mask both
                       --save-grads FILE

(every backward variant the build has; each row is also checked by the binary), reads the inputs
and each row's dQ, dK, dV from FILE (scripts/tensor_file.py), and recomputes the gradients with
torch.autograd in float64 on the CPU: scaled_dot_product_attention(q, k, v, is_causal, scale =
1 / sqrt(D)), then autograd.grad with dO. The bf16 rows get the inputs rounded to bf16 first, as
the binary feeds them. A gradient passes when max |got - ref| <= tol x max |ref| (tol = 2e-2 for
the bf16 rows, 1e-4 for fp32; a gradient that is zero everywhere, as dQ and dK are at S = 1, must
be zero to 1e-6). Exit status: 0 all pass, 1 a mismatch or a failed binary, 2 no PyTorch.
"""
import argparse
import datetime
import json
import math
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tensor_file import read_tensor_file  # noqa: E402  (the script's own folder, just added)
from torch_baselines import git_describe  # noqa: E402

SHAPES = [(s, d) for d in (64, 128) for s in (1, 77, 777, 1031)]
TOLERANCE = {"bf16": 2e-2, "fp32": 1e-4}


def backward_precisions(binary):
    """{variant: 'bf16' | 'fp32'} from the binary's --list (the backward registry's lines)."""
    text = subprocess.run([binary, "--list"], capture_output=True, text=True, check=True).stdout
    out, inside = {}, False
    for line in text.splitlines():
        if line.startswith("the backward pass"):
            inside = True
            continue
        fields = line.split()
        if inside and len(fields) >= 2 and fields[1] in TOLERANCE:
            out[fields[0]] = fields[1]
    return out


def torch_reference(tensors, causal, bf16):
    """dQ, dK, dV (float64 numpy arrays) by torch.autograd, float64 on the CPU, from the saved
    inputs (rounded to bf16 first for the bf16 rows)."""
    import torch
    import torch.nn.functional as F

    def take(name):
        x = torch.from_numpy(tensors[name]).to(torch.float64)
        if bf16:
            x = x.to(torch.bfloat16).to(torch.float64)
        return x

    q, k, v, dout = (take(n) for n in ("q", "k", "v", "dout"))
    for x in (q, k, v):
        x.requires_grad_(True)
    out = F.scaled_dot_product_attention(q, k, v, is_causal=causal,
                                         scale=1.0 / math.sqrt(q.shape[-1]))
    return [g.detach().numpy() for g in torch.autograd.grad(out, (q, k, v), dout)]


def main():
    options = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    options.add_argument("--build", default="build", help="the build folder (default build)")
    options.add_argument("--out", default="", help="also write the results here as JSON")
    args = options.parse_args()
    try:
        import torch
    except ImportError:
        print("torch_attention_grads: PyTorch is not installed here (pip install torch)",
              file=sys.stderr)
        return 2
    binary = os.path.join(args.build, "day05_self_attention", "day05_self_attention")
    if not os.access(binary, os.X_OK):
        print(f"torch_attention_grads: {binary} is not built", file=sys.stderr)
        return 1
    return compare(binary, args.out, torch_reference, f"torch {torch.__version__}")


def compare(binary, out_path, reference, reference_label):
    """Runs the binary at every shape and compares each saved gradient with reference(tensors,
    causal, bf16); prints one line per gradient, writes out_path (when given); 0 or 1."""
    import numpy as np

    precisions = backward_precisions(binary)
    rows, failed = [], 0
    with tempfile.TemporaryDirectory() as tmp:
        for s, d in SHAPES:
            path = os.path.join(tmp, f"s{s}_d{d}.g100")
            cmd = [binary, "--backward", "--batch", "1", "--heads", "2", "--seq", str(s),
                   "--head-dim", str(d), "--mask", "both", "--iters", "1", "--warmup", "0",
                   "--save-grads", path]
            run = subprocess.run(cmd, capture_output=True, text=True)
            if run.returncode != 0:
                print(f"FAIL  S={s} D={d}: the binary exited {run.returncode}: "
                      f"{(run.stderr or run.stdout).strip().splitlines()[-1:]}")
                failed += 1
                continue
            tensors = read_tensor_file(path)
            names = sorted({n.rsplit(".", 2)[0] for n in tensors if n.count(".") == 2})
            for causal in (False, True):
                mask = "causal" if causal else "none"
                refs = {}
                for variant in names:
                    if f"{variant}.{mask}.dq" not in tensors:
                        continue  # refused this shape (the binary says why)
                    precision = precisions.get(variant, "bf16")
                    if precision not in refs:
                        refs[precision] = reference(tensors, causal, precision == "bf16")
                    tol = TOLERANCE[precision]
                    for g, ref in zip(("dq", "dk", "dv"), refs[precision]):
                        got = tensors[f"{variant}.{mask}.{g}"].astype(np.float64)
                        err = float(np.abs(got - ref).max())
                        scale = float(np.abs(ref).max())
                        if scale > 0:
                            ratio = err / (tol * scale)
                        else:  # zero everywhere (dQ and dK at S = 1): must be zero
                            ratio = 0.0 if err <= 1e-6 else math.inf
                        ok = ratio <= 1.0 and math.isfinite(err)
                        failed += 0 if ok else 1
                        rows.append({"variant": variant, "precision": precision, "seq": s,
                                     "head_dim": d, "causal": causal, "grad": g,
                                     "max_abs_err": err, "max_abs_ref": scale,
                                     "err_over_tol": ratio if math.isfinite(ratio) else None,
                                     "ok": ok})
                        print(f"{'PASS' if ok else 'FAIL'}  {variant:27s} S={s:<5d} D={d:<4d}"
                              f"{'causal' if causal else '      '} {g}: max|err| {err:.2e}, "
                              f"max|ref| {scale:.2e}, err/tol {ratio:.3f}")
    if out_path:
        result = {"script": "torch_attention_grads", "git": git_describe(),
                  "timestamp": datetime.datetime.now(datetime.timezone.utc).isoformat(),
                  "reference": f"{reference_label}: autograd, float64, CPU",
                  "rows": rows, "failed": failed}
        os.makedirs(os.path.dirname(os.path.abspath(out_path)), exist_ok=True)
        with open(out_path, "w") as f:
            json.dump(result, f, indent=1)
        print(f"wrote {out_path}")
    print(f"{len(rows)} gradients compared, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
