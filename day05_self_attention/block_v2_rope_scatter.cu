// The attention block's QKV stage, v2: one GEMM, then one kernel that rotates and scatters.
// What changed from v1, and why it is faster:
//  - one projection by the concatenated weight W_qkv [d_model, 3 H D] instead of three: one launch
//    that reads X once instead of three times, with three times the columns to tile (a better-
//    filled GPU at small B S);
//  - RoPE and the three transpositions become one pass: each thread reads 16 bytes of a token's
//    projection row (Q, K: the 8 values of a unit, and for the half-dim split their 8 partners
//    D/2 further), rotates them in fp32 with day01's math and table, and writes them straight to
//    [B, H, S, D]. v1 read and wrote Q and K twice (RoPE, then the transposition) and V once;
//    here each of Q, K and V is read once and written once: 2 x 3 x 2 B S H D bytes in all, 384
//    MiB at the default shape instead of v1's 640 MiB.
// What is left: the projection still writes its 192 MiB to memory and this kernel reads them back
// (v3 folds this kernel into the GEMM's epilogue).
#include <cuda_bf16.h>

#include <cstring>
#include <stdexcept>

#include "block.hpp"
#include "common/cuda_check.hpp"
#include "common/math.hpp"
#include "flash_util.cuh"
#include "gemm.hpp"
#include "rope_device.cuh"

namespace day05 {

namespace {

using bf16 = __nv_bfloat16;
using day01::RopeStyle;

__device__ __forceinline__ float2 widen(uint32_t bits) {
  __nv_bfloat162 h;
  memcpy(&h, &bits, sizeof h);
  return __bfloat1622float2(h);
}

// The 4 pairs (x[2i], x[2i + 1]) of 16 bytes rotated by cs[0 .. 3] (interleaved pairing).
__device__ __forceinline__ uint4 rotate_interleaved(uint4 x, const float2* cs) {
  const uint32_t in[4] = {x.x, x.y, x.z, x.w};
  uint32_t out[4];
#pragma unroll
  for (int p = 0; p < 4; ++p) {
    const float2 f = widen(in[p]), c = __ldg(cs + p);
    const float2 r = day01::detail::rotate(f.x, f.y, c.x, c.y);
    out[p] = flash::pack_bf16(r.x, r.y);
  }
  return make_uint4(out[0], out[1], out[2], out[3]);
}

// 8 values lo[i] and their partners hi[i] (D/2 further) rotated by cs[0 .. 7] (half-dim split).
__device__ __forceinline__ void rotate_half(uint4& lo, uint4& hi, const float2* cs) {
  uint32_t l[4] = {lo.x, lo.y, lo.z, lo.w}, h[4] = {hi.x, hi.y, hi.z, hi.w};
#pragma unroll
  for (int p = 0; p < 4; ++p) {
    const float2 a = widen(l[p]), b = widen(h[p]);
    const float2 c0 = __ldg(cs + 2 * p), c1 = __ldg(cs + 2 * p + 1);
    const float2 r0 = day01::detail::rotate(a.x, b.x, c0.x, c0.y);
    const float2 r1 = day01::detail::rotate(a.y, b.y, c1.x, c1.y);
    l[p] = flash::pack_bf16(r0.x, r1.x);
    h[p] = flash::pack_bf16(r0.y, r1.y);
  }
  lo = make_uint4(l[0], l[1], l[2], l[3]);
  hi = make_uint4(h[0], h[1], h[2], h[3]);
}

// Block row r = token b S + s; thread u of the row handles one unit: units [0, 2 rot_units) rotate
// (Q's, then K's), the next v_units copy V. A rotating unit is 8 values (interleaved: 4 pairs) or
// 8 values and their 8 partners (half split); a V unit is 8 values.
template <RopeStyle kStyle>
__global__ void rope_scatter_kernel(const bf16* __restrict__ qkv, bf16* __restrict__ q,
                                    bf16* __restrict__ k, bf16* __restrict__ v,
                                    const float2* __restrict__ table, uint32_t seq, uint32_t heads,
                                    uint32_t d, uint32_t rot_units, uint32_t v_units) {
  uint32_t u = blockIdx.y * blockDim.x + threadIdx.x;
  if (u >= 2 * rot_units + v_units) return;
  const uint32_t r = blockIdx.x, b = r / seq, s = r - b * seq;
  const size_t hd = size_t(heads) * d;
  const bf16* row = qkv + size_t(r) * 3 * hd;
  // Element (head, dd) of this token in a [B, H, S, D] tensor.
  auto at = [&](bf16* base, uint32_t head, uint32_t dd) {
    return base + ((size_t(b) * heads + head) * seq + s) * d + dd;
  };
  if (u >= 2 * rot_units) {  // V: a copy
    const uint32_t col = 8 * (u - 2 * rot_units), head = col / d;
    *reinterpret_cast<uint4*>(at(v, head, col - head * d)) =
        *reinterpret_cast<const uint4*>(row + 2 * hd + col);
    return;
  }
  const uint32_t which = u >= rot_units ? 1 : 0;  // Q or K
  u -= which * rot_units;
  const bf16* src = row + which * hd;
  bf16* dst = which == 0 ? q : k;
  const float2* cs_row = table + size_t(s) * (d / 2);
  if constexpr (kStyle == RopeStyle::kInterleaved) {
    const uint32_t col = 8 * u, head = col / d, dd = col - head * d;
    const uint4 x = *reinterpret_cast<const uint4*>(src + col);
    *reinterpret_cast<uint4*>(at(dst, head, dd)) = rotate_interleaved(x, cs_row + dd / 2);
  } else {
    const uint32_t per_head = d / 16, head = u / per_head, i0 = 8 * (u - head * per_head);
    uint4 lo = *reinterpret_cast<const uint4*>(src + head * d + i0);
    uint4 hi = *reinterpret_cast<const uint4*>(src + head * d + i0 + d / 2);
    rotate_half(lo, hi, cs_row + i0);
    *reinterpret_cast<uint4*>(at(dst, head, i0)) = lo;
    *reinterpret_cast<uint4*>(at(dst, head, i0 + d / 2)) = hi;
  }
}

}  // namespace

void qkv_gemm_rope_scatter(BlockTensors& t, cudaStream_t stream) {
  const BlockShape& s = t.shape;
  check_block_shape(s);
  day04::cublas_gemm_bf16_out({int(s.tokens()), int(3 * s.hd()), s.d_model}, 1.f, t.x.data(),
                              t.w_qkv.data(), 0.f, t.scratch.data(), stream);
  const bool interleaved = s.style == RopeStyle::kInterleaved;
  const int64_t rot_units = interleaved ? s.hd() / 8 : s.hd() / 16, v_units = s.hd() / 8;
  const auto launch = day01::detail::row_launch(s.tokens(), 2 * rot_units + v_units);
  auto kernel = interleaved ? rope_scatter_kernel<RopeStyle::kInterleaved>
                            : rope_scatter_kernel<RopeStyle::kHalfSplit>;
  kernel<<<launch.grid, launch.block, 0, stream>>>(
      t.scratch.data(), t.q.data(), t.k.data(), t.v.data(), t.table->data(), uint32_t(s.s),
      uint32_t(s.h), uint32_t(s.d), uint32_t(rot_units), uint32_t(v_units));
  CUDA_CHECK_LAST();
}

}  // namespace day05
