// day01_rope v2_table: cos and sin read from a precomputed table (see rope_v1_naive.cu for the
// list of versions).
#include "common/cuda_check.hpp"
#include "rope.cuh"
#include "rope_device.cuh"

namespace day01 {

namespace {

// v2: what changed from v1: powf + sincosf (~100 instructions per pair) become one 8-byte load of
// (cos, sin) from the fp64-built table. The table (2 MiB at the default shape) is shared by all
// B * H rows of a position, so it lives in L2, and in L1 within a block (one token): DRAM traffic
// stays 16 bytes per pair. Same mapping as v1; still one launch per tensor.
template <RopeStyle kStyle>
__global__ void rope_v2_kernel(const float* x, float* out, const float2* __restrict__ table,
                               uint32_t seq, int64_t pos_offset, uint32_t row_pairs,
                               uint32_t half_dim) {
  const uint32_t u = blockIdx.y * blockDim.x + threadIdx.x;
  if (u >= row_pairs) return;
  const uint32_t r = blockIdx.x;
  const uint32_t s = r % seq;
  const detail::PairIndex e = detail::pair_index<kStyle>(u, half_dim);
  const float2 cs = __ldg(table + (pos_offset + s) * half_dim + e.i);
  const int64_t row = int64_t(r) * (2 * int64_t(row_pairs));
  const float2 y = detail::rotate(x[row + e.a], x[row + e.b], cs.x, cs.y);
  out[row + e.a] = y.x;
  out[row + e.b] = y.y;
}

template <RopeStyle kStyle>
void launch_v2(const float* x, float* out, int64_t heads, const RopeParams& p, const float2* table,
               cudaStream_t stream) {
  const int64_t row_pairs = heads * p.dim / 2;
  const detail::RowLaunch l = detail::row_launch(p.batch * p.seq, row_pairs);
  rope_v2_kernel<kStyle><<<l.grid, l.block, 0, stream>>>(
      x, out, table, uint32_t(p.seq), p.pos_offset, uint32_t(row_pairs), uint32_t(p.dim / 2));
  CUDA_CHECK_LAST();
}

}  // namespace

void rope_v2_table(const float* q, const float* k, float* q_out, float* k_out, const RopeParams& p,
                   const RopeTable& table, cudaStream_t stream) {
  validate(p);
  table.check_covers(p);
  if (p.style == RopeStyle::kInterleaved) {
    launch_v2<RopeStyle::kInterleaved>(q, q_out, p.q_heads, p, table.data(), stream);
    launch_v2<RopeStyle::kInterleaved>(k, k_out, p.kv_heads, p, table.data(), stream);
  } else {
    launch_v2<RopeStyle::kHalfSplit>(q, q_out, p.q_heads, p, table.data(), stream);
    launch_v2<RopeStyle::kHalfSplit>(k, k_out, p.kv_heads, p, table.data(), stream);
  }
}

}  // namespace day01
