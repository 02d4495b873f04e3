// SGEMM v5: 2D register blocking. Each thread computes a TM x TN = 8 x 8 block of C: per k it
// loads 8 A values and 8 B values from shared memory into registers and does their 64-FMA outer
// product, 0.25 shared loads per FMA (v4: 1.1). The block tile is 128 x 128 (BK = 8), 256
// threads: each global element now feeds 128 outputs, so global traffic is no longer the limit.
// The cost: 64 accumulators and 16 operands live in registers (about 100 per thread).
#include "common/cuda_check.hpp"
#include "common/math.hpp"
#include "gemm.hpp"

namespace day04 {

template <int BM, int BN, int BK, int TM, int TN>
__global__ void __launch_bounds__((BM / TM) * (BN / TN))
    sgemm_v5_kernel(int m, int n, int k, float alpha, const float* a, const float* b, float beta,
                    float* c) {
  constexpr int kThreads = (BM / TM) * (BN / TN);
  static_assert((BM * BK) % kThreads == 0 && (BK * BN) % kThreads == 0, "even tile loads");
  __shared__ float as[BM * BK];  // A tile as it is in memory: row-major, BK wide
  __shared__ float bs[BK * BN];
  const int tid = threadIdx.x;
  const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
  const int trow = tid / (BN / TN), tcol = tid % (BN / TN);  // this thread's 8 x 8 block
  float acc[TM][TN] = {};
  float ra[TM], rb[TN];
  for (int k0 = 0; k0 < k; k0 += BK) {
#pragma unroll
    for (int e = tid; e < BM * BK; e += kThreads) {
      const int r = e / BK, cc = e % BK;
      as[e] = (row0 + r < m && k0 + cc < k) ? a[size_t(row0 + r) * k + k0 + cc] : 0.f;
    }
#pragma unroll
    for (int e = tid; e < BK * BN; e += kThreads) {
      const int r = e / BN, cc = e % BN;
      bs[e] = (k0 + r < k && col0 + cc < n) ? b[size_t(k0 + r) * n + col0 + cc] : 0.f;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < BK; ++kk) {
#pragma unroll
      for (int i = 0; i < TM; ++i) ra[i] = as[(trow * TM + i) * BK + kk];
#pragma unroll
      for (int j = 0; j < TN; ++j) rb[j] = bs[kk * BN + tcol * TN + j];
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] += ra[i] * rb[j];
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int row = row0 + trow * TM + i;
    if (row >= m) continue;
#pragma unroll
    for (int j = 0; j < TN; ++j) {
      const int col = col0 + tcol * TN + j;
      if (col < n) {
        float* out = c + size_t(row) * n + col;
        *out = alpha * acc[i][j] + (beta != 0.f ? beta * *out : 0.f);
      }
    }
  }
}

void sgemm_v5_2d_blocktile(GemmShape s, float alpha, const float* a, const float* b, float beta,
                           float* c, cudaStream_t stream) {
  check_gemm_args(s, a, b, c);
  constexpr int BM = 128, BN = 128, BK = 8, TM = 8, TN = 8;
  const dim3 grid(gpu100::ceil_div(s.n, BN), gpu100::ceil_div(s.m, BM));
  sgemm_v5_kernel<BM, BN, BK, TM, TN>
      <<<grid, (BM / TM) * (BN / TN), 0, stream>>>(s.m, s.n, s.k, alpha, a, b, beta, c);
  CUDA_CHECK_LAST();
}

}  // namespace day04
