#pragma once
// day08 implicit GEMM: the pieces shared by v4 (CUDA cores) and v5 (tensor cores).
//
// The convolution as a GEMM without materialising im2col (the CUTLASS "implicit GEMM" view):
//   GEMM_M = N*P*Q   row m  = output pixel (n, p, q)
//   GEMM_N = K       col k  = filter
//   GEMM_K = C*R*S   index g = (c, r, s), the same order as the KCRS weights
//   A[m][g] = x[n][c][p*stride - pad + r*dil][q*stride - pad + s*dil]  (0 in the padding)
//   B[g][k] = w[k][c][r][s]   (the weights as stored: B is "column-major", g contiguous per k)
//   y[n][k][p][q] = sum_g A[m][g] * B[g][k] (+ bias[k])
// A tile of A is gathered from x by address arithmetic as it is copied into shared memory; no
// im2col buffer exists. The gather is cp.async (4 bytes, zero-filled where the window hangs over
// the padding), so the copies of later slabs run while the warps compute on the current one.
//
// Address arithmetic is split into a part that depends only on m (computed once per block) and a
// part that depends only on g (the same for every thread of a warp, advanced incrementally by one
// slab of BK, without divisions):
//   x offset = [n*C*H*W + ih0*W + iw0] + [c*H*W + r*dil*W + s*dil]
#include <cuda_runtime.h>

#include <climits>
#include <cstdint>

#include "conv.hpp"
#include "mma.cuh"

namespace day08::igemm {

// The cp.async wrappers are day04's (mma.cuh), with their fallback for targets below sm_80.
using day04::mma::cp_async_16;
using day04::mma::cp_async_4;
using day04::mma::cp_async_commit;
using day04::mma::cp_async_wait;

// Everything the kernels need about the shape, computed on the host once per launch.
struct Params {
  ConvShape s;
  int P, Q, PQ, M, CRS, RS, HW;
  int step_c, step_r, step_s;  // (c, r, s) of g = BK: one slab's advance
};

inline Params make_params(const ConvShape& s, int bk) {
  Params g;
  g.s = s;
  g.P = s.p();
  g.Q = s.q();
  g.PQ = g.P * g.Q;
  g.M = s.n * g.PQ;
  g.RS = s.r * s.s;
  g.CRS = s.c * g.RS;
  g.HW = s.h * s.w;
  g.step_c = bk / g.RS;
  g.step_r = (bk % g.RS) / s.s;
  g.step_s = (bk % g.RS) % s.s;
  return g;
}

// A position g = (c, r, s) along GEMM_K, advanced by a fixed step with carries (s < S and r < R
// hold before and after; c >= C means g >= C*R*S, past the end).
struct KPos {
  int c, r, s;
  __device__ void init(int gk, const Params& g) {
    c = gk / g.RS;
    const int rs = gk - c * g.RS;
    r = rs / g.s.s;
    s = rs - r * g.s.s;
  }
  __device__ void advance(const Params& g) {
    s += g.step_s;
    r += g.step_r;
    c += g.step_c;
    if (s >= g.s.s) s -= g.s.s, ++r;
    if (r >= g.s.r) r -= g.s.r, ++c;
  }
};

// The A-tile gatherer. A thread owns kMChunks pixels, m = m0 + 32 i + lane (a warp covers 32
// consecutive pixels: for stride 1 its 32 loads of one g are consecutive addresses, and its
// shared-memory stores are 32 consecutive words) and kKRows GEMM_K rows kk0 .. kk0 + kKRows - 1
// of each slab. The tile is stored k-major: as[kk * pitch + (m - m0)].
template <int kMChunks, int kKRows>
struct AGather {
  int xoff[kMChunks], ih0[kMChunks], iw0[kMChunks];
  KPos kp[kKRows];
  int kk0;

  __device__ void init(const Params& g, int m0, int kk_first, int lane) {
    kk0 = kk_first;
#pragma unroll
    for (int i = 0; i < kMChunks; ++i) {
      const int m = m0 + 32 * i + lane;
      if (m < g.M) {
        const int n = m / g.PQ, pq = m - n * g.PQ, p = pq / g.Q, q = pq - p * g.Q;
        ih0[i] = p * g.s.stride - g.s.pad;
        iw0[i] = q * g.s.stride - g.s.pad;
        xoff[i] = n * g.s.c * g.HW + ih0[i] * g.s.w + iw0[i];
      } else {
        ih0[i] = INT_MIN / 2;  // every row test fails: the pixel is past the end, load zeros
        iw0[i] = 0;
        xoff[i] = 0;
      }
    }
#pragma unroll
    for (int j = 0; j < kKRows; ++j) kp[j].init(kk0 + j, g);
  }

