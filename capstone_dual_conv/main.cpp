// capstone_dual_conv: the host driver.
//
// Implementations (registry in dual_conv.cpp; kernels in v1_dual_naive.cu ...
// v5_dual_store_bound.cu):
//   cudnn_seq, cudnn_two_streams, cudnn_fused   the library a user would call (cudnn_conv.cpp)
//   own_seq, own_two_streams                    day08::conv2d_forward("best_fp32") per stream
//   dual_naive, dual_halo, dual_regblock        one launch for both streams, direct convolution
//   dual_igemm                                  one launch, implicit GEMM on day04's tiles
//   dual_store_bound                            the stem kernel (3 x 3, C in {1, 3}; else v3)
// Two layer configurations run at each batch size: the plain convolution (no bias, BN or
// activation; every row is compared with cudnn_seq) and conv + bias + BN + activation (--act,
// ReLU by default; compared with cudnn_seq+bn_relu, i.e. cuDNN conv then separate BN and
// activation kernels, and with cudnn_fused). Every row is checked against a double CPU reference
// (every element for small outputs, else sampled points including the image borders) and timed:
// median of --iters runs after --warmup, L2 flushed. GB/s and "% of ceiling" count the compulsory
// bytes (inputs read once, weights once, outputs written once): 100% is the bytes floor at the
// copy ceiling measured in the same run. --sweep runs the stem at N = 1, 8, 32, 64, 128, 256.
//
// Run: build/capstone_dual_conv/capstone_dual_conv [--layer stem|deep] [--batch 8] [--sweep]
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/args.hpp"
#include "common/compare.hpp"
#include "common/cuda_check.hpp"
#include "common/device_buffer.hpp"
#include "common/device_info.hpp"
#include "common/errors.hpp"
#include "common/harness.hpp"
#include "common/random.hpp"
#include "common/results.hpp"
#include "common/tags.hpp"
#include "common/timer.hpp"
#include "dual_conv.hpp"
#include "kernels.cuh"

