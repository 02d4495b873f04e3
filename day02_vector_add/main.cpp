// day02_vector_add: the host driver.
//
// Steps, each timed on its own:
//   pageable host buffers -> H2D copy -> kernel -> D2H copy -> check against the CPU reference.
// CUDA events time the kernel and each transfer, std::chrono times the CPU reference. The table
// gives kernel-only and end-to-end speedups over the CPU, the transfers (pageable and pinned),
// and the kernel's % of the copy bandwidth measured in this same run.
// --sweep times the kernels at n = 2^10 ... 2^28, to show where launch overhead stops dominating.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "common/args.hpp"
#include "common/compare.hpp"
#include "common/cuda_check.hpp"
#include "common/device_buffer.hpp"
#include "common/device_info.hpp"
#include "common/errors.hpp"
#include "common/random.hpp"
#include "common/results.hpp"
#include "common/timer.hpp"
#include "vector_add.cuh"

namespace {

using gpu100::ResultRow;

struct Options {
  std::vector<const day02::Variant*> variants;
  int warmup = 5, iters = 20;
  uint64_t seed = 42;
  bool flush_l2 = true;
};

struct KernelResult {
  ResultRow row;
  double ms = 0;
};

// Poisons c, runs the variant once, checks every element exactly, then times it.
KernelResult run_variant(const day02::Variant& v, const Options& opt, gpu100::GpuTimer& timer,
                         const gpu100::DeviceBuffer<float>& a, const gpu100::DeviceBuffer<float>& b,
                         gpu100::DeviceBuffer<float>& c, const std::vector<float>& ref) {
  const int64_t n = static_cast<int64_t>(ref.size());
  c.poison();
  v.launch(a.data(), b.data(), c.data(), n, nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<float> got = c.download();
  // fp32 addition is exactly rounded on both sides, so the tolerance is zero.
  const gpu100::CompareResult cmp = gpu100::compare_exact(ref, got);

  gpu100::TimingOptions topt;
  topt.warmup = opt.warmup;
  topt.iters = opt.iters;
  topt.flush_l2 = opt.flush_l2;
  const gpu100::Timing t =
      timer.time([&] { v.launch(a.data(), b.data(), c.data(), n, nullptr); }, topt);

  KernelResult r;
  r.ms = t.median_ms;
  r.row.variant = v.name;
  r.row.precision = "fp32";
  r.row.shape = gpu100::size_label(n);
  r.row.ms = t.median_ms;
  r.row.ms_min = t.min_ms;
  r.row.max_rel_err = cmp.max_rel;
  r.row.ok = cmp.ok;
  if (!cmp.ok) r.row.note = cmp.summary();
  return r;
}

// Runs the CPU reference and every selected variant at one size. With `transfers`, also times
// the H2D/D2H copies (pageable and pinned) and adds the end-to-end rows.
void run_size(int64_t n, const Options& opt, double ceiling_gbps, bool transfers,
              gpu100::ResultTable& table, std::string& verdict_extra) {
  const size_t bytes = static_cast<size_t>(n) * sizeof(float);
  gpu100::require_device_memory(3 * bytes, fmt::format("n={}", n).c_str());

  const std::vector<float> a = gpu100::random_vector<float>(n, opt.seed);
  const std::vector<float> b = gpu100::random_vector<float>(n, opt.seed + 1);
  std::vector<float> ref(n);
  const double cpu_ms =
      gpu100::time_host_ms([&] { day02::vector_add_cpu(a.data(), b.data(), ref.data(), n); },
                           n >= (int64_t(1) << 24) ? 3 : 11);
  const double compulsory = 3.0 * double(bytes);  // read A and B, write C

  ResultRow cpu = gpu100::make_row("cpu_reference", "fp32", gpu100::size_label(n));
  cpu.ms = cpu_ms;
  cpu.verified = false;  // the reference itself
  gpu100::derive(cpu, compulsory, 0, 0, cpu_ms, 0);
  table.add(cpu);

  gpu100::DeviceBuffer<float> d_a(n), d_b(n), d_c(n);
  double h2d_ms = 0, d2h_ms = 0;
  if (transfers) {
    // Pageable buffers (plain std::vector): what most first programs use.
    std::vector<float> c_host(n);
    d_c.poison();
    const int reps = 3;
    h2d_ms = gpu100::time_memcpy_ms(d_a.data(), a.data(), bytes, cudaMemcpyHostToDevice, reps) +
             gpu100::time_memcpy_ms(d_b.data(), b.data(), bytes, cudaMemcpyHostToDevice, reps);
    d2h_ms = gpu100::time_memcpy_ms(c_host.data(), d_c.data(), bytes, cudaMemcpyDeviceToHost, reps);
    ResultRow h2d = gpu100::make_row("h2d_pageable", "fp32", fmt::format("2 x {} B", bytes));
    h2d.ms = h2d_ms;
    h2d.verified = false;
    gpu100::derive(h2d, 2.0 * bytes, 0, 0, 0, 0);
    table.add(h2d);
    ResultRow d2h = gpu100::make_row("d2h_pageable", "fp32", fmt::format("{} B", bytes));
    d2h.ms = d2h_ms;
    d2h.verified = false;
    gpu100::derive(d2h, bytes, 0, 0, 0, 0);
    table.add(d2h);

    // Pinned buffers: the DMA engine reads them directly, no staging copy.
    gpu100::PinnedBuffer<float> pinned(n);
    std::copy(a.begin(), a.end(), pinned.data());
    ResultRow h2dp = gpu100::make_row("h2d_pinned", "fp32", fmt::format("{} B", bytes));
    h2dp.ms =
        gpu100::time_memcpy_ms(d_a.data(), pinned.data(), bytes, cudaMemcpyHostToDevice, reps);
    h2dp.verified = false;
    gpu100::derive(h2dp, bytes, 0, 0, 0, 0);
    table.add(h2dp);
    ResultRow d2hp = gpu100::make_row("d2h_pinned", "fp32", fmt::format("{} B", bytes));
    d2hp.ms =
        gpu100::time_memcpy_ms(pinned.data(), d_c.data(), bytes, cudaMemcpyDeviceToHost, reps);
    d2hp.verified = false;
    gpu100::derive(d2hp, bytes, 0, 0, 0, 0);
    table.add(d2hp);
  }
  d_a.upload(a);
  d_b.upload(b);

  gpu100::GpuTimer timer;
  std::vector<KernelResult> results;
  double library_ms = 0;
  const char* library = nullptr;  // the registry's library row, when it runs
  for (const day02::Variant* v : opt.variants) {
    results.push_back(run_variant(*v, opt, timer, d_a, d_b, d_c, ref));
    if (v->is_library) library_ms = results.back().ms, library = v->name;
  }
  const KernelResult* best = nullptr;
  for (size_t i = 0; i < results.size(); ++i) {
    ResultRow row = results[i].row;
    const bool is_library = opt.variants[i]->is_library;
    gpu100::derive(row, compulsory, 0, ceiling_gbps, cpu_ms, is_library ? 0 : library_ms);
    if (!is_library && library_ms > 0) row.library = library;
    table.add(row);
    if (!is_library && (best == nullptr || results[i].ms < best->ms)) best = &results[i];
  }
  if (transfers) {
    for (size_t i = 0; i < results.size(); ++i) {
      if (opt.variants[i]->is_library) continue;
      ResultRow e2e = results[i].row;
      e2e.variant += "+transfers";
      e2e.shape = gpu100::size_label(n) + " H2D+kernel+D2H";
      e2e.ms = h2d_ms + results[i].ms + d2h_ms;
      e2e.ms_min.reset();
      gpu100::derive(e2e, 0, 0, 0, cpu_ms, 0);
      table.add(e2e);
    }
  }
  if (best != nullptr && transfers) {
    const double gbps = compulsory / (best->ms * 1e6);
    verdict_extra = fmt::format(
        "{} moves {:.0f} GB/s, {:.1f}% of the {:.0f} GB/s copy ceiling, {:.1f}x the CPU; with "
        "pageable transfers it is {:.2f}x the CPU end to end",
        best->row.variant, gbps, 100.0 * gbps / ceiling_gbps, ceiling_gbps, cpu_ms / best->ms,
        cpu_ms / (h2d_ms + best->ms + d2h_ms));
  }
}

int run(int argc, char** argv) {
  gpu100::ArgParser args("day02_vector_add", "C = A + B on fp32 vectors, against the CPU");
  args.add_int("n", "number of elements", int64_t(1) << 28, 1, int64_t(1) << 31);
  args.add_flag("sweep", "time the kernels at n = 2^10, 2^11, ..., 2^28 (no transfers)");
  args.add_common();
  if (!args.parse(argc, argv)) return gpu100::kExitOk;

  if (args.get_flag("list")) {
    for (const auto& v : day02::variants()) fmt::print("{:<16} {}\n", v.name, v.description);
    return gpu100::kExitOk;
  }
  Options opt;
  const auto names = gpu100::split_list(args.get_string("variant"));
  for (const auto& v : day02::variants()) {
    if (names.empty() || std::find(names.begin(), names.end(), v.name) != names.end()) {
      opt.variants.push_back(&v);
    }
  }
  for (const auto& name : names) {
    if (day02::find_variant(name) == nullptr) {
      throw gpu100::UsageError(fmt::format("unknown variant '{}' (see --list)", name));
    }
  }
  opt.iters = static_cast<int>(args.get_int("iters"));
  opt.warmup = static_cast<int>(args.get_int("warmup"));
  opt.seed = static_cast<uint64_t>(args.get_int("seed"));
  opt.flush_l2 = !args.get_flag("no-flush-l2");

  // Everything above is argument handling; the GPU is touched from here on.
  const gpu100::DeviceSummary device = gpu100::query_device();
  fmt::print("day02_vector_add: C = A + B, fp32\ndevice: {}\n", device.one_line());
  const double ceiling = gpu100::measure_and_report_ceiling(opt.iters, opt.warmup, opt.flush_l2);
  fmt::print("\n");

  gpu100::ResultTable table;
  std::string verdict_extra;
  if (args.get_flag("sweep")) {
    for (int k = 10; k <= 28; ++k) {
      run_size(int64_t(1) << k, opt, ceiling, false, table, verdict_extra);
    }
  } else {
    run_size(args.get_int("n"), opt, ceiling, true, table, verdict_extra);
  }
  table.print(stdout, verdict_extra);
  if (const std::string& path = args.get_string("json"); !path.empty()) {
    table.write_json(path, gpu100::RunInfo::make(args.get_flag("sweep") ? "day02_vector_add_sweep"
                                                                        : "day02_vector_add",
                                                 device, ceiling));
    fmt::print("wrote {}\n", path);
  }
  return table.all_ok() ? gpu100::kExitOk : gpu100::kExitFailed;
}

}  // namespace

int main(int argc, char** argv) {
  return gpu100::guarded_main(argc, argv, run);
}
