// day02_vector_add: the kernels and their launchers.
//
// Versions:
//   v1_naive       one thread per element, 256 threads per block, grid = ceil(n / 256)
//   cub_transform  the library baseline: cub::DeviceTransform::Transform with cuda::std::plus
//
// Run: build/day02_vector_add/day02_vector_add [--n 2^28] [--sweep] [--json out.json]
#include <cub/device/device_transform.cuh>
#include <cuda/std/functional>
#include <cuda/std/tuple>

#include <stdexcept>

#include "common/cuda_check.hpp"
#include "common/math.hpp"
#include "vector_add.cuh"

namespace day02 {

namespace {

void check_size(int64_t n) {
  if (n < 0) throw std::invalid_argument("vector_add: n must be >= 0, got " + std::to_string(n));
}

}  // namespace

// v1: one thread per element. Thread (blockIdx.x, threadIdx.x) owns element
// i = blockIdx.x * blockDim.x + threadIdx.x; the last block's threads past n do nothing.
// Consecutive threads touch consecutive floats, so each warp's loads and stores are coalesced
// into full 128-byte transactions: the kernel moves 12 bytes per element and does 1 FLOP, so it
// is memory-bound, and the question is only whether it keeps enough loads in flight.
// The index is 64-bit: n may exceed 2^31 - 1.
__global__ void vector_add_v1_kernel(const float* __restrict__ a, const float* __restrict__ b,
                                     float* c, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}

void vector_add_v1(const float* a, const float* b, float* c, int64_t n, cudaStream_t stream) {
  check_size(n);
  if (n == 0) return;
  constexpr int kThreads = 256;
  const int64_t blocks = gpu100::ceil_div<int64_t>(n, kThreads);
  if (blocks > 0x7fffffff) throw std::invalid_argument("vector_add: n too large for one grid");
  vector_add_v1_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(a, b, c, n);
  CUDA_CHECK_LAST();
}

void vector_add_cub(const float* a, const float* b, float* c, int64_t n, cudaStream_t stream) {
  check_size(n);
  if (n == 0) return;
  CUDA_CHECK(cub::DeviceTransform::Transform(cuda::std::make_tuple(a, b), c, n,
                                             cuda::std::plus<float>{}, stream));
  CUDA_CHECK_LAST();
}

}  // namespace day02
