// day01_rope v3_fused_qk: Q and K in one launch (see rope_v1_naive.cu for the list of versions).
#include "common/cuda_check.hpp"
#include "rope.cuh"
#include "rope_device.cuh"

namespace day01 {

namespace {

// v3: what changed from v2: one launch for both tensors. Thread (r, u) owns pair u of token row r
// seen as Q's Hq * D/2 pairs followed by K's Hkv * D/2 (u < Hq * D/2: Q). Same bytes as v2; saved:
// one launch and one grid tail (~5 us: all of a decode step), and Q and K share the L1 table row.
// T is float (v3) or __nv_bfloat16 (v5's fallback); the math is fp32.
template <typename T, RopeStyle kStyle>
__global__ void rope_fused_pairs_kernel(const T* q, const T* k, T* q_out, T* k_out,
                                        const float2* __restrict__ table, uint32_t seq,
                                        int64_t pos_offset, uint32_t q_pairs, uint32_t k_pairs,
                                        uint32_t half_dim) {
  uint32_t u = blockIdx.y * blockDim.x + threadIdx.x;
  if (u >= q_pairs + k_pairs) return;
  const uint32_t r = blockIdx.x;
  const uint32_t s = r % seq;
  const T* x;
  T* out;
  if (u < q_pairs) {
    const int64_t row = int64_t(r) * (2 * int64_t(q_pairs));
    x = q + row;
    out = q_out + row;
  } else {
    u -= q_pairs;
    const int64_t row = int64_t(r) * (2 * int64_t(k_pairs));
    x = k + row;
    out = k_out + row;
  }
  const detail::PairIndex e = detail::pair_index<kStyle>(u, half_dim);
  const float2 cs = __ldg(table + (pos_offset + s) * half_dim + e.i);
  const float2 y =
      detail::rotate(detail::load_float(x + e.a), detail::load_float(x + e.b), cs.x, cs.y);
  detail::store_float(out + e.a, y.x);
  detail::store_float(out + e.b, y.y);
}

}  // namespace

namespace detail {

template <typename T>
void launch_fused_pairs(const T* q, const T* k, T* q_out, T* k_out, const RopeParams& p,
                        const float2* table, cudaStream_t stream) {
  const int64_t q_pairs = p.q_heads * p.dim / 2, k_pairs = p.kv_heads * p.dim / 2;
  const RowLaunch l = row_launch(p.batch * p.seq, q_pairs + k_pairs);
  const auto kernel = p.style == RopeStyle::kInterleaved
                          ? rope_fused_pairs_kernel<T, RopeStyle::kInterleaved>
                          : rope_fused_pairs_kernel<T, RopeStyle::kHalfSplit>;
  kernel<<<l.grid, l.block, 0, stream>>>(q, k, q_out, k_out, table, uint32_t(p.seq), p.pos_offset,
                                         uint32_t(q_pairs), uint32_t(k_pairs), uint32_t(p.dim / 2));
  CUDA_CHECK_LAST();
}

template void launch_fused_pairs<float>(const float*, const float*, float*, float*,
                                        const RopeParams&, const float2*, cudaStream_t);
template void launch_fused_pairs<__nv_bfloat16>(const __nv_bfloat16*, const __nv_bfloat16*,
                                                __nv_bfloat16*, __nv_bfloat16*, const RopeParams&,
                                                const float2*, cudaStream_t);

}  // namespace detail

void rope_v3_fused_qk(const float* q, const float* k, float* q_out, float* k_out,
                      const RopeParams& p, const RopeTable& table, cudaStream_t stream) {
  validate(p);
  table.check_covers(p);
  detail::launch_fused_pairs(q, k, q_out, k_out, p, table.data(), stream);
}

}  // namespace day01
