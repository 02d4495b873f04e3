"""gpu100::dual_conv2d and gpu100::conv_bn_act against F.conv2d in float64, in fp32, TF32 and bf16
at odd shapes; on a non-default stream; in a CUDA graph; under torch.compile(fullgraph=True)."""
import pytest
import torch
import torch.nn.functional as F

from conftest import CL, DEV, TOL, is_hopper, mechanism_dtype, rand, rel_l2, require, tf32

ops = torch.ops.gpu100

# (N, C_rgb, C_depth, H, W, K, R, stride, padding)
DUAL_FP32 = [
    (2, 3, 1, 37, 53, 64, 7, 2, 3),   # the stem: the capstone's dual kernels (dual_regblock)
    (2, 3, 1, 29, 35, 16, 3, 1, 1),   # dual_store_bound's shape
    (3, 16, 16, 19, 23, 24, 3, 1, 1),  # day08's Winograd, both streams in one launch
    (2, 32, 32, 17, 15, 48, 1, 2, 0),  # a 1x1 stride-2 shortcut: v4 / v5
    (1, 24, 24, 21, 13, 40, 3, 2, 1),  # 3x3 stride 2
]
DUAL_BF16 = [
    (3, 16, 16, 19, 23, 24, 3, 1, 1),
    (2, 64, 64, 29, 31, 64, 3, 1, 1),   # v10 (few tiles)
    (16, 64, 64, 64, 72, 64, 3, 1, 1),  # v12 on Hopper: enough 8x8 tiles for every warpgroup
    (2, 32, 32, 17, 15, 48, 1, 2, 0),
    (1, 24, 24, 21, 13, 40, 3, 2, 1),
    (1, 512, 512, 7, 9, 512, 3, 1, 1),  # the last stage: split-K
]


def dual_inputs(case, dtype, seed, bias=True, nhwc=False):
    n, c1, c2, h, w, k, r, _, _ = case
    fmt = CL if nhwc else torch.contiguous_format
    x = [rand(n, c, h, w, seed=seed + i).to(dtype).contiguous(memory_format=fmt)
         for i, c in enumerate((c1, c2))]
    ws = [rand(k, c, r, r, seed=seed + 2 + i, scale=(c * r * r) ** -0.5).to(dtype)
          .contiguous(memory_format=fmt) for i, c in enumerate((c1, c2))]
    b = [rand(k, seed=seed + 4 + i, scale=0.5) if bias else None for i in range(2)]
    return x, ws, b


def reference(x, w, b, stride, padding, residual=None, relu=False):
    y = F.conv2d(x.double(), w.double(), None if b is None else b.double(), stride, padding)
    if residual is not None:
        y = y + residual.double()
    return torch.relu(y) if relu else y


@pytest.mark.parametrize("precision", ["fp32", "tf32"])
@pytest.mark.parametrize("case", DUAL_FP32)
@pytest.mark.parametrize("bias", [True, False])
def test_dual_conv2d_float32(case, precision, bias):
    if precision == "tf32" and case[1] == case[2]:  # two channel counts run FMA kernels
        require("tf32")
    x, w, b = dual_inputs(case, torch.float32, 10, bias)
    stride, padding = case[7], case[8]
    with tf32(precision == "tf32"), torch.no_grad():
        got = ops.dual_conv2d(x[0], x[1], w[0], w[1], b[0], b[1], stride, padding)
    for i in range(2):
        assert got[i].is_contiguous() and got[i].dtype == torch.float32
        err = rel_l2(got[i], reference(x[i], w[i], b[i], stride, padding))
        assert err < TOL[precision], f"stream {i}: rel L2 {err:.2e}"


@pytest.mark.parametrize("case", DUAL_BF16)
def test_dual_conv2d_bf16(case):
    require("bf16")
    x, w, b = dual_inputs(case, torch.bfloat16, 20, True, nhwc=True)
    stride, padding = case[7], case[8]
    with torch.no_grad():
        got = ops.dual_conv2d(x[0], x[1], w[0], w[1], b[0], b[1], stride, padding)
    for i in range(2):
        assert got[i].dtype == torch.bfloat16 and got[i].is_contiguous(memory_format=CL)
        err = rel_l2(got[i], reference(x[i], w[i], b[i], stride, padding))
        assert err < TOL["bf16"], f"stream {i}: rel L2 {err:.2e}"


