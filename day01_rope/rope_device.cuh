#pragma once
// day01_rope: what the kernels share. Included by the .cu files only.
//
// Launch geometry of every variant (a 2D grid, so no thread divides a 64-bit index):
//   blockIdx.x                              = token row r = b * S + s  (B * S < 2^31)
//   blockIdx.y * blockDim.x + threadIdx.x   = work unit u within that row (a pair, or the pairs
//                                             of one 16-byte access), < 65535 * 256
// The thread finds its position with one 32-bit modulo (s = r % S) and its pair index within a
// head with one 32-bit division; element offsets are 64-bit (B * S * H * D may exceed 2^31).
// All the threads of a block share one token row, so they read the same row of the cos/sin
// table (D/2 entries of 8 bytes): after the first warp it comes from L1.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "common/math.hpp"
#include "rope.cuh"

namespace day01::detail {

// (x0 + i x1) * (c + i s): pair (x0, x1) rotated by the angle whose cosine is c and sine is s.
__device__ __forceinline__ float2 rotate(float x0, float x1, float c, float s) {
  return make_float2(x0 * c - x1 * s, x0 * s + x1 * c);
}

// The two elements of pair j of a token row (counted over all the heads of the row, each head
// holding `half_dim` = D/2 pairs), as offsets within the row, and the pair's frequency index i.
struct PairIndex {
  uint32_t a, b, i;
};
template <RopeStyle kStyle>
__device__ __forceinline__ PairIndex pair_index(uint32_t j, uint32_t half_dim) {
  const uint32_t head = j / half_dim;
  const uint32_t i = j - head * half_dim;
  if constexpr (kStyle == RopeStyle::kInterleaved) {
    return {2 * j, 2 * j + 1, i};  // pairs are contiguous; head boundaries fall between pairs
  } else {
    const uint32_t lo = head * 2 * half_dim + i;
    return {lo, lo + half_dim, i};
  }
}

// Scalar loads and stores in either storage type, with fp32 math in between.
__device__ __forceinline__ float load_float(const float* p) {
  return *p;
}
__device__ __forceinline__ float load_float(const __nv_bfloat16* p) {
  return __bfloat162float(*p);
}
__device__ __forceinline__ void store_float(float* p, float v) {
  *p = v;
}
__device__ __forceinline__ void store_float(__nv_bfloat16* p, float v) {
  *p = __float2bfloat16_rn(v);
}

// Grid and block for `rows` token rows of `units` work units each. Blocks have 256 threads, or
// fewer (a multiple of 32) when a row has fewer units, so tiny heads don't launch idle warps.
struct RowLaunch {
  dim3 grid, block;
};
inline RowLaunch row_launch(int64_t rows, int64_t units) {
  const int64_t threads = std::min<int64_t>(256, gpu100::round_up<int64_t>(units, 32));
  const int64_t chunks = gpu100::ceil_div<int64_t>(units, threads);
  if (rows > 0x7fffffff || chunks > 65535) {
    throw std::invalid_argument("rope: grid too large (" + std::to_string(rows) + " rows x " +
                                std::to_string(chunks) + " chunks)");
  }
  return {dim3(static_cast<unsigned>(rows), static_cast<unsigned>(chunks)),
          dim3(static_cast<unsigned>(threads))};
}

using gpu100::aligned16;  // common/math.hpp

// v3's fused kernel (one thread per pair, Q and K in one launch) for either storage type: v3
// launches it for fp32, and v4 and v5 fall back to it when a 16-byte access is not possible.
// Defined and instantiated (float, __nv_bfloat16) in rope_v3_fused_qk.cu.
template <typename T>
void launch_fused_pairs(const T* q, const T* k, T* q_out, T* k_out, const RopeParams& p,
                        const float2* table, cudaStream_t stream);

}  // namespace day01::detail
