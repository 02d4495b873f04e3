// day03_vector_add_variants: the host driver.
//
// Versions (fp32 C = A + B; kernels in v2_grid_stride.cu ... v5_smem_staged.cu):
//   v1_naive        day02's kernel: one thread per element (linked from day02::vector_add)
//   v2_grid_stride  a grid of SMs x resident blocks; each thread loops with the grid's stride
//   v3_float4       one float4 per thread (16-byte accesses), scalar tail, misaligned fallback
//   v4_ilp          four float4 per thread per input, all loaded before use; the type template
//   v5_smem_staged  anti-pattern: A and B staged through shared memory and a barrier
//   cub_transform   the library row, day02's cub::DeviceTransform
// Parts of the run (--parts), each a group of table rows:
//   add        the variants above at --n, against the CPU and CUB
//   types      v4_ilp at fp16, bf16, fp64 and int32 (fp32 is the add part's v4_ilp row)
//   silu       y = silu(a + b * c): one fused kernel against chains of 3 and 4 kernels
//   transfers  pageable / pinned copies, the k-stream pipeline against the serial trip, and a
//              column copy with one cudaMemcpy per element against one cudaMemcpy2D
// --sweep times v1_naive, v4_ilp and cub_transform at n = 2^10 ... 2^28 (the add part only).
//
// Run: build/day03_vector_add_variants/day03_vector_add_variants [--n 2^28] [--sweep] [--json f]
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>
#include <type_traits>
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
#include "vector_add_variants.cuh"

namespace {

using gpu100::ResultRow;

constexpr const char* kDay = "day03_vector_add_variants";
const std::vector<std::string> kParts = {"add", "types", "silu", "transfers"};

struct Options {
  std::vector<const day03::Variant*> variants;
  std::vector<std::string> parts;
  std::vector<int> streams;
  int chunks = 16;
  int64_t n = 0, transfer_n = 0, matrix = 0;
  gpu100::CommonOptions common;