@pytest.mark.skipif(not is_hopper(), reason="TF32 on channels_last runs day08 v11 (Hopper)")
def test_dual_conv2d_tf32_channels_last():
    require("tf32_nhwc")
    case = (2, 32, 32, 23, 19, 64, 3, 1, 1)
    x, w, b = dual_inputs(case, torch.float32, 30, True, nhwc=True)
    with tf32(True), torch.no_grad():
        got = ops.dual_conv2d(x[0], x[1], w[0], w[1], b[0], b[1], 1, 1)
    for i in range(2):
        assert got[i].is_contiguous(memory_format=CL)
        assert rel_l2(got[i], reference(x[i], w[i], b[i], 1, 1)) < TOL["tf32"]


# (case, dtype, channels_last): one of each kernel family the epilogue runs on.
EPILOGUE = [
    ((2, 16, 16, 19, 23, 24, 3, 1, 1), "fp32", False),    # Winograd
    ((2, 32, 32, 17, 15, 48, 1, 2, 0), "tf32", False),    # v5
    ((2, 64, 64, 29, 31, 64, 3, 1, 1), "bf16", True),     # v10 / v6
    ((16, 64, 64, 64, 72, 64, 3, 1, 1), "bf16", True),    # v12 on Hopper
    ((1, 512, 512, 7, 9, 512, 3, 1, 1), "bf16", True),    # split-K
]


@pytest.mark.parametrize("case,precision,nhwc", EPILOGUE)
@pytest.mark.parametrize("act", ["relu", "none"])
def test_dual_conv2d_epilogue(case, precision, nhwc, act):
    """The bias, a residual per stream and ReLU in the kernel's epilogue: a whole ResNet layer
    (BatchNorm folded) in one launch."""
    require(precision)
    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    fmt = CL if nhwc else torch.contiguous_format
    x, w, b = dual_inputs(case, dtype, 60, True, nhwc=nhwc)
    n, _, _, h, wd, k, r, stride, padding = case
    p, q = (h + 2 * padding - r) // stride + 1, (wd + 2 * padding - r) // stride + 1
    res = [rand(n, k, p, q, seed=62 + i).to(dtype).contiguous(memory_format=fmt) for i in range(2)]
    with tf32(precision == "tf32"), torch.no_grad():
        got = ops.dual_conv2d(x[0], x[1], w[0], w[1], b[0], b[1], stride, padding, res[0], res[1],
                              act)
    for i in range(2):
        want = reference(x[i], w[i], b[i], stride, padding, res[i], act == "relu")
        err = rel_l2(got[i], want)
        assert err < TOL[precision], f"stream {i}: rel L2 {err:.2e}"
        if act == "relu":
            assert bool((got[i] >= 0).all())


def test_dual_conv2d_stem_relu():
    """Two channel counts (the stem) take ReLU, and refuse a residual in one line."""
    case = DUAL_FP32[0]
    x, w, b = dual_inputs(case, torch.float32, 70, True)
    stride, padding = case[7], case[8]
    with tf32(False), torch.no_grad():
        got = ops.dual_conv2d(x[0], x[1], w[0], w[1], b[0], b[1], stride, padding, None, None,
                              "relu")
        for i in range(2):
            want = reference(x[i], w[i], b[i], stride, padding, None, True)
            assert rel_l2(got[i], want) < TOL["fp32"]
        with pytest.raises(RuntimeError, match="residual needs one channel count"):
            ops.dual_conv2d(x[0], x[1], w[0], w[1], b[0], b[1], stride, padding, got[0], got[1])


# (N, C, H, W, K, R, stride, padding, residual, act)
SINGLE = [
    (2, 16, 19, 23, 24, 3, 1, 1, True, "relu"),
    (3, 32, 17, 15, 48, 1, 2, 0, False, "none"),
    (1, 24, 21, 13, 40, 3, 2, 1, False, "relu"),
    (2, 64, 13, 17, 64, 3, 1, 1, True, "none"),
]


