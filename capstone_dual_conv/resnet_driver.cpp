// capstone_mc_resnet18's rows (resnet_driver.hpp).
#include "resnet_driver.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <memory>
#include <optional>
#include <stdexcept>

#include "common/cuda_check.hpp"
#include "common/device_info.hpp"
#include "common/errors.hpp"
#include "common/random.hpp"
#include "common/timer.hpp"
#include "cudnn_frontend_conv.hpp"
#include "dual_conv.hpp"
#include "resnet_cudnn.hpp"
#include "resnet_weights.hpp"

#if GPU100_HAVE_CUDNN
#include "common/cudnn_check.hpp"
#include "conv_layer.hpp"
#include "cudnn_conv_plan.hpp"
#endif

namespace capstone::resnet {

namespace {
using gpu100::Precision;
using gpu100::ResultRow;
}  // namespace

const std::vector<NetRow>& net_rows() {
  static const std::vector<NetRow> rows = [] {
    std::vector<NetRow> list = {
        {"own_fp32_sequential",
         "fp32 (FMA), day08 Winograd (3x3/1) and v4 fused, trunks one after the other",
         Precision::kFp32, Trunks::kSequential, false},
        {"own_fp32_streams", "fp32, each trunk on its own CUDA stream", Precision::kFp32,
         Trunks::kStreams, false},
        {"own_fp32_dual", "fp32, one launch for both trunks per layer", Precision::kFp32,
         Trunks::kDual, false},
        {"own_tf32_sequential", "TF32 tensor cores, day08 v5 fused, trunks one after the other",
         Precision::kTf32, Trunks::kSequential, false},
        {"own_tf32_streams", "TF32, each trunk on its own CUDA stream", Precision::kTf32,
         Trunks::kStreams, false},
        {"own_tf32_dual", "TF32, one launch for both trunks per layer", Precision::kTf32,
         Trunks::kDual, false},
        {"own_bf16_sequential",
         "bf16 NHWC tensor cores, day08 fused (v12/v10/v9 wgmma on sm_90a, else v6), trunks in "
         "turn",
         Precision::kBf16, Trunks::kSequential, false},
        {"own_bf16_streams", "bf16 NHWC, each trunk on its own CUDA stream", Precision::kBf16,
         Trunks::kStreams, false},
        {"own_bf16_dual", "bf16 NHWC, one launch for both trunks per layer (stems included)",
         Precision::kBf16, Trunks::kDual, false},
        {"own_fp32_graph", "fp32, dual (one trunk: sequential), replayed as one CUDA graph",
         Precision::kFp32, Trunks::kDual, false, true},
        {"own_tf32_graph", "TF32, dual (one trunk: sequential), replayed as one CUDA graph",
         Precision::kTf32, Trunks::kDual, false, true},
        {"own_bf16_graph", "bf16, dual (one trunk: sequential), replayed as one CUDA graph",
         Precision::kBf16, Trunks::kDual, false, true},
        {"cudnn_fp32", "cuDNN conv+bias+residual+ReLU (FMA math), cuBLAS FC", Precision::kFp32,
         Trunks::kSequential, true},
        {"cudnn_tf32", "cuDNN with tensor-op math on fp32 data (TF32)", Precision::kTf32,
         Trunks::kSequential, true},
        {"cudnn_bf16", "cuDNN bf16 NHWC", Precision::kBf16, Trunks::kSequential, true},
        // --gpus N (multi_gpu/): bf16, each GPU replaying its network as a CUDA graph.
        {"own_bf16_one_gpu",
         "bf16 graph on GPU 0 alone, timed as the rows below are: their baseline", Precision::kBf16,
         Trunks::kDual, false, true},
        {"own_bf16_batch_gpus",
         "bf16 graph on each of --gpus GPUs, the batch split, logits gathered to GPU 0 by NCCL",
         Precision::kBf16, Trunks::kDual, false, true},
        {"own_bf16_trunk_gpus",
         "bf16 graphs, RGB trunk on GPU 0, depth trunk on GPU 1, features sent by NCCL",
         Precision::kBf16, Trunks::kSequential, false, true},
    };
    // The own rows need what their precision's network needs; cuDNN brings its own kernels.
    for (NetRow& r : list) r.needs = r.library ? gpu100::ArchNeed::kAny : net_needs(r.precision);
    const size_t n = list.size();
    list[n - 3].multi = Multi::kOneGpu;
    list[n - 2].multi = Multi::kBatch;
    list[n - 1].multi = Multi::kTrunks;
    return list;
  }();
  return rows;
}

Images::Images(const NetOptions& opt, const NetWeights& wts)
    : model_(opt.model), wts_(wts), seed_(opt.common.seed), h_(opt.h), w_(opt.w) {
  if (!opt.input.empty()) file_ = load_net_inputs(opt.input, model_, &file_n_, &h_, &w_);
}

std::vector<float> Images::image(int trunk, int i) const {
  const int c = trunk_channels(model_)[trunk];
  const size_t count = size_t(c) * h_ * w_;
  if (!file_.empty()) {
    const auto first = file_[trunk].begin() + std::ptrdiff_t(count * i);
    return std::vector<float>(first, first + std::ptrdiff_t(count));
  }
  return gpu100::random_vector<float>(count, seed_ + 1000003 * uint64_t(i) + 7 * uint64_t(trunk));
}

std::vector<gpu100::DeviceBuffer<float>> Images::upload(int n) const {
  std::vector<gpu100::DeviceBuffer<float>> out;
  for (int t = 0; t < int(trunk_channels(model_).size()); ++t) {
    const size_t count = size_t(trunk_channels(model_)[t]) * h_ * w_;
    out.emplace_back(count * n);
    for (int i = 0; i < n; ++i) {
      const std::vector<float> img = image(t, i);
      CUDA_CHECK(cudaMemcpy(out.back().data() + count * i, img.data(), count * sizeof(float),
                            cudaMemcpyHostToDevice));
    }
  }
  return out;
}

const std::vector<float>& Images::reference(int i) {
  auto it = refs_.find(i);
  if (it != refs_.end()) return it->second;
  std::vector<std::vector<float>> in;
  for (int t = 0; t < int(trunk_channels(model_).size()); ++t) in.push_back(image(t, i));
  const auto start = std::chrono::steady_clock::now();
  std::vector<float> logits = net_forward_cpu(wts_, in, 1, h_, w_);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (refs_.empty()) cpu_ms_ = ms;  // the first image's forward: the CPU row
  return refs_.emplace(i, std::move(logits)).first->second;
}

namespace {

// The network of a row behind one interface: plan, forward, arena.
struct AnyNet {
  std::unique_ptr<Net> own;
  std::unique_ptr<CudnnNet> lib;
  void plan(int n, int h, int w) { own ? own->plan(n, h, w) : lib->plan(n, h, w); }
  bool graph = false;
  void forward(const std::vector<const float*>& in, int n, int h, int w, float* logits) {
    if (own && graph) {
      own->forward_graph(in, n, h, w, logits);
    } else if (own) {
      own->forward(in, n, h, w, logits);
    } else {
      lib->forward(in, logits);
    }
  }
  size_t arena_bytes() const { return own ? own->arena_bytes() : lib->arena_bytes(); }
};

}  // namespace

// Images 0 and n - 1 against the CPU reference: relative L2 error of their logits over the
// precision's bound; every image's logits must be finite (they were poisoned with NaN).
gpu100::CompareResult check_logits(const std::vector<float>& got, int n, int classes,
                                   Images& images, Precision p) {
  std::vector<float> ref, sel;
  for (int i : n > 1 ? std::vector<int>{0, n - 1} : std::vector<int>{0}) {
    const std::vector<float>& r = images.reference(i);
    ref.insert(ref.end(), r.begin(), r.end());
    sel.insert(sel.end(), got.begin() + size_t(i) * classes, got.begin() + size_t(i + 1) * classes);
  }
  gpu100::CompareResult cmp = gpu100::compare(ref, sel, 1e30, 0);
  const bool finite = std::all_of(got.begin(), got.end(), [](float v) { return std::isfinite(v); });
  const double tol = logits_tolerance(p);
  cmp.err_over_tol = finite ? cmp.rel_l2 / tol : std::numeric_limits<double>::infinity();
  cmp.ok = finite && cmp.rel_l2 <= tol;
  return cmp;
}

std::string shape_label(int n, int h, int w) {
  return fmt::format("N={} {}x{}", n, h, w);
}

bool prepare_row(ResultRow& r, const NetRow& row, bool strict, const std::function<void()>& build) {
  if (!gpu100::build_has(row.needs)) {
    r.verified = false;
    r.note = fmt::format("{} (this build: CMAKE_CUDA_ARCHITECTURES={})",
                         gpu100::needs_text(row.needs), gpu100::build_architectures());
    return false;
  }
  try {
    build();
  } catch (const capstone::NotAvailable& e) {
    r.verified = false, r.note = e.what();
    return false;
  } catch (const gpu100::UsageError& e) {
    if (strict) throw;
    r.verified = false, r.note = std::string("refused: ") + e.what();
    return false;
  }
  return true;
}

gpu100::TimingOptions row_timing(gpu100::TimingOptions t, double once_ms) {
  t.iters = std::clamp(int(kRowBudgetMs / std::max(once_ms, 1e-3)), std::min(3, t.iters), t.iters);
  t.warmup = std::min(t.warmup, 2);
  return t;
}

ResultRow run_net_row(const NetRow& row, const NetOptions& opt, const NetWeights& wts,
                      Images& images, const std::vector<const float*>& ptrs, int n,
                      gpu100::DayRun& run, bool strict, std::vector<float>* logits_out) {
  const int h = images.h(), w = images.w();
  ResultRow r = gpu100::make_row(row.name, gpu100::to_string(row.precision), shape_label(n, h, w));
  const size_t free_before = gpu100::free_device_memory();
  AnyNet net;
  const bool ready = prepare_row(r, row, strict, [&] {
    if (row.library) {
      net.lib = std::make_unique<CudnnNet>(wts, row.precision);
    } else {
      const bool one_trunk = trunk_channels(opt.model).size() == 1;
      net.own =
          std::make_unique<Net>(wts, row.precision, one_trunk ? Trunks::kSequential : row.trunks);
      net.graph = row.graph;
    }
    net.plan(n, h, w);
  });
  if (!ready) return r;
  gpu100::DeviceBuffer<float> logits(size_t(n) * wts.classes);
  logits.poison();
  net.forward(ptrs, n, h, w, logits.data());
  CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<float> got = logits.download();
  if (logits_out != nullptr) *logits_out = got;
  gpu100::set_check(r, check_logits(got, n, wts.classes, images, row.precision));
  // Timing: one forward to estimate, then repeats for about kRowBudgetMs.
  const auto launch = [&] { net.forward(ptrs, n, h, w, logits.data()); };
  const double one = run.time(launch, {0, 1, false, nullptr}).median_ms;
  gpu100::TimingOptions timing = row_timing(opt.common.timing, one);
  // A forward without a graph is a host loop of launches, which at small batches is slower than
  // the GPU's work: that host time is part of what such a row costs, so its repeats start from an
  // idle GPU (no hold). A graph is one launch: its repeats are held, as a kernel's are.
  if (!row.graph) timing.hold_us = 0;
  const gpu100::Timing tm = run.time(launch, timing);
  r.ms = tm.median_ms, r.ms_min = tm.min_ms;
  const double flops = net_flops(opt.model, h, w, wts.classes) * n;
  gpu100::derive(r, 0, flops, 0, images.cpu_ms() * n, 0);
  const size_t free_after = gpu100::free_device_memory();
  r.metrics = {{"images/s", n / (tm.median_ms * 1e-3)},
               {"arena MB", net.arena_bytes() / 1e6},
               {"device MB", free_before > free_after ? (free_before - free_after) / 1e6 : 0.0}};
  if (net.lib) r.note = net.lib->describe();
  for (const NetRow& lib : net_rows()) {  // the library row of the same precision
    if (!row.library && lib.library && lib.precision == row.precision) r.library = lib.name;
  }
  return r;
}

namespace {

// The shape of a stage's 3x3 stride-1 convolution ("conv 3x3/1 l2": every one of them has the
// same), or none for another kind.
std::optional<day08::ConvShape> layer_shape_of(const std::vector<Net::StepTime>& steps,
                                               const std::string& kind) {
  if (kind.rfind("conv 3x3/1 l", 0) != 0) return std::nullopt;
  for (const auto& st : steps) {
    if (st.kind == kind) return st.shape;
  }
  return std::nullopt;
}

// cuDNN alone on one convolution of this shape, in the precision's configuration (bf16 NHWC;
// TF32 tensor-op math on fp32 NHWC, as our TF32 layers and PyTorch's channels_last take it;
// fp32 without tensor-op math, as the cuDNN network rows), with the
// algorithm re-timed from cudnnFind's list (day08's CudnnConvPlan): the median of 20 runs after
// 3 warm-ups, on random operands; in bf16 and TF32 the faster of that and the fastest engine of
// cuDNN's graph API. The convolution only: no bias, residual or ReLU, which our layers fuse (so it
// is the library's lower bound for the layer).
double cudnn_layer_ms(const day08::ConvShape& s, Precision p) {
#if GPU100_HAVE_CUDNN
  const day08::CudnnPick pick = p == Precision::kBf16   ? day08::CudnnPick::kBf16Nhwc
                                : p == Precision::kTf32 ? day08::CudnnPick::kTf32Nhwc
                                                        : day08::CudnnPick::kFp32NotTensorOp;
  cudnnHandle_t handle = gpu100::cudnn_thread_handle();
  const day08::CudnnConvPlan plan(handle, s, pick, nullptr);
  day08::RandomConvOperands ops(s, p == Precision::kBf16, 21);
  gpu100::DeviceBuffer<char> ws(std::max<size_t>(plan.found_workspace_bytes(), 1));
  gpu100::GpuTimer timer;
  gpu100::TimingOptions t;
  t.warmup = 3;
  t.iters = 20;
  double ms = timer
                  .time(
                      [&] {
                        plan.forward(handle, ops.x.data(), ops.w.data(), ops.y.data(), ws.data(),
                                     ws.bytes(), nullptr);
                      },
                      t)
                  .median_ms;
  // On tensor cores, also every engine of cuDNN's graph API (day08's cudnn_frontend_conv.hpp):
  // the faster of the two is the library's figure, and the line under the table names it.
  if (p != Precision::kFp32) {
    const day08::CudnnFrontendTiming fe = day08::cudnn_frontend_conv_best(s, p == Precision::kBf16);
    std::string which = fmt::format("legacy API {:.4f} ms ({})", ms, plan.choice());
    if (fe.timed > 0) {
      which += fmt::format(", graph API {:.4f} ms (fastest of {}: {})", fe.ms, fe.timed, fe.engine);
      ms = std::min(ms, fe.ms);
    } else {
      which += ", graph API: " + fe.error;
    }
    fmt::print("  cuDNN {} N={} C={} {}x{} K={}: {}\n", gpu100::to_string(p), s.n, s.c, s.h, s.w,
               s.k, which);
  }
  return ms;
#else
  (void)s, (void)p;
  return 0;
#endif
}

}  // namespace

std::vector<gpu100::ResultRow> layer_rows(const NetOptions& opt, const NetWeights& wts,
                                          const std::vector<const float*>& inputs, int n, int h,
                                          int w, double ceiling_gbps) {
  std::vector<gpu100::ResultRow> rows;
  gpu100::DeviceBuffer<float> logits(size_t(n) * wts.classes);
  for (Precision p : {Precision::kFp32, Precision::kTf32, Precision::kBf16}) {
    const bool wanted = std::any_of(opt.rows.begin(), opt.rows.end(), [&](const std::string& r) {
      return r.rfind(std::string("own_") + gpu100::to_string(p), 0) == 0;
    });
    if (!wanted) continue;
    if (!gpu100::build_has(net_needs(p))) {
      fmt::print("layers, {}: not run in this build ({})\n", gpu100::to_string(p),
                 gpu100::needs_text(net_needs(p)));
      continue;
    }
    Net net(wts, p, Trunks::kSequential);
    const std::vector<Net::StepTime> steps = net.profile(inputs, n, h, w, logits.data());
    struct Sum {
      int count = 0;
      double ms = 0, flops = 0, bytes = 0;
    };
    std::vector<std::pair<std::string, Sum>> kinds;  // in first-seen order
    Sum total;
    for (const auto& st : steps) {
      auto it =
          std::find_if(kinds.begin(), kinds.end(), [&](auto& k) { return k.first == st.kind; });
      if (it == kinds.end()) it = kinds.insert(kinds.end(), {st.kind, Sum{}});
      for (Sum* sum : {&it->second, &total}) {
        sum->count++, sum->ms += st.ms, sum->flops += st.flops, sum->bytes += st.bytes;
      }
    }
    // The four stages' 3x3 stride-1 convolutions together, then the whole forward.
    Sum conv3;
    for (const auto& [kind, sum] : kinds) {
      if (kind.rfind("conv 3x3/1 l", 0) != 0) continue;
      conv3.count += sum.count, conv3.ms += sum.ms, conv3.flops += sum.flops;
      conv3.bytes += sum.bytes;
    }
    if (conv3.count > 0) kinds.push_back({"conv 3x3/1 (l1-l4)", conv3});
    kinds.push_back({"total", total});
    fmt::print(
        "layers, {} sequential, N={} {}x{} (median of 5 forwards, events between steps): "
        "{:.3f} ms\n",
        gpu100::to_string(p), n, h, w, total.ms);
    for (const auto& [kind, sum] : kinds) {
      gpu100::ResultRow r =
          gpu100::make_row(fmt::format("layers_{}: {}", gpu100::to_string(p), kind),
                           gpu100::to_string(p), fmt::format("N={} {}x{}", n, h, w));
      r.verified = false;
      r.ms = sum.ms;
      gpu100::derive(r, sum.bytes, sum.flops, ceiling_gbps, 0, 0);
      r.metrics = {{"steps", double(sum.count)}, {"share %", 100 * sum.ms / total.ms}};
      // A stage's 3x3 layer: cuDNN on one of its convolutions, in this run, beside the mean of
      // ours.
      std::string vs;
      if (const auto shape = layer_shape_of(steps, kind); shape && cudnn_available()) {
        const double lib_ms = cudnn_layer_ms(*shape, p);
        const double own_ms = sum.ms / sum.count, conv_flops = sum.flops / sum.count;
        r.metrics.push_back({"cuDNN TFLOP/s", conv_flops / (lib_ms * 1e9)});
        r.metrics.push_back({"x cuDNN", lib_ms / own_ms});
        vs = fmt::format("  cuDNN {:.1f} TFLOP/s: {:.2f}x", conv_flops / (lib_ms * 1e9),
                         lib_ms / own_ms);
      }
      fmt::print(
          "  {:<18} x{:<3} {:9.3f} ms  {:5.1f}%  {:>14}  {:7.0f} GB/s ({:4.1f}% of copy){}\n", kind,
          sum.count, sum.ms, 100 * sum.ms / total.ms,
          sum.flops > 0 ? fmt::format("{:.1f} TFLOP/s", sum.flops / (sum.ms * 1e9)) : "-",
          r.gbps.value_or(0), r.pct_of_ceiling.value_or(0), vs);
      rows.push_back(std::move(r));
    }
  }
  return rows;
}

}  // namespace capstone::resnet
