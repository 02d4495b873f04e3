// day01_rope v5_bf16: bf16 storage, fp32 math (see rope_v1_naive.cu for the list of versions).
#include <cstring>

#include "common/cuda_check.hpp"
#include "rope.cuh"
#include "rope_device.cuh"

namespace day01 {

namespace {

// Eight bf16 values travel as one uint4 (LDG.128 / STG.128): a struct of four __nv_bfloat162
// would be copied member by member, as four 4-byte accesses. Each 32-bit word is one bf16 pair.
__device__ __forceinline__ float2 widen(uint32_t bits) {
  __nv_bfloat162 h;
  memcpy(&h, &bits, sizeof(h));
  return __bfloat1622float2(h);
}
__device__ __forceinline__ uint32_t narrow(float lo, float hi) {
  const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);  // round to nearest even
  uint32_t bits;
  memcpy(&bits, &h, sizeof(bits));
  return bits;
}

// v5: what changed from v4: bf16 storage, so a 16-byte access carries 8 values and the bytes
// halve; the math stays fp32 (widen, rotate, round once). Unit u: interleaved, values 8u..8u+7 =
// 4 pairs (D % 8 == 0); half-split, pairs i0..i0+7 of a head, 8 values at x[i0] and 8 at
// x[i0 + D/2] (D % 16 == 0). Each pair still needs fp32 (cos, sin): 2 or 4 float4 of table per
// unit, L1 hits. Otherwise the launcher runs v3's kernel in bf16.
template <RopeStyle kStyle>
__global__ void rope_v5_kernel(const __nv_bfloat16* q, const __nv_bfloat16* k, __nv_bfloat16* q_out,
                               __nv_bfloat16* k_out, const float2* __restrict__ table, uint32_t seq,
                               int64_t pos_offset, uint32_t q_units, uint32_t k_units,
                               uint32_t half_dim) {
  constexpr uint32_t kValuesPerUnit = kStyle == RopeStyle::kInterleaved ? 8 : 16;
  uint32_t u = blockIdx.y * blockDim.x + threadIdx.x;
  if (u >= q_units + k_units) return;
  const uint32_t r = blockIdx.x;
  const uint32_t s = r % seq;
  const __nv_bfloat16* x;
  __nv_bfloat16* out;
  if (u < q_units) {
    const int64_t row = int64_t(r) * q_units * kValuesPerUnit;
    x = q + row;
    out = q_out + row;
  } else {
    u -= q_units;
    const int64_t row = int64_t(r) * k_units * kValuesPerUnit;
    x = k + row;
    out = k_out + row;
  }
  const float2* cs_row = table + (pos_offset + s) * half_dim;  // 32-byte aligned: half_dim % 4 == 0
  if constexpr (kStyle == RopeStyle::kInterleaved) {
    const uint32_t i0 = (4 * u) % half_dim;  // a multiple of 4
    const uint4 v = reinterpret_cast<const uint4*>(x)[u];
    const float4* c = reinterpret_cast<const float4*>(cs_row + i0);
    const float4 c01 = __ldg(c), c23 = __ldg(c + 1);
    const float2 f0 = widen(v.x), f1 = widen(v.y), f2 = widen(v.z), f3 = widen(v.w);
    const float2 y0 = detail::rotate(f0.x, f0.y, c01.x, c01.y);
    const float2 y1 = detail::rotate(f1.x, f1.y, c01.z, c01.w);
    const float2 y2 = detail::rotate(f2.x, f2.y, c23.x, c23.y);
    const float2 y3 = detail::rotate(f3.x, f3.y, c23.z, c23.w);
    reinterpret_cast<uint4*>(out)[u] =
        make_uint4(narrow(y0.x, y0.y), narrow(y1.x, y1.y), narrow(y2.x, y2.y), narrow(y3.x, y3.y));
  } else {
    const uint32_t units_per_head = half_dim / 8;
    const uint32_t h = u / units_per_head;
    const uint32_t i0 = (u - h * units_per_head) * 8;
    const uint32_t lo = h * 2 * half_dim + i0;  // a multiple of 8 values
    const uint4 a = *reinterpret_cast<const uint4*>(x + lo);
    const uint4 b = *reinterpret_cast<const uint4*>(x + lo + half_dim);
    const float4* c = reinterpret_cast<const float4*>(cs_row + i0);
    const uint32_t aw[4] = {a.x, a.y, a.z, a.w}, bw[4] = {b.x, b.y, b.z, b.w};
    uint32_t lo_out[4], hi_out[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      // Word j of each half holds values 2j and 2j+1: pairs i0 + 2j and i0 + 2j + 1, whose
      // (cos, sin) are the two halves of table float4 j.
      const float4 cj = __ldg(c + j);
      const float2 fa = widen(aw[j]), fb = widen(bw[j]);
      const float2 y0 = detail::rotate(fa.x, fb.x, cj.x, cj.y);
      const float2 y1 = detail::rotate(fa.y, fb.y, cj.z, cj.w);
      lo_out[j] = narrow(y0.x, y1.x);
      hi_out[j] = narrow(y0.y, y1.y);
    }
    *reinterpret_cast<uint4*>(out + lo) = make_uint4(lo_out[0], lo_out[1], lo_out[2], lo_out[3]);
    *reinterpret_cast<uint4*>(out + lo + half_dim) =
        make_uint4(hi_out[0], hi_out[1], hi_out[2], hi_out[3]);
  }
}

}  // namespace

void rope_v5_bf16(const __nv_bfloat16* q, const __nv_bfloat16* k, __nv_bfloat16* q_out,
                  __nv_bfloat16* k_out, const RopeParams& p, const RopeTable& table,
                  cudaStream_t stream) {
  validate(p);
  table.check_covers(p);
  const bool interleaved = p.style == RopeStyle::kInterleaved;
  const int64_t values_per_unit = interleaved ? 8 : 16;
  // As in v4: 16-byte accesses only where every head starts on a 16-byte boundary.
  const bool vec = p.dim % values_per_unit == 0 && detail::aligned16(q) && detail::aligned16(k) &&
                   detail::aligned16(q_out) && detail::aligned16(k_out);
  if (!vec) {
    detail::launch_fused_pairs(q, k, q_out, k_out, p, table.data(), stream);
    return;
  }
  const int64_t q_units = p.q_heads * p.dim / values_per_unit;
  const int64_t k_units = p.kv_heads * p.dim / values_per_unit;
  const detail::RowLaunch l = detail::row_launch(p.batch * p.seq, q_units + k_units);
  const auto kernel =
      interleaved ? rope_v5_kernel<RopeStyle::kInterleaved> : rope_v5_kernel<RopeStyle::kHalfSplit>;
  kernel<<<l.grid, l.block, 0, stream>>>(q, k, q_out, k_out, table.data(), uint32_t(p.seq),
                                         p.pos_offset, uint32_t(q_units), uint32_t(k_units),
                                         uint32_t(p.dim / 2));
  CUDA_CHECK_LAST();
}

}  // namespace day01
