// SGEMM v1: naive. One thread per element of C, 32 x 32 threads per block.
// threadIdx.x runs along the ROWS of C: the 32 lanes of a warp read 32 different rows of A (32
// cache lines per k) and write 32 different rows of C. Every A and B element is read from global
// memory (or L1/L2) K times per output tile: no reuse is organised at all.
#include "common/cuda_check.hpp"
#include "common/math.hpp"
#include "gemm.hpp"

namespace day04 {

__global__ void sgemm_v1_kernel(int m, int n, int k, float alpha, const float* a, const float* b,
                                float beta, float* c) {
  const int row = blockIdx.x * blockDim.x + threadIdx.x;
  const int col = blockIdx.y * blockDim.y + threadIdx.y;
  if (row >= m || col >= n) return;
  float sum = 0.f;
  for (int i = 0; i < k; ++i) sum += a[size_t(row) * k + i] * b[size_t(i) * n + col];
  float* out = c + size_t(row) * n + col;
  *out = alpha * sum + (beta != 0.f ? beta * *out : 0.f);
}

void sgemm_v1_naive(GemmShape s, float alpha, const float* a, const float* b, float beta, float* c,
                    cudaStream_t stream) {
  check_gemm_args(s, a, b, c);
  const dim3 block(32, 32);
  const dim3 grid(gpu100::ceil_div(s.m, 32), gpu100::ceil_div(s.n, 32));
  sgemm_v1_kernel<<<grid, block, 0, stream>>>(s.m, s.n, s.k, alpha, a, b, beta, c);
  CUDA_CHECK_LAST();
}

}  // namespace day04
