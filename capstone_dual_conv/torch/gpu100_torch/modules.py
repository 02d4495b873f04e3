"""MCConv2d: the dual-stream convolution of a multi-channel network as a drop-in nn.Module."""
import torch
import torch.nn as nn
import torch.nn.functional as F

from . import _library  # noqa: F401  (loads the operators)


def _pair(v):
    return tuple(v) if isinstance(v, (tuple, list)) else (v, v)


class MCConv2d(nn.Module):
    """Two convolutions of one geometry, one per stream: forward(x_rgb, x_depth) returns
    (conv_rgb(x_rgb), conv_depth(x_depth)). The streams may have different input channels
    (in_channels=(3, 1) at a stem) and share the output channels, kernel, stride and padding.

    use_custom_kernel=False runs them one after the other with F.conv2d. use_custom_kernel=True
    runs torch.ops.gpu100.dual_conv2d, both streams in one launch, wherever that operator takes
    the call: CUDA tensors outside autograd (no_grad or inference_mode, or nothing requiring a
    gradient); bfloat16 with channels_last tensors and weights, one channel count, C % 8 == 0;
    or float32 (TF32 as torch.backends.cudnn.allow_tf32 says; contiguous NCHW, or channels_last
    on Hopper). Elsewhere, F.conv2d runs (the same numbers, within each path's rounding), and
    custom_kernel_takes() says why.

    forward(x_rgb, x_depth, bn=None, residual=None, relu=False) also applies what follows the
    convolution in a ResNet: an MCBatchNorm2d, the shortcut's (r, d) added, and ReLU, as PyTorch
    ops. After fuse_bn(bn) (eval mode: the BatchNorm's running statistics folded into the
    weights and a bias), that BatchNorm is folded away: F.conv2d runs with the folded weights,
    and the custom kernel takes the bias, the residual and the ReLU into its epilogue, so the
    whole layer is one launch for both streams.
    """

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, bias=False,
                 use_custom_kernel=False, device=None, dtype=None):
        super().__init__()
        c_rgb, c_depth = _pair(in_channels)
        k = _pair(kernel_size)
        self.stride, self.padding = int(stride), int(padding)
        kw = dict(kernel_size=k, stride=self.stride, padding=self.padding, bias=bias,
                  device=device, dtype=dtype)
        self.rgb = nn.Conv2d(c_rgb, out_channels, **kw)
        self.depth = nn.Conv2d(c_depth, out_channels, **kw)
        self.use_custom_kernel = use_custom_kernel
        self.bn_folded = False  # fuse_bn has run: forward's bn is in the folded_* buffers
        # The folded weights (the convolution's dtype), biases in float32 for the kernel's
        # epilogue and in the convolution's dtype for F.conv2d.
        for name in ("w_rgb", "b_rgb", "bc_rgb", "w_depth", "b_depth", "bc_depth"):
            self.register_buffer(f"folded_{name}", None, persistent=False)

    @torch.no_grad()
    def fuse_bn(self, bn):
        """Folds bn, the eval-mode MCBatchNorm2d that follows this convolution, into folded
        weights (the convolution's dtype and memory format) and float32 biases, which forward
        then uses in place of its bn argument (pass that same bn). Run it again after changing
        the weights or the statistics."""
        self.folded_w_rgb, self.folded_b_rgb = fold_bn(self.rgb, bn.rgb)
        self.folded_w_depth, self.folded_b_depth = fold_bn(self.depth, bn.depth)
        self.folded_bc_rgb = self.folded_b_rgb.to(self.rgb.weight.dtype)
        self.folded_bc_depth = self.folded_b_depth.to(self.depth.weight.dtype)
        self.bn_folded = True
        return self

    def custom_kernel_takes(self, x_rgb, x_depth):
        """(True, "") when forward would run gpu100::dual_conv2d on these inputs, else
        (False, why)."""
        tensors = (x_rgb, x_depth, self.rgb.weight, self.depth.weight)
        if not all(t.is_cuda for t in tensors):
            return False, "a tensor is not on the GPU"
        if torch.is_grad_enabled() and any(t.requires_grad for t in tensors):
            return False, "autograd is recording (the operator has no backward)"
        dt = x_rgb.dtype
        if any(t.dtype != dt for t in tensors):
            return False, "the inputs and weights differ in dtype"
        if dt == torch.bfloat16:
            cl = torch.channels_last
            if not all(t.is_contiguous(memory_format=cl) for t in tensors):
                return False, "bfloat16 needs channels_last tensors and weights"
            c = x_rgb.shape[1]
            if x_depth.shape[1] != c or c % 8 != 0 or self.rgb.out_channels % 2 != 0:
                return False, "bfloat16 needs one channel count, C % 8 == 0 and an even K"
            return True, ""
        if dt == torch.float32:
            if all(t.is_contiguous() for t in tensors):
                return True, ""
            return False, "float32 takes contiguous NCHW tensors here"
        return False, f"{dt} is not float32 or bfloat16"

    def forward(self, x_rgb, x_depth, bn=None, residual=None, relu=False):
        folded = bn is not None and self.bn_folded
        if folded:
            w = (self.folded_w_rgb, self.folded_w_depth)
            b = (self.folded_b_rgb, self.folded_b_depth)
        else:
            w, b = (self.rgb.weight, self.depth.weight), (self.rgb.bias, self.depth.bias)
        if self.use_custom_kernel and self.custom_kernel_takes(x_rgb, x_depth)[0]:
            if folded or (bn is None and residual is None and not relu):
                # The whole layer in one launch: bias, residual and ReLU in the epilogue.
                res = (None, None) if residual is None else residual
                return torch.ops.gpu100.dual_conv2d(
                    x_rgb, x_depth, w[0], w[1], b[0], b[1], self.stride, self.padding,
                    res[0], res[1], "relu" if relu else "none")
            y = torch.ops.gpu100.dual_conv2d(x_rgb, x_depth, w[0], w[1], b[0], b[1],
                                             self.stride, self.padding)
        else:
            if folded:
                b = (self.folded_bc_rgb, self.folded_bc_depth)
            y = tuple(F.conv2d(x, wi, bi, self.stride, self.padding)
                      for x, wi, bi in zip((x_rgb, x_depth), w, b))
        if bn is not None and not folded:
            y = bn(*y)
        if residual is not None:
            y = (y[0] + residual[0], y[1] + residual[1])
        if relu:
            y = (F.relu(y[0]), F.relu(y[1]))
        return y

    def extra_repr(self):
        return (f"use_custom_kernel={self.use_custom_kernel}"
                + (", BatchNorm folded" if self.bn_folded else ""))


@torch.no_grad()
def fold_bn(conv, bn):
    """(weight, bias) of conv followed by an eval-mode BatchNorm2d, folded into one convolution:
    what gpu100::conv_bn_act takes. The weight keeps conv's dtype and memory format; the bias is
    float32."""
    scale = bn.weight.float() / torch.sqrt(bn.running_var.float() + bn.eps)
    shift = bn.bias.float() - bn.running_mean.float() * scale
    bias = shift if conv.bias is None else conv.bias.float() * scale + shift
    w = conv.weight.float() * scale.view(-1, 1, 1, 1)
    fmt = (torch.channels_last if conv.weight.is_contiguous(memory_format=torch.channels_last)
           and not conv.weight.is_contiguous() else torch.contiguous_format)
    return w.to(conv.weight.dtype).contiguous(memory_format=fmt), bias.contiguous()
