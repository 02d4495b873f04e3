// Conv2d v8: Winograd F(2x2, 3x3) on TF32 tensor cores. Changed from v7: only the engine that
// accumulates a chunk's 16 point products. v7's FMAs are the kernel's main cost; here each
// point's (32 tiles x 8 channels) by (8 channels x 64 filters) product is 2 x 8 mma.sync m16n8k8
// TF32 tiles per warp (day04's mma.cuh), with fp32 accumulation, so the tensor cores take the
// multiplies and what is left is v7's loads, transforms and stores. V and U are rounded to TF32
// when they are written (the filter transform and the input transform), so the fragments need
// no conversion; their rows are padded (V: 36 floats, U: 72) so the fragment loads are
// conflict-free. Error: TF32's 10-bit mantissa on the transformed values, which are larger than
// the inputs (the tests allow 4x v5's TF32 tolerance). The rest is winograd.cuh, shared with v7.
// Only 3x3 filters, stride 1 and dilation 1 (v7_refusal).
#include <cstdint>
#include <stdexcept>
#include <string>

#include "common/arch.hpp"
#include "conv_day.hpp"
#include "mma.cuh"
#include "winograd.cuh"

namespace day08 {

namespace {

using wino::kBC;
using wino::kBK;
using wino::kMPitch;
using wino::kTiles;

// Warp w owns points 2w and 2w + 1; for each, the 32 x 64 product is 2 m-tiles (tiles 0-15,
// 16-31) by 8 n-tiles (8 filters each), one k8 step per chunk. Fragment layouts as mma.cuh
// states them, with g = lane / 4 and t = lane % 4: A[tile][c], B[c][filter], C[tile][filter].
struct MmaEngine {
  static constexpr int kVPitch = kTiles + 4;  // bank 4t + g: conflict-free A fragments
  static constexpr int kUPitch = kBK + 8;     // bank 8t + g: conflict-free B fragments
  static constexpr bool kTf32 = true;
  __device__ static int v_pos(int tt) { return tt; }
  float acc[2][2][8][4];  // [point][m-tile][n-tile][fragment]

  __device__ void zero() {
#pragma unroll
    for (int q = 0; q < 2; ++q)
#pragma unroll
      for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int nt = 0; nt < 8; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) acc[q][mt][nt][e] = 0.f;
  }
  __device__ void chunk(const float* vb, const float* ub) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int q = 0; q < 2; ++q) {
      const int point = 2 * warp + q;
      const float* v_lo = vb + (point * kBC + t) * kVPitch;  // channel t
      const float* v_hi = v_lo + 4 * kVPitch;                // channel t + 4
      uint32_t a[2][4];
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) {
        a[mt][0] = __float_as_uint(v_lo[16 * mt + g]);
        a[mt][1] = __float_as_uint(v_lo[16 * mt + g + 8]);
        a[mt][2] = __float_as_uint(v_hi[16 * mt + g]);
        a[mt][3] = __float_as_uint(v_hi[16 * mt + g + 8]);
      }
      const float* u_lo = ub + (point * kBC + t) * kUPitch;
      const float* u_hi = u_lo + 4 * kUPitch;
#pragma unroll
      for (int nt = 0; nt < 8; ++nt) {
        const uint32_t b[2] = {__float_as_uint(u_lo[8 * nt + g]),
                               __float_as_uint(u_hi[8 * nt + g])};
#pragma unroll
        for (int mt = 0; mt < 2; ++mt) day04::mma::mma_tf32_1688(acc[q][mt][nt], a[mt], b);
      }
    }
  }
  // M[point][filter][tile], pitch 33.
  __device__ void stage(float* ms) const {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int q = 0; q < 2; ++q)
#pragma unroll
      for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int nt = 0; nt < 8; ++nt) {
          float* m = ms + ((2 * warp + q) * kBK + 8 * nt + 2 * t) * kMPitch + 16 * mt + g;
          m[0] = acc[q][mt][nt][0];
          m[kMPitch] = acc[q][mt][nt][1];
          m[8] = acc[q][mt][nt][2];
          m[kMPitch + 8] = acc[q][mt][nt][3];
        }
  }
};

}  // namespace

void conv2d_v8_winograd_tf32(const ConvShape& s, const float* x, const float* w, const float* bias,
                             float* y, cudaStream_t stream) {
  check_conv_args(s);
  if (const std::string why = v7_refusal(s, bias != nullptr); !why.empty()) {
    throw std::invalid_argument("conv2d_v8_winograd_tf32: " + why);
  }
  gpu100::require_build(gpu100::ArchNeed::kSm80, "v8_winograd_tf32");
  wino::launch<MmaEngine>(s, x, w, bias, y, stream);
}

}  // namespace day08
