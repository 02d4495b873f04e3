// Conv2d v7: Winograd F(2x2, 3x3) on CUDA cores, fp32 (Lavin and Gray, "Fast Algorithms for
// Convolutional Neural Networks", 2016; PMPP's convolution chapter points at it). Changed from v4:
// fewer multiplies. A 2x2 block of outputs of one filter needs 4 x 9 = 36 multiply-adds per
// channel done directly; Winograd transforms the 4x4 input patch (V = B^T d B) and the 3x3 filter
// (U = G g G^T) so that the same 2x2 outputs come from 16 element-wise products, Y = A^T (U . V) A:
// 2.25x fewer FMAs. Summed over channels, each of the 16 transform points is a GEMM of
// (tiles x C) by (C x K), so the FMAs stay in the register-tiled outer-product form of day04's
// SGEMM. The price is additions in the transforms (about 3% of the FMAs here) and a larger
// rounding error (the tests allow 4x v4's tolerance).
// Fused (winograd.cuh, shared with v8): a small kernel transforms the filters (16 x C x K floats,
// in L2); then one block takes 32 output tiles (consecutive in (n, tile row, tile col) order) by
// 64 filters, loops over C in chunks of 8 (the next chunk's patches loaded into registers and its
// U copied by cp.async while this chunk's FMAs run), transforms the patches in registers, and
// stages the sums in shared memory for the output transform, the bias and the stores. This file
// is the FMA engine: 8 warps, 2 transform points each, 8 tiles x 8 filters per thread as an
// outer product of two 16-byte shared-memory loads each (day04's register tiling), 16 x 32 x 64
// sums in registers. Only 3x3 filters, stride 1 and dilation 1 (v7_refusal).
#include <stdexcept>
#include <string>

#include "conv_day.hpp"
#include "winograd.cuh"

namespace day08 {

namespace {

using wino::kBC;
using wino::kBK;
using wino::kMPitch;
using wino::kTiles;

// Lane (tg, kg) of warp w accumulates tiles tg + 4i (i < 8) by filters 4 kg + j and 32 + 4 kg + j
// (j < 4), at points 2w and 2w + 1. V stores tile tt at position 8 (tt % 4) + tt / 4, so a lane's
// 8 tiles are contiguous (two 16-byte loads, 4 distinct addresses per warp).
struct FmaEngine {
  static constexpr int kVPitch = kTiles, kUPitch = kBK;
  static constexpr bool kTf32 = false;
  __device__ static int v_pos(int tt) { return 8 * (tt & 3) + (tt >> 2); }
  float acc[2][8][8];

  __device__ void zero() {
#pragma unroll
    for (int q = 0; q < 2; ++q)
#pragma unroll
      for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[q][i][j] = 0.f;
  }
  __device__ void chunk(const float* vb, const float* ub) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, tg = lane & 3, kg = lane >> 2;
#pragma unroll
    for (int c = 0; c < kBC; ++c) {
#pragma unroll
      for (int q = 0; q < 2; ++q) {
        const int point = 2 * warp + q;
        const float* vrow = vb + (point * kBC + c) * kVPitch + 8 * tg;
        const float* urow = ub + (point * kBC + c) * kUPitch + 4 * kg;
        const float4 v0 = *reinterpret_cast<const float4*>(vrow);
        const float4 v1 = *reinterpret_cast<const float4*>(vrow + 4);
        const float4 u0 = *reinterpret_cast<const float4*>(urow);
        const float4 u1 = *reinterpret_cast<const float4*>(urow + 32);
        const float vv[8] = {v0.x, v0.y, v0.z, v0.w, v1.x, v1.y, v1.z, v1.w};
        const float uu[8] = {u0.x, u0.y, u0.z, u0.w, u1.x, u1.y, u1.z, u1.w};
#pragma unroll
        for (int i = 0; i < 8; ++i)
#pragma unroll
          for (int j = 0; j < 8; ++j) acc[q][i][j] = fmaf(vv[i], uu[j], acc[q][i][j]);
      }
    }
  }
  // M[point][filter][tile], pitch 33: bank 4 kg + tg + const, conflict-free.
  __device__ void stage(float* ms) const {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, tg = lane & 3, kg = lane >> 2;
#pragma unroll
    for (int q = 0; q < 2; ++q)
#pragma unroll
      for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          const int f = j < 4 ? 4 * kg + j : 32 + 4 * kg + (j - 4);
          ms[((2 * warp + q) * kBK + f) * kMPitch + tg + 4 * i] = acc[q][i][j];
        }
  }
};

}  // namespace

std::string v7_refusal(const ConvShape& s, bool /*bias*/) {
  return winograd_refusal(s, "F(2x2, 3x3)");
}

void conv2d_v7_winograd(const ConvShape& s, const float* x, const float* w, const float* bias,
                        float* y, cudaStream_t stream) {
  check_conv_args(s);
  if (const std::string why = v7_refusal(s, bias != nullptr); !why.empty()) {
    throw std::invalid_argument("conv2d_v7_winograd: " + why);
  }
  wino::launch<FmaEngine>(s, x, w, bias, y, stream);
}

namespace detail {
void conv2d_v7_group(const ConvShape& s, const ConvGroup<float>& grp, cudaStream_t stream) {
  if (const std::string why = v7_refusal(s, false); !why.empty()) {
    throw std::invalid_argument("conv2d_fused_winograd: " + why);
  }
  wino::launch_group<FmaEngine>(s, grp, stream);
}
}  // namespace detail

}  // namespace day08
