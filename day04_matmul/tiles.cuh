#pragma once
// day04 device tile templates: the pieces of the tiled fp32 GEMM (v7, v8) as reusable building
// blocks. They take their tile origin and thread indices as arguments instead of reading
// threadIdx/blockIdx, so other kernels (an implicit-GEMM convolution, an attention kernel) can
// drive them with their own mapping of work to blocks.
//
// Hierarchy (CUTLASS names): threadblock tile BM x BN (k-slab BK) -> warp tile WM x WN ->
// thread tile TM x TN, computed as WMITER x WNITER sub-tiles of 4 x 4 so that every shared-memory
// read is a 16-byte float4.
//
// Shared-memory layout: As[BK][BM + kAPad] holds A transposed (k-major), so a thread's TM values of
// one k are contiguous float4s; Bs[BK][BN] holds B as it is. The pad of 4 floats spreads the
// transposed stores of A over all 32 banks (without it, two k rows 4 apart hit the same bank).
#include <cuda_runtime.h>

namespace day04::tiles {

constexpr int kAPad = 4;

// Global -> registers -> shared memory loader for one BM x BK tile of row-major A (M x K), stored
// transposed. kVec: 16-byte loads, valid when K % 4 == 0 and A is 16-byte aligned (then a float4
// never straddles the K edge, so each float4 is wholly inside or wholly zero-filled).
template <int BM, int BK, int kThreads, bool kVec>
struct ATileLoader {
  static_assert(BK % 4 == 0, "BK must be a multiple of 4");
  static constexpr int kElems = BM * BK;
  static_assert(kElems % (4 * kThreads) == 0,
                "the A tile must split evenly into float4 per thread");
  static constexpr int kPerThread = kElems / kThreads;  // floats per thread
  float reg[kPerThread];

  // Reads the tile whose top-left element is A[row0][k0]; elements outside M x K read as 0.
  __device__ void load(const float* __restrict__ a, int m, int k, int row0, int k0, int tid) {
#pragma unroll
    for (int v = 0; v < kPerThread / 4; ++v) {
      const int f = tid + v * kThreads;  // which float4 of the tile
      const int r = f / (BK / 4), c = (f % (BK / 4)) * 4;
      const int gr = row0 + r, gc = k0 + c;
      if constexpr (kVec) {
        float4 x = make_float4(0.f, 0.f, 0.f, 0.f);
        if (gr < m && gc < k) x = *reinterpret_cast<const float4*>(a + size_t(gr) * k + gc);
        reg[4 * v + 0] = x.x, reg[4 * v + 1] = x.y, reg[4 * v + 2] = x.z, reg[4 * v + 3] = x.w;
      } else {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          reg[4 * v + j] = (gr < m && gc + j < k) ? a[size_t(gr) * k + gc + j] : 0.f;
        }
      }
    }
  }
  // Writes the registers into As[BK][BM + kAPad], transposed.
  __device__ void store(float* as, int tid) const {
#pragma unroll
    for (int v = 0; v < kPerThread / 4; ++v) {
      const int f = tid + v * kThreads;
      const int r = f / (BK / 4), c = (f % (BK / 4)) * 4;
#pragma unroll
      for (int j = 0; j < 4; ++j) as[(c + j) * (BM + kAPad) + r] = reg[4 * v + j];
    }
  }
};

// The same for one BK x BN tile of row-major B (K x N), stored as it is in Bs[BK][BN].
// kVec: 16-byte loads, valid when N % 4 == 0 and B is 16-byte aligned.
template <int BK, int BN, int kThreads, bool kVec>
struct BTileLoader {
  static_assert(BN % 4 == 0, "BN must be a multiple of 4");
  static constexpr int kElems = BK * BN;
  static_assert(kElems % (4 * kThreads) == 0,
                "the B tile must split evenly into float4 per thread");
  static constexpr int kPerThread = kElems / kThreads;
  float4 reg[kPerThread / 4];

  __device__ void load(const float* __restrict__ b, int k, int n, int k0, int col0, int tid) {
#pragma unroll
    for (int v = 0; v < kPerThread / 4; ++v) {
      const int f = tid + v * kThreads;
      const int r = f / (BN / 4), c = (f % (BN / 4)) * 4;
      const int gr = k0 + r, gc = col0 + c;
      if constexpr (kVec) {
        float4 x = make_float4(0.f, 0.f, 0.f, 0.f);
        if (gr < k && gc < n) x = *reinterpret_cast<const float4*>(b + size_t(gr) * n + gc);
        reg[v] = x;
      } else {
        float e[4];
#pragma unroll
        for (int j = 0; j < 4; ++j)
          e[j] = (gr < k && gc + j < n) ? b[size_t(gr) * n + gc + j] : 0.f;
        reg[v] = make_float4(e[0], e[1], e[2], e[3]);
      }
    }
  }
  __device__ void store(float* bs, int tid) const {
#pragma unroll
    for (int v = 0; v < kPerThread / 4; ++v) {
      const int f = tid + v * kThreads;
      const int r = f / (BN / 4), c = (f % (BN / 4)) * 4;
      *reinterpret_cast<float4*>(bs + r * BN + c) = reg[v];
    }
  }
};

