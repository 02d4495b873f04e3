#pragma once
// CUDA-event timing with a separate warm-up, N timed repeats, median and min, and an optional
// L2 flush between repeats (so a small problem is not timed out of a warm cache). Each repeat's
// start event waits behind a short GPU spin (hold_gpu), so that the GPU is still busy while the
// host makes the calls being timed: the events then time the GPU's work, not the host's dispatch
// of it (a library call can spend tens of microseconds on the CPU before its kernel is queued).
//
//   gpu100::GpuTimer timer;                         // allocates the L2-flush buffer once
//   gpu100::Timing t = timer.time([&] { launch(...); }, options);  // TimingOptions
//   fmt::print("{:.3f} ms (min {:.3f})\n", t.median_ms, t.min_ms);
//
// Nothing is allocated inside the timed loop. The launch function must check its own launch
// (CUDA_CHECK_LAST); the timer checks the events and synchronises after each repeat.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <vector>

#include "common/device_buffer.hpp"

namespace gpu100 {

struct TimingOptions {
  int warmup = 5;
  int iters = 20;
  bool flush_l2 = true;  // write a buffer of 2x the L2 size between repeats (outside the events)
  cudaStream_t stream = nullptr;
  double hold_us = 200;  // the GPU spin queued before each repeat's start event (0: none)
};

struct Timing {
  double median_ms = 0;
  double min_ms = 0;
  std::vector<float> samples_ms;
};

class GpuTimer {
 public:
  GpuTimer();
  ~GpuTimer();
  GpuTimer(const GpuTimer&) = delete;
  GpuTimer& operator=(const GpuTimer&) = delete;

  Timing time(const std::function<void()>& launch, const TimingOptions& options = {});
  void flush_l2(cudaStream_t stream);

 private:
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
  DeviceBuffer<char> flush_buffer_;
};

// Queues a one-thread kernel on `stream` that spins for `us` microseconds of the GPU's clock
// (%globaltimer). Work queued after it starts no earlier than that: a timer's start event recorded
// behind it is taken while the host is still queuing what it times.
void hold_gpu(cudaStream_t stream, double us);

// Median and min of a list of samples (exposed for the CPU unit tests).
Timing summarize(std::vector<float> samples_ms);

// Median time of `reps` cudaMemcpy calls (synchronous for pageable host memory), CUDA events
// around each: the transfer rows of day02 and day03.
double time_memcpy_ms(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, int reps);

// Median wall time of `reps` runs of host code (a CPU reference), after one untimed run when
// `warm` (it first-touches the output's pages and fills the caches).
template <typename F>
double time_host_ms(F&& run, int reps, bool warm = true) {
  if (warm) run();
  std::vector<double> ms;
  for (int r = 0; r < std::max(reps, 1); ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    run();
    const auto t1 = std::chrono::steady_clock::now();
    ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// The bandwidth ceiling of this GPU, measured now: a device-to-device cudaMemcpy of `bytes`
// (1 GiB by default, less if memory is short), counted as bytes read + bytes written.
double measure_copy_ceiling_gbps(size_t bytes = size_t(1) << 30, int iters = 20);

}  // namespace gpu100
