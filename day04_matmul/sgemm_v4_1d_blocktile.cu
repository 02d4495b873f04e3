// SGEMM v4: 1D register blocking. Each thread now computes TM = 8 outputs of one column of C.
// Per k it reads one B value from shared memory and reuses it for 8 FMAs against 8 A values, so
// shared-memory traffic per FMA drops from 2 loads to (8 + 1) / 8 ~ 1.1. The block tile grows to
// 64 x 64 (BK = 8) with 512 threads, so each global element also feeds 64 outputs.
// (The 1D / 2D blocktiling steps follow siboehm's SGEMM_CUDA kernels 4 and 5.)
#include "common/cuda_check.hpp"
#include "common/math.hpp"
#include "gemm.hpp"

namespace day04 {

template <int BM, int BN, int BK, int TM>
__global__ void __launch_bounds__(BM* BN / TM)
    sgemm_v4_kernel(int m, int n, int k, float alpha, const float* a, const float* b, float beta,
                    float* c) {
  constexpr int kThreads = BM * BN / TM;
  static_assert(BM * BK == kThreads && BK * BN == kThreads, "one A and one B element per thread");
  __shared__ float as[BM * BK];
  __shared__ float bs[BK * BN];
  const int tid = threadIdx.x;
  const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
  const int tcol = tid % BN, trow = tid / BN;  // this thread's column and its group of TM rows
  const int a_r = tid / BK, a_c = tid % BK;    // the A element this thread loads
  const int b_r = tid / BN, b_c = tid % BN;    // the B element this thread loads
  float acc[TM] = {};
  for (int k0 = 0; k0 < k; k0 += BK) {
    const int ar = row0 + a_r, ak = k0 + a_c, bk = k0 + b_r, bc = col0 + b_c;
    as[a_r * BK + a_c] = (ar < m && ak < k) ? a[size_t(ar) * k + ak] : 0.f;
    bs[b_r * BN + b_c] = (bk < k && bc < n) ? b[size_t(bk) * n + bc] : 0.f;
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < BK; ++kk) {
      const float bv = bs[kk * BN + tcol];  // reused TM times from a register
#pragma unroll
      for (int i = 0; i < TM; ++i) acc[i] += as[(trow * TM + i) * BK + kk] * bv;
    }
    __syncthreads();
  }
  const int col = col0 + tcol;
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int row = row0 + trow * TM + i;
    if (row < m && col < n) {
      float* out = c + size_t(row) * n + col;
      *out = alpha * acc[i] + (beta != 0.f ? beta * *out : 0.f);
    }
  }
}

void sgemm_v4_1d_blocktile(GemmShape s, float alpha, const float* a, const float* b, float beta,
                           float* c, cudaStream_t stream) {
  check_gemm_args(s, a, b, c);
  constexpr int BM = 64, BN = 64, BK = 8, TM = 8;
  const dim3 grid(gpu100::ceil_div(s.n, BN), gpu100::ceil_div(s.m, BM));
  sgemm_v4_kernel<BM, BN, BK, TM>
      <<<grid, BM * BN / TM, 0, stream>>>(s.m, s.n, s.k, alpha, a, b, beta, c);
  CUDA_CHECK_LAST();
}

}  // namespace day04
