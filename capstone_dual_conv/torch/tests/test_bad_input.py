"""Bad input: one clear RuntimeError, never a crash, a silent copy or a wrong answer."""
import pytest
import torch

from conftest import CL, DEV, rand, randomize, require
from gpu100_torch import MCResNet18, MCResNet18Torch

ops = torch.ops.gpu100


def bf(*shape, seed=1):
    return rand(*shape, seed=seed).to(torch.bfloat16).contiguous(memory_format=CL)


def dual_args(**change):
    a = dict(rgb=bf(2, 16, 9, 11), depth=bf(2, 16, 9, 11, seed=2), w_rgb=bf(32, 16, 3, 3, seed=3),
             w_depth=bf(32, 16, 3, 3, seed=4), b_rgb=None, b_depth=None, stride=1, padding=1,
             res_rgb=None, res_depth=None, act="none")
    a.update(change)
    return a


def refuses(match, **change):
    a = dual_args(**change)
    with pytest.raises(RuntimeError, match=match) as e:
        ops.dual_conv2d(*a.values())
    assert "\n" not in str(e.value).strip(), str(e.value)  # one line


def test_good_arguments_run():
    require("bf16")
    a = dual_args()
    out = ops.dual_conv2d(*a.values())
    assert out[0].shape == (2, 32, 9, 11)


def test_cpu_tensor():
    refuses("rgb is on cpu", rgb=bf(2, 16, 9, 11).cpu())


def test_all_cpu():
    with pytest.raises(RuntimeError, match="is on cpu"):
        ops.conv_bn_act(torch.rand(1, 8, 5, 5), torch.rand(8, 8, 3, 3), torch.rand(8))


def test_wrong_dtype():
    refuses("float32 or bfloat16", rgb=rand(2, 16, 9, 11, seed=1).half(),
            depth=rand(2, 16, 9, 11, seed=1).half())
    refuses("one dtype", depth=rand(2, 16, 9, 11, seed=2))


def test_wrong_channels():
    refuses("w_rgb takes 16 input channels but rgb has 8", rgb=bf(2, 8, 9, 11))
    refuses("must share K", w_depth=bf(16, 16, 3, 3))


def test_bad_epilogue():
    refuses("act must be", act="silu")
    refuses("residual must match the output", res_rgb=bf(2, 32, 9, 10))
    refuses("residual must match the output", res_depth=bf(2, 32, 9, 11).contiguous())
    refuses("res_depth is on cpu", res_depth=bf(2, 32, 9, 11).cpu())


def test_layout_the_kernel_cannot_take():
    refuses("channels_last", rgb=bf(2, 16, 9, 11).contiguous())
    refuses("C % 8 == 0", rgb=bf(2, 12, 9, 11), depth=bf(2, 12, 9, 11), w_rgb=bf(32, 12, 3, 3),
            w_depth=bf(32, 12, 3, 3))
    refuses("one channel count", rgb=bf(2, 8, 9, 11), w_rgb=bf(32, 8, 3, 3))


def test_unaligned_view():
    n = 2 * 16 * 9 * 11
    flat = torch.rand(n + 8, device=DEV).to(torch.bfloat16)
    view = flat[1:1 + n].view(2, 9, 11, 16).permute(0, 3, 1, 2)  # channels_last, 2 bytes off
    refuses("16-byte aligned", rgb=view)


def test_sizes():
    refuses("stride must be >= 1", stride=0)
    refuses("padding must be >= 0", padding=-1)
    refuses("does not fit", rgb=bf(2, 16, 1, 1), depth=bf(2, 16, 1, 1), padding=0)
    refuses("is empty", rgb=bf(0, 16, 9, 11), depth=bf(0, 16, 9, 11))
    # 2^31 images of 16 x 9 x 11 without the memory: an expanded (stride 0) tensor.
    huge = torch.empty(1, 16, 9, 11, device=DEV, dtype=torch.bfloat16).expand(2**31, 16, 9, 11)
    refuses("32-bit", rgb=huge, depth=huge)


def test_conv_bn_act_rules():
    x, w, b = bf(1, 16, 9, 11), bf(16, 16, 3, 3, seed=2), rand(16, seed=3)
    with pytest.raises(RuntimeError, match='act must be "relu" or "none"'):
        ops.conv_bn_act(x, w, b, None, "silu", 1, 1)
    with pytest.raises(RuntimeError, match="residual must match"):
        ops.conv_bn_act(x, w, b, bf(1, 16, 9, 10), "relu", 1, 1)
    with pytest.raises(RuntimeError, match=r"bias must be \[16\]"):
        ops.conv_bn_act(x, w, rand(15, seed=4), None, "relu", 1, 1)
    with pytest.raises(RuntimeError, match="TF32 off"):
        x32 = rand(1, 16, 9, 11, seed=5).contiguous(memory_format=CL)
        w32 = rand(16, 16, 3, 3, seed=6).contiguous(memory_format=CL)
        old = torch.backends.cudnn.allow_tf32
        torch.backends.cudnn.allow_tf32 = False
        try:
            ops.conv_bn_act(x32, w32, b, None, "relu", 1, 1)
        finally:
            torch.backends.cudnn.allow_tf32 = old


def test_backward_says_there_is_none():
    require("bf16")
    a = dual_args()
    w = a["w_rgb"].clone().requires_grad_()
    out = ops.dual_conv2d(a["rgb"], a["depth"], w, a["w_depth"], None, None, 1, 1)
    with pytest.raises(RuntimeError, match="has no backward"):
        out[0].float().sum().backward()


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_mismatched_devices():
    refuses("every tensor must be on one GPU", depth=bf(2, 16, 9, 11).to("cuda:1"))


@pytest.fixture(scope="module")
def net():
    precision = "fp32" if ops.build_lacks("bf16") else "bf16"  # the checks are the same
    n = MCResNet18.from_torch(randomize(MCResNet18Torch(), seed=9).to(DEV), precision)
    yield n
    n.close()


def test_network_inputs(net):
    rgb, depth = rand(1, 3, 33, 35, seed=1), rand(1, 1, 33, 35, seed=2)
    for bad, match in [((depth, depth), r"rgb must be \[N, 3, H, W\]"),
                       ((rgb.half(), depth), "must be float32"),
                       ((rgb.contiguous(memory_format=CL), depth.expand(1, 1, 33, 35)[..., :34]),
                        "contiguous NCHW|share"),
                       ((rgb, rand(1, 1, 33, 34, seed=3)), "share N, H and W"),
                       ((rgb[:0], depth[:0]), "is empty"),
                       ((rgb.cpu(), depth.cpu()), "is on cpu")]:
        with pytest.raises(RuntimeError, match=match):
            net(*bad)
    assert net(rgb, depth).shape == (1, 15)


def test_network_weights_and_handles():
    sd = randomize(MCResNet18Torch(), seed=1).state_dict()
    del sd["layer3.1.bn2.depth.running_var"]
    with pytest.raises(RuntimeError, match="depth.layer3.1.bn2.running_var' is missing"):
        MCResNet18(sd)
    with pytest.raises(ValueError, match="precision"):
        MCResNet18(sd, precision="fp8")
    with pytest.raises(RuntimeError, match="no network with handle"):
        ops.mc_resnet18_forward(123456, rand(1, 3, 8, 8, seed=1), rand(1, 1, 8, 8, seed=2))
