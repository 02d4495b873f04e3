// day08_convolution: the host driver (this file: the options, 1D and 2D filter rows; the Conv2d
// layer's rows are in driver_layer.cpp). Three registries (conv_day.hpp; --list prints them):
//   1D     conv1d.cu                                  GB/s, % of the copy ceiling
//   2D     filter2d_f1_naive.cu ... f6_pipelined.cu   at every --filter-sizes mask width
//   Conv2d conv2d_v1_direct.cu ... v8_winograd_tf32.cu and the cuDNN rows: TFLOP/s, x cuDNN
// Checks: 1D against the whole CPU reference (double); 2D against CPU rows (the first and last 4
// and 24 random rows, every column); Conv2d against the CPU at sampled outputs (every output when
// the layer is small; gpu100::sample_points) and, with cuDNN, every output against cuDNN of the
// same precision. The bf16 rows' inputs (NHWC x, KRSC w) are converted once on the host, before
// any timing, and their reference uses the bf16-rounded inputs.
//
// Run: build/day08_convolution/day08_convolution [--mode filters|conv|all] [--json out.json]
#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/arch.hpp"
#include "common/cuda_check.hpp"
#include "common/device_buffer.hpp"
#include "common/harness.hpp"
#include "common/random.hpp"
#include "driver.hpp"

using day08::Options;

