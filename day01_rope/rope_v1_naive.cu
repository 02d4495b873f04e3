// day01_rope: the kernels, one variant per file (rope_v1_naive.cu ... rope_v5_bf16.cu).
//
// Versions (each changes one thing from the one before):
//   v1_naive     one thread per pair; theta = powf(base, -2i/D), sincosf(m * theta); Q then K
//   v2_table     cos/sin read from a table [pos_offset + S, D/2] built once in fp64 on the host
//   v3_fused_qk  Q and K in one launch
//   v4_vec16     16-byte loads and stores (float4: 2 interleaved pairs, or 4 half-split pairs)
//   v5_bf16      bf16 storage, 8 values per 16-byte access, fp32 math
// Idea credit: llm.c (karpathy) dev/cuda/rope.cu for the table-driven, one-thread-per-pair
// formulation; the code here is written from the math in rope.cuh.
//
// Run: build/day01_rope/day01_rope [--batch 8 --seq 4096 --heads 32 --head-dim 128] [--half-split]
#include <stdexcept>

#include "common/cuda_check.hpp"
#include "rope.cuh"
#include "rope_device.cuh"

namespace day01 {

namespace {

// v1: the formula, literally. Thread (r, u) rotates pair u of token row r of one tensor (Q, then
// K: two launches): theta_i by powf, (cos, sin)(m theta_i) by sincosf, ~100 fp32 instructions for
// 8 bytes in and 8 out. The angle is formed in fp32: up to ~5e-7 * m rad off (see tolerance()).
template <RopeStyle kStyle>
__global__ void rope_v1_kernel(const float* x, float* out, uint32_t seq, int64_t pos_offset,
                               uint32_t row_pairs, uint32_t half_dim, float base) {
  const uint32_t u = blockIdx.y * blockDim.x + threadIdx.x;
  if (u >= row_pairs) return;
  const uint32_t r = blockIdx.x;
  const uint32_t s = r % seq;
  const detail::PairIndex e = detail::pair_index<kStyle>(u, half_dim);
  const float theta = powf(base, -float(2 * e.i) / float(2 * half_dim));
  float sn, cs;
  sincosf(float(pos_offset + s) * theta, &sn, &cs);
  const int64_t row = int64_t(r) * (2 * int64_t(row_pairs));
  const float2 y = detail::rotate(x[row + e.a], x[row + e.b], cs, sn);
  out[row + e.a] = y.x;
  out[row + e.b] = y.y;
}

template <RopeStyle kStyle>
void launch_v1(const float* x, float* out, int64_t heads, const RopeParams& p,
               cudaStream_t stream) {
  const int64_t row_pairs = heads * p.dim / 2;
  const detail::RowLaunch l = detail::row_launch(p.batch * p.seq, row_pairs);
  rope_v1_kernel<kStyle><<<l.grid, l.block, 0, stream>>>(x, out, uint32_t(p.seq), p.pos_offset,
                                                         uint32_t(row_pairs), uint32_t(p.dim / 2),
                                                         float(p.base));
  CUDA_CHECK_LAST();
}

}  // namespace

void rope_v1_naive(const float* q, const float* k, float* q_out, float* k_out, const RopeParams& p,
                   const RopeTable& /*table: v1 computes its own angles*/, cudaStream_t stream) {
  validate(p);
  if (p.style == RopeStyle::kInterleaved) {
    launch_v1<RopeStyle::kInterleaved>(q, q_out, p.q_heads, p, stream);
    launch_v1<RopeStyle::kInterleaved>(k, k_out, p.kv_heads, p, stream);
  } else {
    launch_v1<RopeStyle::kHalfSplit>(q, q_out, p.q_heads, p, stream);
    launch_v1<RopeStyle::kHalfSplit>(k, k_out, p.kv_heads, p, stream);
  }
}

}  // namespace day01
