// day03 v2_grid_stride: a grid sized to the GPU, each thread looping over the array.
#include <array>
#include <atomic>

#include "common/cuda_check.hpp"
#include "elementwise.cuh"
#include "vector_add_variants.cuh"

namespace day03 {

namespace {

// v2: instead of one thread per element (v1: 2^20 blocks at n = 2^28), launch only the blocks the
// GPU can hold at once (SMs x resident blocks per SM) and let each thread walk the array with a
// stride of the whole grid: thread t handles t, t + G, t + 2G, ... (G = gridDim.x * blockDim.x),
// so each warp's accesses stay coalesced. It saves the block scheduling of v1 but keeps the same
// 8 bytes in flight per thread, so at large n it should not be faster (the grid-stride loop: Mark
// Harris, "CUDA Pro Tip: Write Flexible Kernels with Grid-Stride Loops").
__global__ void add_v2_grid_stride_kernel(const float* __restrict__ a, const float* __restrict__ b,
                                          float* c, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    c[i] = a[i] + b[i];
  }
}

// SMs x the blocks of this kernel one SM can hold, per device, computed once: the launch itself
// must not pay for the occupancy query (at small n the launch is all there is to time).
int64_t resident_blocks() {
  static std::array<std::atomic<int64_t>, 64> cache{};
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  if (device >= 0 && device < static_cast<int>(cache.size())) {
    if (const int64_t cached = cache[device].load(); cached > 0) return cached;
  }
  int sms = 0, per_sm = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, add_v2_grid_stride_kernel,
                                                           detail::kThreads, 0));
  const int64_t blocks = static_cast<int64_t>(sms) * std::max(per_sm, 1);
  if (device >= 0 && device < static_cast<int>(cache.size())) cache[device].store(blocks);
  return blocks;
}

}  // namespace

void add_v2_grid_stride(const float* a, const float* b, float* c, int64_t n, cudaStream_t stream) {
  detail::check_size(n, "add_v2_grid_stride");
  if (n == 0) return;
  // No more blocks than there are elements to give them.
  const int64_t blocks = std::min<int64_t>(resident_blocks(), detail::blocks_for(n));
  add_v2_grid_stride_kernel<<<static_cast<unsigned>(blocks), detail::kThreads, 0, stream>>>(a, b, c,
                                                                                            n);
  CUDA_CHECK_LAST();
}

}  // namespace day03