namespace {

using gpu100::ResultRow;
constexpr const char* kDay = "day08_convolution";

void run_conv1d(const Options& opt, gpu100::DayRun& run) {
  const int64_t n = opt.n1d;
  const auto x = gpu100::random_vector<float>(size_t(n), opt.common.seed);
  const auto mask = gpu100::random_vector<float>(size_t(opt.mask1d), opt.common.seed + 1);
  std::vector<double> ref(static_cast<size_t>(n));
  const double cpu_ms = gpu100::time_host_ms(
      [&] { day08::conv1d_cpu(x.data(), mask.data(), n, opt.mask1d, ref.data()); }, 1, false);
  const std::string shape = fmt::format("{} mask {}", gpu100::size_label(n), opt.mask1d);
  const double bytes = 8.0 * double(n);
  run.table().add(gpu100::reference_row("cpu_conv1d", "fp64 acc", shape, cpu_ms, bytes));
  gpu100::DeviceBuffer<float> d_x(n), d_mask(mask.size()), d_y(n);
  d_x.upload(x);
  d_mask.upload(mask);
  const gpu100::Tolerance tol = day08::filter_tolerance(opt.mask1d);
  for (const auto& v : day08::conv1d_variants()) {
    if (!opt.selected(v.name)) continue;
    ResultRow row = run.measure(
        v.name, "fp32", shape, [&] { d_y.poison(); },
        [&] { v.launch(d_x.data(), d_mask.data(), n, opt.mask1d, d_y.data(), nullptr); },
        [&] { return gpu100::compare(ref, d_y.download(), tol.abs_tol, tol.rel_tol); });
    gpu100::derive(row, bytes, 2.0 * double(n) * opt.mask1d, run.ceiling_gbps(), cpu_ms, 0);
    run.table().add(row);
  }
}

// Returns the best variant's % of the copy ceiling for each mask width (for the verdict line).
std::string run_filters(const Options& opt, gpu100::DayRun& run) {
  const int h = opt.img_h, w = opt.img_w;
  const size_t count = size_t(h) * w;
  const auto x = gpu100::random_vector<float>(count, opt.common.seed + 2);
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
  auto download_rows = [&] {
    std::vector<float> got(rows.size() * w);
    for (size_t i = 0; i < rows.size(); ++i) {
      CUDA_CHECK(cudaMemcpy(got.data() + i * w, d_y.data() + size_t(rows[i]) * w, sizeof(float) * w,
                            cudaMemcpyDeviceToHost));
    }
    return got;
  };
  std::string summary;
  for (int mw : opt.filter_sizes) {
    const auto mask = gpu100::random_vector<float>(size_t(mw) * mw, opt.common.seed + 3 + mw);
    d_mask.upload(mask);
    std::vector<double> ref(rows.size() * w);
    for (size_t i = 0; i < rows.size(); ++i) {
      day08::filter2d_cpu_row(x.data(), h, w, mask.data(), mw, rows[i], ref.data() + i * w);
    }
    const gpu100::Tolerance tol = day08::filter_tolerance(mw * mw);
    const std::string shape = fmt::format("{}x{} mask {}x{}", h, w, mw, mw);
    ResultRow best;
    for (const auto& v : day08::filter2d_variants()) {
      if (!opt.selected(v.name)) continue;
      ResultRow row = run.measure(
          v.name, "fp32", shape, [&] { d_y.poison(); },
          [&] { v.launch(d_x.data(), d_mask.data(), h, w, mw, d_y.data(), nullptr); },
          [&] { return gpu100::compare(ref, download_rows(), tol.abs_tol, tol.rel_tol); });
      gpu100::derive(row, 8.0 * double(count), 2.0 * double(count) * mw * mw, run.ceiling_gbps(), 0,
                     0);
      if (row.pct_of_ceiling > best.pct_of_ceiling) best = row;
      run.table().add(row);
    }
    if (best.pct_of_ceiling) {
      gpu100::append(summary, fmt::format("best {}x{} filter {}: {:.1f}% of the copy ceiling", mw,
                                          mw, best.variant, *best.pct_of_ceiling));
    }
  }
  return summary;
}

int parse_int_in(const std::string& flag, const std::string& text, int lo, int hi) {
  const int64_t v = gpu100::parse_size(flag, text);
  if (v < lo || v > hi) {
    throw gpu100::UsageError(fmt::format("--{} {} must be in [{}, {}]", flag, text, lo, hi));
  }
  return static_cast<int>(v);
}

void declare_flags(gpu100::ArgParser& args) {
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
}

Options read_options(const gpu100::ArgParser& args) {
  Options opt;
  const std::string mode = args.get_string("mode");
  if (mode != "filters" && mode != "conv" && mode != "all") {
    throw gpu100::UsageError("--mode must be filters, conv or all, not '" + mode + "'");
  }
  opt.filters = mode != "conv";
  opt.conv = mode != "filters";
  opt.common = gpu100::CommonOptions::read(args);
  auto& names = opt.common.variants;
  std::replace(names.begin(), names.end(), std::string("best_fp32"), std::string(day08::kBestFp32));
  gpu100::check_known(names, day08::conv1d_variants(), day08::filter2d_variants(),
                      day08::conv2d_variants());
  gpu100::refuse_named_not_built(day08::conv2d_variants(), names);
  opt.n1d = args.get_int("n1d");
  opt.mask1d = static_cast<int>(args.get_int("mask1d"));
  if (opt.mask1d % 2 == 0) throw gpu100::UsageError("--mask1d must be odd");
  const std::string img = args.get_string("image");
  const size_t x = img.find('x');
  if (x == std::string::npos) throw gpu100::UsageError("--image must be HxW, e.g. 8192x8192");
  opt.img_h = parse_int_in("image", img.substr(0, x), 1, 1 << 16);
  opt.img_w = parse_int_in("image", img.substr(x + 1), 1, 1 << 16);
  if (int64_t(opt.img_h) * opt.img_w > (int64_t(1) << 30)) {
    throw gpu100::UsageError("--image: at most 2^30 pixels");
  }
  for (int64_t mw : gpu100::parse_int_list("filter-sizes", args.get_string("filter-sizes"), 1,
                                           day08::kMaxFilter2d)) {
    if (mw % 2 == 0) throw gpu100::UsageError("--filter-sizes: mask widths must be odd");
    opt.filter_sizes.push_back(static_cast<int>(mw));
  }
  auto get = [&](const char* flag) { return static_cast<int>(args.get_int(flag)); };
  day08::ConvShape& s = opt.shape;
  s = {get("batch"), get("channels"), get("h"),      get("w"),   get("filters"),
       get("r"),     get("s"),        get("stride"), get("pad"), get("dilation")};
  if (s.s == 0) s.s = s.r;
  try {
    day08::check_conv_args(s);
  } catch (const std::invalid_argument& e) {
    throw gpu100::UsageError(e.what());
  }
  opt.bias = args.get_flag("bias");
  return opt;
}

size_t device_bytes_needed(const Options& opt) {
  size_t need = 0;
  if (opt.filters) need = 8 * std::max<size_t>(opt.n1d, size_t(opt.img_h) * opt.img_w);
  if (opt.conv) {
    // fp32 x, w, y and their bf16 copies (6 bytes per element), v3's scratch, cuDNN's workspace.
    const day08::ConvShape& s = opt.shape;
    const size_t elems = size_t(s.n) * s.c * s.h * s.w + size_t(s.k) * s.c * s.r * s.s +
                         size_t(day08::output_dims(s).size());
    need = std::max(need, 6 * elems + (size_t(256) << 20));
  }
  return need + (size_t(64) << 20);
}

int run(int argc, char** argv) {
  gpu100::ArgParser args(kDay,
                         "1D/2D convolution (PMPP ch. 7) and a Conv2d layer up to tensor-core "
                         "implicit GEMM, against cuDNN");
  declare_flags(args);
  if (!args.parse(argc, argv)) return gpu100::kExitOk;
  if (args.get_flag("list")) {
    fmt::print("1D convolution:\n");
    gpu100::print_list(day08::conv1d_variants());
    fmt::print("2D filters:\n");
    gpu100::print_list(day08::filter2d_variants());
    fmt::print("Conv2d layer (best_fp32 = {}{}):\n", day08::kBestFp32,
               day08::have_cudnn() ? "" : "; cuDNN not found: its rows are skipped");
    gpu100::print_list(day08::conv2d_variants());
    return gpu100::kExitOk;
  }
  const Options opt = read_options(args);

  // Everything above is argument handling; the GPU is touched from here on.
  gpu100::DayRun run(kDay, "PMPP convolution and a Conv2d layer", opt.common);
  if (const auto lacked =
          gpu100::refuse_or_list_lacked(day08::conv2d_variants(), opt.common.variants);
      opt.conv && !lacked.empty()) {
    fmt::print("{}\n", lacked);
  }
  gpu100::require_device_memory(device_bytes_needed(opt), kDay);
  std::string extra;
  if (opt.filters) {
    run_conv1d(opt, run);
    gpu100::append(extra, run_filters(opt, run));
  }
  if (opt.conv) gpu100::append(extra, day08::run_conv2d(opt, run));
  return run.finish(kDay, extra);
}

}  // namespace

int main(int argc, char** argv) {
  return gpu100::guarded_main(argc, argv, run);
}
