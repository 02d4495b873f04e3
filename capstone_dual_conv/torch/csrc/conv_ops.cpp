// gpu100::dual_conv2d and gpu100::conv_bn_act: the capstone's dual-stream layer and day08's fused
// convolution as PyTorch operators, with their shape (Meta) functions for torch.compile.
//
// Which kernel runs is decided by the dtype and the memory format, never by a hidden conversion:
//   bfloat16, channels_last tensors (weights too): day08's bf16 NHWC kernels (v12 or v10 on
//       Hopper's wgmma, v6's mma.sync on sm_80+), both streams in one launch;
//   float32 with TF32 allowed (torch.backends.cudnn.allow_tf32, as F.conv2d): day08's TF32
//       kernels: v11 (wgmma) for channels_last on Hopper, v5 (mma.sync) for contiguous NCHW;
//   float32 with TF32 off: FMA only. Two streams of different channel counts (the stem) take the
//       capstone's dual kernels (dual_store_bound, else dual_regblock); equal ones day08's fused
//       form, on Winograd F(2x2, 3x3) for 3x3 stride-1 layers, else v4's implicit GEMM.
// Anything else (a CPU tensor, another dtype, a layout the path does not take, a size over the
// kernels' 32-bit indexing) is refused with one line naming the tensor and the rule.
// (No fmt here: PyTorch's include folder carries fmt headers of its own version, which would not
// match the fmt library the project links.)
#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <torch/library.h>

#include <optional>
#include <tuple>

#include "common/arch.hpp"
#include "common/math.hpp"
#include "conv.hpp"
#include "kernels.cuh"
#include "ops.hpp"
#include "torch_util.hpp"

namespace gpu100_torch {

std::string describe(const at::Tensor& t) {
  std::string dims;
  for (int64_t i = 0; i < t.dim(); ++i) dims += (i ? ", " : "") + std::to_string(t.size(i));
  std::string layout = t.is_contiguous()  ? "contiguous"
                       : channels_last(t) ? "channels_last"
                                          : "strided";
  return c10::str("[", dims, "] ", c10::toString(t.scalar_type()), " ", t.device().str(), " (",
                  layout, ")");
}

void check_same_cuda_device(const char* op, const std::vector<at::Tensor>& tensors,
                            const std::vector<const char*>& names) {
  std::optional<c10::Device> first;
  const char* first_name = nullptr;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const at::Tensor& t = tensors[i];
    if (!t.defined()) continue;
    TORCH_CHECK(t.is_cuda(), op, ": ", names[i], " is on ", t.device().str(),
                "; the kernels take CUDA tensors (", names[i], ".cuda())");
    if (!first) {
      first = t.device(), first_name = names[i];
    } else {
      TORCH_CHECK(t.device() == *first, op, ": ", names[i], " is on ", t.device().str(), " and ",
                  first_name, " on ", first->str(), "; every tensor must be on one GPU");
    }
  }
}

