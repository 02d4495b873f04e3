// day08_convolution: the host driver.
//
// Versions (kernels in conv1d.cu, filter2d_f1_naive.cu ... filter2d_f6_pipelined.cu and
// conv2d_v1_direct.cu ... conv2d_v8_*.cu; --list prints the registries):
//   1D    c1_naive, c2_constant_mask, c3_smem_halo                  (--n1d, --mask1d)
//   2D    f1_naive, f2_constant_mask, f3_in_tile, f4_cached_halo, f5_register_tiled,
//         f6_pipelined
//         at every --filter-sizes mask width on one --image           (GB/s, % of copy ceiling)
//   conv  v1_direct, v2_smem_tiled, v3_im2col_gemm, v4_implicit_gemm, v5_implicit_gemm_tf32,
//         v6_implicit_gemm_bf16_nhwc, v7_winograd, v8_winograd_tf32, cudnn_fp32, cudnn_tf32,
//         cudnn_bf16_nhwc
//                                                                   (TFLOP/s, GB/s, x cuDNN)
// Checks: 1D against the full CPU reference (double); 2D against CPU rows (the first and last 4
// and 24 random rows, every column); conv against the CPU at 16384 sampled outputs (borders
// included) or the whole output when it is small, and, with cuDNN, every output against
// cudnn_fp32 (the bf16 rows: the CPU on the bf16-rounded inputs, and every output against
// cudnn_bf16_nhwc). The bf16 rows' inputs (NHWC x, KRSC w) are converted once on the host,
// before any timing. Then timing: median of --iters runs after --warmup, L2 flushed before each
// run.
// GB/s counts the compulsory bytes (inputs read once, output written once).
//
// Run: build/day08_convolution/day08_convolution [--mode filters|conv|all] [--json out.json]
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/arch.hpp"
#include "common/args.hpp"
#include "common/compare.hpp"
#include "common/cuda_check.hpp"
#include "common/device_buffer.hpp"
#include "common/device_info.hpp"
#include "common/errors.hpp"
#include "common/half.hpp"
#include "common/harness.hpp"
#include "common/random.hpp"
#include "common/results.hpp"
#include "common/timer.hpp"
#include "conv_day.hpp"

