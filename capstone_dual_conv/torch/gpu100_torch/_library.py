"""Finds and loads libgpu100_torch.so, and registers what the C++ side leaves to Python: a
backward for each operator that says there is none."""
import glob
import os

import torch

_LOADED = None
_OPS = ("dual_conv2d", "conv_bn_act", "mc_resnet18_forward")


def library_path():
    """$GPU100_TORCH_LIBRARY, else the newest build*/capstone_dual_conv/torch/libgpu100_torch.so
    of the repository this package sits in."""
    env = os.environ.get("GPU100_TORCH_LIBRARY")
    if env:
        if not os.path.isfile(env):
            raise FileNotFoundError(f"GPU100_TORCH_LIBRARY={env} is not a file")
        return env
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))))
    found = glob.glob(os.path.join(repo, "build*", "capstone_dual_conv", "torch",
                                   "libgpu100_torch.so"))
    if not found:
        raise FileNotFoundError(
            "libgpu100_torch.so not found: build the project where PyTorch is importable "
            f"(scripts/setup.sh in {repo}), or set GPU100_TORCH_LIBRARY to its path")
    return max(found, key=os.path.getmtime)


def _no_backward(name):
    def backward(ctx, *grads):
        raise RuntimeError(f"gpu100::{name} has no backward: the gpu100 operators are for "
                           "inference (use F.conv2d, or MCConv2d with use_custom_kernel=False, "
                           "to train)")
    return backward


def load_library():
    """Loads the operator library once; returns its path."""
    global _LOADED
    if _LOADED is None:
        path = library_path()
        torch.ops.load_library(path)
        for name in _OPS:
            torch.library.register_autograd(f"gpu100::{name}", _no_backward(name))
        _LOADED = path
    return _LOADED


load_library()