namespace {

// The kernel family of a call (see the top of the file).
enum class Path { kBf16, kTf32Nhwc, kTf32Nchw, kFp32Dual, kFp32Group };

// The geometry both the CUDA and the Meta functions derive from the arguments, every rule that
// needs no data checked.
struct ConvCall {
  day08::ConvShape shape[2];  // per stream (one for conv_bn_act)
  int count = 1;
  int64_t p = 0, q = 0;
  bool nhwc = false;  // channels_last tensors in and out
};

int64_t out_size(int64_t in, int64_t pad, int64_t r, int64_t stride) {
  return (in + 2 * pad - r) / stride + 1;
}

// Checks one convolution's operands and returns its shape. `x_name`/`w_name` name them in the
// messages.
day08::ConvShape conv_shape(const char* op, const at::Tensor& x, const at::Tensor& w,
                            int64_t stride, int64_t padding, const char* x_name,
                            const char* w_name) {
  TORCH_CHECK(x.dim() == 4, op, ": ", x_name, " must be 4-D [N, C, H, W]; got ", describe(x));
  TORCH_CHECK(w.dim() == 4, op, ": ", w_name, " must be 4-D [K, C, R, S]; got ", describe(w));
  TORCH_CHECK(w.size(1) == x.size(1), op, ": ", w_name, " takes ", w.size(1),
              " input channels but ", x_name, " has ", x.size(1));
  TORCH_CHECK(stride >= 1, op, ": stride must be >= 1; got ", stride);
  TORCH_CHECK(padding >= 0, op, ": padding must be >= 0; got ", padding);
  for (int d = 0; d < 4; ++d) {
    TORCH_CHECK(x.size(d) > 0, op, ": ", x_name, " is empty: ", describe(x));
    TORCH_CHECK(w.size(d) > 0, op, ": ", w_name, " is empty: ", describe(w));
  }
  const int64_t p = out_size(x.size(2), padding, w.size(2), stride);
  const int64_t q = out_size(x.size(3), padding, w.size(3), stride);
  TORCH_CHECK(x.size(2) + 2 * padding >= w.size(2) && x.size(3) + 2 * padding >= w.size(3) &&
                  p >= 1 && q >= 1,
              op, ": a ", w.size(2), "x", w.size(3), " filter does not fit ", x_name, "'s ",
              x.size(2), "x", x.size(3), " with padding ", padding);
  constexpr int64_t kIntMax = 2147483647;
  for (int64_t v : {x.size(0), x.size(1), x.size(2), x.size(3), w.size(0), w.size(2), w.size(3),
                    stride, padding}) {
    TORCH_CHECK(v <= kIntMax, op, ": ", x_name, " ", describe(x), " or ", w_name, " ", describe(w),
                " is over the kernels' 32-bit limits");
  }
  day08::ConvShape s;
  s.n = int(x.size(0)), s.c = int(x.size(1)), s.h = int(x.size(2)), s.w = int(x.size(3));
  s.k = int(w.size(0)), s.r = int(w.size(2)), s.s = int(w.size(3));
  s.stride = int(stride), s.pad = int(padding);
  try {
    day08::check_conv_args(s);  // every index inside int32
  } catch (const std::invalid_argument& e) {
    TORCH_CHECK(false, op, ": ", x_name, " ", describe(x), ": ", e.what());
  }
  return s;
}

// The rules of the dtypes and memory formats (the same on the Meta device).
void check_layouts(const char* op, const std::vector<at::Tensor>& xs,
                   const std::vector<at::Tensor>& ws, const std::vector<const char*>& x_names,
                   const std::vector<const char*>& w_names) {
  const at::ScalarType dt = xs[0].scalar_type();
  TORCH_CHECK(dt == at::kFloat || dt == at::kBFloat16, op, ": ", x_names[0],
              " must be float32 or bfloat16; got ", describe(xs[0]));
  const bool nhwc = channels_last(xs[0]) && !xs[0].is_contiguous();
  for (size_t i = 0; i < xs.size() + ws.size(); ++i) {
    const at::Tensor& t = i < xs.size() ? xs[i] : ws[i - xs.size()];
    const char* name = i < xs.size() ? x_names[i] : w_names[i - xs.size()];
    TORCH_CHECK(t.scalar_type() == dt, op, ": ", name, " is ", describe(t), " but ", x_names[0],
                " is ", std::string(c10::toString(dt)), "; every input and weight has one dtype");
    if (dt == at::kBFloat16) {
      TORCH_CHECK(channels_last(t), op,
                  ": bfloat16 takes channels_last tensors (NHWC memory; "
                  "x.to(memory_format=torch.channels_last)); ",
                  name, " is ", describe(t));
    } else {
      const bool ok = nhwc ? channels_last(t) : t.is_contiguous();
      TORCH_CHECK(ok, op,
                  ": float32 takes contiguous NCHW tensors, or channels_last ones "
                  "throughout; ",
                  name, " is ", describe(t), " and ", x_names[0], " ", describe(xs[0]));
    }
  }
}

bool parse_act(const char* op, const std::string& act) {
  TORCH_CHECK(act == "relu" || act == "none", op,
              ": act must be \"relu\" or \"none\" (the fused "
              "epilogue has ReLU only); got \"",
              act, "\"");
  return act == "relu";
}

void check_residual(const char* op, const std::optional<at::Tensor>& residual,
                    const at::Tensor& y) {
  if (!residual.has_value() || !residual->defined()) return;
  const at::Tensor& r = *residual;
  TORCH_CHECK(r.sizes() == y.sizes() && r.scalar_type() == y.scalar_type() &&
                  (y.is_contiguous() ? r.is_contiguous() : channels_last(r)),
              op, ": residual must match the output ", describe(y), "; got ", describe(r));
}

// The memory format of the outputs: channels_last for bf16 and for fp32 NHWC.
at::Tensor empty_output(const at::Tensor& like, const ConvCall& c) {
  const day08::ConvShape& s = c.shape[0];
  return at::empty({s.n, s.k, c.p, c.q},
                   like.options().memory_format(c.nhwc ? at::MemoryFormat::ChannelsLast
                                                       : at::MemoryFormat::Contiguous));
}

// A bias as the kernels take it: fp32 [K] (a bf16 bias is widened, K values), or K zeros.
at::Tensor bias_fp32(const char* op, const std::optional<at::Tensor>& b, const at::Tensor& x, int k,
                     const char* name) {
  if (!b.has_value() || !b->defined()) {
    return at::zeros({k},
                     x.options().dtype(at::kFloat).memory_format(at::MemoryFormat::Contiguous));
  }
  TORCH_CHECK(b->dim() == 1 && b->size(0) == k, op, ": ", name, " must be [", k, "]; got ",
              describe(*b));
  TORCH_CHECK(b->scalar_type() == at::kFloat || b->scalar_type() == at::kBFloat16, op, ": ", name,
              " must be float32 or bfloat16; got ", describe(*b));
  return b->to(at::kFloat).contiguous();
}

void check_aligned(const char* op, const at::Tensor& t, const char* name) {
  TORCH_CHECK(reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0, op, ": ", name,
              " must start 16-byte aligned (a view into another tensor may not); got ",
              describe(t));
}

ConvCall dual_call(const at::Tensor& rgb, const at::Tensor& depth, const at::Tensor& w_rgb,
                   const at::Tensor& w_depth, int64_t stride, int64_t padding) {
  constexpr const char* op = "gpu100::dual_conv2d";
  ConvCall c;
  c.count = 2;
  c.shape[0] = conv_shape(op, rgb, w_rgb, stride, padding, "rgb", "w_rgb");
  c.shape[1] = conv_shape(op, depth, w_depth, stride, padding, "depth", "w_depth");
  const day08::ConvShape &a = c.shape[0], &b = c.shape[1];
  TORCH_CHECK(a.n == b.n && a.h == b.h && a.w == b.w, op,
              ": rgb and depth must share N, H and W; got ", describe(rgb), " and ",
              describe(depth));
  TORCH_CHECK(a.k == b.k && a.r == b.r && a.s == b.s, op,
              ": w_rgb and w_depth must share K, R and S; got ", describe(w_rgb), " and ",
              describe(w_depth));
  check_layouts(op, {rgb, depth}, {w_rgb, w_depth}, {"rgb", "depth"}, {"w_rgb", "w_depth"});
  c.p = a.p(), c.q = a.q();
  c.nhwc = channels_last(rgb) && (rgb.scalar_type() == at::kBFloat16 || !rgb.is_contiguous());
  return c;
}

ConvCall single_call(const at::Tensor& x, const at::Tensor& w, int64_t stride, int64_t padding) {
  constexpr const char* op = "gpu100::conv_bn_act";
  ConvCall c;
  c.shape[0] = conv_shape(op, x, w, stride, padding, "x", "w");
  check_layouts(op, {x}, {w}, {"x"}, {"w"});
  c.p = c.shape[0].p(), c.q = c.shape[0].q();
  c.nhwc = channels_last(x) && (x.scalar_type() == at::kBFloat16 || !x.is_contiguous());
  return c;
}

// The kernel family for a call on this GPU and build; refuses what none of them takes.
Path pick_path(const char* op, const ConvCall& c, at::ScalarType dt) {
  const day08::ConvShape& s = c.shape[0];
  const bool same = c.count == 1 || (c.shape[0].c == c.shape[1].c);
  if (dt == at::kBFloat16) {
    TORCH_CHECK(same, op,
                ": bfloat16 runs both streams in one launch and needs one channel "
                "count; got ",
                c.shape[0].c, " and ", c.shape[1].c,
                " (run such a layer in float32, or with F.conv2d)");
    TORCH_CHECK(day08::conv2d_fused_bf16_takes(s) && s.k % 2 == 0, op,
                ": the bf16 kernels take C % 8 == 0 and an even K on this GPU and build; got C = ",
                s.c, ", K = ", s.k);
    return Path::kBf16;
  }
  if (at::globalContext().allowTF32CuDNN()) {
    if (c.nhwc) {
      TORCH_CHECK(day08::conv2d_fused_tf32_nhwc_takes(s), op,
                  ": float32 channels_last runs day08's TF32 wgmma kernel, which needs a Hopper "
                  "GPU with this build's sm_90a code, C % 4 == 0 and an even K; got C = ",
                  s.c, ", K = ", s.k, " (pass contiguous NCHW tensors instead)");
      TORCH_CHECK(same, op, ": float32 channels_last needs one channel count for both streams");
      return Path::kTf32Nhwc;
    }
    return same ? Path::kTf32Nchw : Path::kFp32Dual;
  }
  TORCH_CHECK(!c.nhwc, op,
              ": float32 with TF32 off (torch.backends.cudnn.allow_tf32 = False) "
              "takes contiguous NCHW tensors");
  return same ? Path::kFp32Group : Path::kFp32Dual;
}

// Runs one group of 1 or 2 convolutions (x, w, bias, residual, y per stream) on `path`.
void run_group(Path path, const ConvCall& c, const std::vector<at::Tensor>& x,
               const std::vector<at::Tensor>& w, const std::vector<at::Tensor>& bias,
               const std::vector<at::Tensor>& residual, const std::vector<at::Tensor>& y, bool relu,
               cudaStream_t stream) {
  const day08::ConvShape& s = c.shape[0];
  if (path == Path::kBf16) {
    using bf16 = __nv_bfloat16;
    day08::ConvGroup<bf16> g;
    g.count = c.count, g.relu = relu;
    for (int i = 0; i < c.count; ++i) {
      g.op[i] = {static_cast<const bf16*>(x[i].data_ptr()),
                 static_cast<const bf16*>(w[i].data_ptr()), bias[i].data_ptr<float>(),
                 residual[i].defined() ? static_cast<const bf16*>(residual[i].data_ptr()) : nullptr,
                 static_cast<bf16*>(y[i].data_ptr())};
    }
    day08::conv2d_fused_bf16_nhwc(s, g, stream);
    return;
  }
  day08::ConvGroup<float> g;
  g.count = c.count, g.relu = relu;
  std::vector<at::Tensor> u;  // Winograd's transformed filters
  const bool wino = path == Path::kFp32Group && day08::winograd_takes(s);
  for (int i = 0; i < c.count; ++i) {
    const float* wi = w[i].data_ptr<float>();
    if (wino) {
      u.push_back(at::empty({static_cast<int64_t>(day08::winograd_filter_floats(s))},
                            x[i].options().memory_format(at::MemoryFormat::Contiguous)));
      day08::winograd_transform_filters(s, wi, u.back().data_ptr<float>(), stream);
      wi = u.back().data_ptr<float>();
    }
    g.op[i] = {x[i].data_ptr<float>(), wi, bias[i].data_ptr<float>(),
               residual[i].defined() ? residual[i].data_ptr<float>() : nullptr,
               y[i].data_ptr<float>()};
  }
  switch (path) {
    case Path::kTf32Nhwc:
      day08::conv2d_fused_tf32_nhwc(s, g, stream);
      return;
    case Path::kTf32Nchw:
      day08::conv2d_fused(gpu100::Precision::kTf32, s, g, stream);
      return;
    case Path::kFp32Group:
      if (wino) {
        day08::conv2d_fused_winograd(s, g, stream);
      } else {
        day08::conv2d_fused(gpu100::Precision::kFp32, s, g, stream);
      }
      return;
    default:
      TORCH_CHECK(false, "run_group: a path it does not run");
  }
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> dual_conv2d_cuda(
    const at::Tensor& rgb, const at::Tensor& depth, const at::Tensor& w_rgb,
    const at::Tensor& w_depth, const std::optional<at::Tensor>& b_rgb,
    const std::optional<at::Tensor>& b_depth, int64_t stride, int64_t padding,
    const std::optional<at::Tensor>& res_rgb, const std::optional<at::Tensor>& res_depth,
    const std::string& act) {
  constexpr const char* op = "gpu100::dual_conv2d";
  const at::Tensor none;
  const at::Tensor r_rgb = res_rgb.value_or(none), r_depth = res_depth.value_or(none);
  check_same_cuda_device(
      op,
      {rgb, depth, w_rgb, w_depth, b_rgb.value_or(none), b_depth.value_or(none), r_rgb, r_depth},
      {"rgb", "depth", "w_rgb", "w_depth", "b_rgb", "b_depth", "res_rgb", "res_depth"});
  const bool relu = parse_act(op, act);
  const ConvCall c = dual_call(rgb, depth, w_rgb, w_depth, stride, padding);
  const Path path = pick_path(op, c, rgb.scalar_type());
  const c10::cuda::CUDAGuard guard(rgb.device());
  const cudaStream_t stream = current_stream(rgb);
  at::Tensor out_rgb = empty_output(rgb, c), out_depth = empty_output(rgb, c);
  check_residual(op, res_rgb, out_rgb);
  check_residual(op, res_depth, out_depth);
  TORCH_CHECK(path != Path::kFp32Dual || (!r_rgb.defined() && !r_depth.defined()), op,
              ": a residual needs one channel count for both streams (the kernels of two channel "
              "counts have no residual input); got ",
              c.shape[0].c, " and ", c.shape[1].c);
  if (path == Path::kBf16 || path == Path::kTf32Nhwc) {
    for (const auto& [t, name] : {std::pair{rgb, "rgb"},
                                  {depth, "depth"},
                                  {w_rgb, "w_rgb"},
                                  {w_depth, "w_depth"},
                                  {r_rgb, "res_rgb"},
                                  {r_depth, "res_depth"}}) {
      if (t.defined()) check_aligned(op, t, name);
    }
  }
  const int k = c.shape[0].k;
  std::vector<at::Tensor> bias = {bias_fp32(op, b_rgb, rgb, k, "b_rgb"),
                                  bias_fp32(op, b_depth, rgb, k, "b_depth")};
  translate_errors(op, [&] {
    TorchScratch scratch(rgb.device());
    const day08::ScratchScope scope(&scratch);
    if (path != Path::kFp32Dual) {
      run_group(path, c, {rgb, depth}, {w_rgb, w_depth}, bias, {r_rgb, r_depth},
                {out_rgb, out_depth}, relu, stream);
      return;
    }
    // The capstone's own dual kernels: fp32 NCHW, both streams in one launch, any two channel
    // counts. y = alpha * conv + beta with alpha = 1 and beta = the bias.
    const at::Tensor ones =
        at::ones({k}, rgb.options().memory_format(at::MemoryFormat::Contiguous));
    capstone::detail::DualArgs a;
    const at::Tensor* xs[2] = {&rgb, &depth};
    const at::Tensor* ws[2] = {&w_rgb, &w_depth};
    at::Tensor* ys[2] = {&out_rgb, &out_depth};
    for (int i = 0; i < 2; ++i) {
      a.s[i] = {xs[i]->data_ptr<float>(),  ws[i]->data_ptr<float>(), ones.data_ptr<float>(),
                bias[i].data_ptr<float>(), ys[i]->data_ptr(),        c.shape[i].c};
    }
    const day08::ConvShape& s = c.shape[0];
    a.n = s.n, a.h = s.h, a.w = s.w, a.k = s.k, a.r = s.r, a.sw = s.s, a.stride = s.stride;
    a.pad = s.pad, a.p = int(c.p), a.q = int(c.q), a.act = relu ? 1 : 0, a.bf16 = false;
    capstone::detail::launch_dual_store_bound(a, stream);  // the stem kernel, else dual_regblock
  });
  return {out_rgb, out_depth};
}

std::tuple<at::Tensor, at::Tensor> dual_conv2d_meta(
    const at::Tensor& rgb, const at::Tensor& depth, const at::Tensor& w_rgb,
    const at::Tensor& w_depth, const std::optional<at::Tensor>&, const std::optional<at::Tensor>&,
    int64_t stride, int64_t padding, const std::optional<at::Tensor>& res_rgb,
    const std::optional<at::Tensor>& res_depth, const std::string& act) {
  constexpr const char* op = "gpu100::dual_conv2d";
  parse_act(op, act);
  const ConvCall c = dual_call(rgb, depth, w_rgb, w_depth, stride, padding);
  at::Tensor out_rgb = empty_output(rgb, c), out_depth = empty_output(rgb, c);
  check_residual(op, res_rgb, out_rgb);
  check_residual(op, res_depth, out_depth);
  return {out_rgb, out_depth};
}

std::string build_lacks(const std::string& what) {
  gpu100::ArchNeed need = gpu100::ArchNeed::kAny;
  if (what == "tf32" || what == "bf16") {
    need = gpu100::ArchNeed::kSm80;
  } else if (what == "tf32_nhwc") {
    need = gpu100::ArchNeed::kSm90a;
  } else {
    TORCH_CHECK(what == "fp32", "gpu100::build_lacks: what must be \"fp32\", \"tf32\", \"bf16\" ",
                "or \"tf32_nhwc\"; got \"", what, "\"");
  }
  bool has = false;
  translate_errors("gpu100::build_lacks", [&] { has = gpu100::build_has(need); });
  if (has) return "";
  return c10::str(what, " ", gpu100::needs_text(need),
                  " (CMAKE_CUDA_ARCHITECTURES=", gpu100::build_architectures(), ")");
}

at::Tensor conv_bn_act_cuda(const at::Tensor& x, const at::Tensor& w, const at::Tensor& bias,
                            const std::optional<at::Tensor>& residual, const std::string& act,
                            int64_t stride, int64_t padding) {
  constexpr const char* op = "gpu100::conv_bn_act";
  check_same_cuda_device(op, {x, w, bias, residual.value_or(at::Tensor())},
                         {"x", "w", "bias", "residual"});
  const bool relu = parse_act(op, act);
  const ConvCall c = single_call(x, w, stride, padding);
  const Path path = pick_path(op, c, x.scalar_type());
  const c10::cuda::CUDAGuard guard(x.device());
  at::Tensor y = empty_output(x, c);
  check_residual(op, residual, y);
  if (path == Path::kBf16 || path == Path::kTf32Nhwc) {
    check_aligned(op, x, "x");
    check_aligned(op, w, "w");
    if (residual.has_value() && residual->defined()) check_aligned(op, *residual, "residual");
  }
  std::vector<at::Tensor> b = {bias_fp32(op, bias, x, c.shape[0].k, "bias")};
  translate_errors(op, [&] {
    TorchScratch scratch(x.device());
    const day08::ScratchScope scope(&scratch);
    run_group(path == Path::kFp32Dual ? Path::kFp32Group : path, c, {x}, {w}, b,
              {residual.value_or(at::Tensor())}, {y}, relu, current_stream(x));
  });
  return y;
}

at::Tensor conv_bn_act_meta(const at::Tensor& x, const at::Tensor& w, const at::Tensor&,
                            const std::optional<at::Tensor>& residual, const std::string& act,
                            int64_t stride, int64_t padding) {
  constexpr const char* op = "gpu100::conv_bn_act";
  parse_act(op, act);
  const ConvCall c = single_call(x, w, stride, padding);
  at::Tensor y = empty_output(x, c);
  check_residual(op, residual, y);
  return y;
}

}  // namespace gpu100_torch
