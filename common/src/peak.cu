// The fp32 arithmetic ceiling of this GPU, measured now: every SM runs blocks whose threads each
// advance 8 independent FMA chains (enough to cover the FMA pipeline latency), so the kernel is
// limited only by the FMA issue rate at the clock the GPU runs at under load.
#include "common/cuda_check.hpp"
#include "common/device_buffer.hpp"
#include "common/peak.hpp"
#include "common/timer.hpp"

namespace gpu100 {

namespace {

constexpr int kChains = 8, kIters = 4096, kThreads = 256;

__global__ void fma_peak_kernel(float* out, float seed) {
  float x[kChains];
#pragma unroll
  for (int c = 0; c < kChains; ++c) x[c] = seed + threadIdx.x + c;
  const float mul = 0.999f, add = 1e-3f;
  for (int i = 0; i < kIters; ++i) {
#pragma unroll
    for (int c = 0; c < kChains; ++c) x[c] = fmaf(x[c], mul, add);
  }
  float sum = 0.f;
#pragma unroll
  for (int c = 0; c < kChains; ++c) sum += x[c];
  if (sum == -1.2345f) out[blockIdx.x] = sum;  // never true: keeps the chains alive
}

}  // namespace

double measure_fp32_peak_tflops() {
  int device = 0, sms = 0, blocks_per_sm = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  CUDA_CHECK(
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks_per_sm, fma_peak_kernel, kThreads, 0));
  const int blocks = sms * blocks_per_sm * 4;  // several waves: the tail matters little
  DeviceBuffer<float> out(blocks);
  GpuTimer timer;
  TimingOptions options;
  options.warmup = 3;
  options.iters = 10;
  options.flush_l2 = false;
  const Timing t = timer.time(
      [&] {
        fma_peak_kernel<<<blocks, kThreads>>>(out.data(), 1.0f);
        CUDA_CHECK_LAST();
      },
      options);
  const double flops = 2.0 * kChains * kIters * double(kThreads) * blocks;
  return flops / (t.median_ms * 1e9);
}

}  // namespace gpu100
