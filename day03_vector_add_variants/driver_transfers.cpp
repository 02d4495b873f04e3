// day03_vector_add_variants' driver, the transfer part: what crossing PCIe costs, and what
// pinned memory, streams and one strided copy instead of many buy back. Each trip is verified
// once (outputs poisoned first), then timed by the wall clock, since it spans several streams.
#include <fmt/format.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "common/cuda_check.hpp"
#include "common/device_buffer.hpp"
#include "common/random.hpp"
#include "driver.hpp"

namespace day03 {

namespace {

using gpu100::ResultRow;

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

// The host-to-host trip C = A + B: serial, then over k streams ("x library": against serial).
void run_trips(const Options& opt, gpu100::ResultTable& table, const std::vector<float>& a,
               const std::vector<float>& b, const std::vector<float>& ref, double cpu_ms) {
  const int64_t n = opt.transfer_n;
  const size_t bytes = static_cast<size_t>(n) * sizeof(float);
  gpu100::DeviceBuffer<float> d_a(n), d_b(n), d_c(n);
  gpu100::PinnedBuffer<float> h_a(n), h_b(n), h_c(n);
  std::copy(a.begin(), a.end(), h_a.data());
  std::copy(b.begin(), b.end(), h_b.data());
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
    gpu100::set_check(row, cmp);
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
}

// Column 0 of a pinned row-major matrix to the device: one cudaMemcpy per element against one
// cudaMemcpy2D. Verified exactly (a copy).
void run_column(const Options& opt, gpu100::ResultTable& table) {
  const int iters = std::min(opt.common.timing.iters, 10);
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
    gpu100::set_check(row, cmp);
    gpu100::derive(row, 0, 0, 0, 0, per_element_ms);
    if (per_element_ms > 0) row.library = "strided_per_element";
    if (per_element_ms == 0) per_element_ms = t.median_ms;
    table.add(row);
  };
  column_row("strided_per_element", day03::copy_column_per_element, 3);
  column_row("strided_memcpy2d", day03::copy_column_2d, iters);
}

}  // namespace

void run_transfers(const Options& opt, gpu100::ResultTable& table) {
  const int64_t n = opt.transfer_n;
  const size_t bytes = static_cast<size_t>(n) * sizeof(float);
  const std::vector<float> a = gpu100::random_vector<float>(n, opt.common.seed + 30);
  const std::vector<float> b = gpu100::random_vector<float>(n, opt.common.seed + 31);
  std::vector<float> ref(n);
  const double cpu_ms =
      time_cpu_ms(n, [&] { day02::vector_add_cpu(a.data(), b.data(), ref.data(), n); });
  table.add(gpu100::reference_row("cpu_reference", "fp32", gpu100::size_label(n), cpu_ms,
                                  12.0 * double(n)));

  gpu100::DeviceBuffer<float> d_a(n);
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
  {
    gpu100::PinnedBuffer<float> h_a(n), h_c(n);
    std::copy(a.begin(), a.end(), h_a.data());
    copy_row("h2d_pinned",
             gpu100::time_memcpy_ms(d_a.data(), h_a.data(), bytes, cudaMemcpyHostToDevice, reps));
    copy_row("d2h_pinned",
             gpu100::time_memcpy_ms(h_c.data(), d_a.data(), bytes, cudaMemcpyDeviceToHost, reps));
  }
  run_trips(opt, table, a, b, ref, cpu_ms);
  run_column(opt, table);
}

}  // namespace day03
