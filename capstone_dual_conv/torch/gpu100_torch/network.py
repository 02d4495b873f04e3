"""MCResNet18: the whole network on the project's kernels, built once from a PyTorch model."""
import torch

from . import _library  # noqa: F401  (loads the operators)
from .models import trunk_state_dict

PRECISIONS = ("fp32", "tf32", "bf16")
TRUNKS = ("sequential", "streams", "dual")


class MCResNet18:
    """MC-ResNet18 inference on gpu100's kernels: BN folded into every convolution, the bias,
    residual and ReLU in its epilogue, the stem fused with its pool (bf16, and TF32 on Hopper).

        net = MCResNet18.from_torch(model, precision="bf16")
        logits = net(rgb, depth)   # float32 [N, 3, H, W] and [N, 1, H, W] on the GPU -> [N, classes]

    The weights are copied to the current GPU once. Each call runs on PyTorch's current stream;
    it can be captured in a CUDA graph and traced by torch.compile(fullgraph=True). Outside a
    capture it replays a CUDA graph of its own (eager_graph=False launches every kernel instead).
    One call at a time per network.
    """

    def __init__(self, state_dict, precision="bf16", trunks="streams", eager_graph=True):
        if precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {PRECISIONS}; got {precision!r}")
        if trunks not in TRUNKS:
            raise ValueError(f"trunks must be one of {TRUNKS}; got {trunks!r}")
        named = [(k, v) for k, v in trunk_state_dict(state_dict).items()
                 if not k.endswith("num_batches_tracked")]
        self.precision, self.trunks = precision, trunks
        self.handle = torch.ops.gpu100.mc_resnet18_create(
            [k for k, _ in named], [v.detach() for _, v in named], precision, trunks, eager_graph)

    @classmethod
    def from_torch(cls, model, precision="bf16", trunks="streams", eager_graph=True):
        """From a PyTorch MC-ResNet18: MCResNet18Torch, or any module whose state_dict has the
        two-trunk names ("rgb.conv1.weight", ..., "depth.layer4.1.bn2.running_var", "fc.weight",
        "fc.bias"). BN is folded with the running statistics (eval mode)."""
        return cls(model.state_dict(), precision, trunks, eager_graph)

    def __call__(self, rgb, depth):
        return torch.ops.gpu100.mc_resnet18_forward(self.handle, rgb, depth)

    def close(self):
        if getattr(self, "handle", None) is not None:
            torch.ops.gpu100.mc_resnet18_release(self.handle)
            self.handle = None

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown: the library may be gone already
            pass