@pytest.mark.parametrize("precision", ["fp32", "tf32", "bf16", "tf32_nhwc"])
@pytest.mark.parametrize("case", SINGLE)
def test_conv_bn_act(case, precision):
    if precision == "tf32_nhwc" and not is_hopper():
        pytest.skip("TF32 on channels_last runs day08 v11 (Hopper)")
    require(precision)
    n, c, h, w, k, r, stride, padding, with_res, act = case
    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    nhwc = precision in ("bf16", "tf32_nhwc")
    fmt = CL if nhwc else torch.contiguous_format
    x = rand(n, c, h, w, seed=40).to(dtype).contiguous(memory_format=fmt)
    wt = rand(k, c, r, r, seed=41, scale=(c * r * r) ** -0.5).to(dtype).contiguous(
        memory_format=fmt)
    b = rand(k, seed=42, scale=0.5)
    p, q = (h + 2 * padding - r) // stride + 1, (w + 2 * padding - r) // stride + 1
    res = (rand(n, k, p, q, seed=43).to(dtype).contiguous(memory_format=fmt)
           if with_res else None)
    with tf32(precision != "fp32"), torch.no_grad():
        y = ops.conv_bn_act(x, wt, b, res, act, stride, padding)
    ref = reference(x, wt, b, stride, padding, res, act == "relu")
    tol = TOL["tf32" if precision == "tf32_nhwc" else precision]
    assert y.shape == ref.shape and y.dtype == dtype
    assert rel_l2(y, ref) < tol


def test_non_default_stream():
    dtype, nhwc = mechanism_dtype()
    x, w, b = dual_inputs(DUAL_BF16[1], dtype, 50, True, nhwc=nhwc)
    with torch.no_grad(), tf32(False):
        want = ops.dual_conv2d(x[0], x[1], w[0], w[1], b[0], b[1], 1, 1)
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            got = ops.dual_conv2d(x[0], x[1], w[0], w[1], b[0], b[1], 1, 1)
            y = ops.conv_bn_act(got[0], w[0], b[0], got[1], "relu", 1, 1)
        torch.cuda.current_stream().wait_stream(s)
        ref = ops.conv_bn_act(want[0], w[0], b[0], want[1], "relu", 1, 1)
    torch.cuda.synchronize()
    assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
    assert torch.equal(y, ref)


@pytest.mark.parametrize("case", [DUAL_BF16[1], DUAL_BF16[5]])
def test_cuda_graph_capture(case):
    """Captured once, replayed on new inputs copied into the static ones (split-K's scratch comes
    from PyTorch's graph pool at the last stage's shape)."""
    dtype, nhwc = mechanism_dtype()
    x, w, b = dual_inputs(case, dtype, 60, True, nhwc=nhwc)
    stride, padding = case[7], case[8]
    static = [t.clone(memory_format=CL if nhwc else torch.contiguous_format) for t in x]
    g = torch.cuda.CUDAGraph()
    with torch.no_grad(), tf32(False):
        with torch.cuda.graph(g):
            out = ops.dual_conv2d(static[0], static[1], w[0], w[1], b[0], b[1], stride, padding)
            y = ops.conv_bn_act(out[0], w[0], b[0], out[1], "relu", 1, 1) \
                if case[5] == case[1] else out[0]
        fresh, _, _ = dual_inputs(case, dtype, 70, True, nhwc=nhwc)
        for s, f in zip(static, fresh):
            s.copy_(f)
        g.replay()
        want = ops.dual_conv2d(fresh[0], fresh[1], w[0], w[1], b[0], b[1], stride, padding)
        want_y = ops.conv_bn_act(want[0], w[0], b[0], want[1], "relu", 1, 1) \
            if case[5] == case[1] else want[0]
    torch.cuda.synchronize()
    assert torch.equal(out[0], want[0]) and torch.equal(out[1], want[1])
    assert torch.equal(y, want_y)


def test_torch_compile_fullgraph():
    """Traced with no graph break (fullgraph=True) through the Meta functions; the same numbers."""
    dtype, nhwc = mechanism_dtype()
    x, w, b = dual_inputs(DUAL_BF16[0], dtype, 80, True, nhwc=nhwc)
    w2 = rand(24, 24, 3, 3, seed=85, scale=(24 * 9) ** -0.5).to(dtype).contiguous(
        memory_format=CL if nhwc else torch.contiguous_format)

    def layer(r, d):
        a, c = ops.dual_conv2d(r, d, w[0], w[1], b[0], b[1], 1, 1)
        return ops.conv_bn_act(a, w2, b[0], c, "relu", 1, 1) * 0.5

    compiled = torch.compile(layer, fullgraph=True)
    with torch.no_grad(), tf32(False):
        got, want = compiled(x[0], x[1]), layer(x[0], x[1])
    assert got.shape == want.shape
    assert rel_l2(got, want) < 1e-6