// One warp's WM x WN tile of C, accumulated in registers.
// The 32 lanes form an 8 (along M) x 4 (along N) grid; lane (lm, ln) owns, in each of the
// WMITER x WNITER sub-tiles, the 4 x 4 block at rows i*32 + lm*4 and columns j*16 + ln*4 of the
// warp tile. Per k, a lane reads TM + TN floats as float4s (8 lanes share each A float4 and 4
// lanes each B float4: broadcasts, no bank conflicts) and does TM * TN FMAs.
template <int BM, int BN, int BK, int WM, int WN>
struct WarpTile {
  static constexpr int kLanesM = 8, kLanesN = 4;
  static_assert(WM % (kLanesM * 4) == 0 && WN % (kLanesN * 4) == 0, "warp tile vs lane grid");
  static constexpr int kWmIter = WM / (kLanesM * 4), kWnIter = WN / (kLanesN * 4);
  static constexpr int TM = kWmIter * 4, TN = kWnIter * 4;
  float acc[TM][TN];

  __device__ void zero() {
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
      for (int j = 0; j < TN; ++j) acc[i][j] = 0.f;
  }

  // acc += As[:, warp rows] x Bs[:, warp cols] over the BK slab. (wm0, wn0): the warp tile's
  // origin inside the block tile.
  __device__ void mma(const float* as, const float* bs, int wm0, int wn0, int lane) {
    const int lm = lane / kLanesN, ln = lane % kLanesN;
#pragma unroll
    for (int kk = 0; kk < BK; ++kk) {
      float fa[TM], fb[TN];
#pragma unroll
      for (int i = 0; i < kWmIter; ++i) {
        const float4 x = *reinterpret_cast<const float4*>(as + kk * (BM + kAPad) + wm0 +
                                                          i * kLanesM * 4 + lm * 4);
        fa[4 * i + 0] = x.x, fa[4 * i + 1] = x.y, fa[4 * i + 2] = x.z, fa[4 * i + 3] = x.w;
      }
#pragma unroll
      for (int j = 0; j < kWnIter; ++j) {
        const float4 x =
            *reinterpret_cast<const float4*>(bs + kk * BN + wn0 + j * kLanesN * 4 + ln * 4);
        fb[4 * j + 0] = x.x, fb[4 * j + 1] = x.y, fb[4 * j + 2] = x.z, fb[4 * j + 3] = x.w;
      }
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(fa[i], fb[j], acc[i][j]);
    }
  }

  // C[row][col] = alpha * acc + beta * C for the elements inside M x N. (row0, col0): the warp
  // tile's origin in C. kVec: float4 stores (N % 4 == 0 and C 16-byte aligned).
  template <bool kVec>
  __device__ void store(float* c, int m, int n, float alpha, float beta, int row0, int col0,
                        int lane) const {
    const int lm = lane / kLanesN, ln = lane % kLanesN;
#pragma unroll
    for (int i = 0; i < kWmIter; ++i)
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const int row = row0 + i * kLanesM * 4 + lm * 4 + r;
        if (row >= m) continue;
#pragma unroll
        for (int j = 0; j < kWnIter; ++j) {
          const int col = col0 + j * kLanesN * 4 + ln * 4;
          const float* v = &acc[4 * i + r][4 * j];
          float* dst = c + size_t(row) * n + col;
          if (kVec && col + 3 < n) {
            float4 out = make_float4(alpha * v[0], alpha * v[1], alpha * v[2], alpha * v[3]);
            if (beta != 0.f) {
              const float4 old = *reinterpret_cast<const float4*>(dst);
              out.x += beta * old.x, out.y += beta * old.y, out.z += beta * old.z,
                  out.w += beta * old.w;
            }
            *reinterpret_cast<float4*>(dst) = out;
          } else {
#pragma unroll
            for (int q = 0; q < 4; ++q) {
              if (col + q < n) dst[q] = alpha * v[q] + (beta != 0.f ? beta * dst[q] : 0.f);
            }
          }
        }
      }
  }
};

}  // namespace day04::tiles
