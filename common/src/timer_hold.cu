// GpuTimer's hold (timer.hpp): a spin on the GPU queued before each timed repeat. Without it the
// start event is recorded on an idle GPU, which then waits for the host to queue the timed work:
// one cudnnConvolutionForward at MC-ResNet18's l2 (bf16, N = 32) was timed at 299 TFLOP/s that
// way and at 549 held, on an H200 (results/h200/profiles.txt).
#include "common/cuda_check.hpp"
#include "common/timer.hpp"

namespace gpu100 {

namespace {

__device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void hold_kernel(unsigned long long ns) {
  const unsigned long long t0 = global_ns();
  while (global_ns() - t0 < ns) {
  }
}

}  // namespace

void hold_gpu(cudaStream_t stream, double us) {
  if (!(us > 0)) return;
  hold_kernel<<<1, 1, 0, stream>>>(static_cast<unsigned long long>(us * 1000.0));
  CUDA_CHECK_LAST();
}

}  // namespace gpu100
