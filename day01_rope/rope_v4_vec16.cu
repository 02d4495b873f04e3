// day01_rope v4_vec16: 16-byte loads and stores (see rope_v1_naive.cu for the list of versions).
#include "common/cuda_check.hpp"
#include "rope.cuh"
#include "rope_device.cuh"

namespace day01 {

namespace {

// v4: what changed from v3: 16-byte loads and stores (LDG.128 / STG.128) instead of 4-byte ones.
// Unit u of a row is one float4: interleaved, floats 4u..4u+3 = pairs 2u, 2u+1 (D % 4 == 0);
// half-split, pairs i0..i0+3 of a head from a float4 at x[i0] and one at x[i0 + D/2] (D % 8 == 0).
// Same bytes, 4x fewer memory instructions, 16-32 bytes in flight per thread per load. Otherwise
// (D = 2, 6, ..., or a misaligned pointer) the launcher runs v3.
template <RopeStyle kStyle>
__global__ void rope_v4_kernel(const float* q, const float* k, float* q_out, float* k_out,
                               const float2* __restrict__ table, uint32_t seq, int64_t pos_offset,
                               uint32_t q_units, uint32_t k_units, uint32_t half_dim) {
  constexpr uint32_t kFloatsPerUnit = kStyle == RopeStyle::kInterleaved ? 4 : 8;
  uint32_t u = blockIdx.y * blockDim.x + threadIdx.x;
  if (u >= q_units + k_units) return;
  const uint32_t r = blockIdx.x;
  const uint32_t s = r % seq;
  const float* x;
  float* out;
  if (u < q_units) {
    const int64_t row = int64_t(r) * q_units * kFloatsPerUnit;
    x = q + row;
    out = q_out + row;
  } else {
    u -= q_units;
    const int64_t row = int64_t(r) * k_units * kFloatsPerUnit;
    x = k + row;
    out = k_out + row;
  }
  const float2* cs_row = table + (pos_offset + s) * half_dim;  // 16-byte aligned: half_dim is even
  if constexpr (kStyle == RopeStyle::kInterleaved) {
    const uint32_t i0 = (2 * u) % half_dim;  // even
    const float4 v = reinterpret_cast<const float4*>(x)[u];
    const float4 c = __ldg(reinterpret_cast<const float4*>(cs_row + i0));
    const float2 y0 = detail::rotate(v.x, v.y, c.x, c.y);
    const float2 y1 = detail::rotate(v.z, v.w, c.z, c.w);
    reinterpret_cast<float4*>(out)[u] = make_float4(y0.x, y0.y, y1.x, y1.y);
  } else {
    const uint32_t units_per_head = half_dim / 4;
    const uint32_t h = u / units_per_head;
    const uint32_t i0 = (u - h * units_per_head) * 4;
    const uint32_t lo = h * 2 * half_dim + i0;  // a multiple of 4 floats
    const float4 a = *reinterpret_cast<const float4*>(x + lo);
    const float4 b = *reinterpret_cast<const float4*>(x + lo + half_dim);
    const float4 c01 = __ldg(reinterpret_cast<const float4*>(cs_row + i0));
    const float4 c23 = __ldg(reinterpret_cast<const float4*>(cs_row + i0 + 2));
    const float2 y0 = detail::rotate(a.x, b.x, c01.x, c01.y);
    const float2 y1 = detail::rotate(a.y, b.y, c01.z, c01.w);
    const float2 y2 = detail::rotate(a.z, b.z, c23.x, c23.y);
    const float2 y3 = detail::rotate(a.w, b.w, c23.z, c23.w);
    *reinterpret_cast<float4*>(out + lo) = make_float4(y0.x, y1.x, y2.x, y3.x);
    *reinterpret_cast<float4*>(out + lo + half_dim) = make_float4(y0.y, y1.y, y2.y, y3.y);
  }
}

}  // namespace

void rope_v4_vec16(const float* q, const float* k, float* q_out, float* k_out, const RopeParams& p,
                   const RopeTable& table, cudaStream_t stream) {
  validate(p);
  table.check_covers(p);
  const bool interleaved = p.style == RopeStyle::kInterleaved;
  const int64_t floats_per_unit = interleaved ? 4 : 8;
  // Every head starts on a 16-byte boundary when D is a multiple of the unit and the four base
  // pointers are 16-byte aligned (cudaMalloc's are); otherwise v3's 4-byte accesses.
  const bool vec = p.dim % floats_per_unit == 0 && detail::aligned16(q) && detail::aligned16(k) &&
                   detail::aligned16(q_out) && detail::aligned16(k_out);
  if (!vec) {
    detail::launch_fused_pairs(q, k, q_out, k_out, p, table.data(), stream);
    return;
  }
  const int64_t q_units = p.q_heads * p.dim / floats_per_unit;
  const int64_t k_units = p.kv_heads * p.dim / floats_per_unit;
  const detail::RowLaunch l = detail::row_launch(p.batch * p.seq, q_units + k_units);
  const auto kernel =
      interleaved ? rope_v4_kernel<RopeStyle::kInterleaved> : rope_v4_kernel<RopeStyle::kHalfSplit>;
  kernel<<<l.grid, l.block, 0, stream>>>(q, k, q_out, k_out, table.data(), uint32_t(p.seq),
                                         p.pos_offset, uint32_t(q_units), uint32_t(k_units),
                                         uint32_t(p.dim / 2));
  CUDA_CHECK_LAST();
}

}  // namespace day01
