#pragma once
// day04: what the FP8 GEMMs v14-v20 (gemm_v14_wgmma_fp8.cu ... gemm_v20_wgmma_fp8_epilogue.cu)
// share: the tile and pipeline sizes, the producer of the persistent ones (v16 on), and the
// epilogue from registers. Each variant's file keeps what it changes. Device code here runs only in
// sm_90a targets (the kernels that call it compile their bodies there only).
#include <cuda.h>
#include <cuda_bf16.h>

#include <cstddef>
#include <cstdint>

#include "wgmma.cuh"

namespace day04::fp8_gemm {

using namespace day04::wgmma;

inline constexpr int kBM = 128, kBN = 128;
inline constexpr int kBK = 128;    // k per stage: 128 e4m3 = one 128-byte swizzled row
inline constexpr int kKStep = 32;  // k per wgmma (32 bytes inside the row)
inline constexpr int kStages = 6, kThreads = 384;
inline constexpr int kABytes = kBM * kBK;  // 16 KB
inline constexpr int kBBytes = kBN * kBK;  // 16 KB of B^T: 128 rows (n) of 128 bytes of k
inline constexpr int kStageBytes = kABytes + kBBytes;
// The stages, the 1024-byte alignment slack and the full / empty barriers (after the stages).
inline constexpr size_t kSmemBytes =
    size_t(kStages) * kStageBytes + 1024 /* alignment slack */ + 128;
inline constexpr int kProducerRegs = 40, kConsumerRegs = 232;  // (40 + 2 x 232) x 128 <= 64 K

// The persistent producer (v16 on), run by one thread of the producer warpgroup: the k-tiles of
// this block's tiles (tile blockIdx.x, then + gridDim.x, ...) one after another. The g-th k-tile
// the block handles (counted across its tiles) goes to stage g % kStages, in phase g / kStages of
// that stage's barriers, once all 8 consumer warps have released the stage's previous k-tile.
// tile_origin(tile) gives the tile's (first row, first column) of C: the tile order.
template <class TileOrigin>
__device__ __forceinline__ void produce_persistent(uint8_t* smem, uint64_t* full, uint64_t* empty,
                                                   const CUtensorMap* map_a,
                                                   const CUtensorMap* map_bt, int num_tiles,
                                                   int num_ktiles, TileOrigin tile_origin) {
  int g = 0;
  for (int tile = blockIdx.x; tile < num_tiles; tile += gridDim.x) {
    const int2 origin = tile_origin(tile);
    for (int t = 0; t < num_ktiles; ++t, ++g) {
      const int s = g % kStages;
      if (g >= kStages) mbar_wait(&empty[s], (g / kStages - 1) & 1);  // all 8 warps done
      uint8_t* stage = smem + s * kStageBytes;
      mbar_expect_tx(&full[s], kStageBytes);  // whole boxes count, zero-filled parts too
      tma_load_2d(stage, map_a, t * kBK, origin.x, &full[s]);
      tma_load_2d(stage + kABytes, map_bt, t * kBK, origin.y, &full[s]);
    }
  }
}

// The epilogue from registers: C = scale acc in bf16 for consumer warpgroup wg's 64 rows of the
// tile at (row0, col0). Register 4j + {0, 1} holds row lane / 4 of this warp's 16 rows, columns
// 8j + 2 (lane % 4) + {0, 1}; registers 4j + {2, 3} the same columns 8 rows further down. A column
// pair is one 4-byte bf16x2 store when N is even (col is even, so col < n means col + 1 < n).
// Rows and columns past M and N are skipped. tid: the thread's index in the block.
__device__ __forceinline__ void store_registers(const float (&acc)[64], float scale,
                                                __nv_bfloat16* __restrict__ c, int m, int n,
                                                int row0, int col0, int wg, int tid) {
  const int lane = tid % 32, warp_in_wg = (tid % 128) / 32;
  const int rbase = row0 + wg * 64 + warp_in_wg * 16 + lane / 4;
  const bool pairs = n % 2 == 0 && reinterpret_cast<uintptr_t>(c) % 4 == 0;
#pragma unroll
  for (int j = 0; j < kBN / 8; ++j) {
    const int col = col0 + 8 * j + 2 * (lane % 4);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = rbase + 8 * h;
      if (row >= m || col >= n) continue;
      __nv_bfloat16* out = c + size_t(row) * n + col;
      const float v0 = scale * acc[4 * j + 2 * h], v1 = scale * acc[4 * j + 2 * h + 1];
      if (pairs) {
        *reinterpret_cast<__nv_bfloat162*>(out) = __floats2bfloat162_rn(v0, v1);
      } else {
        out[0] = __float2bfloat16_rn(v0);
        if (col + 1 < n) out[1] = __float2bfloat16_rn(v1);
      }
    }
  }
}

}  // namespace day04::fp8_gemm
