"""MC-ResNet18 in PyTorch on MCConv2d: an RGB and a depth ResNet-18 trunk in lock-step, each
layer one MCConv2d, their 512 + 512 pooled features concatenated into Linear(1024, classes).

Its state_dict names put the stream last ("layer1.0.conv1.rgb.weight"); trunk_state_dict() turns
them into the two-trunk names ("rgb.layer1.0.conv1.weight") that torchvision's ResNet-18 and the
project's weight files use, and load_trunk_state_dict() takes those."""
import torch
import torch.nn as nn
import torch.nn.functional as F

from .modules import MCConv2d

STREAMS = ("rgb", "depth")


class MCBatchNorm2d(nn.Module):
    """One BatchNorm2d per stream."""

    def __init__(self, channels):
        super().__init__()
        self.rgb = nn.BatchNorm2d(channels)
        self.depth = nn.BatchNorm2d(channels)

    def forward(self, x_rgb, x_depth):
        return self.rgb(x_rgb), self.depth(x_depth)


class MCDownsample(nn.Module):
    """The 1x1 stride-2 shortcut and its BN; indices 0 and 1, as torchvision's Sequential."""

    def __init__(self, cin, cout, use_custom_kernel):
        super().__init__()
        self.add_module("0", MCConv2d(cin, cout, 1, stride=2, use_custom_kernel=use_custom_kernel))
        self.add_module("1", MCBatchNorm2d(cout))

    def forward(self, x_rgb, x_depth):
        return getattr(self, "0")(x_rgb, x_depth, bn=getattr(self, "1"))


class MCBasicBlock(nn.Module):
    def __init__(self, cin, cout, stride, use_custom_kernel):
        super().__init__()
        self.conv1 = MCConv2d(cin, cout, 3, stride, 1, use_custom_kernel=use_custom_kernel)
        self.bn1 = MCBatchNorm2d(cout)
        self.conv2 = MCConv2d(cout, cout, 3, 1, 1, use_custom_kernel=use_custom_kernel)
        self.bn2 = MCBatchNorm2d(cout)
        self.downsample = (MCDownsample(cin, cout, use_custom_kernel)
                           if stride != 1 or cin != cout else None)

    def forward(self, r, d):
        a, b = self.conv1(r, d, bn=self.bn1, relu=True)
        if self.downsample is not None:
            r, d = self.downsample(r, d)
        return self.conv2(a, b, bn=self.bn2, residual=(r, d), relu=True)


class MCResNet18Torch(nn.Module):
    """forward(rgb [N, 3, H, W], depth [N, 1, H, W]) -> logits [N, classes]."""

    def __init__(self, classes=15, use_custom_kernel=False):
        super().__init__()
        self.conv1 = MCConv2d((3, 1), 64, 7, 2, 3, use_custom_kernel=use_custom_kernel)
        self.bn1 = MCBatchNorm2d(64)
        widths = (64, 128, 256, 512)
        cin = 64
        for i, cout in enumerate(widths):
            stride = 1 if i == 0 else 2
            layer = nn.ModuleList([MCBasicBlock(cin, cout, stride, use_custom_kernel),
                                   MCBasicBlock(cout, cout, 1, use_custom_kernel)])
            self.add_module(f"layer{i + 1}", layer)
            cin = cout
        self.fc = nn.Linear(1024, classes)

    def set_custom_kernel(self, on):
        """Switches every MCConv2d's use_custom_kernel."""
        for m in self.modules():
            if isinstance(m, MCConv2d):
                m.use_custom_kernel = on
        return self

    @torch.no_grad()
    def fuse_bn(self):
        """Folds every BatchNorm into the MCConv2d before it (eval mode; see MCConv2d.fuse_bn):
        F.conv2d then runs with folded weights, and with use_custom_kernel each dual layer is
        one launch with its bias, residual and ReLU in the kernel's epilogue."""
        for m in self.modules():
            if isinstance(m, MCBasicBlock):
                m.conv1.fuse_bn(m.bn1)
                m.conv2.fuse_bn(m.bn2)
            elif isinstance(m, MCDownsample):
                getattr(m, "0").fuse_bn(getattr(m, "1"))
        self.conv1.fuse_bn(self.bn1)
        return self

    def forward(self, rgb, depth):
        r, d = self.conv1(rgb, depth, bn=self.bn1, relu=True)
        r = F.max_pool2d(r, 3, 2, 1)
        d = F.max_pool2d(d, 3, 2, 1)
        for name in ("layer1", "layer2", "layer3", "layer4"):
            for block in getattr(self, name):
                r, d = block(r, d)
        feats = torch.cat([torch.flatten(F.adaptive_avg_pool2d(t, 1), 1) for t in (r, d)], 1)
        return self.fc(feats.to(self.fc.weight.dtype))

    def load_trunk_state_dict(self, state_dict):
        """Loads weights named as two trunks ("rgb.conv1.weight", ..., "fc.weight")."""
        return self.load_state_dict(dual_state_dict(state_dict))


def _move_stream(name, to_front):
    parts = name.split(".")
    if to_front:
        for i, p in enumerate(parts):
            if p in STREAMS:
                return ".".join([p] + parts[:i] + parts[i + 1:])
        return name
    if parts[0] in STREAMS:
        return ".".join(parts[1:-1] + [parts[0], parts[-1]])
    return name


def trunk_state_dict(state_dict):
    """The two-trunk names of a state_dict: MCResNet18Torch's "layer1.0.conv1.rgb.weight" becomes
    "rgb.layer1.0.conv1.weight"; names that already lead with the stream are kept."""
    return {_move_stream(k, True): v for k, v in state_dict.items()}


def dual_state_dict(state_dict):
    """The reverse of trunk_state_dict: "rgb.layer1.0.conv1.weight" -> "layer1.0.conv1.rgb.weight"."""
    return {_move_stream(k, False): v for k, v in state_dict.items()}