namespace {

using gpu100::ResultRow;
using bf16 = __nv_bfloat16;
constexpr const char* kDay = "day08_convolution";

struct Options {
  bool filters = true, conv = true;
  std::vector<std::string> variants;  // empty: all
  int64_t n1d = 0;
  int mask1d = 7;
  int img_h = 8192, img_w = 8192;
  std::vector<int> filter_sizes;
  day08::ConvShape shape;
  bool bias = false;
  gpu100::CommonOptions common;
};

using Prec = day08::ConvPrecision;

// The registry's library row (cuDNN) of a precision.
const day08::Conv2dVariant& library_of(Prec p) {
  for (const auto& v : day08::conv2d_variants()) {
    if (v.is_library && v.precision == p) return v;
  }
  throw std::logic_error("day08: no library row for a precision");
}

bool selected(const Options& opt, const std::string& name) {
  return opt.variants.empty() ||
         std::find(opt.variants.begin(), opt.variants.end(), name) != opt.variants.end();
}

void set_check(ResultRow& row, const gpu100::CompareResult& cmp) {
  row.max_rel_err = cmp.max_rel;
  row.ok = cmp.ok;
  if (!cmp.ok) row.note = cmp.summary();
}

// ---- 1D --------------------------------------------------------------------------------------
void run_conv1d(const Options& opt, gpu100::DayRun& run) {
  gpu100::ResultTable& table = run.table();
  const double ceiling = run.ceiling_gbps();
  const int64_t n = opt.n1d;
  const std::vector<float> x = gpu100::random_vector<float>(size_t(n), opt.common.seed);
  const std::vector<float> mask =
      gpu100::random_vector<float>(size_t(opt.mask1d), opt.common.seed + 1);
  std::vector<double> ref(static_cast<size_t>(n));
  const double cpu_ms = gpu100::time_host_ms(
      [&] { day08::conv1d_cpu(x.data(), mask.data(), n, opt.mask1d, ref.data()); }, 1, false);
  const std::string shape = fmt::format("{} mask {}", gpu100::size_label(n), opt.mask1d);
  const double bytes = 8.0 * double(n);
  ResultRow cpu = gpu100::make_row("cpu_conv1d", "fp64 acc", shape);
  cpu.ms = cpu_ms;
  cpu.verified = false;
  gpu100::derive(cpu, bytes, 0, 0, cpu_ms, 0);
  table.add(cpu);
  gpu100::DeviceBuffer<float> d_x(n), d_mask(mask.size()), d_y(n);
  d_x.upload(x);
  d_mask.upload(mask);
  const day08::Tolerance tol = day08::filter_tolerance(opt.mask1d);
  for (const auto& v : day08::conv1d_variants()) {
    if (!selected(opt, v.name)) continue;
    auto launch = [&] { v.launch(d_x.data(), d_mask.data(), n, opt.mask1d, d_y.data(), nullptr); };
    d_y.poison();
    launch();
    CUDA_CHECK(cudaDeviceSynchronize());
    const auto cmp = gpu100::compare(ref, d_y.download(), tol.abs_tol, tol.rel_tol);
    const gpu100::Timing t = run.time(launch);
    ResultRow row = gpu100::make_row(v.name, "fp32", shape);
    row.ms = t.median_ms;
    row.ms_min = t.min_ms;
    set_check(row, cmp);
    gpu100::derive(row, bytes, 2.0 * double(n) * opt.mask1d, ceiling, cpu_ms, 0);
    table.add(row);
  }
}

// ---- 2D filters ------------------------------------------------------------------------------
// Returns the best variant's % of the copy ceiling for each mask width (for the verdict line).
std::string run_filters(const Options& opt, gpu100::DayRun& run) {
  gpu100::ResultTable& table = run.table();
  const double ceiling = run.ceiling_gbps();
  const int h = opt.img_h, w = opt.img_w;
  const size_t count = size_t(h) * w;
  const std::vector<float> x = gpu100::random_vector<float>(count, opt.common.seed + 2);
  gpu100::DeviceBuffer<float> d_x(count), d_y(count),
      d_mask(day08::kMaxFilter2d * day08::kMaxFilter2d);
  d_x.upload(x);
  // The rows checked: the first and last 4 (the padded borders) and 24 random rows.
  std::vector<int> rows;
  for (int i = 0; i < std::min(h, 4); ++i) rows.push_back(i), rows.push_back(h - 1 - i);
  for (int i = 0; i < 24; ++i) {
    rows.push_back(static_cast<int>(gpu100::splitmix64(opt.common.seed * 31 + i) % uint64_t(h)));
  }
  std::sort(rows.begin(), rows.end());
  rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
  std::string summary;
  for (int mw : opt.filter_sizes) {
    const std::vector<float> mask =
        gpu100::random_vector<float>(size_t(mw) * mw, opt.common.seed + 3 + mw);
    d_mask.upload(mask);
    std::vector<double> ref(rows.size() * w);
    for (size_t i = 0; i < rows.size(); ++i) {
      day08::filter2d_cpu_row(x.data(), h, w, mask.data(), mw, rows[i], ref.data() + i * w);
    }
    const day08::Tolerance tol = day08::filter_tolerance(mw * mw);
    const std::string shape = fmt::format("{}x{} mask {}x{}", h, w, mw, mw);
    const double bytes = 8.0 * double(count);
    double best_pct = 0;
    std::string best_name;
    for (const auto& v : day08::filter2d_variants()) {
      if (!selected(opt, v.name)) continue;
      auto launch = [&] { v.launch(d_x.data(), d_mask.data(), h, w, mw, d_y.data(), nullptr); };
      d_y.poison();
      launch();
      CUDA_CHECK(cudaDeviceSynchronize());
      std::vector<float> got(rows.size() * w);
      for (size_t i = 0; i < rows.size(); ++i) {
        CUDA_CHECK(cudaMemcpy(got.data() + i * w, d_y.data() + size_t(rows[i]) * w,
                              sizeof(float) * w, cudaMemcpyDeviceToHost));
      }
      const auto cmp = gpu100::compare(ref, got, tol.abs_tol, tol.rel_tol);
      const gpu100::Timing t = run.time(launch);
      ResultRow row = gpu100::make_row(v.name, "fp32", shape);
      row.ms = t.median_ms;
      row.ms_min = t.min_ms;
      set_check(row, cmp);
      gpu100::derive(row, bytes, 2.0 * double(count) * mw * mw, ceiling, 0, 0);
      if (row.pct_of_ceiling.value_or(0) > best_pct) {
        best_pct = row.pct_of_ceiling.value_or(0);
        best_name = v.name;
      }
      table.add(row);
    }
    if (!best_name.empty()) {
      summary += fmt::format("{}best {}x{} filter {}: {:.1f}% of the copy ceiling",
                             summary.empty() ? "" : "; ", mw, mw, best_name, best_pct);
    }
  }
  return summary;
}

// ---- Conv2d layer ----------------------------------------------------------------------------

// The first (untimed) call of a bf16 library row: cuDNN may not support the bf16 NHWC
// configuration at some shape (no algorithm, CUDNN_STATUS_NOT_SUPPORTED); that becomes the row's
// "skipped" note instead of ending the run. CUDA errors still end it.
std::string first_library_call(const std::function<void()>& launch) {
  try {
    launch();
    CUDA_CHECK(cudaDeviceSynchronize());
    return "";
  } catch (const gpu100::CudaError&) {
    throw;
  } catch (const std::runtime_error& e) {
    return e.what();
  }
}

std::string run_conv2d(const Options& opt, gpu100::DayRun& run) {
  gpu100::ResultTable& table = run.table();
  const double ceiling = run.ceiling_gbps();
  const day08::ConvShape& s = opt.shape;
  const int P = s.p(), Q = s.q();
  const size_t x_count = size_t(s.n) * s.c * s.h * s.w, w_count = size_t(s.k) * s.c * s.r * s.s;
  const size_t y_count = size_t(s.n) * s.k * P * Q;
  const std::vector<float> x = gpu100::random_vector<float>(x_count, opt.common.seed + 20);
  const std::vector<float> w = gpu100::random_vector<float>(w_count, opt.common.seed + 21);
  const std::vector<float> bias = gpu100::random_vector<float>(size_t(s.k), opt.common.seed + 22);
  const float* h_bias = opt.bias ? bias.data() : nullptr;
  gpu100::DeviceBuffer<float> d_x(x_count), d_w(w_count), d_b(size_t(s.k)), d_y(y_count);
  d_x.upload(x);
  d_w.upload(w);
  d_b.upload(bias);
  const float* dev_bias = opt.bias ? d_b.data() : nullptr;

  // The bf16 NHWC rows (v6, cudnn_bf16_nhwc): x in NHWC and w in KRSC, bf16, converted once here
  // on the host, outside any timing; cuDNN's bf16 output (NPQK) goes to d_y16.
  bool any_bf16 = false;
  for (const auto& v : day08::conv2d_variants()) {
    any_bf16 =
        any_bf16 || (v.takes_bf16_nhwc() && selected(opt, v.name) && gpu100::build_has(v.needs));
  }
  gpu100::DeviceBuffer<bf16> d_x16(any_bf16 ? x_count : 0), d_w16(any_bf16 ? w_count : 0),
      d_y16(any_bf16 ? y_count : 0);
  std::vector<float> x_r, w_r;  // the values the bf16 rows see, as floats (their reference's input)
  if (any_bf16) {
    d_x16.upload(day08::to_nhwc_bf16(s, x));
    d_w16.upload(day08::to_krsc_bf16(s, w));
    x_r = gpu100::round_trip<bf16>(x);
    w_r = gpu100::round_trip<bf16>(w);
  }

  // The CPU reference: every output when the layer is small, else 16384 sampled outputs (the
  // first and last rows and columns of the output planes included).
  const bool full = double(y_count) * s.c * s.r * s.s <= 2e8;
  std::vector<size_t> idx;
  if (full) {
    for (size_t i = 0; i < y_count; ++i) idx.push_back(i);
  } else {
    for (uint64_t i = 0; i < 16384; ++i) {
      const uint64_t hsh = gpu100::splitmix64(opt.common.seed * 7919 + i);
      const size_t nk = size_t(hsh % (uint64_t(s.n) * s.k));
      int p = static_cast<int>((hsh >> 20) % uint64_t(P)),
          q = static_cast<int>((hsh >> 40) % uint64_t(Q));
      if (i % 4 == 1) p = (i / 4) % 2 ? P - 1 : 0;
      if (i % 4 == 2) q = (i / 4) % 2 ? Q - 1 : 0;
      idx.push_back((nk * P + p) * Q + q);
    }
  }
  std::vector<double> ref(idx.size()), ref16(any_bf16 ? idx.size() : 0);
  for (size_t j = 0; j < idx.size(); ++j) {
    const size_t i = idx[j];
    const int q = int(i % Q), p = int((i / Q) % P), k = int((i / (size_t(P) * Q)) % s.k),
              n = int(i / (size_t(P) * Q * s.k));
    ref[j] = day08::conv2d_cpu_at(s, x.data(), w.data(), h_bias, n, k, p, q);
    if (any_bf16) ref16[j] = day08::conv2d_cpu_at(s, x_r.data(), w_r.data(), h_bias, n, k, p, q);
  }
  const std::string shape = day08::to_string(s) + (opt.bias ? " +bias" : "");
  const double flops = day08::conv2d_flops(s);

  // cuDNN fp32's whole output, the second reference (when cuDNN is present); for the bf16 rows,
  // cuDNN bf16's (when it runs this shape).
  std::vector<float> cudnn_y, cudnn16_y;
  if (day08::have_cudnn()) {
    d_y.poison();
    day08::conv2d_cudnn_fp32(s, d_x.data(), d_w.data(), dev_bias, d_y.data(), nullptr);
    CUDA_CHECK(cudaDeviceSynchronize());
    cudnn_y = d_y.download();
    if (any_bf16 && day08::cudnn_bf16_refusal(s, opt.bias).empty()) {
      d_y16.poison();
      const std::string err = first_library_call([&] {
        day08::conv2d_cudnn_bf16_nhwc(s, d_x16.data(), d_w16.data(), nullptr, d_y16.data(),
                                      nullptr);
      });
      if (err.empty()) cudnn16_y = day08::npqk_to_nkpq(s, d_y16.download());
    }
  }

  std::vector<ResultRow> rows;
  std::vector<const day08::Conv2dVariant*> used;
  double lib_ms[3] = {0, 0, 0};
  for (const auto& v : day08::conv2d_variants()) {
    if (!selected(opt, v.name) || !gpu100::build_has(v.needs)) continue;
    ResultRow row = gpu100::make_row(v.name, day08::to_string(v.precision), shape);
    if (v.is_library && !day08::have_cudnn()) {
      row.verified = false;
      row.note = "skipped: cuDNN not found";
      table.add(row);
      continue;
    }
    if (v.refusal != nullptr) {
      if (const std::string why = v.refusal(s, opt.bias); !why.empty()) {
        row.verified = false;
        row.note = "refused: " + why;
        table.add(row);
        continue;
      }
    }
    const bool is16 = v.takes_bf16_nhwc();
    auto launch = [&] {
      if (is16) {
        void* y = v.y_bf16_npqk ? static_cast<void*>(d_y16.data()) : d_y.data();
        v.launch_bf16_nhwc(s, d_x16.data(), d_w16.data(), dev_bias, y, nullptr);
      } else {
        v.launch(s, d_x.data(), d_w.data(), dev_bias, d_y.data(), nullptr);
      }
    };
    d_y.poison();
    d_y16.poison();
    // Also the untimed first call: cuDNN's Find and workspace, v3's scratch.
    if (is16 && v.is_library) {
      if (const std::string err = first_library_call(launch); !err.empty()) {
        row.verified = false;
        row.note = "skipped: " + err;
        table.add(row);
        continue;
      }
    } else {
      launch();
      CUDA_CHECK(cudaDeviceSynchronize());
    }
    const std::vector<float> got =
        v.y_bf16_npqk ? day08::npqk_to_nkpq(s, d_y16.download()) : d_y.download();
    std::vector<float> sampled(idx.size());
    for (size_t j = 0; j < idx.size(); ++j) sampled[j] = got[idx[j]];
    const day08::Tolerance tol = day08::conv2d_tolerance(s, v);
    gpu100::CompareResult cmp =
        gpu100::compare(is16 ? ref16 : ref, sampled, tol.abs_tol, tol.rel_tol);
    const std::vector<float>& lib_y = is16 ? cudnn16_y : cudnn_y;
    if (cmp.ok && !lib_y.empty()) {
      // cuDNN's own rounding is in the reference here: the variant's tolerance plus the larger
      // of its own and cuDNN's (x10 when Find picks a Winograd or FFT algorithm).
      const day08::Conv2dVariant& lib_v = library_of(is16 ? Prec::kBf16 : Prec::kFp32);
      const day08::Tolerance tl = day08::conv2d_tolerance(s, lib_v);
      const gpu100::CompareResult vs =
          gpu100::compare(lib_y, got, tol.abs_tol + std::max(tol.abs_tol, tl.abs_tol),
                          tol.rel_tol + std::max(tol.rel_tol, tl.rel_tol));
      if (!vs.ok) cmp = vs, cmp.ok = false;
    } else if (cmp.ok && !full) {
      // No whole-output reference: at least every output must have been written (no NaN poison).
      const gpu100::CompareResult written = gpu100::compare(
          std::vector<float>(got.size(), 0.f), got, std::numeric_limits<double>::infinity(), 0);
      if (!written.ok) cmp = written, cmp.ok = false;
    }
    const gpu100::Timing t = run.time(launch);
    row.ms = t.median_ms;
    row.ms_min = t.min_ms;
    set_check(row, cmp);
    if (v.is_library) {
      lib_ms[int(v.precision)] = t.median_ms;
      if (row.note.empty()) row.note = "algorithm " + day08::cudnn_choice(s, v.precision);
      if (is16 && cmp.ok) row.note += "; bf16 NHWC x, w and y (cuDNN's one bf16 configuration)";
    } else if (is16 && cmp.ok) {
      row.note =
          "bf16 NHWC x, KRSC w (converted once on the host, not timed), fp32 accumulation, fp32 "
          "NKPQ y; checked on the bf16-rounded inputs";
    }
    rows.push_back(row);
    used.push_back(&v);
  }
  std::string summary;
  double best_tf[3] = {0, 0, 0};
  std::string best_name[3];
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto* v = used[i];
    const double lib = v->is_library ? 0 : lib_ms[int(v->precision)];
    const double bytes = v->takes_bf16_nhwc()
                             ? day08::conv2d_bytes_bf16(s, opt.bias, v->y_bf16_npqk)
                             : day08::conv2d_bytes(s, opt.bias);
    gpu100::derive(rows[i], bytes, flops, ceiling, 0, lib);
    if (!v->is_library && lib > 0) rows[i].library = v->library;
    if (!v->is_library && rows[i].ok) {
      const double tf = rows[i].tflops.value_or(0);
      const int pr = int(v->precision);
      if (tf > best_tf[pr]) best_tf[pr] = tf, best_name[pr] = v->name;
    }
    table.add(rows[i]);
  }
  auto part = [&](day08::ConvPrecision p) {
    const int pr = int(p);
    if (best_name[pr].empty()) return;
    summary += fmt::format("{}best {} {:.1f} TFLOP/s", summary.empty() ? "" : "; ", best_name[pr],
                           best_tf[pr]);
    if (lib_ms[pr] > 0) {
      summary += fmt::format(" = {:.2f}x {}", best_tf[pr] / (flops / (lib_ms[pr] * 1e-3) / 1e12),
                             library_of(p).name);
    }
  };
  for (Prec p : {Prec::kFp32, Prec::kTf32, Prec::kBf16}) part(p);
  return summary;
}

