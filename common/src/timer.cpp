#include "common/timer.hpp"

#include <algorithm>
#include <stdexcept>

#include "common/device_info.hpp"

namespace gpu100 {

Timing summarize(std::vector<float> samples_ms) {
  Timing t;
  if (samples_ms.empty()) return t;
  std::vector<float> sorted = samples_ms;
  std::sort(sorted.begin(), sorted.end());
  const size_t n = sorted.size();
  t.median_ms = (n % 2 == 1) ? sorted[n / 2] : 0.5 * (double(sorted[n / 2 - 1]) + sorted[n / 2]);
  t.min_ms = sorted.front();
  t.samples_ms = std::move(samples_ms);
  return t;
}

GpuTimer::GpuTimer() {
  CUDA_CHECK(cudaEventCreate(&start_));
  CUDA_CHECK(cudaEventCreate(&stop_));
  int device = 0, l2 = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device));
  flush_buffer_ = DeviceBuffer<char>(2 * static_cast<size_t>(std::max(l2, 1 << 20)));
}

GpuTimer::~GpuTimer() {
  cudaEventDestroy(start_);
  cudaEventDestroy(stop_);
}

void GpuTimer::flush_l2(cudaStream_t stream) {
  // Writing twice the L2's size evicts whatever the previous repeat left in it.
  CUDA_CHECK(cudaMemsetAsync(flush_buffer_.data(), 0, flush_buffer_.bytes(), stream));
}

Timing GpuTimer::time(const std::function<void()>& launch, const TimingOptions& options) {
  if (options.iters < 1) throw std::invalid_argument("GpuTimer::time: iters must be >= 1");
  for (int i = 0; i < options.warmup; ++i) launch();
  CUDA_CHECK(cudaStreamSynchronize(options.stream));

  std::vector<float> samples;
  samples.reserve(options.iters);
  for (int i = 0; i < options.iters; ++i) {
    if (options.flush_l2) flush_l2(options.stream);
    if (options.hold_us > 0) hold_gpu(options.stream, options.hold_us);
    CUDA_CHECK(cudaEventRecord(start_, options.stream));
    launch();
    CUDA_CHECK(cudaEventRecord(stop_, options.stream));
    CUDA_CHECK(cudaEventSynchronize(stop_));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
    samples.push_back(ms);
  }
  return summarize(std::move(samples));
}

double time_memcpy_ms(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, int reps) {
  cudaEvent_t start = nullptr, stop = nullptr;
  CUDA_CHECK(cudaEventCreate(&start));
  CUDA_CHECK(cudaEventCreate(&stop));
  std::vector<float> ms;
  for (int r = 0; r < std::max(reps, 1); ++r) {
    CUDA_CHECK(cudaEventRecord(start));
    CUDA_CHECK(cudaMemcpy(dst, src, bytes, kind));
    CUDA_CHECK(cudaEventRecord(stop));
    CUDA_CHECK(cudaEventSynchronize(stop));
    float t = 0;
    CUDA_CHECK(cudaEventElapsedTime(&t, start, stop));
    ms.push_back(t);
  }
  CUDA_CHECK(cudaEventDestroy(start));
  CUDA_CHECK(cudaEventDestroy(stop));
  return summarize(ms).median_ms;
}

double measure_copy_ceiling_gbps(size_t bytes, int iters) {
  // Leave room for the problem that follows: use at most a quarter of free memory per buffer.
  bytes = std::min(bytes, free_device_memory() / 4);
  bytes &= ~size_t(255);
  if (bytes == 0) throw std::runtime_error("not enough free device memory to measure the ceiling");
  DeviceBuffer<char> src(bytes), dst(bytes);
  CUDA_CHECK(cudaMemset(src.data(), 1, bytes));
  GpuTimer timer;
  TimingOptions options;
  options.warmup = 3;
  options.iters = iters;
  options.flush_l2 = false;
  Timing t = timer.time(
      [&] { CUDA_CHECK(cudaMemcpyAsync(dst.data(), src.data(), bytes, cudaMemcpyDeviceToDevice)); },
      options);
  return 2.0 * double(bytes) / (t.median_ms * 1e6);  // read + write, GB/s (1e9 bytes)
}

}  // namespace gpu100
