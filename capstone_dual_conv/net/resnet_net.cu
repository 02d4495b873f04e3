// MC-ResNet18 and ResNet-18 on the curriculum's kernels (resnet_net.hpp): the program of a trunk,
// the arena layout by liveness, and the three ways of running two trunks.
#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>
#include <string>

#include "common/cuda_check.hpp"
#include "common/device_info.hpp"
#include "common/errors.hpp"
#include "common/half.hpp"
#include "common/math.hpp"
#include "conv.hpp"
#include "conv_day.hpp"
#include "resnet_net.hpp"
#include "resnet_stem.hpp"

namespace capstone::resnet {

namespace {

using bf16 = __nv_bfloat16;
constexpr int kThreads = 256;

// The FC: logits[i][j] = b[j] + sum over trunks t and features f of feat_t[i][f] W[j][512 t + f].
// One warp per logit: the lanes stride over the features (coalesced reads of one row of W and one
// row of features), then a shuffle sum. At these sizes the FC is a matrix-vector product (N x 15
// logits of 1024 features for MC-ResNet18): day04's tiled GEMM, one block looping over K for a
// 1 x 15 output, took about 30 us per trunk at N = 1, 12% of the graphed forward.
struct FcFeatures {
  const float* trunk[2];
  int trunks;
};
__global__ void fc_kernel(FcFeatures feat, const float* __restrict__ w, const float* __restrict__ b,
                          float* __restrict__ y, int n, int classes) {
  const int64_t logit = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (logit >= int64_t(n) * classes) return;  // a whole warp leaves together
  const int64_t img = logit / classes;
  const int j = static_cast<int>(logit % classes);
  const float* wr = w + int64_t(j) * 512 * feat.trunks;
  float sum = 0.f;
  for (int t = 0; t < feat.trunks; ++t) {
    const float* fr = feat.trunk[t] + img * 512;
    for (int f = lane; f < 512; f += 32) sum = fmaf(fr[f], wr[512 * t + f], sum);
  }
  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_down_sync(0xffffffffu, sum, offset);
  if (lane == 0) y[logit] = sum + b[j];
}

day08::ConvShape conv_shape(const ConvSpec& s, int c_in, int n, int h, int w) {
  day08::ConvShape cs;
  cs.n = n, cs.c = c_in, cs.h = h, cs.w = w, cs.k = s.c_out, cs.r = cs.s = s.r;
  cs.stride = s.stride, cs.pad = s.pad, cs.dilation = 1;
  return cs;
}

}  // namespace

day08::ConvShape Net::layer_shape(const Layer& l, int n, int h, int w) {
  return conv_shape(l.spec, l.c_in, n, h, w);
}

const char* to_string(Trunks t) {
  switch (t) {
    case Trunks::kSequential:
      return "sequential";
    case Trunks::kStreams:
      return "streams";
    case Trunks::kDual:
      return "dual";
  }
  return "?";
}

Trunks parse_trunks(const std::string& s) {
  for (Trunks t : {Trunks::kSequential, Trunks::kStreams, Trunks::kDual}) {
    if (s == to_string(t)) return t;
  }
  throw std::invalid_argument("unknown trunks mode '" + s + "' (sequential, streams or dual)");
}

Net::DeviceTrunk Net::upload(const Trunk& t, const TrunkWeights& wts) const {
  const bool bf = precision_ == gpu100::Precision::kBf16;
  auto layer = [&](const ConvBn& cb, const ConvSpec& spec, bool present, bool stem) {
    Layer l;
    l.spec = spec;
    l.c_in = spec.c_in;
    // TF32 on Hopper: every layer but the stem (3 or 1 input channels) on day08 v11's kernel.
    l.nhwc32 = nhwc32_ && spec.c_in % 4 == 0;
    if (!present) return l;
    const FoldedConv f = fold(cb);
    l.bias = gpu100::DeviceBuffer<float>(f.b.size());
    l.bias.upload(f.b);
    if (stem && stem_pool_) {  // the fused stem's own filter layout (resnet_stem.hpp)
      if (bf) {
        const std::vector<bf16> w16 = stem_filters_bf16(f.w, spec.c_in);
        l.w16 = gpu100::DeviceBuffer<bf16>(w16.size());
        l.w16.upload(w16);
      } else {
        const std::vector<float> w32 = stem_filters_tf32(f.w, spec.c_in);
        l.w32 = gpu100::DeviceBuffer<float>(w32.size());
        l.w32.upload(w32);
      }
    } else if (bf) {
      // KCRS fp32 -> KRSC bf16 (day08's host conversion).
      const std::vector<bf16> w16 =
          day08::to_krsc_bf16(conv_shape(spec, spec.c_in, 1, 1, 1), f.w, l.c_in);
      l.w16 = gpu100::DeviceBuffer<bf16>(w16.size());
      l.w16.upload(w16);
    } else if (l.nhwc32) {
      // KCRS -> KRSC, rounded to TF32 here (the tensor core would truncate them; conv.hpp).
      l.w32 = gpu100::DeviceBuffer<float>(f.w.size());
      l.w32.upload(
          gpu100::round_to_tf32(day08::to_krsc_f32(conv_shape(spec, spec.c_in, 1, 1, 1), f.w)));
    } else {
      l.w32 = gpu100::DeviceBuffer<float>(f.w.size());
      l.w32.upload(f.w);
      const day08::ConvShape cs = conv_shape(spec, spec.c_in, 1, 1, 1);
      if (precision_ == gpu100::Precision::kFp32 && day08::winograd_takes(cs)) {
        // fp32 3x3/1 layers run day08's Winograd form: 2.25x fewer FMAs than the direct
        // convolution, on filters transformed here (synchronised before the constructor returns).
        l.wino = gpu100::DeviceBuffer<float>(day08::winograd_filter_floats(cs));
        day08::winograd_transform_filters(cs, l.w32.data(), l.wino.data(), nullptr);
      } else if (precision_ == gpu100::Precision::kFp32) {
        // The other fp32 layers (the stem, stride 2, the 1x1 shortcuts) run day08 v15's kernel,
        // on filters transposed to CRSK here, once.
        l.crsk = gpu100::DeviceBuffer<float>(day08::crsk_filter_floats(cs));
        day08::crsk_transform_filters(cs, l.w32.data(), l.crsk.data(), nullptr);
      }
    }
    return l;
  };
  DeviceTrunk dt;
  dt.t = t;
  dt.layers.push_back(layer(wts.stem, t.stem, true, true));
  for (size_t i = 0; i < t.blocks.size(); ++i) {
    const BasicBlock& b = t.blocks[i];
    dt.layers.push_back(layer(wts.conv1[i], b.conv1, true, false));
    dt.layers.push_back(layer(wts.conv2[i], b.conv2, true, false));
    dt.layers.push_back(layer(wts.shortcut[i], b.shortcut, b.downsample, false));
  }
  return dt;
}

gpu100::ArchNeed net_needs(gpu100::Precision precision) {
  return precision == gpu100::Precision::kFp32 ? gpu100::ArchNeed::kAny : gpu100::ArchNeed::kSm80;
}

Net::Net(const NetWeights& weights, gpu100::Precision precision, Trunks trunks, int only_trunk)
    : model_(weights.model),
      only_trunk_(only_trunk),
      precision_(precision),
      trunks_(trunks),
      classes_(weights.classes) {
  check_net_weights(weights);
  gpu100::require_build(net_needs(precision_),
                        fmt::format("the {} network", gpu100::to_string(precision_)));
  const std::vector<int> channels = trunk_channels(model_);
  model_trunks_ = int(channels.size());
  if ((channels.size() == 1 || only_trunk_ >= 0) && trunks_ != Trunks::kSequential) {
    throw std::invalid_argument("Net: a one-trunk model or part runs its trunk sequentially only");
  }
  if (only_trunk_ >= model_trunks_) {
    throw std::invalid_argument(
        fmt::format("Net: {} has no trunk {}", to_string(model_), only_trunk_));
  }
  // TF32 takes day08 v11 (fp32 NHWC, wgmma) where the GPU runs this build's sm_90a code and v11
  // takes every layer after the stem (the ResNet's channel counts always pass its rules).
  if (precision_ == gpu100::Precision::kTf32) {
    nhwc32_ = true;
    for (const BasicBlock& b : resnet18_trunk(channels[0]).blocks) {
      for (const ConvSpec& c : {b.conv1, b.conv2}) {
        nhwc32_ = nhwc32_ && day08::conv2d_fused_tf32_nhwc_takes(conv_shape(c, c.c_in, 1, 8, 8));
      }
    }
  }
  // The stem and its pool as one kernel wherever the next layer reads NHWC: bf16, and TF32 on
  // Hopper (every ResNet-18 stem passes stem_pool_takes).
  if (precision_ == gpu100::Precision::kBf16 || nhwc32_) {
    stem_pool_ = true;
    for (int c : channels) stem_pool_ = stem_pool_ && stem_pool_takes(resnet18_trunk(c));
    if (!stem_pool_ && precision_ == gpu100::Precision::kBf16) {
      throw std::invalid_argument("Net: the bf16 network needs a ResNet-18 stem (7x7/2 and pool)");
    }
  }
  for (int i = 0; i < model_trunks_; ++i) {
    if (only_trunk_ < 0 || i == only_trunk_) {
      trunk_.push_back(upload(resnet18_trunk(channels[i]), weights.trunks[i]));
    }
  }
  fc_w_ = gpu100::DeviceBuffer<float>(weights.fc_w.size());  // [classes][512 x trunks]
  fc_w_.upload(weights.fc_w);
  fc_b_ = gpu100::DeviceBuffer<float>(size_t(classes_));
  fc_b_.upload(weights.fc_b);
  CUDA_CHECK(cudaDeviceSynchronize());  // the Winograd filter transforms are done before any use
  if (trunks_ == Trunks::kStreams) {
    for (int i = 0; i < 2; ++i) {
      CUDA_CHECK(cudaStreamCreateWithFlags(&side_[i], cudaStreamNonBlocking));
      CUDA_CHECK(cudaEventCreateWithFlags(&join_[i], cudaEventDisableTiming));
    }
    CUDA_CHECK(cudaEventCreateWithFlags(&fork_, cudaEventDisableTiming));
  }
}

Net::~Net() {
  if (graph_exec_ != nullptr) cudaGraphExecDestroy(graph_exec_);
  if (graph_ != nullptr) cudaGraphDestroy(graph_);
  if (capture_ != nullptr) cudaStreamDestroy(capture_);
  for (int i = 0; i < 2; ++i) {
    if (side_[i] != nullptr) cudaStreamDestroy(side_[i]);
    if (join_[i] != nullptr) cudaEventDestroy(join_[i]);
  }
  if (fork_ != nullptr) cudaEventDestroy(fork_);
}

// The trunk as a list of steps and the tensors they produce. A tensor is live from the step that
// writes it to the last step that reads it; the features live to the end (the FC reads them).
Net::Program Net::program(const DeviceTrunk& dt, int n, int h, int w) const {
  const bool bf = precision_ == gpu100::Precision::kBf16;
  const size_t es = bf ? sizeof(bf16) : sizeof(float);
  Program p;
  auto add = [&](Op op, int c_out, int ho, int wo, size_t elem) {
    const int step = int(p.ops.size());
    p.tensors.push_back({size_t(n) * c_out * ho * wo * elem, step, step});
    op.out = int(p.tensors.size()) - 1;
    for (int id : {op.in, op.residual}) {
      if (id >= 0) p.tensors[id].last = step;
    }
    p.ops.push_back(op);
    return op.out;
  };
  const Trunk& t = dt.t;
  int cur = -1, c = t.stem.c_in;
  const int ph = t.pool_out(t.stem.out(h)), pw = t.pool_out(t.stem.out(w));
  if (stem_pool_) {
    cur = add({Op::kStemPool, 0, -1, -1, -1, true, c, h, w}, 64, ph, pw, es);
  } else {
    cur = add({Op::kConv, 0, cur, -1, -1, true, c, h, w}, 64, t.stem.out(h), t.stem.out(w), es);
    h = t.stem.out(h), w = t.stem.out(w);
    cur = add({Op::kMaxPool, -1, cur, -1, -1, false, 64, h, w}, 64, ph, pw, es);
  }
  h = ph, w = pw, c = 64;
  for (size_t i = 0; i < t.blocks.size(); ++i) {
    const BasicBlock& b = t.blocks[i];
    const int l1 = int(1 + 3 * i), ho = b.conv1.out(h), wo = b.conv1.out(w), k = b.conv1.c_out;
    const int sc =
        b.downsample ? add({Op::kConv, l1 + 2, cur, -1, -1, false, c, h, w}, k, ho, wo, es) : cur;
    const int mid = add({Op::kConv, l1, cur, -1, -1, true, c, h, w}, k, ho, wo, es);
    cur = add({Op::kConv, l1 + 1, mid, -1, sc, true, k, ho, wo}, k, ho, wo, es);
    h = ho, w = wo, c = k;
  }
  const int feat = add({Op::kAvgPool, -1, cur, -1, -1, false, c, h, w}, c, 1, 1, sizeof(float));
  p.tensors[feat].last = int(p.ops.size());
  return p;
}

// Sequential: one timeline, trunk 1 after trunk 0 (only trunk 0's features outlive it). Dual: one
// timeline, the trunks in lock-step (step s of both is live at once). Streams: the trunks may run
// in any interleaving, so each gets its own region.
Net::Layout Net::layout(const std::vector<Program>& progs) const {
  Layout out;
  if (trunks_ == Trunks::kStreams) {
    for (const Program& p : progs) {
      const ArenaPlan plan = plan_arena(p.tensors);
      out.offsets.push_back(plan.offsets);
      for (size_t& o : out.offsets.back()) o += out.bytes;
      out.bytes += gpu100::ceil_div(plan.bytes, kArenaAlign) * kArenaAlign;
    }
    return out;
  }
  std::vector<ArenaTensor> all;
  int shift = 0, end = 0;
  for (const Program& p : progs) end += trunks_ == Trunks::kDual ? 0 : int(p.ops.size());
  end = std::max(end, int(progs[0].ops.size()));
  for (const Program& p : progs) {
    for (ArenaTensor t : p.tensors) {
      const bool features = t.last == int(p.ops.size());
      t.first += shift, t.last = features ? end : t.last + shift;
      all.push_back(t);
    }
    if (trunks_ == Trunks::kSequential) shift += int(p.ops.size());
  }
  const ArenaPlan plan = plan_arena(all);
  size_t i = 0;
  for (const Program& p : progs) {
    out.offsets.emplace_back(plan.offsets.begin() + i, plan.offsets.begin() + i + p.tensors.size());
    i += p.tensors.size();
  }
  out.bytes = plan.bytes;
  return out;
}

size_t Net::arena_bytes_for(int n, int h, int w) const {
  if (n < 1 || h < 1 || w < 1) {
    throw gpu100::UsageError(fmt::format("network: an empty batch (N={}, {}x{})", n, h, w));
  }
  std::vector<Program> progs;
  for (const DeviceTrunk& dt : trunk_) progs.push_back(program(dt, n, h, w));
  return layout(progs).bytes;
}

size_t Net::prepare(int n, int h, int w) {
  return lay_out(n, h, w, false);
}

void Net::plan(int n, int h, int w) {
  const size_t bytes = lay_out(n, h, w, true);
  arena_.reserve(bytes);
}

size_t Net::lay_out(int n, int h, int w, bool own_arena) {
  if (n < 1 || h < 1 || w < 1) {
    throw gpu100::UsageError(fmt::format("network: an empty batch (N={}, {}x{})", n, h, w));
  }
  const bool cached = n == plan_n_ && h == plan_h_ && w == plan_w_;
  std::vector<Program> progs;
  Layout lay;
  if (!cached) {
    for (const DeviceTrunk& dt : trunk_) progs.push_back(program(dt, n, h, w));
    lay = layout(progs);
  }
  const size_t bytes = cached ? layout_.bytes : lay.bytes;
  // The memory first: a batch far too large says how many bytes it needs.
  if (own_arena && arena_.bytes() < bytes) {
    const size_t free = gpu100::free_device_memory(), margin = size_t(256) << 20;
    if (bytes + margin > free) {
      throw gpu100::UsageError(fmt::format(
          "network: N={} at {}x{} needs {} bytes ({:.0f} MiB) of activations; {:.0f} MiB of "
          "device memory is free",
          n, h, w, bytes, bytes / 1048576.0, free / 1048576.0));
    }
  }
  if (cached) return bytes;
  for (size_t t = 0; t < progs.size(); ++t) {  // every layer within the kernels' limits
    for (const Op& op : progs[t].ops) {
      try {
        if (op.kind == Op::kConv) {
          day08::check_conv_args(layer_shape(trunk_[t].layers[op.layer], n, op.h, op.w));
        } else if (op.kind == Op::kStemPool) {
          check_stem_pool_args(trunk_[t].t, n, op.h, op.w);
        }
      } catch (const std::invalid_argument& e) {
        throw gpu100::UsageError(fmt::format("network: N={} at {}x{}: {}", n, h, w, e.what()));
      }
    }
  }
  layout_ = std::move(lay);
  progs_ = std::move(progs);
  plan_n_ = n, plan_h_ = h, plan_w_ = w;
  return bytes;
}

void* Net::tensor(int trunk, int id) const {
  const size_t offset = layout_.offsets[trunk][id];
  return workspace_ != nullptr ? static_cast<void*>(workspace_ + offset) : arena_.at<char>(offset);
}

void Net::run_op(int trunk, const Op& op, int n, const std::vector<const float*>& inputs,
                 cudaStream_t stream) {
  const float* input = inputs[trunk];
  const bool bf = precision_ == gpu100::Precision::kBf16;
  const void* in = op.in >= 0 ? tensor(trunk, op.in) : input;
  void* out = tensor(trunk, op.out);
  const Trunk& t = trunk_[trunk].t;
  switch (op.kind) {
    case Op::kStemPool: {
      const Layer& l = trunk_[trunk].layers[0];
      if (bf) {
        stem_pool_bf16(t, input, l.w16.data(), l.bias.data(), static_cast<bf16*>(out), n, op.h,
                       op.w, stream);
      } else {
        stem_pool_tf32(t, input, l.w32.data(), l.bias.data(), static_cast<float*>(out), n, op.h,
                       op.w, stream);
      }
      return;
    }
    case Op::kMaxPool:  // fp32, and TF32 off Hopper: NCHW (the other networks fuse it)
      maxpool_nchw(static_cast<const float*>(in), static_cast<float*>(out), n, op.c, op.h, op.w,
                   t.pool_k, t.pool_stride, t.pool_pad, stream);
      return;
    case Op::kAvgPool:
      if (bf) {
        global_avgpool_nhwc_bf16(static_cast<const bf16*>(in), static_cast<float*>(out), n, op.c,
                                 op.h, op.w, stream);
      } else if (nhwc32_) {
        global_avgpool_nhwc(static_cast<const float*>(in), static_cast<float*>(out), n, op.c, op.h,
                            op.w, stream);
      } else {
        global_avgpool_nchw(static_cast<const float*>(in), static_cast<float*>(out), n, op.c, op.h,
                            op.w, stream);
      }
      return;
    case Op::kConv:
      conv({{trunk, &op}}, n, inputs, stream);
      return;
  }
}

// One launch for the convolutions in `group` ((trunk, op) pairs of one shape: 1, or 2 in dual
// mode): day08's fused form, the bias, the residual and the ReLU in its epilogue.
void Net::conv(const std::vector<std::pair<int, const Op*>>& group, int n,
               const std::vector<const float*>& inputs, cudaStream_t stream) {
  const auto [t0, op0] = group[0];
  const Layer& l0 = trunk_[t0].layers[op0->layer];
  const day08::ConvShape cs = layer_shape(l0, n, op0->h, op0->w);
  if (precision_ == gpu100::Precision::kBf16) {
    day08::ConvGroup<bf16> g;
    g.count = int(group.size()), g.relu = op0->relu;
    for (size_t i = 0; i < group.size(); ++i) {
      const auto [t, op] = group[i];
      const Layer& l = trunk_[t].layers[op->layer];
      g.op[i] = {static_cast<const bf16*>(tensor(t, op->in)), l.w16.data(), l.bias.data(),
                 op->residual >= 0 ? static_cast<const bf16*>(tensor(t, op->residual)) : nullptr,
                 static_cast<bf16*>(tensor(t, op->out))};
    }
    day08::conv2d_fused_bf16_nhwc(cs, g, stream);
    return;
  }
  day08::ConvGroup<float> g;
  g.count = int(group.size()), g.relu = op0->relu;
  const bool wino = l0.wino.size() > 0, crsk = l0.crsk.size() > 0;
  for (size_t i = 0; i < group.size(); ++i) {
    const auto [t, op] = group[i];
    const Layer& l = trunk_[t].layers[op->layer];
    g.op[i] = {op->in >= 0 ? static_cast<const float*>(tensor(t, op->in)) : inputs[t],
               wino   ? l.wino.data()
               : crsk ? l.crsk.data()
                      : l.w32.data(),
               l.bias.data(),
               op->residual >= 0 ? static_cast<const float*>(tensor(t, op->residual)) : nullptr,
               static_cast<float*>(tensor(t, op->out))};
  }
  if (wino) {
    day08::conv2d_fused_winograd(cs, g, stream);
  } else if (crsk) {
    day08::conv2d_fused_crsk(cs, g, stream);
  } else if (l0.nhwc32) {
    day08::conv2d_fused_tf32_nhwc(cs, g, stream);
  } else {
    day08::conv2d_fused(precision_, cs, g, stream);
  }
}

void Net::run_trunk(int t, int n, const std::vector<const float*>& inputs, cudaStream_t stream) {
  for (const Op& op : progs_[t].ops) run_op(t, op, n, inputs, stream);
}

// Both trunks in lock-step: a shared launch where the layers match, one each where they do not
// (the fp32 and tf32 stems: 3 and 1 input channels).
void Net::run_dual(int n, const std::vector<const float*>& inputs, cudaStream_t stream) {
  for (size_t i = 0; i < progs_[0].ops.size(); ++i) {
    const Op& a = progs_[0].ops[i];
    const Op& b = progs_[1].ops[i];
    const bool same = a.kind == Op::kConv && b.kind == Op::kConv &&
                      trunk_[0].layers[a.layer].c_in == trunk_[1].layers[b.layer].c_in;
    if (same) {
      conv({{0, &a}, {1, &b}}, n, inputs, stream);
    } else {
      run_op(0, a, n, inputs, stream);
      run_op(1, b, n, inputs, stream);
    }
  }
}

void Net::forward(const std::vector<const float*>& inputs, int n, int h, int w, float* logits,
                  cudaStream_t stream) {
  check_io(inputs, logits);
  plan(n, h, w);
  run(inputs, n, logits, stream);
}

void Net::forward(const std::vector<const float*>& inputs, int n, int h, int w, float* logits,
                  void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  check_io(inputs, logits);
  prepare(n, h, w);
  if (workspace == nullptr || workspace_bytes < layout_.bytes ||
      reinterpret_cast<uintptr_t>(workspace) % kArenaAlign != 0) {
    throw std::invalid_argument(fmt::format(
        "network: N={} at {}x{} needs a {}-byte aligned workspace of {} bytes (got {} bytes at {})",
        n, h, w, kArenaAlign, layout_.bytes, workspace_bytes, workspace));
  }
  workspace_ = static_cast<char*>(workspace);
  try {
    run(inputs, n, logits, stream);
  } catch (...) {
    workspace_ = nullptr;
    throw;
  }
  workspace_ = nullptr;
}

void Net::check_io(const std::vector<const float*>& inputs, const float* logits) const {
  if (inputs.size() != trunk_.size() ||
      std::find(inputs.begin(), inputs.end(), nullptr) != inputs.end()) {
    throw std::invalid_argument("network: one non-null input per trunk");
  }
  if (only_trunk_ >= 0 && logits != nullptr) {
    throw std::invalid_argument(
        "network: a part (one trunk of the model) has no FC of its own: pass null logits and "
        "call fc() with every trunk's features");
  }
}

void Net::run(const std::vector<const float*>& inputs, int n, float* logits, cudaStream_t stream) {
  if (trunks_ == Trunks::kDual) {
    run_dual(n, inputs, stream);
  } else if (trunks_ == Trunks::kStreams) {
    CUDA_CHECK(cudaEventRecord(fork_, stream));
    for (int t = 0; t < int(trunk_.size()); ++t) {
      CUDA_CHECK(cudaStreamWaitEvent(side_[t], fork_, 0));
      run_trunk(t, n, inputs, side_[t]);
      CUDA_CHECK(cudaEventRecord(join_[t], side_[t]));
      CUDA_CHECK(cudaStreamWaitEvent(stream, join_[t], 0));
    }
  } else {
    for (int t = 0; t < int(trunk_.size()); ++t) run_trunk(t, n, inputs, stream);
  }
  if (logits != nullptr) fc(n, logits, stream);
}

void Net::forward_graph(const std::vector<const float*>& inputs, int n, int h, int w, float* logits,
                        cudaStream_t stream) {
  std::vector<const void*> key(inputs.begin(), inputs.end());
  key.push_back(logits);
  for (int v : {n, h, w}) key.push_back(reinterpret_cast<const void*>(intptr_t(v)));
  if (graph_exec_ == nullptr || key != graph_key_) {
    // Capture needs a stream other than the legacy default one.
    if (capture_ == nullptr)
      CUDA_CHECK(cudaStreamCreateWithFlags(&capture_, cudaStreamNonBlocking));
    // Everything a capture must not do (allocate, tune, synchronise) happens in this eager run,
    // on the stream the capture will use: day08's per-stream scratch (split-K's partial sums)
    // is allocated for it here. It waits for the caller's stream first.
    CUDA_CHECK(cudaStreamSynchronize(stream));
    forward(inputs, n, h, w, logits, capture_);
    CUDA_CHECK(cudaStreamSynchronize(capture_));
    if (graph_exec_ != nullptr) CUDA_CHECK(cudaGraphExecDestroy(graph_exec_));
    if (graph_ != nullptr) CUDA_CHECK(cudaGraphDestroy(graph_));
    graph_exec_ = nullptr, graph_ = nullptr;
    CUDA_CHECK(cudaStreamBeginCapture(capture_, cudaStreamCaptureModeThreadLocal));
    try {
      forward(inputs, n, h, w, logits, capture_);
    } catch (...) {
      cudaGraph_t broken = nullptr;
      cudaStreamEndCapture(capture_, &broken);  // leave the stream usable
      if (broken != nullptr) cudaGraphDestroy(broken);
      throw;
    }
    CUDA_CHECK(cudaStreamEndCapture(capture_, &graph_));
    CUDA_CHECK(cudaGraphInstantiate(&graph_exec_, graph_, 0));
    graph_key_ = key;
  }
  CUDA_CHECK(cudaGraphLaunch(graph_exec_, stream));
}

namespace {
// "stem 7x7/2", "conv 3x3/1 l1" (a 3x3 convolution names its stage: l1 writes 64 channels, l2
// 128, l3 256, l4 512), "shortcut 1x1/2".
std::string step_kind(const ConvSpec& s, bool stem) {
  if (stem) return fmt::format("stem {}x{}/{}", s.r, s.r, s.stride);
  if (s.r == 1) return fmt::format("shortcut {}x{}/{}", s.r, s.r, s.stride);
  int stage = 1;
  while ((64 << stage) <= s.c_out) ++stage;
  return fmt::format("conv {}x{}/{} l{}", s.r, s.r, s.stride, stage);
}
}  // namespace

std::vector<Net::StepTime> Net::profile(const std::vector<const float*>& inputs, int n, int h,
                                        int w, float* logits, int reps) {
  if (only_trunk_ >= 0 || logits == nullptr) {
    throw std::invalid_argument("Net::profile: the whole network, with a logits pointer");
  }
  forward(inputs, n, h, w, logits, nullptr);  // plans, tunes and warms up
  const bool bf = precision_ == gpu100::Precision::kBf16;
  // The steps' kinds, FLOPs and bytes, in order.
  std::vector<StepTime> steps;
  for (int t = 0; t < int(trunk_.size()); ++t) {
    const Program& prog = progs_[t];
    for (const Op& op : prog.ops) {
      StepTime st;
      // Every tensor once: the input (the caller's fp32 batch for the first step), the residual,
      // the output; plus the weights.
      st.bytes = double(prog.tensors[op.out].bytes) +
                 (op.in >= 0 ? double(prog.tensors[op.in].bytes)
                             : double(n) * op.c * op.h * op.w * sizeof(float)) +
                 (op.residual >= 0 ? double(prog.tensors[op.residual].bytes) : 0.0);
      if (op.kind == Op::kConv || op.kind == Op::kStemPool) {
        const Layer& l = trunk_[t].layers[op.layer];
        const ConvSpec& s = l.spec;
        st.kind = step_kind(s, op.layer == 0) + (op.kind == Op::kStemPool ? " + max pool" : "");
        st.shape = conv_shape(s, s.c_in, n, op.h, op.w);
        st.flops = 2.0 * n * s.c_in * s.c_out * s.r * s.r * double(s.out(op.h)) * s.out(op.w);
        st.bytes += bf                  ? l.w16.size() * sizeof(bf16)
                    : l.wino.size() > 0 ? l.wino.size() * sizeof(float)
                    : l.crsk.size() > 0 ? l.crsk.size() * sizeof(float)
                                        : l.w32.size() * sizeof(float);
      } else {
        st.kind = op.kind == Op::kMaxPool ? "max pool" : "avg pool";
      }
      steps.push_back(st);
    }
  }
  StepTime fc_step;
  fc_step.kind = "fc";
  fc_step.flops = 2.0 * n * 512 * classes_ * double(trunk_.size());
  fc_step.bytes =
      (double(n) * 512 * trunk_.size() + 512.0 * classes_ * trunk_.size() + double(n) * classes_) *
      sizeof(float);
  steps.push_back(fc_step);

  // reps forwards, an event after every step. No GPU spin first (GpuTimer's hold): at small
  // batches the steps are host-bound, and each step's time then is the host's launch rate.
  std::vector<cudaEvent_t> events(steps.size() + 1);
  for (auto& e : events) CUDA_CHECK(cudaEventCreate(&e));
  std::vector<std::vector<float>> ms(steps.size());
  for (int rep = 0; rep < std::max(reps, 1); ++rep) {
    size_t i = 0;
    CUDA_CHECK(cudaEventRecord(events[i++], nullptr));
    for (int t = 0; t < int(trunk_.size()); ++t) {
      for (const Op& op : progs_[t].ops) {
        run_op(t, op, n, inputs, nullptr);
        CUDA_CHECK(cudaEventRecord(events[i++], nullptr));
      }
    }
    fc(n, logits, nullptr);
    CUDA_CHECK(cudaEventRecord(events[i++], nullptr));
    CUDA_CHECK(cudaEventSynchronize(events.back()));
    for (size_t j = 0; j < steps.size(); ++j) {
      float e = 0;
      CUDA_CHECK(cudaEventElapsedTime(&e, events[j], events[j + 1]));
      ms[j].push_back(e);
    }
  }
  for (auto& e : events) cudaEventDestroy(e);
  for (size_t j = 0; j < steps.size(); ++j) {
    std::nth_element(ms[j].begin(), ms[j].begin() + ms[j].size() / 2, ms[j].end());
    steps[j].ms = ms[j][ms[j].size() / 2];
  }
  return steps;
}

const float* Net::features(int t) const {
  if (t < 0 || t >= int(trunk_.size()) || plan_n_ == 0) {
    throw std::invalid_argument("Net::features: no such trunk, or no forward yet");
  }
  // Each trunk's pooled features are the last tensor of its program.
  return static_cast<const float*>(tensor(t, int(progs_[t].tensors.size()) - 1));
}

void Net::fc(int n, float* logits, cudaStream_t stream) {
  std::vector<const float*> feat;
  for (int t = 0; t < int(trunk_.size()); ++t) feat.push_back(features(t));
  fc(feat, n, logits, stream);
}

void Net::fc(const std::vector<const float*>& features, int n, float* logits, cudaStream_t stream) {
  if (int(features.size()) != model_trunks_ || logits == nullptr || n < 1 ||
      std::find(features.begin(), features.end(), nullptr) != features.end()) {
    throw std::invalid_argument(fmt::format(
        "Net::fc: one non-null feature pointer per trunk of the model ({}), logits and N >= 1",
        model_trunks_));
  }
  FcFeatures feat{{nullptr, nullptr}, model_trunks_};
  for (int t = 0; t < model_trunks_; ++t) feat.trunk[t] = features[t];
  const int64_t threads = int64_t(n) * classes_ * 32;
  fc_kernel<<<unsigned(gpu100::ceil_div<int64_t>(threads, kThreads)), kThreads, 0, stream>>>(
      feat, fc_w_.data(), fc_b_.data(), logits, n, classes_);
  CUDA_CHECK_LAST();
}

}  // namespace capstone::resnet
