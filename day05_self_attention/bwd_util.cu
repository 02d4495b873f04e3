// day05: the flash backwards' pre-pass and post-pass (bwd_util.hpp says what they do). Plain CUDA
// (16-byte loads and stores, warp shuffles): builds and runs on every architecture.
#include "bwd_util.hpp"

#include <algorithm>
#include <cstring>

#include "common/cuda_check.hpp"
#include "common/math.hpp"
#include "flash_util.cuh"

namespace day05::bwd {

namespace {

using bf16 = __nv_bfloat16;
constexpr int kRowWarps = 8;  // warps per block of the pre-pass

// A group of g lanes per padded row (g = d / 8 rounded down to a power of two, at most 32), each
// lane 8 elements (16 bytes of dO and of O) per step, so that a warp has 32 / g rows in flight. One
// warp per row, as this kernel first was, left 24 of 32 lanes idle at d = 64 and ran at 28% of the
// DRAM peak (86 us at B 8, H 16, S 2048, against 35 us for cuDNN's own pre-pass, on an H200).
__global__ void __launch_bounds__(32 * kRowWarps)
    prepass_kernel(const bf16* __restrict__ dout, const bf16* __restrict__ o,
                   const float* __restrict__ lse, float* __restrict__ delta,
                   float* __restrict__ lse2, float* __restrict__ dq_acc, int64_t padded_rows, int s,
                   int s_pad, int d, int g) {
  const int lane = threadIdx.x % 32, sub = lane % g;
  const int64_t rows_per_warp = 32 / g;
  const int64_t warp = int64_t(blockIdx.x) * kRowWarps + threadIdx.x / 32;
  const int64_t warps = int64_t(gridDim.x) * kRowWarps;
  // Every lane runs every step (the shuffles need the whole warp); rows past the end do nothing.
  for (int64_t r0 = warp * rows_per_warp; r0 < padded_rows; r0 += warps * rows_per_warp) {
    const int64_t r = r0 + lane / g;
    const int64_t bh = r / s_pad;
    const int i = static_cast<int>(r - bh * s_pad);
    const bool real = r < padded_rows && i < s;  // i >= s: padding, finite zeros (a masked
                                                 // score still multiplies D_i)
    const int64_t row = bh * s + i;
    float acc = 0.f;
    if (real) {
      const bf16* a = dout + row * d;
      const bf16* b = o + row * d;
      for (int e = 8 * sub; e < d; e += 8 * g) {
        const uint4 ua = *reinterpret_cast<const uint4*>(a + e);
        const uint4 ub = *reinterpret_cast<const uint4*>(b + e);
        const uint32_t wa[4] = {ua.x, ua.y, ua.z, ua.w}, wb[4] = {ub.x, ub.y, ub.z, ub.w};
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          __nv_bfloat162 x, y;
          memcpy(&x, &wa[c], 4);
          memcpy(&y, &wb[c], 4);
          acc += __low2float(x) * __low2float(y) + __high2float(x) * __high2float(y);
        }
      }
    }
    for (int off = g / 2; off > 0; off /= 2) acc += __shfl_xor_sync(0xffffffffu, acc, off);
    if (r < padded_rows && sub == 0) {
      delta[r] = acc;
      if (lse2 != nullptr) lse2[r] = real ? lse[row] * flash::kLog2e : 0.f;
    }
    if (real && dq_acc != nullptr) {
      float* z = dq_acc + row * d;
      for (int e = 8 * sub; e < d; e += 8 * g) {
        *reinterpret_cast<float4*>(z + e) = make_float4(0.f, 0.f, 0.f, 0.f);
        *reinterpret_cast<float4*>(z + e + 4) = make_float4(0.f, 0.f, 0.f, 0.f);
      }
    }
  }
}

// Four elements per thread (grid-stride).
__global__ void __launch_bounds__(256)
    postpass_kernel(const float* __restrict__ dq_acc, bf16* __restrict__ dq, int64_t n4,
                    float scale) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n4;
       i += int64_t(gridDim.x) * blockDim.x) {
    const float4 f = reinterpret_cast<const float4*>(dq_acc)[i];
    uint2 u;
    u.x = flash::pack_bf16(f.x * scale, f.y * scale);
    u.y = flash::pack_bf16(f.z * scale, f.w * scale);
    reinterpret_cast<uint2*>(dq)[i] = u;
  }
}

unsigned grid_for(int64_t items, int per_block) {
  return static_cast<unsigned>(
      std::min<int64_t>(gpu100::ceil_div<int64_t>(items, per_block), int64_t(1) << 20));
}

}  // namespace

void launch_prepass(const bf16* dout, const bf16* o, const float* lse, float* delta, float* lse2,
                    float* dq_acc, int64_t heads, int s, int s_pad, int d, cudaStream_t stream) {
  const int64_t padded_rows = heads * s_pad;
  int g = 1;  // lanes per row: d / 8 rounded down to a power of two, at most 32
  while (2 * g <= d / 8 && 2 * g <= 32) g *= 2;
  prepass_kernel<<<grid_for(padded_rows, kRowWarps * (32 / g)), 32 * kRowWarps, 0, stream>>>(
      dout, o, lse, delta, lse2, dq_acc, padded_rows, s, s_pad, d, g);
  CUDA_CHECK_LAST();
}

void launch_postpass(const float* dq_acc, bf16* dq, int64_t elements, float scale,
                     cudaStream_t stream) {
  const int64_t n4 = elements / 4;
  postpass_kernel<<<grid_for(n4, 256), 256, 0, stream>>>(dq_acc, dq, n4, scale);
  CUDA_CHECK_LAST();
}

}  // namespace day05::bwd
