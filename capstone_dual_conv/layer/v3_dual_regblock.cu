// dual v3: register blocking over output channels. v2's thread made one pixel and read a weight
// from L1 for every FMA; now a thread makes 16 output channels x 4 neighbouring pixels (64
// accumulators), so per filter tap it reads 4 inputs and 16 weights from shared memory (four
// float4 broadcasts: the whole block uses the same weights) for 64 FMAs. The block's weights sit
// in shared memory, transposed to [c][r][s][k]. Each output row segment is written once, as one
// 16-byte streaming store per thread and channel (__stcs: the output is never read again, so it
// should not evict the inputs from L2); a warp writes four full 128-byte lines per store.
// At the stem (C = 3 or 1) the input window is loaded once per block and the kernel is bound by
// those stores: the design point of the capstone. The cost: ~100 registers per thread, and for
// large C the window is reloaded for every 16 output channels (use dual_igemm there).
// (Register blocking as in SGEMM_CUDA's kernels 4-5 and PMPP chapter 16's thread coarsening.)
#include <cuda_bf16.h>

#include <algorithm>
#include <stdexcept>

#include "common/cuda_check.hpp"
#include "common/math.hpp"
#include "halo_tile.cuh"
#include "kernels.cuh"

namespace capstone::detail {

namespace {

constexpr int kTx = 8, kTy = 16, kThreads = kTx * kTy;  // 128 threads
constexpr int kPx = 4;                                  // pixels per thread, along q
constexpr int kKt = 16;                                 // output channels per thread
constexpr int kTileW = kTx * kPx, kTileH = kTy;         // 32 x 16 output pixels per block
constexpr int kSmemBytes = 48 * 1024;

// Thread (tx, ty): output row p0 + ty, columns q0 + 4 tx .. q0 + 4 tx + 3, channels k0 .. k0 + 15
// for every k0 step of 16. blockIdx.z = 2 * n + stream. KR, KS: the filter size when known at
// compile time (the taps unroll fully), 0 for any size.
template <int KR, int KS>
__global__ void __launch_bounds__(kThreads, 4)
    dual_regblock_kernel(DualArgs a, int rows, int cols, int pitch, int cc, bool vec) {
  extern __shared__ __align__(16) float smem[];
  const int st = blockIdx.z & 1, n = blockIdx.z >> 1;
  const StreamArgs& sa = a.s[st];
  const int R = KR ? KR : a.r, S = KS ? KS : a.sw, rs = R * S;
  float* xs = smem;  // [cc][rows][pitch]: input window
  // [cc][R][S][kKt]: weights of 16 output channels, 16-byte aligned after the window.
  float* ws = smem + ((cc * rows * pitch + 3) & ~3);
  const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * kTx + tx;
  const int p0 = blockIdx.y * kTileH, q0 = blockIdx.x * kTileW;
  const int p = p0 + ty, q = q0 + tx * kPx;
  const bool inside = p < a.p && q < a.q;
  const int chunks = (sa.c + cc - 1) / cc;
  const int stride = a.stride;

  for (int k0 = 0; k0 < a.k; k0 += kKt) {
    float acc[kKt][kPx];
#pragma unroll
    for (int i = 0; i < kKt; ++i)
#pragma unroll
      for (int j = 0; j < kPx; ++j) acc[i][j] = 0.f;

    for (int ch = 0; ch < chunks; ++ch) {
      const int c0 = ch * cc, cn = min(cc, sa.c - c0);
      __syncthreads();  // every thread is done with the previous weights (and window)
      if (chunks > 1 || k0 == 0) {
        for (int c = 0; c < cn; ++c) {
          day08::load_halo_tile(
              xs + c * rows * pitch, pitch, sa.x + (int64_t(n) * sa.c + c0 + c) * a.h * a.w, a.h,
              a.w, p0 * stride - a.pad, q0 * stride - a.pad, rows, cols, tid, kThreads);
        }
      }
      // Weights of channels k0 .. k0 + 15 (zero past K), transposed so that a thread's 16
      // channels of one tap are four consecutive float4s.
      for (int i = tid; i < cn * rs * kKt; i += kThreads) {
        const int j = i % kKt, t = i / kKt;
        const int c = t / rs, tap = t - c * rs;
        ws[i] = k0 + j < a.k ? __ldg(sa.w + (int64_t(k0 + j) * sa.c + c0 + c) * rs + tap) : 0.f;
      }
      __syncthreads();  // window and weights complete
      if (!inside) continue;
      for (int c = 0; c < cn; ++c) {
        const float* win = xs + c * rows * pitch + ty * stride * pitch + tx * kPx * stride;
        const float4* wc = reinterpret_cast<const float4*>(ws) + c * rs * (kKt / 4);
#pragma unroll 1
        for (int r = 0; r < R; ++r) {
#pragma unroll
          for (int s = 0; s < S; ++s) {
            float x[kPx];
#pragma unroll
            for (int j = 0; j < kPx; ++j) x[j] = win[r * pitch + j * stride + s];
#pragma unroll
            for (int i4 = 0; i4 < kKt / 4; ++i4) {
              const float4 w4 = wc[(r * S + s) * (kKt / 4) + i4];
              const float wv[4] = {w4.x, w4.y, w4.z, w4.w};
#pragma unroll
              for (int u = 0; u < 4; ++u)
#pragma unroll
                for (int j = 0; j < kPx; ++j)
                  acc[4 * i4 + u][j] = fmaf(x[j], wv[u], acc[4 * i4 + u][j]);
            }
          }
        }
      }
    }
    if (!inside) continue;
    const int64_t plane = int64_t(a.p) * a.q;
    store_channels(acc, sa, a, k0, int64_t(n) * a.k * plane + int64_t(p) * a.q + q, plane,
                   min(kPx, a.q - q), vec);
  }
}

}  // namespace

void launch_dual_regblock(const DualArgs& a, cudaStream_t stream) {
  const int rows = (kTileH - 1) * a.stride + a.r, cols = (kTileW - 1) * a.stride + a.sw;
  const int pitch = cols | 1;  // odd: the 4 rows of a warp start in different banks mod 4
  const int per_channel = (rows * pitch + a.r * a.sw * kKt) * int(sizeof(float));
  if (per_channel > kSmemBytes) {
    throw std::invalid_argument(
        "dual_regblock: the input window and weights of one channel exceed 48 KB");
  }
  if (2 * int64_t(a.n) > 65535) throw std::invalid_argument("dual_regblock: N must be <= 32767");
  // (16 bytes spare: the weights start 16-byte aligned after the window.)
  const int cc =
      std::max(1, std::min(std::max(a.s[0].c, a.s[1].c), (kSmemBytes - 16) / per_channel));
  const int xs_floats = gpu100::round_up(cc * rows * pitch, 4);
  const size_t smem = (size_t(xs_floats) + size_t(cc) * a.r * a.sw * kKt) * sizeof(float);
  if (smem > size_t(kSmemBytes)) {
    throw std::invalid_argument("dual_regblock: shared memory plan exceeds 48 KB");
  }
  const bool vec = a.q % 4 == 0;
  const dim3 grid(gpu100::ceil_div(a.q, kTileW), gpu100::ceil_div(a.p, kTileH), 2 * a.n);
  const dim3 block(kTx, kTy);
  // Only the any-size instantiation: <3, 3> (all taps unrolled) spills at the 128-register cap.
  dual_regblock_kernel<0, 0><<<grid, block, smem, stream>>>(a, rows, cols, pitch, cc, vec);
  CUDA_CHECK_LAST();
}

}  // namespace capstone::detail
