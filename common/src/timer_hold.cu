// GpuTimer's hold (timer.hpp): a spin on the GPU queued before each timed repeat. Without it the
// start event is recorded on an idle GPU, which then waits for the host to queue the timed work:
// a cuDNN call that spends 30 us on the CPU before its 60 us kernel would be timed at 90 us.
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
