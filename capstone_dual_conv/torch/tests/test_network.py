"""MCResNet18 (the whole forward, gpu100::mc_resnet18_forward) and MCConv2d inside the PyTorch
model, against the PyTorch model in float64."""
import pytest
import torch

from conftest import CL, DEV, TOL, rand, randomize, rel_l2, require, tf32
from gpu100_torch import MCConv2d, MCResNet18, MCResNet18Torch, trunk_state_dict

H, W = 67, 93  # odd, and no multiple of any tile


@pytest.fixture(scope="module")
def model():
    return randomize(MCResNet18Torch(), seed=3).to(DEV)


@pytest.fixture(scope="module")
def inputs():
    return rand(2, 3, H, W, seed=4), rand(2, 1, H, W, seed=5)


@pytest.fixture(scope="module")
def reference(model, inputs):
    with torch.no_grad():
        return model.double()(*(t.double() for t in inputs)).clone(), model.float()


@pytest.mark.parametrize("precision", ["fp32", "tf32", "bf16"])
@pytest.mark.parametrize("trunks", ["sequential", "streams", "dual"])
@pytest.mark.parametrize("eager_graph", [True, False])
def test_whole_network(model, inputs, reference, precision, trunks, eager_graph):
    require(precision)
    net = MCResNet18.from_torch(model, precision, trunks, eager_graph)
    with torch.no_grad():
        logits = net(*inputs)
        again = net(*inputs)  # the second eager call replays the network's own graph
    assert logits.shape == (2, 15) and logits.dtype == torch.float32
    assert rel_l2(logits, reference[0]) < {"fp32": 1e-4, "tf32": 5e-3, "bf16": 3e-2}[precision]
    assert torch.equal(logits, again)
    net.close()


def test_whole_network_graph_stream_compile(model, inputs, reference):
    """Captured in a CUDA graph, on a side stream, and under torch.compile(fullgraph=True)."""
    precision = "fp32" if torch.ops.gpu100.build_lacks("bf16") else "bf16"
    net = MCResNet18.from_torch(model, precision)
    with torch.no_grad():
        want = net(*inputs)
        static = [t.clone() for t in inputs]
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            out = net(*static)
        for s, i in zip(static, (3.0, 1.5)):
            s.mul_(i)  # new inputs, same buffers
        g.replay()
        fresh = net(*static)
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            side = net(*static)
        torch.cuda.current_stream().wait_stream(s)
        compiled = torch.compile(lambda r, d: net(r, d).softmax(1), fullgraph=True)
        comp = compiled(*static)
    torch.cuda.synchronize()
    assert torch.equal(out, fresh) and torch.equal(side, fresh)
    assert rel_l2(comp, fresh.softmax(1)) < 1e-6
    assert not torch.equal(want, fresh)


def test_trunk_names_round_trip(model):
    sd = model.state_dict()
    names = trunk_state_dict(sd)
    assert "rgb.layer2.0.downsample.0.weight" in names and "depth.conv1.weight" in names
    assert "fc.weight" in names and len(names) == len(sd)
    copy = MCResNet18Torch().to(DEV)
    copy.load_trunk_state_dict(names)
    for k, v in copy.state_dict().items():
        assert torch.equal(v, sd[k])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_mcconv2d_custom_kernel_in_the_model(model, inputs, dtype):
    """use_custom_kernel swaps only the dual layers; the logits stay within the precision's
    rounding of the sequential model's."""
    if dtype == torch.bfloat16:
        require("bf16")
    m = MCResNet18Torch().to(DEV)
    m.load_state_dict(model.state_dict())
    m = m.eval().to(dtype).to(memory_format=CL if dtype == torch.bfloat16 else
                              torch.contiguous_format)
    fmt = CL if dtype == torch.bfloat16 else torch.contiguous_format
    x = [t.to(dtype).contiguous(memory_format=fmt) for t in inputs]
    with torch.no_grad(), tf32(False):
        seq = m.set_custom_kernel(False)(*x)
        custom = m.set_custom_kernel(True)(*x)
    taken = [mod for mod in m.modules() if isinstance(mod, MCConv2d)]
    assert len(taken) == 20
    tol = 1e-4 if dtype == torch.float32 else 3e-2
    assert rel_l2(custom, seq) < tol


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_mcconv2d_fused_bn_in_the_model(model, inputs, dtype):
    """fuse_bn folds every BatchNorm: the F.conv2d model and the custom kernels with the bias,
    residual and ReLU in their epilogue both stay within the precision's rounding of the
    unfused sequential model."""
    if dtype == torch.bfloat16:
        require("bf16")
    m = MCResNet18Torch().to(DEV)
    m.load_state_dict(model.state_dict())
    fmt = CL if dtype == torch.bfloat16 else torch.contiguous_format
    m = m.eval().to(dtype).to(memory_format=fmt)
    x = [t.to(dtype).contiguous(memory_format=fmt) for t in inputs]
    with torch.no_grad(), tf32(False):
        seq = m.set_custom_kernel(False)(*x)
        f = MCResNet18Torch().to(DEV)
        f.load_state_dict(m.state_dict())
        f = f.eval().to(dtype).to(memory_format=fmt).fuse_bn()
        folded = f.set_custom_kernel(False)(*x)
        fused = f.set_custom_kernel(True)(*x)
    tol = 1e-4 if dtype == torch.float32 else 3e-2
    assert rel_l2(folded, seq) < tol
    assert rel_l2(fused, seq) < tol


def test_mcconv2d_falls_back_where_the_kernel_does_not_take(inputs):
    conv = MCConv2d((3, 1), 16, 3, 1, 1).to(DEV).to(torch.bfloat16).to(memory_format=CL)
    conv.use_custom_kernel = True
    x = [t.to(torch.bfloat16).contiguous(memory_format=CL) for t in inputs]
    with torch.no_grad():
        ok, why = conv.custom_kernel_takes(*x)
        a, b = conv(*x)
    assert not ok and "channel" in why
    assert a.shape == (2, 16, H, W) and b.shape == (2, 16, H, W)
    ok, why = conv.custom_kernel_takes(*x)  # grad mode on, weights require grad
    assert not ok and "autograd" in why
