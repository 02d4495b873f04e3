// SGEMM v6: 16-byte accesses, with A transposed in shared memory. v5's global loads become float4
// loads (4x fewer load instructions), and A is stored k-major (As[BK][BM]) as it is copied in, so
// a thread's 8 A values for one k are contiguous and, like its 8 B values, come in two 16-byte
// shared loads instead of eight 4-byte ones. Edges: the float4 path needs K % 4 == 0, N % 4 == 0
// and 16-byte aligned pointers; otherwise the launcher picks the same kernel with scalar loads.
// Left for v7: the thread-to-output mapping still makes 16-byte shared reads 2-way bank-conflicted.
#include <cstdint>

#include "common/cuda_check.hpp"
#include "common/math.hpp"
#include "gemm.hpp"

namespace day04 {

template <int BM, int BN, int BK, int TM, int TN, bool kVec>
__global__ void __launch_bounds__((BM / TM) * (BN / TN))
    sgemm_v6_kernel(int m, int n, int k, float alpha, const float* __restrict__ a,
                    const float* __restrict__ b, float beta, float* c) {
  constexpr int kThreads = (BM / TM) * (BN / TN);
  static_assert(BK % 4 == 0 && BN % 4 == 0 && TM % 4 == 0 && TN % 4 == 0, "float4 tiles");
  static_assert((BM * BK) % (4 * kThreads) == 0 && (BK * BN) % (4 * kThreads) == 0, "even loads");
  __shared__ __align__(16) float as[BK * BM];  // transposed: as[kk * BM + r]
  __shared__ __align__(16) float bs[BK * BN];
  const int tid = threadIdx.x;
  const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
  const int trow = tid / (BN / TN), tcol = tid % (BN / TN);
  float acc[TM][TN] = {};
  for (int k0 = 0; k0 < k; k0 += BK) {
#pragma unroll
    for (int f = tid; f < BM * BK / 4; f += kThreads) {  // float4 number f of the A tile
      const int r = f / (BK / 4), cc = (f % (BK / 4)) * 4;
      const int gr = row0 + r, gc = k0 + cc;
      float v[4];
      if (kVec) {
        float4 x = make_float4(0.f, 0.f, 0.f, 0.f);
        if (gr < m && gc < k) x = *reinterpret_cast<const float4*>(a + size_t(gr) * k + gc);
        v[0] = x.x, v[1] = x.y, v[2] = x.z, v[3] = x.w;
      } else {
#pragma unroll
        for (int j = 0; j < 4; ++j)
          v[j] = (gr < m && gc + j < k) ? a[size_t(gr) * k + gc + j] : 0.f;
      }
#pragma unroll
      for (int j = 0; j < 4; ++j) as[(cc + j) * BM + r] = v[j];  // transpose on the way in
    }
#pragma unroll
    for (int f = tid; f < BK * BN / 4; f += kThreads) {
      const int r = f / (BN / 4), cc = (f % (BN / 4)) * 4;
      const int gr = k0 + r, gc = col0 + cc;
      float4 x = make_float4(0.f, 0.f, 0.f, 0.f);
      if (kVec) {
        if (gr < k && gc < n) x = *reinterpret_cast<const float4*>(b + size_t(gr) * n + gc);
      } else {
        float v[4];
#pragma unroll
        for (int j = 0; j < 4; ++j)
          v[j] = (gr < k && gc + j < n) ? b[size_t(gr) * n + gc + j] : 0.f;
        x = make_float4(v[0], v[1], v[2], v[3]);
      }
      *reinterpret_cast<float4*>(bs + r * BN + cc) = x;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < BK; ++kk) {
      float ra[TM], rb[TN];
#pragma unroll
      for (int i = 0; i < TM; i += 4) {
        const float4 x = *reinterpret_cast<const float4*>(as + kk * BM + trow * TM + i);
        ra[i] = x.x, ra[i + 1] = x.y, ra[i + 2] = x.z, ra[i + 3] = x.w;
      }
#pragma unroll
      for (int j = 0; j < TN; j += 4) {
        const float4 x = *reinterpret_cast<const float4*>(bs + kk * BN + tcol * TN + j);
        rb[j] = x.x, rb[j + 1] = x.y, rb[j + 2] = x.z, rb[j + 3] = x.w;
      }
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(ra[i], rb[j], acc[i][j]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int row = row0 + trow * TM + i;
    if (row >= m) continue;
#pragma unroll
    for (int j = 0; j < TN; j += 4) {
      const int col = col0 + tcol * TN + j;
      float* out = c + size_t(row) * n + col;
      if (kVec && col < n) {  // N % 4 == 0: the float4 is wholly inside
        float4 r = make_float4(alpha * acc[i][j], alpha * acc[i][j + 1], alpha * acc[i][j + 2],
                               alpha * acc[i][j + 3]);
        if (beta != 0.f) {
          const float4 old = *reinterpret_cast<const float4*>(out);
          r.x += beta * old.x, r.y += beta * old.y, r.z += beta * old.z, r.w += beta * old.w;
        }
        *reinterpret_cast<float4*>(out) = r;
      } else if (!kVec) {
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          if (col + q < n) out[q] = alpha * acc[i][j + q] + (beta != 0.f ? beta * out[q] : 0.f);
        }
      }
    }
  }
}

bool vector_path_ok(GemmShape s, const void* a, const void* b, const void* c) {
  return s.k % 4 == 0 && s.n % 4 == 0 && gpu100::aligned16(a) && gpu100::aligned16(b) &&
         gpu100::aligned16(c);
}

void sgemm_v6_vectorized(GemmShape s, float alpha, const float* a, const float* b, float beta,
                         float* c, cudaStream_t stream) {
  check_gemm_args(s, a, b, c);
  constexpr int BM = 128, BN = 128, BK = 8, TM = 8, TN = 8;
  const dim3 grid(gpu100::ceil_div(s.n, BN), gpu100::ceil_div(s.m, BM));
  constexpr int kThreads = (BM / TM) * (BN / TN);
  if (vector_path_ok(s, a, b, c)) {
    sgemm_v6_kernel<BM, BN, BK, TM, TN, true>
        <<<grid, kThreads, 0, stream>>>(s.m, s.n, s.k, alpha, a, b, beta, c);
  } else {
    sgemm_v6_kernel<BM, BN, BK, TM, TN, false>
        <<<grid, kThreads, 0, stream>>>(s.m, s.n, s.k, alpha, a, b, beta, c);
  }
  CUDA_CHECK_LAST();
}

}  // namespace day04