void print_list() {
  fmt::print("1D convolution (--variant):\n");
  for (const auto& v : day08::conv1d_variants()) fmt::print("  {:<24} {}\n", v.name, v.description);
  fmt::print("2D filters (--variant):\n");
  for (const auto& v : day08::filter2d_variants()) {
    fmt::print("  {:<24} {}\n", v.name, v.description);
  }
  fmt::print("Conv2d layer (--variant; best_fp32 = {}):\n", day08::kBestFp32);
  for (const auto& v : day08::conv2d_variants()) {
    fmt::print("  {:<28} {} [{}]{}{}\n", v.name, v.description, day08::to_string(v.precision),
               v.is_library && !day08::have_cudnn() ? " (cuDNN not found: skipped)" : "",
               gpu100::needs_suffix(v.needs));
  }
}

int parse_int_in(const std::string& flag, const std::string& text, int lo, int hi) {
  const int64_t v = gpu100::parse_size(flag, text);
  if (v < lo || v > hi) {
    throw gpu100::UsageError(fmt::format("--{} {} must be in [{}, {}]", flag, text, lo, hi));
  }
  return static_cast<int>(v);
}

int run(int argc, char** argv) {
  gpu100::ArgParser args(kDay,
                         "1D/2D convolution (PMPP ch. 7) and a Conv2d layer up to tensor-core "
                         "implicit GEMM, against cuDNN");
  args.add_string("mode", "filters (1D + 2D), conv (the layer) or all", "all");
  args.add_int("n1d", "1D: number of elements", int64_t(1) << 26, 1, day08::kMaxN1d);
  args.add_int("mask1d", "1D: mask width (odd)", 7, 1, day08::kMaxMask1d);
  args.add_string("image", "2D: image size HxW", "8192x8192");
  args.add_string("filter-sizes", "2D: mask widths, comma-separated (1, 3, 5, 7)", "3,5,7");
  args.add_int("batch", "conv: batch size N", 64, 1, 1 << 16);
  args.add_int("channels", "conv: input channels C", 64, 1, 1 << 16);
  args.add_int("h", "conv: input height H", 56, 1, 1 << 20);
  args.add_int("w", "conv: input width W", 56, 1, 1 << 20);
  args.add_int("filters", "conv: filters K", 64, 1, 1 << 16);
  args.add_int("r", "conv: filter height R", 3, 1, 64);
  args.add_int("s", "conv: filter width S (0: same as R)", 0, 0, 64);
  args.add_int("stride", "conv: stride", 1, 1, 64);
  args.add_int("pad", "conv: zero padding", 1, 0, 64);
  args.add_int("dilation", "conv: dilation", 1, 1, 64);
  args.add_flag("bias", "conv: add a bias per filter (cuDNN then needs a second call)");
  args.add_common();
  args.add_alias("n", "batch");
  args.add_alias("c", "channels");
  args.add_alias("k", "filters");
  if (!args.parse(argc, argv)) return gpu100::kExitOk;
  if (args.get_flag("list")) {
    print_list();
    return gpu100::kExitOk;
  }

  Options opt;
  const std::string mode = args.get_string("mode");
  if (mode != "filters" && mode != "conv" && mode != "all") {
    throw gpu100::UsageError("--mode must be filters, conv or all, not '" + mode + "'");
  }
  opt.filters = mode != "conv";
  opt.conv = mode != "filters";
  opt.variants = gpu100::split_list(args.get_string("variant"));
  for (const auto& name : opt.variants) {
    bool known = day08::find_conv2d_variant(name) != nullptr;
    for (const auto& v : day08::conv1d_variants()) known = known || name == v.name;
    for (const auto& v : day08::filter2d_variants()) known = known || name == v.name;
    if (!known) throw gpu100::UsageError(fmt::format("unknown variant '{}' (see --list)", name));
  }
  for (auto& name : opt.variants) {
    if (name == "best_fp32") name = day08::kBestFp32;
  }
  gpu100::refuse_named_not_built(day08::conv2d_variants(), opt.variants);
  opt.n1d = args.get_int("n1d");
  opt.mask1d = static_cast<int>(args.get_int("mask1d"));
  if (opt.mask1d % 2 == 0) throw gpu100::UsageError("--mask1d must be odd");
  {
    const std::string img = args.get_string("image");
    const size_t x = img.find('x');
    if (x == std::string::npos) throw gpu100::UsageError("--image must be HxW, e.g. 8192x8192");
    opt.img_h = parse_int_in("image", img.substr(0, x), 1, 1 << 16);
    opt.img_w = parse_int_in("image", img.substr(x + 1), 1, 1 << 16);
    if (int64_t(opt.img_h) * opt.img_w > (int64_t(1) << 30)) {
      throw gpu100::UsageError("--image: at most 2^30 pixels");
    }
  }
  for (const auto& t : gpu100::split_list(args.get_string("filter-sizes"))) {
    const int mw = parse_int_in("filter-sizes", t, 1, day08::kMaxFilter2d);
    if (mw % 2 == 0) throw gpu100::UsageError("--filter-sizes: mask widths must be odd");
    opt.filter_sizes.push_back(mw);
  }
  if (opt.filter_sizes.empty()) throw gpu100::UsageError("--filter-sizes: give at least one");
  day08::ConvShape& s = opt.shape;
  s.n = static_cast<int>(args.get_int("batch"));
  s.c = static_cast<int>(args.get_int("channels"));
  s.h = static_cast<int>(args.get_int("h"));
  s.w = static_cast<int>(args.get_int("w"));
  s.k = static_cast<int>(args.get_int("filters"));
  s.r = static_cast<int>(args.get_int("r"));
  s.s = args.get_int("s") == 0 ? s.r : static_cast<int>(args.get_int("s"));
  s.stride = static_cast<int>(args.get_int("stride"));
  s.pad = static_cast<int>(args.get_int("pad"));
  s.dilation = static_cast<int>(args.get_int("dilation"));
  try {
    day08::check_conv_args(s);
  } catch (const std::invalid_argument& e) {
    throw gpu100::UsageError(e.what());
  }
  opt.bias = args.get_flag("bias");
  opt.common = gpu100::CommonOptions::read(args);

  // Everything above is argument handling; the GPU is touched from here on.
  gpu100::DayRun run(kDay, "PMPP convolution and a Conv2d layer", opt.common);
  if (const auto lacked = gpu100::refuse_or_list_lacked(day08::conv2d_variants(), opt.variants);
      opt.conv && !lacked.empty()) {
    fmt::print("{}\n", lacked);
  }
  size_t need = 0;
  if (opt.filters) need = std::max<size_t>(8 * size_t(opt.n1d), 8 * size_t(opt.img_h) * opt.img_w);
  if (opt.conv) {
    // fp32 x, w, y and their bf16 copies (the bf16 NHWC rows): 6 bytes per element.
    const size_t conv_bytes = 6 * (size_t(s.n) * s.c * s.h * s.w + size_t(s.k) * s.c * s.r * s.s +
                                   size_t(s.n) * s.k * s.p() * s.q());
    need = std::max(need, conv_bytes + (size_t(256) << 20));  // + v3's scratch, cuDNN's workspace
  }
  gpu100::require_device_memory(need + (size_t(64) << 20), kDay);
  std::vector<std::string> parts;
  if (opt.filters) {
    run_conv1d(opt, run);
    const std::string f = run_filters(opt, run);
    if (!f.empty()) parts.push_back(f);
  }
  if (opt.conv) {
    const std::string c = run_conv2d(opt, run);
    if (!c.empty()) parts.push_back(c);
  }
  std::string extra;
  for (const auto& p : parts) extra += (extra.empty() ? "" : "; ") + p;
  return run.finish(kDay, extra);
}

}  // namespace

int main(int argc, char** argv) {
  return gpu100::guarded_main(argc, argv, run);
}
