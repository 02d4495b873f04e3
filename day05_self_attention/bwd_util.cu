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

// One warp per padded row (grid-stride): the same row for the whole warp.
__global__ void __launch_bounds__(32 * kRowWarps)
    prepass_kernel(const bf16* __restrict__ dout, const bf16* __restrict__ o,
                   const float* __restrict__ lse, float* __restrict__ delta,
                   float* __restrict__ lse2, float* __restrict__ dq_acc, int64_t padded_rows, int s,
                   int s_pad, int d) {
  const int lane = threadIdx.x % 32;
  for (int64_t r = int64_t(blockIdx.x) * kRowWarps + threadIdx.x / 32; r < padded_rows;
       r += int64_t(gridDim.x) * kRowWarps) {
    const int64_t bh = r / s_pad;
    const int i = static_cast<int>(r - bh * s_pad);
    if (i >= s) {  // padding: finite zeros (a masked score still multiplies D_i)
      if (lane == 0) {
        delta[r] = 0.f;
        if (lse2 != nullptr) lse2[r] = 0.f;
      }
      continue;
    }
    const int64_t row = bh * s + i;
    const bf16* a = dout + row * d;
    const bf16* b = o + row * d;
    float acc = 0.f;
    for (int e = 8 * lane; e < d; e += 256) {  // 8 bf16 (16 bytes) per lane and step
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
#pragma unroll
    for (int off = 16; off > 0; off /= 2) acc += __shfl_xor_sync(0xffffffffu, acc, off);
    if (lane == 0) {
      delta[r] = acc;
      if (lse2 != nullptr) lse2[r] = lse[row] * flash::kLog2e;
    }
    if (dq_acc != nullptr) {
      float* z = dq_acc + row * d;
      for (int e = 4 * lane; e < d; e += 128) {
        *reinterpret_cast<float4*>(z + e) = make_float4(0.f, 0.f, 0.f, 0.f);
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
  prepass_kernel<<<grid_for(padded_rows, kRowWarps), 32 * kRowWarps, 0, stream>>>(
      dout, o, lse, delta, lse2, dq_acc, padded_rows, s, s_pad, d);
  CUDA_CHECK_LAST();
}

void launch_postpass(const float* dq_acc, bf16* dq, int64_t elements, float scale,
                     cudaStream_t stream) {
  const int64_t n4 = elements / 4;
  postpass_kernel<<<grid_for(n4, 256), 256, 0, stream>>>(dq_acc, dq, n4, scale);
  CUDA_CHECK_LAST();
}

}  // namespace day05::bwd
