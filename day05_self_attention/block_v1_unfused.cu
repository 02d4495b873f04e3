// The attention block, v1: the unfused chain, one kernel per step as an eager framework runs it
// (the baseline the fused block is measured against). Per block: 3 projections (cuBLAS) write Qp,
// Kp, V as [B, S, H, D]; day01's RoPE (v5_bf16) rotates Qp and Kp in place; 3 transpositions move
// Q, K and V to the [B, H, S, D] the flash kernel reads; the flash kernel; 1 transposition of O
// back to token-major rows; the output projection (cuBLAS). Each step reads what the step before
// it wrote to memory: at the default shape (B 8, S 2048, H D 2048) Q, K and V are 64 MiB each, so
// the RoPE and the four transpositions move about 0.9 GB that a fused block never touches.
#include <cuda_bf16.h>

#include <stdexcept>
#include <string>

#include "block.hpp"
#include "common/cuda_check.hpp"
#include "common/math.hpp"
#include "gemm.hpp"

namespace day05 {

namespace {

using bf16 = __nv_bfloat16;

// One thread moves 16 bytes (8 values) of a D-row: thread u of the block's row r = (b, i, j)
// copies in[b][i][j][8u .. 8u + 7] to out[b][j][i][...]. Both sides are whole D-rows (128 or 256
// bytes at D = 64, 128), so a warp reads and writes whole contiguous rows: coalesced on both sides.
__global__ void swap_middle_kernel(const uint4* __restrict__ in, uint4* __restrict__ out,
                                   int64_t rows, uint32_t i_count, uint32_t j_count,
                                   uint32_t chunks) {
  const int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= rows * chunks) return;
  const int64_t r = t / chunks;
  const uint32_t c = uint32_t(t - r * chunks);
  const int64_t b = r / (int64_t(i_count) * j_count);
  const uint32_t ij = uint32_t(r - b * i_count * j_count);
  const uint32_t i = ij / j_count, j = ij - i * j_count;
  out[((b * j_count + j) * i_count + i) * chunks + c] = in[r * chunks + c];
}

}  // namespace

void swap_middle_bf16(const bf16* in, bf16* out, int64_t b, int64_t i, int64_t j, int d,
                      cudaStream_t stream) {
  if (in == nullptr || out == nullptr || b < 1 || i < 1 || j < 1 || d < 8 || d % 8 != 0 ||
      i > 0x7fffffff || j > 0x7fffffff || !gpu100::aligned16(in) || !gpu100::aligned16(out)) {
    throw std::invalid_argument(
        "swap_middle_bf16: sizes >= 1, D a multiple of 8, 16-byte aligned pointers");
  }
  const int64_t rows = b * i * j, chunks = d / 8, threads = rows * chunks;
  constexpr int kBlock = 256;
  if (gpu100::ceil_div<int64_t>(threads, kBlock) > 0x7fffffff) {
    throw std::invalid_argument("swap_middle_bf16: too many rows");
  }
  swap_middle_kernel<<<unsigned(gpu100::ceil_div<int64_t>(threads, kBlock)), kBlock, 0, stream>>>(
      reinterpret_cast<const uint4*>(in), reinterpret_cast<uint4*>(out), rows, uint32_t(i),
      uint32_t(j), uint32_t(chunks));
  CUDA_CHECK_LAST();
}

void qkv_unfused(BlockTensors& t, cudaStream_t stream) {
  const BlockShape& s = t.shape;
  const int64_t n = s.tokens() * s.hd();
  bf16 *qp = t.scratch.data(), *kp = qp + n, *vp = kp + n;
  const day04::GemmShape g{int(s.tokens()), int(s.hd()), s.d_model};
  day04::cublas_gemm_bf16_out(g, 1.f, t.x.data(), t.w_q.data(), 0.f, qp, stream);
  day04::cublas_gemm_bf16_out(g, 1.f, t.x.data(), t.w_k.data(), 0.f, kp, stream);
  day04::cublas_gemm_bf16_out(g, 1.f, t.x.data(), t.w_v.data(), 0.f, vp, stream);
  day01::rope_v5_bf16(qp, kp, qp, kp, s.rope(), *t.table, stream);  // in place
  swap_middle_bf16(qp, t.q.data(), s.b, s.s, s.h, s.d, stream);
  swap_middle_bf16(kp, t.k.data(), s.b, s.s, s.h, s.d, stream);
  swap_middle_bf16(vp, t.v.data(), s.b, s.s, s.h, s.d, stream);
}

void block_unfused(BlockTensors& t, cudaStream_t stream) {
  const BlockShape& s = t.shape;
  qkv_unfused(t, stream);
  attention_flash_bf16(s.attention(), t.q.data(), t.k.data(), t.v.data(), t.o.data(),
                       OLayout::kBHSD, t.workspace.data(), t.workspace.bytes(), stream);
  swap_middle_bf16(t.o.data(), t.o_tok.data(), s.b, s.h, s.s, s.d, stream);
  day04::cublas_gemm_bf16_out({int(s.tokens()), s.d_model, int(s.hd())}, 1.f, t.o_tok.data(),
                              t.w_o.data(), 0.f, t.y.data(), stream);
}

}  // namespace day05
