// day03 v3_float4: 16-byte loads and stores (float4), with a scalar tail.
#include "common/cuda_check.hpp"
#include "elementwise.cuh"
#include "vector_add_variants.cuh"

namespace day03 {

namespace {

// v3: each thread adds one float4 (4 consecutive floats) instead of one float: thread t owns
// elements 4t .. 4t + 3 for t < num_vec = n / 4. A warp then moves 512 bytes per load instruction
// instead of 128, so a quarter of the instructions keep four times the bytes in flight per thread
// (NVIDIA, "CUDA Pro Tip: Increase Performance with Vectorized Memory Access").
// The last n % 4 elements are the scalar tail: thread t (t < n - 4 num_vec) adds element
// 4 num_vec + t. When a pointer is not 16-byte aligned the host passes num_vec = 0 and the whole
// array is tail: one float per thread, v1's mapping, correct for any pointer.
__global__ void add_v3_float4_kernel(const float* __restrict__ a, const float* __restrict__ b,
                                     float* c, int64_t n, int64_t num_vec) {
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t < num_vec) {
    const float4 x = reinterpret_cast<const float4*>(a)[t];
    const float4 y = reinterpret_cast<const float4*>(b)[t];
    reinterpret_cast<float4*>(c)[t] = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
  }
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = 4 * num_vec + t; i < n; i += stride) c[i] = a[i] + b[i];
}

}  // namespace

void add_v3_float4(const float* a, const float* b, float* c, int64_t n, cudaStream_t stream) {
  detail::check_size(n, "add_v3_float4");
  if (n == 0) return;
  const bool vec = detail::aligned16(a) && detail::aligned16(b) && detail::aligned16(c);
  const int64_t num_vec = vec ? n / 4 : 0;
  // One thread per float4, or per tail element if there are more of those (misaligned case).
  const unsigned blocks = detail::blocks_for(std::max(num_vec, n - 4 * num_vec));
  add_v3_float4_kernel<<<blocks, detail::kThreads, 0, stream>>>(a, b, c, n, num_vec);
  CUDA_CHECK_LAST();
}

}  // namespace day03
