// day06_scan: the host driver.
//
// Versions (kernels in reduce.cu and v1_kogge_stone.cu ... v6_decoupled_lookback.cu):
//   reductions  r1_interleaved_divergent .. r7_vectorized (Harris's steps), cub_reduce
//   scans       v1_kogge_stone, v2_brent_kung, v3_warp_shuffle (one block each, run at their
//               maximum n), v4_hierarchical, v5_reduce_then_scan, v6_decoupled_lookback, cub_scan
// Every row runs at fp32 and int32, is checked against the CPU (int32 exactly, fp32 within
// kFp32TolC * 2^-24 * sum |x|), then timed: median of --iters runs after --warmup, L2 flushed.
// GB/s counts 4n bytes for a reduction (read once) and 8n for a scan (read once, write once).
// --sweep times r7_vectorized, cub_reduce, v6_decoupled_lookback and cub_scan (fp32) at
// n = 2^10 ... 2^28.
//
// Run: build/day06_scan/day06_scan [--n 2^28] [--exclusive] [--sweep] [--json out.json]
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
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
#include "scan.cuh"

namespace {

using gpu100::ResultRow;

constexpr const char* kDay = "day06_scan";

struct Options {
  gpu100::CommonOptions common;
  std::vector<const day06::ReduceVariant*> reduces;
  std::vector<const day06::ScanVariant*> scans;
  bool exclusive = false;
  bool sweep = false;
};

// Inputs: uniform in [-1, 1] for fp32; [-100, 100] for int32, so no prefix of up to 2^24
// elements can overflow (and at 2^28 a random walk stays near 10^6).
template <typename T>
std::vector<T> make_input(int64_t n, uint64_t seed) {
  if constexpr (std::is_same_v<T, float>) {
    return gpu100::random_vector<float>(static_cast<size_t>(n), seed);
  } else {
    return gpu100::random_ints(static_cast<size_t>(n), seed, -100, 100);
  }
}

// ---- reductions ----

template <typename T>
void run_reduce(int64_t n, const Options& opt, gpu100::DayRun& run) {
  gpu100::ResultTable& table = run.table();
  const double ceiling = run.ceiling_gbps();
  if (opt.reduces.empty()) return;
  const std::vector<T> x = make_input<T>(n, opt.common.seed);
  const std::string prec = day06::precision_name<T>();
  const double bytes = 4.0 * double(n);
  double cpu_ms = 0;
  if (!opt.sweep) {
    cpu_ms = gpu100::time_host_ms([&] { (void)day06::reduce_cpu(x.data(), n); }, 3);
    ResultRow cpu = gpu100::make_row("cpu_reduce", prec, gpu100::size_label(n));
    cpu.ms = cpu_ms;
    cpu.verified = false;
    gpu100::derive(cpu, bytes, 0, 0, cpu_ms, 0);
    table.add(cpu);
  }
  size_t ws_bytes = 0;
  for (const auto* v : opt.reduces) ws_bytes = std::max(ws_bytes, v->workspace_bytes(n));
  gpu100::DeviceBuffer<T> d_x(n), d_out(1);
  gpu100::DeviceBuffer<char> ws(std::max<size_t>(ws_bytes, 1));
  d_x.upload(x);

  std::vector<ResultRow> rows;
  double library_ms = 0;
  const char* library = nullptr;  // the registry's library row, when it runs
  for (const auto* v : opt.reduces) {
    const day06::ReduceFn<T> launch = day06::launcher<T>(*v);
    const ResultRow row = run.measure(
        v->name, prec, gpu100::size_label(n), [&] { d_out.poison(); },
        [&] { launch(d_x.data(), d_out.data(), n, ws.data(), ws_bytes, nullptr); },
        [&] { return day06::check_reduce(x, d_out.download()[0]); });
    if (v->is_library) library_ms = *row.ms, library = v->name;
    rows.push_back(row);
  }
  for (size_t i = 0; i < rows.size(); ++i) {
    const bool lib = opt.reduces[i]->is_library;
    gpu100::derive(rows[i], bytes, 0, ceiling, cpu_ms, lib ? 0 : library_ms);
    if (!lib && library_ms > 0) rows[i].library = library;
    table.add(rows[i]);
  }
}

// ---- scans ----

template <typename T>
void run_scan(int64_t n, const Options& opt, gpu100::DayRun& run, std::string& verdict_extra) {
  gpu100::ResultTable& table = run.table();
  const double ceiling = run.ceiling_gbps();
  if (opt.scans.empty()) return;
  const std::vector<T> x_full = make_input<T>(n, opt.common.seed + 1);
  const std::string prec = day06::precision_name<T>();
  const std::string mode = opt.exclusive ? " exclusive" : "";
  // The CPU reference at every size a row runs at (n, and the single-block maxima below n).
  std::vector<int64_t> sizes;
  for (const auto* v : opt.scans) sizes.push_back(std::min(n, v->max_n));
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  std::vector<double> cpu_ms(sizes.size(), 0.0);
  {
    std::vector<T> y(static_cast<size_t>(n));
    for (size_t k = 0; k < sizes.size(); ++k) {
      if (opt.sweep) break;
      const int64_t m = sizes[k];
      cpu_ms[k] =
          gpu100::time_host_ms([&] { day06::scan_cpu(x_full.data(), y.data(), m, opt.exclusive); },
                               m >= (int64_t(1) << 24) ? 3 : 11);
    }
  }
  if (!opt.sweep) {
    ResultRow cpu = gpu100::make_row("cpu_scan", prec + mode, gpu100::size_label(sizes.back()));
    cpu.ms = cpu_ms.back();
    cpu.verified = false;
    gpu100::derive(cpu, 8.0 * double(sizes.back()), 0, 0, cpu_ms.back(), 0);
    table.add(cpu);
  }
  size_t ws_bytes = 0;
  for (const auto* v : opt.scans) ws_bytes = std::max(ws_bytes, v->workspace_bytes(n));
  gpu100::DeviceBuffer<T> d_x(n), d_y(n);
  gpu100::DeviceBuffer<char> ws(std::max<size_t>(ws_bytes, 1));
  d_x.upload(x_full);

  std::vector<ResultRow> rows;
  std::vector<double> row_cpu_ms, row_bytes;
  double library_ms = 0;
  const char* library = nullptr;  // the registry's library row, when it runs
  for (const auto* v : opt.scans) {
    const int64_t m = std::min(n, v->max_n);
    const day06::ScanFn<T> launch = day06::launcher<T>(*v);
    std::string shape = gpu100::size_label(m);
    if (m < n) shape += " (one block, its maximum)";
    ResultRow row = run.measure(
        v->name, prec + mode, shape, [&] { d_y.poison(); },
        [&] { launch(d_x.data(), d_y.data(), m, opt.exclusive, ws.data(), ws_bytes, nullptr); },
        [&] {
          std::vector<T> got(static_cast<size_t>(m));
          CUDA_CHECK(cudaMemcpy(got.data(), d_y.data(), m * sizeof(T), cudaMemcpyDeviceToHost));
          const std::vector<T> x(x_full.begin(), x_full.begin() + m);
          return day06::check_scan(x, got, opt.exclusive);
        });
    if (v->build_note != nullptr && !v->build_note().empty()) {
      row.note += (row.note.empty() ? "" : "; ") + v->build_note();
    }
    if (v->is_library) library_ms = *row.ms, library = v->name;
    rows.push_back(row);
    row_bytes.push_back(8.0 * double(m));
    row_cpu_ms.push_back(cpu_ms[std::lower_bound(sizes.begin(), sizes.end(), m) - sizes.begin()]);
  }
  const ResultRow* best = nullptr;
  for (size_t i = 0; i < rows.size(); ++i) {
    const bool lib = opt.scans[i]->is_library;
    const bool full = opt.scans[i]->max_n >= n;  // single-block rows at a smaller n: no ratio
    gpu100::derive(rows[i], row_bytes[i], 0, ceiling, row_cpu_ms[i], lib || !full ? 0 : library_ms);
    if (!lib && full && library_ms > 0) rows[i].library = library;
    table.add(rows[i]);
    if (!lib && full && (best == nullptr || *rows[i].ms < *best->ms)) best = &rows[i];
  }
  if (best != nullptr && std::is_same_v<T, float> && !opt.sweep) {
    verdict_extra =
        fmt::format("best fp32 scan {}: {:.0f} GB/s, {:.1f}% of the copy ceiling", best->variant,
                    best->gbps.value_or(0), best->pct_of_ceiling.value_or(0));
    if (library_ms > 0) {
      verdict_extra += fmt::format(", {:.2f}x {}", library_ms / *best->ms, library);
    }
  }
}

void print_list() {
  fmt::print("reductions (--variant):\n");
  gpu100::print_list(day06::reduce_variants());
  fmt::print("scans (--variant):\n");
  gpu100::print_list(day06::scan_variants());
}

int run(int argc, char** argv) {
  gpu100::ArgParser args(kDay, "reductions and prefix sums, fp32 and int32, against CUB");
  args.add_int("n", "number of elements", int64_t(1) << 28, 1, day06::kMaxN);
  args.add_flag("exclusive", "exclusive scans (y[i] = x[0] + ... + x[i-1]) instead of inclusive");
  args.add_flag("sweep",
                "time r7_vectorized, cub_reduce, v6_decoupled_lookback, cub_scan (fp32) at "
                "n = 2^10 ... 2^28");
  args.add_common();
  if (!args.parse(argc, argv)) return gpu100::kExitOk;
  if (args.get_flag("list")) {
    print_list();
    return gpu100::kExitOk;
  }

  Options opt;
  opt.common = gpu100::CommonOptions::read(args);
  opt.sweep = args.get_flag("sweep");
  const auto& names = opt.common.variants;
  for (const auto& name : names) {
    if (day06::find_reduce_variant(name) == nullptr && day06::find_scan_variant(name) == nullptr) {
      throw gpu100::UsageError(fmt::format("unknown variant '{}' (see --list)", name));
    }
  }
  // Default: every variant; with --sweep, those tagged "sweep" (the best of each and CUB).
  auto selected = [&](const auto& v) {
    if (!names.empty()) return std::find(names.begin(), names.end(), v.name) != names.end();
    return !opt.sweep || gpu100::has_tag(v.tags, "sweep");
  };
  for (const auto& v : day06::reduce_variants()) {
    if (selected(v)) opt.reduces.push_back(&v);
  }
  for (const auto& v : day06::scan_variants()) {
    if (selected(v) && (!opt.sweep || v.max_n == day06::kMaxN)) opt.scans.push_back(&v);
  }
  opt.exclusive = args.get_flag("exclusive");
  const int64_t n = opt.sweep ? int64_t(1) << 28 : args.get_int("n");

  // Everything above is argument handling; the GPU is touched from here on.
  gpu100::DayRun run(kDay,
                     std::string("reductions and prefix sums") +
                         (opt.exclusive ? " (exclusive scans)" : "") + ", fp32 and int32",
                     opt.common);
  // x and y of n 4-byte elements, plus the workspaces (a few MB at 2^28, CUB's included).
  gpu100::require_device_memory(static_cast<size_t>(n) * 8 + (size_t(64) << 20), kDay);
  std::string verdict_extra;
  if (opt.sweep) {
    for (int k = 10; k <= 28; ++k) {
      run_reduce<float>(int64_t(1) << k, opt, run);
      run_scan<float>(int64_t(1) << k, opt, run, verdict_extra);
    }
  } else {
    run_reduce<float>(n, opt, run);
    run_reduce<int32_t>(n, opt, run);
    std::string unused;
    run_scan<float>(n, opt, run, verdict_extra);
    run_scan<int32_t>(n, opt, run, unused);
  }
  return run.finish(opt.sweep ? std::string(kDay) + "_sweep" : kDay, verdict_extra);
}

}  // namespace

int main(int argc, char** argv) {
  return gpu100::guarded_main(argc, argv, run);
}
