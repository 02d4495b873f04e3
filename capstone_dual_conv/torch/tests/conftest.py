"""Shared helpers of the extension's tests. Every input is fresh random data (never zeros); every
output is compared with PyTorch in float64."""
import math
import os
import sys

import pytest
import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import gpu100_torch  # noqa: E402,F401  (loads the operators)

if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU", allow_module_level=True)

DEV = torch.device("cuda")
CL = torch.channels_last
# Relative L2 error bounds against float64: fp32 (FMA, Winograd's larger rounding included),
# TF32 (10 mantissa bits per operand), bf16 (the output rounded to 8 bits; inputs exact).
TOL = {"fp32": 2e-5, "tf32": 5e-3, "bf16": 1e-2}


@pytest.fixture(autouse=True)
def poisoned_allocator():
    """Outputs poisoned first. The operators take their outputs from PyTorch's caching allocator,
    so before each test its cached memory is released, refilled with NaN blocks in both of its
    pools (1 MB tensors: the small pool's 2 MB segments; one 256 MB block: the large pool, split
    for later requests) and freed again. An output element a kernel never writes then reads NaN,
    which fails every comparison, instead of a right answer an earlier call left there."""
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    nan = float("nan")
    small = [torch.full((1 << 18,), nan, device=DEV) for _ in range(8)]
    large = torch.full((64 << 20,), nan, device=DEV)
    del small, large
    yield


def is_hopper():
    return torch.cuda.get_device_capability() == (9, 0)


def require(what):
    """Skips the test where this build cannot run `what` ("tf32", "bf16", "tf32_nhwc") on this GPU
    (an sm_75 build has no tensor-core kernels, an sm_80 build no wgmma), as the C++ tests do."""
    why = torch.ops.gpu100.build_lacks(what)
    if why:
        pytest.skip(f"this build: {why}")


def mechanism_dtype():
    """(dtype, channels_last) for the tests of streams, graphs and torch.compile: bf16 NHWC where
    the build runs it, else fp32 NCHW (run with TF32 off), so every build checks them."""
    if torch.ops.gpu100.build_lacks("bf16"):
        return torch.float32, False
    return torch.bfloat16, True


def rand(*shape, seed, dtype=torch.float32, scale=1.0):
    g = torch.Generator(device="cpu").manual_seed(seed)
    return ((torch.rand(shape, generator=g) * 2 - 1) * scale).to(DEV, dtype)


def rel_l2(got, ref):
    got, ref = got.double(), ref.double()
    return ((got - ref).norm() / ref.norm().clamp_min(1e-30)).item()


class tf32:
    """with tf32(True): F.conv2d and the gpu100 operators multiply as TF32."""

    def __init__(self, on):
        self.on = on

    def __enter__(self):
        self.old = torch.backends.cudnn.allow_tf32
        torch.backends.cudnn.allow_tf32 = self.on

    def __exit__(self, *exc):
        torch.backends.cudnn.allow_tf32 = self.old


@torch.no_grad()
def randomize(model, seed):
    """Seeded weights: He-normal convs, BN weight and running_var in [0.5, 1.5], bias and
    running_mean in [-0.1, 0.1], Linear uniform +-1/sqrt(in); eval mode."""
    g = torch.Generator(device="cpu").manual_seed(seed)

    def uni(shape, lo, hi):
        return torch.rand(shape, generator=g) * (hi - lo) + lo

    for m in model.modules():
        if isinstance(m, nn.Conv2d):
            fan_in = m.in_channels * m.kernel_size[0] * m.kernel_size[1]
            m.weight.copy_(torch.randn(m.weight.shape, generator=g) * math.sqrt(2.0 / fan_in))
        elif isinstance(m, nn.BatchNorm2d):
            m.weight.copy_(uni(m.weight.shape, 0.5, 1.5))
            m.bias.copy_(uni(m.bias.shape, -0.1, 0.1))
            m.running_mean.copy_(uni(m.running_mean.shape, -0.1, 0.1))
            m.running_var.copy_(uni(m.running_var.shape, 0.5, 1.5))
        elif isinstance(m, nn.Linear):
            b = 1.0 / math.sqrt(m.in_features)
            m.weight.copy_(uni(m.weight.shape, -b, b))
            m.bias.copy_(uni(m.bias.shape, -b, b))
    return model.eval()
