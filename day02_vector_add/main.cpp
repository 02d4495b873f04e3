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
#include "common/errors.hpp"
#include "common/harness.hpp"
#include "common/random.hpp"
#include "common/results.hpp"
#include "common/timer.hpp"
#include "vector_add.cuh"

namespace {

using gpu100::ResultRow;

// A transfer's row: a time and the bytes moved, nothing to check.
ResultRow transfer_row(const char* name, const std::string& shape, double ms, double bytes) {
  ResultRow row = gpu100::make_row(name, "fp32", shape);
  row.ms = ms;
  row.verified = false;
  gpu100::derive(row, bytes, 0, 0, 0, 0);
  return row;
}

// Times A and B to the device and C back, from pageable buffers (plain std::vector: what most
// first programs use) and from pinned ones (the DMA engine reads them directly, no staging copy);
// returns the pageable times, which the end-to-end rows add to the kernel's.
void time_transfers(const std::vector<float>& a, const std::vector<float>& b,
                    gpu100::DeviceBuffer<float>& d_a, gpu100::DeviceBuffer<float>& d_b,
                    gpu100::DeviceBuffer<float>& d_c, gpu100::ResultTable& table, double& h2d_ms,
                    double& d2h_ms) {
  const size_t n = a.size(), bytes = n * sizeof(float);
  const int reps = 3;
  std::vector<float> c_host(n);
  d_c.poison();
  h2d_ms = gpu100::time_memcpy_ms(d_a.data(), a.data(), bytes, cudaMemcpyHostToDevice, reps) +
           gpu100::time_memcpy_ms(d_b.data(), b.data(), bytes, cudaMemcpyHostToDevice, reps);
  d2h_ms = gpu100::time_memcpy_ms(c_host.data(), d_c.data(), bytes, cudaMemcpyDeviceToHost, reps);
  table.add(transfer_row("h2d_pageable", fmt::format("2 x {} B", bytes), h2d_ms, 2.0 * bytes));
  table.add(transfer_row("d2h_pageable", fmt::format("{} B", bytes), d2h_ms, double(bytes)));
  gpu100::PinnedBuffer<float> pinned(n);
  std::copy(a.begin(), a.end(), pinned.data());
  table.add(transfer_row(
      "h2d_pinned", fmt::format("{} B", bytes),
      gpu100::time_memcpy_ms(d_a.data(), pinned.data(), bytes, cudaMemcpyHostToDevice, reps),
      double(bytes)));
  table.add(transfer_row(
      "d2h_pinned", fmt::format("{} B", bytes),
      gpu100::time_memcpy_ms(pinned.data(), d_c.data(), bytes, cudaMemcpyDeviceToHost, reps),
      double(bytes)));
}

// Runs the CPU reference and every selected variant at one size. With `transfers`, also times
// the H2D/D2H copies (pageable and pinned) and adds the end-to-end rows.
void run_size(int64_t n, const std::vector<const day02::Variant*>& variants, uint64_t seed,
              bool transfers, gpu100::DayRun& run, std::string& verdict_extra) {
  gpu100::ResultTable& table = run.table();
  const double ceiling_gbps = run.ceiling_gbps();
  const size_t bytes = static_cast<size_t>(n) * sizeof(float);
  gpu100::require_device_memory(3 * bytes, fmt::format("n={}", n).c_str());

  const std::vector<float> a = gpu100::random_vector<float>(n, seed);
  const std::vector<float> b = gpu100::random_vector<float>(n, seed + 1);
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
  if (transfers) time_transfers(a, b, d_a, d_b, d_c, table, h2d_ms, d2h_ms);
  d_a.upload(a);
  d_b.upload(b);

  // Each variant: C poisoned, one launch checked against the CPU exactly (fp32 addition is exactly
  // rounded on both sides, so the tolerance is zero), then timed.
  std::vector<ResultRow> results;
  double library_ms = 0;
  const char* library = nullptr;  // the registry's library row, when it runs
  for (const day02::Variant* v : variants) {
    results.push_back(run.measure(
        v->name, "fp32", gpu100::size_label(n), [&] { d_c.poison(); },
        [&] { v->launch(d_a.data(), d_b.data(), d_c.data(), n, nullptr); },
        [&] { return gpu100::compare_exact(ref, d_c.download()); }));
    if (v->is_library) library_ms = *results.back().ms, library = v->name;
  }
  const ResultRow* best = nullptr;
  for (size_t i = 0; i < results.size(); ++i) {
    ResultRow row = results[i];
    const bool is_library = variants[i]->is_library;
    gpu100::derive(row, compulsory, 0, ceiling_gbps, cpu_ms, is_library ? 0 : library_ms);
    if (!is_library && library_ms > 0) row.library = library;
    table.add(row);
    if (!is_library && (best == nullptr || *results[i].ms < *best->ms)) best = &results[i];
  }
  if (transfers) {
    for (size_t i = 0; i < results.size(); ++i) {
      if (variants[i]->is_library) continue;
      ResultRow e2e = results[i];
      e2e.variant += "+transfers";
      e2e.shape = gpu100::size_label(n) + " H2D+kernel+D2H";
      e2e.ms = h2d_ms + *results[i].ms + d2h_ms;
      e2e.ms_min.reset();
      gpu100::derive(e2e, 0, 0, 0, cpu_ms, 0);
      table.add(e2e);
    }
  }
  if (best != nullptr && transfers) {
    const double gbps = compulsory / (*best->ms * 1e6);
    verdict_extra = fmt::format(
        "{} moves {:.0f} GB/s, {:.1f}% of the {:.0f} GB/s copy ceiling, {:.1f}x the CPU; with "
        "pageable transfers it is {:.2f}x the CPU end to end",
        best->variant, gbps, 100.0 * gbps / ceiling_gbps, ceiling_gbps, cpu_ms / *best->ms,
        cpu_ms / (h2d_ms + *best->ms + d2h_ms));
  }
}

int run(int argc, char** argv) {
  gpu100::ArgParser args("day02_vector_add", "C = A + B on fp32 vectors, against the CPU");
  args.add_int("n", "number of elements", int64_t(1) << 28, 1, int64_t(1) << 31);
  args.add_flag("sweep", "time the kernels at n = 2^10, 2^11, ..., 2^28 (no transfers)");
  args.add_common();
  if (!args.parse(argc, argv)) return gpu100::kExitOk;
  if (gpu100::list_requested(args, day02::variants())) return gpu100::kExitOk;
  const gpu100::CommonOptions opt = gpu100::CommonOptions::read(args);
  const auto variants = gpu100::select(day02::variants(), opt.variants);
  const bool sweep = args.get_flag("sweep");

  // Everything above is argument handling; the GPU is touched from here on.
  gpu100::DayRun run("day02_vector_add", "C = A + B, fp32", opt);
  std::string verdict_extra;
  if (sweep) {
    for (int k = 10; k <= 28; ++k)
      run_size(int64_t(1) << k, variants, opt.seed, false, run, verdict_extra);
  } else {
    run_size(args.get_int("n"), variants, opt.seed, true, run, verdict_extra);
  }
  return run.finish(sweep ? "day02_vector_add_sweep" : "day02_vector_add", verdict_extra);
}

}  // namespace

int main(int argc, char** argv) {
  return gpu100::guarded_main(argc, argv, run);
}