  // Issues this thread's cp.async for the next slab into `as`, then advances to the slab after.
  __device__ void load(const float* __restrict__ x, float* as, int pitch, const Params& g,
                       int lane) {
#pragma unroll
    for (int j = 0; j < kKRows; ++j) {
      const int rd = kp[j].r * g.s.dilation, sd = kp[j].s * g.s.dilation;
      const bool kvalid = kp[j].c < g.s.c;
      const int koff = kp[j].c * g.HW + rd * g.s.w + sd;
#pragma unroll
      for (int i = 0; i < kMChunks; ++i) {
        const int ih = ih0[i] + rd, iw = iw0[i] + sd;
        const bool ok = kvalid && unsigned(ih) < unsigned(g.s.h) && unsigned(iw) < unsigned(g.s.w);
        cp_async_4(as + (kk0 + j) * pitch + 32 * i + lane, ok ? x + (xoff[i] + koff) : x, ok);
      }
      kp[j].advance(g);
    }
  }
};

// The CUDA-core kernels' main loop (v4, v15): a ring of kStages shared-memory stages, the copies
// of slab t issued kStages - 1 slabs ahead, so the gathers of the next slabs run while slab t is
// multiplied; one barrier a slab. load(stage, slab) issues one thread's cp.async copies of a slab
// into a stage, mma(stage) multiplies the slab held in a stage.
template <int kStages, class Load, class Mma>
__device__ __forceinline__ void pipelined_slabs(int num_slabs, Load&& load, Mma&& mma) {
  // Prologue: slabs 0 .. kStages - 2 in flight (one commit group each, empty past the end).
#pragma unroll
  for (int st = 0; st < kStages - 1; ++st) {
    if (st < num_slabs) load(st, st);
    cp_async_commit();
  }
  for (int t = 0; t < num_slabs; ++t) {
    cp_async_wait<kStages - 2>();  // this thread's copies of slab t have landed
    __syncthreads();  // ... and everyone's; also, all warps are done with slab t - 1's stage
    const int next = t + kStages - 1;
    if (next < num_slabs) load(next % kStages, next);  // overwrites slab t - 1's stage
    cp_async_commit();
    mma(t % kStages);
  }
}

// The CUDA-core kernels' epilogue (v4, v15): a warp's tile of day04's WarpTile (Warp) stored as
// y[n][k][p][q] = relu?(acc + bias[k] + residual[n][k][p][q]). Lane (lm, ln) of the 8 x 4 lane
// grid owns pixels wm0 + 32i + 4lm + {0..3} and filters wn0 + 16j + 4ln + {0..3} (WarpTile's
// layout). kVecOut: P*Q % 4 == 0 and y 16-byte aligned, so a lane's 4 consecutive pixels are 4
// consecutive words of one output plane: one float4 store.
template <bool kVecOut, class Warp>
__device__ __forceinline__ void store_nkpq(const Warp& tile, const ConvOperands<float>& op,
                                           bool relu, const Params& g, int m0, int k0, int wm0,
                                           int wn0, int lane) {
  float* __restrict__ y = op.y;
  const float* __restrict__ res = op.residual;
  auto finish = [&](float v, size_t i, float b) {
    v += b + (res != nullptr ? res[i] : 0.f);
    return relu ? fmaxf(v, 0.f) : v;
  };
  const int lm = lane / 4, ln = lane % 4;
#pragma unroll
  for (int i = 0; i < Warp::kWmIter; ++i) {
    const int mb = m0 + wm0 + 32 * i + 4 * lm;
    int yoff[4];
#pragma unroll
    for (int rr = 0; rr < 4; ++rr) {
      const int m = mb + rr;
      const int n = m / g.PQ;
      yoff[rr] = m < g.M ? n * g.s.k * g.PQ + (m - n * g.PQ) : -1;
    }
#pragma unroll
    for (int j = 0; j < Warp::kWnIter; ++j)
#pragma unroll
      for (int cc = 0; cc < 4; ++cc) {
        const int k = k0 + wn0 + 16 * j + 4 * ln + cc;
        if (k >= g.s.k) continue;
        const float b = op.bias != nullptr ? op.bias[k] : 0.f;
        const float* v0 = &tile.acc[4 * i][4 * j + cc];
        if constexpr (kVecOut) {
          if (yoff[0] >= 0) {  // M % 4 == 0 here, so all four pixels exist
            const size_t o = yoff[0] + size_t(k) * g.PQ;
            *reinterpret_cast<float4*>(y + o) =
                make_float4(finish(v0[0], o, b), finish(v0[Warp::TN], o + 1, b),
                            finish(v0[2 * Warp::TN], o + 2, b), finish(v0[3 * Warp::TN], o + 3, b));
          }
        } else {
#pragma unroll
          for (int rr = 0; rr < 4; ++rr) {
            const size_t o = yoff[rr] + size_t(k) * g.PQ;
            if (yoff[rr] >= 0) y[o] = finish(v0[rr * Warp::TN], o, b);
          }
        }
      }
  }
}

}  // namespace day08::igemm
