// SGEMM v2: coalesced. The same one-thread-per-output kernel, with threadIdx.x now running along
// the COLUMNS of C. A warp reads one A element (a broadcast) and 32 consecutive B elements (one
// 128-byte line) per k, and writes 32 consecutive C elements: the memory system serves a warp with
// 1-2 transactions instead of 32. Still no data reuse beyond what the caches find.
#include "common/cuda_check.hpp"
#include "common/math.hpp"
#include "gemm.hpp"

namespace day04 {

__global__ void sgemm_v2_kernel(int m, int n, int k, float alpha, const float* a, const float* b,
                                float beta, float* c) {
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  const int row = blockIdx.y * blockDim.y + threadIdx.y;
  if (row >= m || col >= n) return;
  float sum = 0.f;
  for (int i = 0; i < k; ++i) sum += a[size_t(row) * k + i] * b[size_t(i) * n + col];
  float* out = c + size_t(row) * n + col;
  *out = alpha * sum + (beta != 0.f ? beta * *out : 0.f);
}

void sgemm_v2_coalesced(GemmShape s, float alpha, const float* a, const float* b, float beta,
                        float* c, cudaStream_t stream) {
  check_gemm_args(s, a, b, c);
  const dim3 block(32, 32);
  const dim3 grid(gpu100::ceil_div(s.n, 32), gpu100::ceil_div(s.m, 32));
  sgemm_v2_kernel<<<grid, block, 0, stream>>>(s.m, s.n, s.k, alpha, a, b, beta, c);
  CUDA_CHECK_LAST();
}

}  // namespace day04
