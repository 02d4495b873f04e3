"""gpu-100-days' capstone kernels from PyTorch.

    import gpu100_torch                       # loads libgpu100_torch.so: torch.ops.gpu100.*
    from gpu100_torch import MCConv2d, MCResNet18

The operators (inference only; calling backward through one raises):
    torch.ops.gpu100.dual_conv2d(rgb, depth, w_rgb, w_depth, b_rgb=None, b_depth=None,
                                 stride=1, padding=0) -> (out_rgb, out_depth)
    torch.ops.gpu100.conv_bn_act(x, w, bias, residual=None, act="relu", stride=1, padding=0)
    MCResNet18.from_torch(model, precision="bf16")(rgb, depth) -> logits

The library is found through $GPU100_TORCH_LIBRARY, else in the repository's build folders
(build*/capstone_dual_conv/torch/libgpu100_torch.so, the newest first): build the project with
PyTorch importable (scripts/setup.sh) first.
"""
from ._library import library_path, load_library
from .modules import MCConv2d, fold_bn
from .network import MCResNet18, trunk_state_dict
from .models import MCResNet18Torch

__all__ = ["MCConv2d", "MCResNet18", "MCResNet18Torch", "fold_bn", "library_path",
           "load_library", "trunk_state_dict"]