  bool has(const std::string& part) const {
    return std::find(parts.begin(), parts.end(), part) != parts.end();
  }
};

// Wall time of a CPU reference: the median of a few runs, fewer at large n, where one run takes a
// good part of a second.
template <typename F>
double time_cpu_ms(int64_t n, F&& run) {
  const int reps = n >= (int64_t(1) << 26) ? 1 : (n >= (int64_t(1) << 22) ? 3 : 11);
  return gpu100::time_host_ms(run, reps);
}

// Wall time of something that returns only when its work is done (a whole host-to-host trip).
template <typename F>
gpu100::Timing time_wall(int warmup, int iters, F&& run) {
  for (int i = 0; i < warmup; ++i) run();
  CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<float> ms;
  for (int i = 0; i < iters; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    run();
    const auto t1 = std::chrono::steady_clock::now();
    ms.push_back(static_cast<float>(std::chrono::duration<double, std::milli>(t1 - t0).count()));
  }
  return gpu100::summarize(ms);
}

ResultRow cpu_row(const std::string& name, const std::string& precision, int64_t n, double ms,
                  double bytes) {
  ResultRow row = gpu100::make_row(name, precision, gpu100::size_label(n));
  row.ms = ms;
  row.verified = false;  // the reference itself
  gpu100::derive(row, bytes, 0, 0, ms, 0);
  return row;
}

void set_check(ResultRow& row, const gpu100::CompareResult& cmp) {
  row.max_rel_err = cmp.max_rel;
  row.ok = cmp.ok;
  if (!cmp.ok) row.note = cmp.summary();
}

// ---- part "add": the fp32 variants ----

void run_add(int64_t n, const Options& opt, gpu100::DayRun& run, std::string& verdict_extra) {
  gpu100::ResultTable& table = run.table();
  const double ceiling = run.ceiling_gbps();
  const std::vector<float> a = gpu100::random_vector<float>(n, opt.common.seed);
  const std::vector<float> b = gpu100::random_vector<float>(n, opt.common.seed + 1);
  std::vector<float> ref(n);
  const double cpu_ms =
      time_cpu_ms(n, [&] { day02::vector_add_cpu(a.data(), b.data(), ref.data(), n); });
  const double compulsory = 12.0 * double(n);  // read A and B, write C: 4 + 4 + 4 bytes
  table.add(cpu_row("cpu_reference", "fp32", n, cpu_ms, compulsory));

  gpu100::DeviceBuffer<float> d_a(n), d_b(n), d_c(n);
  d_a.upload(a);
  d_b.upload(b);
  std::vector<ResultRow> rows;
  double library_ms = 0;
  const char* library = nullptr;  // the registry's library row, when it runs
  for (const day03::Variant* v : opt.variants) {
    d_c.poison();
    v->launch(d_a.data(), d_b.data(), d_c.data(), n, nullptr);
    CUDA_CHECK(cudaDeviceSynchronize());
    const gpu100::CompareResult cmp =
        gpu100::compare_exact(ref, d_c.download());  // exact: both IEEE adds
    const gpu100::Timing t =
        run.time([&] { v->launch(d_a.data(), d_b.data(), d_c.data(), n, nullptr); });
    ResultRow row = gpu100::make_row(v->name, "fp32", gpu100::size_label(n));
    row.ms = t.median_ms;
    row.ms_min = t.min_ms;
    set_check(row, cmp);
    if (v->is_library) library_ms = t.median_ms, library = v->name;
    rows.push_back(row);
  }
  const ResultRow* best = nullptr;
  for (size_t i = 0; i < rows.size(); ++i) {
    const bool is_library = opt.variants[i]->is_library;
    gpu100::derive(rows[i], compulsory, 0, ceiling, cpu_ms, is_library ? 0 : library_ms);
    if (!is_library && library_ms > 0) rows[i].library = library;
    table.add(rows[i]);
    if (!is_library && (best == nullptr || *rows[i].ms < *best->ms)) best = &rows[i];
  }
  if (best != nullptr && best->pct_of_ceiling) {
    verdict_extra =
        fmt::format("fastest: {} at {:.0f} GB/s, {:.1f}% of the {:.0f} GB/s copy ceiling",
                    best->variant, *best->gbps, *best->pct_of_ceiling, ceiling);
    if (library_ms > 0) {
      verdict_extra += fmt::format(" ({:.2f}x CUB's time)", *best->ms / library_ms);
    }
  }
}

// ---- part "types": v4_ilp (the registry's "types" entry) at fp16, bf16, fp64, int32 ----

const day03::Variant& types_variant() {
  for (const auto& v : day03::variants()) {
    if (gpu100::has_tag(v.tags, "types")) return v;
  }
  throw std::logic_error("day03: no variant tagged \"types\"");
}

template <typename T>
void run_type(int64_t n, const Options& opt, gpu100::DayRun& run) {
  gpu100::ResultTable& table = run.table();
  const double ceiling = run.ceiling_gbps();
  const char* precision = day03::precision_name<T>();
  const std::vector<T> a = day03::random_input<T>(n, opt.common.seed + 10);
  const std::vector<T> b = day03::random_input<T>(n, opt.common.seed + 11);
  std::vector<T> ref(n);
  const double cpu_ms = time_cpu_ms(n, [&] { day03::add_cpu(a.data(), b.data(), ref.data(), n); });
  const double compulsory = 3.0 * double(n) * sizeof(T);
  table.add(cpu_row("cpu_reference", precision, n, cpu_ms, compulsory));

  gpu100::DeviceBuffer<T> d_a(n), d_b(n), d_c(n);
  d_a.upload(a);
  d_b.upload(b);
  d_c.poison();
  day03::add_v4_ilp<T>(d_a.data(), d_b.data(), d_c.data(), n, nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());
  // Exact for every type: int32 is exact, fp32/fp64 adds are correctly rounded on both sides, and
  // fp16/bf16 are rounded once from the exact float sum on both sides.
  const gpu100::CompareResult cmp = gpu100::compare_exact(ref, d_c.download());
  const gpu100::Timing t =
      run.time([&] { day03::add_v4_ilp<T>(d_a.data(), d_b.data(), d_c.data(), n, nullptr); });
  ResultRow row = gpu100::make_row(types_variant().name, precision, gpu100::size_label(n));
  row.ms = t.median_ms;
  row.ms_min = t.min_ms;
  set_check(row, cmp);
  gpu100::derive(row, compulsory, 0, ceiling, cpu_ms, 0);
  table.add(row);
}

// ---- part "silu": fused against unfused ----

void run_silu(int64_t n, const Options& opt, gpu100::DayRun& run) {
  gpu100::ResultTable& table = run.table();
  const double ceiling = run.ceiling_gbps();
  const std::vector<float> a = gpu100::random_vector<float>(n, opt.common.seed + 20);
  const std::vector<float> b = gpu100::random_vector<float>(n, opt.common.seed + 21);
  const std::vector<float> c = gpu100::random_vector<float>(n, opt.common.seed + 22);
  std::vector<float> ref(n);
  const double cpu_ms =
      time_cpu_ms(n, [&] { day03::silu_fused_cpu(a.data(), b.data(), c.data(), ref.data(), n); });
  // Compulsory bytes of y = silu(a + b * c): three arrays read, one written, whatever the chain.
  const double compulsory = 16.0 * double(n);
  table.add(cpu_row("cpu_silu", "fp32", n, cpu_ms, compulsory));

  gpu100::DeviceBuffer<float> d_a(n), d_b(n), d_c(n), d_y(n), d_t(n), d_u(n);
  d_a.upload(a);
  d_b.upload(b);
  d_c.upload(c);
  double fused_ms = 0;
  for (const day03::SiluVariant& v : day03::silu_variants()) {
    d_y.poison();
    d_t.poison();
    d_u.poison();
    auto launch = [&] {
      v.launch(d_a.data(), d_b.data(), d_c.data(), d_y.data(), d_t.data(), d_u.data(), n, nullptr);
    };
    launch();
    CUDA_CHECK(cudaDeviceSynchronize());
    const gpu100::CompareResult cmp =
        gpu100::compare(ref, d_y.download(), day03::kSiluAbsTol, day03::kSiluRelTol);
    const gpu100::Timing t = run.time(launch);
    ResultRow row = gpu100::make_row(v.name, "fp32", gpu100::size_label(n));
    row.ms = t.median_ms;
    row.ms_min = t.min_ms;
    set_check(row, cmp);
    gpu100::derive(row, compulsory, 0, ceiling, cpu_ms, 0);
    if (v.kernels == 1) {
      fused_ms = t.median_ms;
    } else if (fused_ms > 0 && row.ok) {
      row.note = fmt::format(
          "{} kernels move {} arrays against the fused kernel's 4: silu_fused is {:.2f}x faster "
          "(byte bound {:.2f}x)",
          v.kernels, v.arrays_moved, t.median_ms / fused_ms, v.arrays_moved / 4.0);
    }
    table.add(row);
  }
}

// ---- part "transfers" ----

void run_transfers(const Options& opt, gpu100::ResultTable& table) {
  const int64_t n = opt.transfer_n;
  const size_t bytes = static_cast<size_t>(n) * sizeof(float);
  const std::vector<float> a = gpu100::random_vector<float>(n, opt.common.seed + 30);
  const std::vector<float> b = gpu100::random_vector<float>(n, opt.common.seed + 31);
  std::vector<float> ref(n);
  const double cpu_ms =
      time_cpu_ms(n, [&] { day02::vector_add_cpu(a.data(), b.data(), ref.data(), n); });
  table.add(cpu_row("cpu_reference", "fp32", n, cpu_ms, 12.0 * double(n)));

  gpu100::DeviceBuffer<float> d_a(n), d_b(n), d_c(n);
  const int reps = 3;
  auto copy_row = [&](const char* name, double ms) {
    ResultRow row = gpu100::make_row(name, "fp32", fmt::format("{} B", bytes));
    row.ms = ms;
    row.verified = false;  // a transfer timing checks nothing
    gpu100::derive(row, double(bytes), 0, 0, 0, 0);
    table.add(row);
  };
  {
    std::vector<float> host_out(n);  // pageable: the driver stages it through a pinned buffer
    copy_row("h2d_pageable",
             gpu100::time_memcpy_ms(d_a.data(), a.data(), bytes, cudaMemcpyHostToDevice, reps));
    copy_row("d2h_pageable", gpu100::time_memcpy_ms(host_out.data(), d_a.data(), bytes,
                                                    cudaMemcpyDeviceToHost, reps));
  }
  gpu100::PinnedBuffer<float> h_a(n), h_b(n), h_c(n);
  std::copy(a.begin(), a.end(), h_a.data());
  std::copy(b.begin(), b.end(), h_b.data());
  copy_row("h2d_pinned",
           gpu100::time_memcpy_ms(d_a.data(), h_a.data(), bytes, cudaMemcpyHostToDevice, reps));
  copy_row("d2h_pinned",
           gpu100::time_memcpy_ms(h_c.data(), d_a.data(), bytes, cudaMemcpyDeviceToHost, reps));

  // The host-to-host trip C = A + B: serial, then over k streams. Each is verified once (device
  // and host outputs poisoned first), then timed by wall clock, since it spans several streams.
  const int warmup = std::min(opt.common.timing.warmup, 2),
            iters = std::min(opt.common.timing.iters, 10);
  const std::string shape = fmt::format("{} H2D+kernel+D2H", gpu100::size_label(n));
  double serial_ms = 0;
  auto trip_row = [&](const std::string& name, const std::function<void()>& trip, bool serial) {
    std::memset(h_c.data(), 0xFF, bytes);  // NaN
    d_c.poison();
    CUDA_CHECK(cudaDeviceSynchronize());
    trip();
    std::vector<float> got(h_c.data(), h_c.data() + n);
    const gpu100::CompareResult cmp = gpu100::compare_exact(ref, got);
    const gpu100::Timing t = time_wall(warmup, iters, trip);
    ResultRow row = gpu100::make_row(name, "fp32", shape);
    row.ms = t.median_ms;
    row.ms_min = t.min_ms;
    set_check(row, cmp);
    // GB/s here counts the bytes that cross PCIe (A and B in, C out); no device-memory ceiling.
    gpu100::derive(row, 3.0 * double(bytes), 0, 0, cpu_ms, serial ? 0 : serial_ms);
    if (serial) {
      serial_ms = t.median_ms;
    } else {
      row.library = "pipeline_serial";
    }
    table.add(row);
  };
  trip_row(
      "pipeline_serial",
      [&] {
        day03::add_serial(h_a.data(), h_b.data(), h_c.data(), d_a.data(), d_b.data(), d_c.data(), n,
                          nullptr);
      },
      true);
  for (int k : opt.streams) {
    day03::StreamPipeline pipeline(k);
    trip_row(
        fmt::format("pipeline_{}_streams", k),
        [&] {
          pipeline.run(h_a.data(), h_b.data(), h_c.data(), d_a.data(), d_b.data(), d_c.data(), n,
                       opt.chunks);
        },
        false);
  }

  // Column 0 of a pinned row-major matrix to the device: one cudaMemcpy per element against one
  // cudaMemcpy2D. Verified exactly (a copy).
  const int64_t m = opt.matrix;
  gpu100::PinnedBuffer<float> matrix(static_cast<size_t>(m * m));
  gpu100::fill_uniform(matrix.data(), static_cast<size_t>(m * m), opt.common.seed + 40);
  std::vector<float> column(m);
  for (int64_t r = 0; r < m; ++r) column[r] = matrix[static_cast<size_t>(r * m)];
  gpu100::DeviceBuffer<float> d_col(m);
  const std::string col_shape = fmt::format("column of {}x{} (pinned)", m, m);
  double per_element_ms = 0;
  auto column_row = [&](const char* name, void (*copy)(const float*, int64_t, int64_t, float*),
                        int timed) {
    d_col.poison();
    CUDA_CHECK(cudaDeviceSynchronize());
    copy(matrix.data(), m, m, d_col.data());
    const gpu100::CompareResult cmp = gpu100::compare_exact(column, d_col.download());
    const gpu100::Timing t = time_wall(1, timed, [&] { copy(matrix.data(), m, m, d_col.data()); });
    ResultRow row = gpu100::make_row(name, "fp32", col_shape);
    row.ms = t.median_ms;
    row.ms_min = t.min_ms;
    set_check(row, cmp);
    gpu100::derive(row, 0, 0, 0, 0, per_element_ms);
    if (per_element_ms > 0) row.library = "strided_per_element";
    if (per_element_ms == 0) per_element_ms = t.median_ms;
    table.add(row);
  };
  column_row("strided_per_element", day03::copy_column_per_element, 3);
  column_row("strided_memcpy2d", day03::copy_column_2d, iters);
}

// ---- command line ----

std::vector<int> parse_streams(const std::string& text) {
  const std::vector<std::string> items = gpu100::split_list(text);
  if (items.empty()) throw gpu100::UsageError("--streams needs at least one stream count");
  std::vector<int> out;
  for (const auto& item : items) {
    const int64_t k = gpu100::parse_size("streams", item);
    if (k < 1 || k > 64) {
      throw gpu100::UsageError(fmt::format("--streams counts must be 1..64 (got {})", k));
    }
    out.push_back(static_cast<int>(k));
  }
  return out;
}

void print_list() {
  fmt::print("fp32 add variants (--variant):\n");
  for (const auto& v : day03::variants()) fmt::print("  {:<16} {}\n", v.name, v.description);
  fmt::print("types (--parts types): v4_ilp at");
  day03::for_each_type([](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (!std::is_same_v<T, float>) fmt::print(" {}", day03::precision_name<T>());
  });
  fmt::print(" (fp32 is the add part's v4_ilp row)\nsilu (--parts silu):\n");
  for (const auto& v : day03::silu_variants()) {
    fmt::print("  {:<16} {} ({} arrays moved)\n", v.name, v.description, v.arrays_moved);
  }
  fmt::print(
      "transfers (--parts transfers): h2d/d2h pageable and pinned, pipeline_serial, "
      "pipeline_<k>_streams, strided_per_element, strided_memcpy2d\n");
}

int run(int argc, char** argv) {
  gpu100::ArgParser args(kDay,
                         "what makes an elementwise kernel fast: C = A + B variants, types, "
                         "fused SiLU, transfers");
  args.add_int("n", "elements of the kernel parts (add, types, silu)", int64_t(1) << 28, 1,
               int64_t(1) << 31);
  args.add_int("transfer-n", "elements of the transfer part", int64_t(1) << 26, 1,
               int64_t(1) << 30);
  args.add_string("streams", "stream counts of the pipeline rows, comma-separated", "2,4,8");
  args.add_int("chunks", "chunks of the pipeline", 16, 1, 4096);
  args.add_int("matrix", "rows = columns of the strided-copy matrix", 4096, 1, 16384);
  args.add_string("parts", "comma-separated parts: add,types,silu,transfers",
                  "add,types,silu,transfers");
  args.add_flag("sweep", "time v1_naive, v4_ilp and cub_transform at n = 2^10 ... 2^28 (add only)");
  args.add_common();
  if (!args.parse(argc, argv)) return gpu100::kExitOk;

  if (args.get_flag("list")) {
    print_list();
    return gpu100::kExitOk;
  }
  Options opt;
  const bool sweep = args.get_flag("sweep");
  opt.common = gpu100::CommonOptions::read(args);
  const auto& names = opt.common.variants;
  for (const auto& name : names) {
    if (day03::find_variant(name) == nullptr) {
      throw gpu100::UsageError(fmt::format("unknown variant '{}' (see --list)", name));
    }
  }
  // Default: every variant; with --sweep, those tagged "sweep" (the baseline, the best variant
  // and the library).
  for (const auto& v : day03::variants()) {
    const bool wanted = names.empty()
                            ? !sweep || gpu100::has_tag(v.tags, "sweep")
                            : std::find(names.begin(), names.end(), v.name) != names.end();
    if (wanted) opt.variants.push_back(&v);
  }
  opt.parts = gpu100::split_list(args.get_string("parts"));
  if (opt.parts.empty()) throw gpu100::UsageError("--parts needs at least one part");
  for (const auto& part : opt.parts) {
    if (std::find(kParts.begin(), kParts.end(), part) == kParts.end()) {
      throw gpu100::UsageError(
          fmt::format("unknown part '{}' (the parts are add, types, silu, transfers)", part));
    }
  }
  if (sweep) opt.parts = {"add"};
  opt.streams = parse_streams(args.get_string("streams"));
  opt.chunks = static_cast<int>(args.get_int("chunks"));
  opt.n = args.get_int("n");
  opt.transfer_n = args.get_int("transfer-n");
  opt.matrix = args.get_int("matrix");

  // Everything above is argument handling; the GPU is touched from here on.
  gpu100::DayRun run(kDay,
                     "what makes an elementwise kernel fast (C = A + B variants, types, fused "
                     "SiLU, transfers)",
                     opt.common);
  // The largest part decides the device memory needed (parts run one after another).
  const size_t n = static_cast<size_t>(sweep ? int64_t(1) << 28 : opt.n);
  size_t need = 0;
  if (opt.has("add")) need = std::max(need, 3 * n * sizeof(float));
  if (opt.has("types")) need = std::max(need, 3 * n * sizeof(double));
  if (opt.has("silu")) need = std::max(need, 6 * n * sizeof(float));
  if (opt.has("transfers")) {
    need = std::max(need, (3 * static_cast<size_t>(opt.transfer_n) + opt.matrix) * sizeof(float));
  }
  gpu100::require_device_memory(need, kDay);

  std::string verdict_extra;
  if (sweep) {
    for (int k = 10; k <= 28; ++k) run_add(int64_t(1) << k, opt, run, verdict_extra);
    verdict_extra.clear();
  } else {
    if (opt.has("add")) run_add(opt.n, opt, run, verdict_extra);
    if (opt.has("types")) {
      day03::for_each_type([&](auto tag) {
        using T = typename decltype(tag)::type;
        if constexpr (!std::is_same_v<T, float>) run_type<T>(opt.n, opt, run);
      });
    }
    if (opt.has("silu")) run_silu(opt.n, opt, run);
    if (opt.has("transfers")) run_transfers(opt, run.table());
  }
  return run.finish(sweep ? std::string(kDay) + "_sweep" : kDay, verdict_extra);
}

}  // namespace

int main(int argc, char** argv) {
  return gpu100::guarded_main(argc, argv, run);
}
