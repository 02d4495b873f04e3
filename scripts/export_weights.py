#!/usr/bin/env python3
"""Writes ResNet-18 / MC-ResNet18 weights as a tensor file (scripts/tensor_file.py) that
capstone_mc_resnet18 --weights reads; also the models themselves, for scripts that import it.

  python3 scripts/export_weights.py --model mc_resnet18 --seed 1 --out W.g100
  python3 scripts/export_weights.py --model resnet18 --from-torchvision --out resnet18.g100

Models (the weight names are the state_dict keys; num_batches_tracked is not written):
  resnet18     torchvision.models.resnet18(weights=None): 3 x 224 x 224 in, 1000 classes;
  mc_resnet18  MCResNet18 below: an RGB trunk (3 channels) and a depth trunk (1 channel), each
               a ResNet-18 without its fc; their 512 + 512 pooled features are concatenated
               into Linear(1024, 15). Trained at 3/1 x 416 x 544.
Random weights (randomize, seeded, drawn on the CPU so every machine gets the same numbers):
  conv He-normal (std sqrt(2 / fan_in)); BN weight and running_var uniform [0.5, 1.5], BN bias
  and running_mean uniform [-0.1, 0.1]; Linear weight and bias uniform +-1/sqrt(in_features).
--from-torchvision takes the ImageNet weights of resnet18 instead, only if they are already in
torch's hub cache (nothing is downloaded).
"""
import argparse
import math
import os
import sys
import urllib.parse

import torch
import torch.nn as nn
import torchvision

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tensor_file import write_tensor_file  # noqa: E402  (the script's own folder, just added)

MODELS = ("mc_resnet18", "resnet18")


class MCResNet18(nn.Module):
    """Two ResNet-18 trunks (RGB: 3 channels, depth: 1 channel) -> cat -> Linear(1024, 15)."""

    def __init__(self, classes=15):
        super().__init__()
        self.rgb = torchvision.models.resnet18(weights=None)
        self.rgb.fc = nn.Identity()
        self.depth = torchvision.models.resnet18(weights=None)
        self.depth.conv1 = nn.Conv2d(1, 64, kernel_size=7, stride=2, padding=3, bias=False)
        self.depth.fc = nn.Identity()
        self.fc = nn.Linear(1024, classes)

    def forward(self, rgb, depth):
        # fc columns 0..511 take the rgb features, 512..1023 the depth features.
        return self.fc(torch.cat([self.rgb(rgb), self.depth(depth)], dim=1))


def build_model(model_name):
    """A fresh model (torch's default init, train mode) by its --model name."""
    if model_name == "resnet18":
        return torchvision.models.resnet18(weights=None)
    if model_name == "mc_resnet18":
        return MCResNet18()
    raise ValueError(f"unknown model {model_name!r} (one of {', '.join(MODELS)})")


def _uniform(shape, lo, hi, gen):
    return torch.rand(shape, generator=gen, dtype=torch.float32) * (hi - lo) + lo


@torch.no_grad()
def randomize(model, seed):
    """Seeded random weights (see the docstring at the top), drawn on the CPU in the order of
    named_modules(); puts the model in eval mode and returns it."""
    gen = torch.Generator(device="cpu").manual_seed(seed)
    for _, m in model.named_modules():
        if isinstance(m, nn.Conv2d):
            fan_in = m.in_channels // m.groups * m.kernel_size[0] * m.kernel_size[1]
            w = torch.randn(m.weight.shape, generator=gen) * math.sqrt(2.0 / fan_in)
            m.weight.copy_(w)
            if m.bias is not None:
                m.bias.zero_()
        elif isinstance(m, nn.BatchNorm2d):
            m.weight.copy_(_uniform(m.weight.shape, 0.5, 1.5, gen))
            m.bias.copy_(_uniform(m.bias.shape, -0.1, 0.1, gen))
            m.running_mean.copy_(_uniform(m.running_mean.shape, -0.1, 0.1, gen))
            m.running_var.copy_(_uniform(m.running_var.shape, 0.5, 1.5, gen))
        elif isinstance(m, nn.Linear):
            bound = 1.0 / math.sqrt(m.in_features)
            m.weight.copy_(_uniform(m.weight.shape, -bound, bound, gen))
            if m.bias is not None:
                m.bias.copy_(_uniform(m.bias.shape, -bound, bound, gen))
    return model.eval()


def weight_items(model):
    """[(name, float32 numpy array)] of the state_dict in its order, less num_batches_tracked."""
    return [(name, t.detach().to("cpu", torch.float32).contiguous().numpy())
            for name, t in model.state_dict().items()
            if not name.endswith("num_batches_tracked")]


def export(model, path):
    """Writes the model's weights to a tensor file; returns the number of tensors."""
    items = weight_items(model)
    write_tensor_file(path, items)
    return len(items)


def load_torchvision_resnet18(model):
    """Loads torchvision's ImageNet resnet18 weights from the hub cache, never the network."""
    weights = torchvision.models.ResNet18_Weights.IMAGENET1K_V1
    file_name = os.path.basename(urllib.parse.urlparse(weights.url).path)
    path = os.path.join(torch.hub.get_dir(), "checkpoints", file_name)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"torchvision's resnet18 weights are not at {path}; nothing is "
                                f"downloaded: copy {file_name} there, or drop --from-torchvision")
    model.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))
    return model.eval()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", choices=MODELS, default="mc_resnet18")
    parser.add_argument("--seed", type=int, default=1, help="seed of the random weights")
    parser.add_argument("--out", required=True, help="the tensor file to write (.g100)")
    parser.add_argument("--from-torchvision", action="store_true",
                        help="resnet18 only: torchvision's ImageNet weights, if cached offline")
    args = parser.parse_args()
    model = build_model(args.model)
    try:
        if args.from_torchvision:
            if args.model != "resnet18":
                raise ValueError("--from-torchvision has weights for --model resnet18 only")
            load_torchvision_resnet18(model)
            origin = "torchvision IMAGENET1K_V1"
        else:
            randomize(model, args.seed)
            origin = f"random, seed {args.seed}"
        count = export(model, args.out)
    except (OSError, ValueError, RuntimeError) as e:  # RuntimeError: a checkpoint that doesn't fit
        print(f"export_weights: {e}", file=sys.stderr)
        return 2
    params = sum(p.numel() for p in model.parameters())
    print(f"wrote {args.out}: {args.model} ({origin}), {count} tensors, {params} parameters")
    return 0


if __name__ == "__main__":
    sys.exit(main())