namespace {

using capstone::Activation;
using capstone::BatchShape;
using capstone::DualConv2d;
using capstone::DualConvShape;
using capstone::OutType;
using gpu100::ResultRow;

constexpr const char* kDay = "capstone_dual_conv";
const std::vector<int> kSweepN = {1, 8, 32, 64, 128, 256};

struct Options {
  DualConvShape shape;
  int h = 416, w = 544, n = 8;
  Activation act = Activation::kRelu;
  std::vector<std::string> variants;  // empty: all
  gpu100::CommonOptions common;
  bool sweep = false;
  int samples = 20000;
  std::string layer_name;
};

bool selected(const Options& opt, const std::string& name) {
  return opt.variants.empty() ||
         std::find(opt.variants.begin(), opt.variants.end(), name) != opt.variants.end();
}

// The layer's parameters: weights in [-1, 1] scaled by 1/sqrt(C R S) (so outputs stay O(1) at any
// depth), bias, and BN statistics with var in [0.5, 1.5].
capstone::StreamParams make_params(const DualConvShape& sh, int stream, bool epilogue,
                                   uint64_t seed) {
  capstone::StreamParams prm;
  const int crs = sh.c(stream) * sh.r * sh.s;
  prm.weight = gpu100::random_vector<float>(size_t(sh.k) * crs, seed);
  const float scale = 1.f / std::sqrt(float(crs));
  for (auto& v : prm.weight) v *= scale;
  if (epilogue) {
    prm.bias = gpu100::random_vector<float>(sh.k, seed + 1, -0.5, 0.5);
    prm.has_bn = true;
    prm.bn.gamma = gpu100::random_vector<float>(sh.k, seed + 2, 0.5, 1.5);
    prm.bn.beta = gpu100::random_vector<float>(sh.k, seed + 3, -0.5, 0.5);
    prm.bn.mean = gpu100::random_vector<float>(sh.k, seed + 4, -0.5, 0.5);
    prm.bn.var = gpu100::random_vector<float>(sh.k, seed + 5, 0.5, 1.5);
  }
  return prm;
}

// The output points a row is checked at, and their reference values.
struct CheckSet {
  std::vector<int64_t> idx[2];
  std::vector<double> ref[2];
  gpu100::DeviceBuffer<int64_t> d_idx[2];
};

CheckSet make_checks(const Options& opt, const BatchShape& b, const std::vector<float> (&x)[2],
                     const capstone::StreamParams (&prm)[2], Activation act) {
  const DualConvShape& sh = opt.shape;
  const int P = sh.p(b.h), Q = sh.q(b.w), K = sh.k;
  const int64_t total = int64_t(b.n) * K * P * Q;
  CheckSet cs;
  std::vector<int64_t> idx;
  if (total <= (int64_t(1) << 20)) {
    for (int64_t i = 0; i < total; ++i) idx.push_back(i);
  } else {
    auto at = [&](int n, int k, int p, int q) { return ((int64_t(n) * K + k) * P + p) * Q + q; };
    for (int n : {0, b.n - 1})
      for (int k : {0, K - 1}) {
        for (int q = 0; q < Q; ++q)
          idx.push_back(at(n, k, 0, q)), idx.push_back(at(n, k, P - 1, q));
        for (int p = 0; p < P; ++p)
          idx.push_back(at(n, k, p, 0)), idx.push_back(at(n, k, p, Q - 1));
      }
    for (int i = 0; i < opt.samples; ++i) {
      idx.push_back(
          static_cast<int64_t>(gpu100::splitmix64(opt.common.seed * 7919 + i) % uint64_t(total)));
    }
  }
  for (int s = 0; s < 2; ++s) {
    cs.idx[s] = idx;
    cs.ref[s].resize(idx.size());
    for (size_t j = 0; j < idx.size(); ++j) {
      int64_t e = idx[j];
      const int q = int(e % Q);
      e /= Q;
      const int p = int(e % P);
      e /= P;
      const int k = int(e % K), n = int(e / K);
      cs.ref[s][j] = capstone::conv_point_cpu(sh, s, b, x[s].data(), prm[s], act, n, k, p, q);
    }
    cs.d_idx[s] = gpu100::DeviceBuffer<int64_t>(idx.size());
    cs.d_idx[s].upload(idx);
  }
  return cs;
}

gpu100::CompareResult check_outputs(const CheckSet& cs, void* const (&out)[2], OutType t,
                                    const DualConvShape& sh) {
  gpu100::CompareResult worst;
  for (int s = 0; s < 2; ++s) {
    gpu100::DeviceBuffer<float> got(cs.idx[s].size());
    capstone::detail::launch_gather(out[s], t == OutType::kBf16, cs.d_idx[s].data(), got.data(),
                                    static_cast<int>(cs.idx[s].size()), nullptr);
    CUDA_CHECK(cudaDeviceSynchronize());
    const std::vector<float> g = got.download();
    const gpu100::CompareResult r =
        gpu100::compare(cs.ref[s].data(), g.data(), g.size(), capstone::abs_tolerance(sh, t),
                        capstone::rel_tolerance(t));
    // Keep the first failure, else the larger error.
    if (s == 0 || (worst.ok && (!r.ok || r.max_rel > worst.max_rel))) worst = r;
  }
  return worst;
}

struct Buffers {
  BatchShape b;
  std::vector<float> x[2];
  gpu100::DeviceBuffer<float> d_x[2];
  gpu100::DeviceBuffer<float> d_y[2];  // fp32-sized; bf16 rows use the first half
};

std::string shape_label(const Options& opt, const BatchShape& b, bool epilogue) {
  const DualConvShape& s = opt.shape;
  std::string label =
      fmt::format("N={} {}x{} {}+{}->{} {}x{}", b.n, b.h, b.w, s.c1, s.c2, s.k, s.r, s.s);
  if (s.stride != 1) label += fmt::format(" stride {}", s.stride);
  if (epilogue) label += fmt::format(" +bias+BN+{}", capstone::to_string(opt.act));
  return label;
}

// Runs and times the listed implementations on one layer configuration; returns the rows (the
// library row's time is filled into the others' "x library" by the caller).
struct RowSpec {
  std::string impl;
  OutType out = OutType::kFp32;
  std::string label;  // the row's variant name
};

std::vector<ResultRow> run_config(const Options& opt, Buffers& buf, bool epilogue,
                                  const std::vector<RowSpec>& specs, double ceiling,
                                  gpu100::GpuTimer& timer, bool sweep) {
  const DualConvShape& sh = opt.shape;
  const BatchShape& b = buf.b;
  const Activation act = epilogue ? opt.act : Activation::kNone;
  capstone::StreamParams prm[2] = {make_params(sh, 0, epilogue, opt.common.seed + 100),
                                   make_params(sh, 1, epilogue, opt.common.seed + 200)};
  DualConv2d layer(sh);
  layer.set_params(0, prm[0]);
  layer.set_params(1, prm[1]);
  layer.set_activation(act);
  CheckSet checks = make_checks(opt, b, buf.x, prm, act);
  const int P = sh.p(b.h), Q = sh.q(b.w);
  const double outputs = 2.0 * b.n * sh.k * P * Q;
  const double in_bytes =
      4.0 * b.n * (sh.c1 + sh.c2) * b.h * b.w + 4.0 * sh.k * (sh.c1 + sh.c2) * sh.r * sh.s;
  const double flops = outputs / 2 * 2.0 * (sh.c1 + sh.c2) * sh.r * sh.s;
  const std::string label = sweep ? fmt::format("N={}", b.n) : shape_label(opt, b, epilogue);

  std::vector<ResultRow> rows;
  // The floor: the compulsory bytes (fp32 outputs) at the copy ceiling of this run.
  {
    ResultRow floor =
        gpu100::make_row(epilogue ? "bytes_floor+epilogue" : "bytes_floor", "fp32", label);
    floor.ms = (in_bytes + 4 * outputs) / (ceiling * 1e6);
    floor.verified = false;
    floor.note = "inputs read once + outputs written once at the copy ceiling (not a kernel)";
    gpu100::derive(floor, in_bytes + 4 * outputs, flops, ceiling, 0, 0);
    if (!sweep || !epilogue) rows.push_back(floor);
  }
  for (const RowSpec& spec : specs) {
    const std::string prec = spec.out == OutType::kBf16 ? "fp32->bf16" : "fp32";
    ResultRow row = gpu100::make_row(spec.label, prec, label);
    try {
      layer.use_kernel(spec.impl);
      layer.set_output_type(spec.out);
      void* out[2] = {buf.d_y[0].data(), buf.d_y[1].data()};
      const capstone::InputTensor rgb{buf.d_x[0].data(), b.n, sh.c1, b.h, b.w};
      const capstone::InputTensor depth{buf.d_x[1].data(), b.n, sh.c2, b.h, b.w};
      buf.d_y[0].poison();
      buf.d_y[1].poison();
      // First call: plans cuDNN (cudnnFind, workspace); its result is the one checked.
      layer.forward(rgb, depth, out[0], out[1], nullptr);
      CUDA_CHECK(cudaDeviceSynchronize());
      const gpu100::CompareResult cmp = check_outputs(checks, out, spec.out, sh);
      // Fewer repeats at large N: about a second per row.
      gpu100::TimingOptions t;
      t.flush_l2 = opt.common.timing.flush_l2;
      const gpu100::Timing probe = timer.time(
          [&] { layer.forward(rgb, depth, out[0], out[1], nullptr); }, {0, 1, false, nullptr});
      t.iters = std::clamp(static_cast<int>(1000.0 / std::max(probe.median_ms, 1e-3)), 3,
                           opt.common.timing.iters);
      t.warmup =
          probe.median_ms > 5 ? std::min(opt.common.timing.warmup, 1) : opt.common.timing.warmup;
      const gpu100::Timing tm =
          timer.time([&] { layer.forward(rgb, depth, out[0], out[1], nullptr); }, t);
      row.ms = tm.median_ms;
      row.ms_min = tm.min_ms;
      row.max_rel_err = cmp.max_rel;
      row.ok = cmp.ok;
      if (!cmp.ok) row.note = cmp.summary();
      const double bytes = in_bytes + (spec.out == OutType::kBf16 ? 2 : 4) * outputs;
      gpu100::derive(row, bytes, flops, ceiling, 0, 0);
    } catch (const capstone::NotAvailable& e) {
      row.verified = false;
      row.note = e.what();
    } catch (const std::invalid_argument& e) {
      row.verified = false;
      row.note = std::string("skipped: ") + e.what();
    } catch (const std::exception& e) {  // a cuDNN status error, e.g. a tensor past its limits
      if (spec.impl.rfind("cudnn", 0) != 0) throw;
      row.verified = false;
      row.note = std::string("skipped: cuDNN refused: ") + e.what();
    }
    rows.push_back(row);
  }
  return rows;
}

// Sets "x library" against the row named `lib` (when it ran) and returns its time (0 if none).
// The name of the registry entry with a tag (the baseline, the fused library row).
std::string tagged(const char* tag) {
  for (const auto& i : capstone::implementations()) {
    if (gpu100::has_tag(i.tags, tag)) return i.name;
  }
  throw std::logic_error(std::string("capstone: no implementation tagged ") + tag);
}

double set_library(std::vector<ResultRow>& rows, const std::string& lib) {
  double lib_ms = 0;
  for (const auto& r : rows) {
    if (r.variant == lib && r.ms) lib_ms = *r.ms;
  }
  if (lib_ms <= 0) return 0;
  for (auto& r : rows) {
    if (r.variant == lib || !r.ms) continue;
    r.ratio_vs_library = lib_ms / *r.ms;
    r.library = lib;
  }
  return lib_ms;
}

// The fastest own row (not a library row, not the floor) among `rows`.
const ResultRow* best_own(const std::vector<ResultRow>& rows) {
  const ResultRow* best = nullptr;
  for (const auto& r : rows) {
    if (!r.ms || r.variant.rfind("cudnn", 0) == 0 || r.variant.rfind("bytes_floor", 0) == 0) {
      continue;
    }
    if (best == nullptr || *r.ms < *best->ms) best = &r;
  }
  return best;
}

bool allocate(Buffers& buf, const Options& opt, const BatchShape& b, std::string& why) {
  const DualConvShape& sh = opt.shape;
  const size_t in1 = size_t(b.n) * sh.c1 * b.h * b.w, in2 = size_t(b.n) * sh.c2 * b.h * b.w;
  const size_t out = size_t(b.n) * sh.k * sh.p(b.h) * sh.q(b.w);
  const size_t need = 4 * (in1 + in2 + 2 * out) + (size_t(1) << 30);  // + 1 GiB for cuDNN
  const size_t free_bytes = gpu100::free_device_memory();
  if (need > free_bytes) {
    why = fmt::format(
        "N={} needs {:.1f} GiB of device memory (inputs, two fp32 outputs, 1 GiB "
        "for cuDNN's workspace) but {:.1f} GiB is free",
        b.n, need / double(1 << 30), free_bytes / double(1 << 30));
    return false;
  }
  buf = Buffers{};
  buf.b = b;
  buf.x[0] = gpu100::random_vector<float>(in1, opt.common.seed);
  buf.x[1] = gpu100::random_vector<float>(in2, opt.common.seed + 1);
  for (int s = 0; s < 2; ++s) {
    buf.d_x[s] = gpu100::DeviceBuffer<float>(buf.x[s].size());
    buf.d_x[s].upload(buf.x[s]);
    buf.d_y[s] = gpu100::DeviceBuffer<float>(out);
  }
  return true;
}

void print_list() {
  fmt::print("implementations (--variant):\n");
  for (const auto& i : capstone::implementations()) {
    fmt::print("  {:<18} {}\n", i.name, i.description);
  }
}

int run(int argc, char** argv) {
  gpu100::ArgParser args(kDay,
                         "the dual-stream (RGB + depth) convolution layer against cuDNN, fp32");
  args.add_string("layer", "stem (416x544, 3+1 -> 64) or deep (104x136, 64+64 -> 64)", "stem");
  args.add_int("batch", "batch size N", 8, 1, 32767);
  args.add_int("h", "input height (0: the layer's)", 0, 0, 1 << 20);
  args.add_int("w", "input width (0: the layer's)", 0, 0, 1 << 20);
  args.add_int("c1", "RGB stream input channels (0: the layer's)", 0, 0, 4096);
  args.add_int("c2", "depth stream input channels (0: the layer's)", 0, 0, 4096);
  args.add_int("filters", "output channels K of each stream", 64, 1, 4096);
  args.add_int("filter", "filter size R = S", 3, 1, 15);
  args.add_int("stride", "stride", 1, 1, 8);
  args.add_int("pad", "zero padding", 1, 0, 16);
  args.add_string("act", "activation of the epilogue rows: none, relu, silu", "relu");
  args.add_int("samples", "random output points checked per stream (large outputs)", 20000, 1,
               10000000);
  args.add_flag("sweep", "the stem at N = 1, 8, 32, 64, 128, 256 (fewer rows)");
  args.add_common();
  args.add_alias("n", "batch");
  args.add_alias("k", "filters");
  if (!args.parse(argc, argv)) return gpu100::kExitOk;
  if (args.get_flag("list")) {
    print_list();
    return gpu100::kExitOk;
  }

  Options opt;
  opt.layer_name = args.get_string("layer");
  if (opt.layer_name == "stem") {
    opt.h = 416, opt.w = 544, opt.shape.c1 = 3, opt.shape.c2 = 1;
  } else if (opt.layer_name == "deep") {
    opt.h = 104, opt.w = 136, opt.shape.c1 = 64, opt.shape.c2 = 64;
  } else {
    throw gpu100::UsageError("unknown --layer '" + opt.layer_name + "' (stem or deep)");
  }
  if (args.get_int("h") > 0) opt.h = static_cast<int>(args.get_int("h"));
  if (args.get_int("w") > 0) opt.w = static_cast<int>(args.get_int("w"));
  if (args.get_int("c1") > 0) opt.shape.c1 = static_cast<int>(args.get_int("c1"));
  if (args.get_int("c2") > 0) opt.shape.c2 = static_cast<int>(args.get_int("c2"));
  opt.shape.k = static_cast<int>(args.get_int("filters"));
  opt.shape.r = opt.shape.s = static_cast<int>(args.get_int("filter"));
  opt.shape.stride = static_cast<int>(args.get_int("stride"));
  opt.shape.pad = static_cast<int>(args.get_int("pad"));
  opt.n = static_cast<int>(args.get_int("batch"));
  opt.sweep = args.get_flag("sweep");
  opt.samples = static_cast<int>(args.get_int("samples"));
  opt.common = gpu100::CommonOptions::read(args);
  try {
    opt.act = capstone::parse_activation(args.get_string("act"));
  } catch (const std::invalid_argument& e) {
    throw gpu100::UsageError(e.what());
  }
  opt.variants = opt.common.variants;
  for (const auto& v : opt.variants) {
    if (capstone::find_implementation(v) == nullptr) {
      throw gpu100::UsageError(fmt::format("unknown variant '{}' (see --list)", v));
    }
  }
  std::vector<int> batches = opt.sweep ? kSweepN : std::vector<int>{opt.n};
  try {  // the shapes are checked before any GPU call
    DualConv2d probe(opt.shape);
    for (int n : batches) probe.check_batch(BatchShape{n, opt.h, opt.w});
  } catch (const std::invalid_argument& e) {
    throw gpu100::UsageError(e.what());
  }

  // Everything above is argument handling; the GPU is touched from here on.
  gpu100::DayRun run(
      kDay,
      fmt::format("dual-stream convolution, {} layer, fp32{}", opt.layer_name,
                  capstone::cudnn_available() ? "" : " (cuDNN not found: its rows are skipped)"),
      opt.common);
  if (!opt.sweep) {
    const DualConvShape& s = opt.shape;
    const size_t need = 4 * (size_t(opt.n) * (s.c1 + s.c2) * opt.h * opt.w +
                             2 * size_t(opt.n) * s.k * s.p(opt.h) * s.q(opt.w));
    gpu100::require_device_memory(need, kDay);
  }
  const double ceiling = run.ceiling_gbps();
  gpu100::GpuTimer timer;  // its own: the rows' repeats adapt to their time (run_config)
  gpu100::ResultTable& table = run.table();
  std::string verdict_extra;
  for (int n : batches) {
    Buffers buf;
    std::string why;
    if (!allocate(buf, opt, BatchShape{n, opt.h, opt.w}, why)) {
      fmt::print("stopped: {}\n", why);
      ResultRow stop = gpu100::make_row("sweep_stop", "fp32", fmt::format("N={}", n));
      stop.verified = false;
      stop.note = "stopped: " + why;
      table.add(stop);
      break;
    }
    std::vector<RowSpec> plain, epi;
    for (const auto& i : capstone::implementations()) {
      const std::string name = i.name;
      if (gpu100::has_tag(i.tags, "fused_only") || !selected(opt, name)) continue;
      if (opt.sweep && !gpu100::has_tag(i.tags, "sweep")) continue;
      plain.push_back({name, OutType::kFp32, name});
    }
    const std::string suffix = std::string("+bn_") + capstone::to_string(opt.act);
    for (const auto& i : capstone::implementations()) {
      const std::string name = i.name;
      if (!gpu100::has_tag(i.tags, "epilogue") || !selected(opt, name)) continue;
      if (opt.sweep && !gpu100::has_tag(i.tags, "epilogue_sweep")) continue;
      const bool fused_only = gpu100::has_tag(i.tags, "fused_only");
      epi.push_back({name, OutType::kFp32, fused_only ? name : name + suffix});
      if (i.fused_epilogue && !i.is_library && !opt.sweep) {
        epi.push_back({name, OutType::kBf16, name + suffix + "_bf16"});
      }
    }
    std::vector<ResultRow> rows_plain =
        run_config(opt, buf, false, plain, ceiling, timer, opt.sweep);
    std::vector<ResultRow> rows_epi = run_config(opt, buf, true, epi, ceiling, timer, opt.sweep);
    const std::string baseline = tagged("baseline"), fused_library = tagged("fused_only");
    set_library(rows_plain, baseline);
    const double seq_epi_ms = set_library(rows_epi, baseline + suffix);
    const ResultRow* bp = best_own(rows_plain);
    const ResultRow* be = nullptr;
    double fused_ms = 0;
    for (const auto& r : rows_epi) {
      if (r.variant == fused_library && r.ms) fused_ms = *r.ms;
      if (r.ms && r.precision == "fp32" && r.variant.rfind("dual", 0) == 0 &&
          (be == nullptr || *r.ms < *be->ms)) {
        be = &r;
      }
    }
    std::string line = fmt::format("N={}:", n);
    if (bp != nullptr) {
      line += fmt::format(" best conv {} {:.3f} ms ({:.1f}% of the bytes floor", bp->variant,
                          *bp->ms, bp->pct_of_ceiling.value_or(0));
      if (bp->ratio_vs_library)
        line += fmt::format(", {:.2f}x {}", *bp->ratio_vs_library, baseline);
      line += ")";
    }
    if (be != nullptr) {
      line += fmt::format("; best fused epilogue {} {:.3f} ms", be->variant, *be->ms);
      if (seq_epi_ms > 0)
        line += fmt::format(" ({:.2f}x cuDNN + separate BN + act", seq_epi_ms / *be->ms);
      if (fused_ms > 0) line += fmt::format(", {:.2f}x {}", fused_ms / *be->ms, fused_library);
      if (seq_epi_ms > 0) line += ")";
    }
    fmt::print("{}\n", line);
    verdict_extra += (verdict_extra.empty() ? "" : "; ") + line;
    for (auto& r : rows_plain) table.add(r);
    for (auto& r : rows_epi) table.add(r);
  }
  fmt::print("\n");
  return run.finish(fmt::format("{}_{}_{}", kDay, opt.layer_name,
                                opt.sweep ? std::string("sweep") : fmt::format("n{}", opt.n)),
                    verdict_extra);
}

}  // namespace

int main(int argc, char** argv) {
  return gpu100::guarded_main(argc, argv, run);
}
