#pragma once
// day04: what the FP8 GEMMs v14-v20 (gemm_v14_wgmma_fp8.cu ... gemm_v20_wgmma_fp8_epilogue.cu)
// share: the tile and pipeline sizes, the barriers' set-up, the producer of the persistent ones
// (v16 on) and their grid, v19's lean main loop (v20 reuses it), and the epilogue from registers.
// Each variant's file keeps what it changes. Device code here runs only in sm_90a targets (the
// kernels that call it compile their bodies there only).
#include <cuda.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "common/math.hpp"
#include "common/occupancy.hpp"
#include "gemm.hpp"
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

// Thread 0 sets up the stages' barriers: `full` completes when the producer's copies have
// landed, `empty` when all 8 consumer warps have released the stage. The block syncs after.
__device__ __forceinline__ void init_barriers(uint64_t* full, uint64_t* empty) {
  for (int s = 0; s < kStages; ++s) {
    mbar_init(&full[s], 1);   // the producer's expect_tx arrival
    mbar_init(&empty[s], 8);  // one arrival per consumer warp
  }
  mbar_fence_init();
}

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

// v19's main loop for one consumer warpgroup (the why is in gemm_v19_wgmma_fp8_lean.cu; v20 runs
// it unchanged): two wgmma accumulators used in turn, each k-tile promoted into acc while the next
// one's products run, the descriptors moved by adds and the stage and phase kept as counters that
// wrap. One object per consumer thread, for all of its tiles (the counters run on across them).
struct LeanMainLoop {
  uint64_t* full;
  uint64_t* empty;
  uint64_t desc_a0, desc_b0;               // stage 0, k-step 0: this warpgroup's A rows, all B^T
  uint32_t issue_phase = 0;                // of the next k-tile to issue
  int issue_stage = 0, release_stage = 0;  // of the next k-tile to issue, and to release
  int lane;

  __device__ __forceinline__ LeanMainLoop(uint8_t* smem, uint64_t* full_, uint64_t* empty_, int wg,
                                          int lane_)
      : full(full_),
        empty(empty_),
        desc_a0(make_desc(smem + wg * 64 * 128, 16, 1024)),
        desc_b0(make_desc(smem + kABytes, 16, 1024)),
        lane(lane_) {}

  // Issue the next k-tile's 4 wgmma into d (v14's products: both operands K-major; kk == 0
  // starts d from zero).
  __device__ __forceinline__ void issue(float (&d)[64]) {
    mbar_wait(&full[issue_stage], issue_phase);  // the k-tile has landed
    fence();  // d was read by the adds below: order those reads before the wgmma writes it
    const uint64_t stage_off = uint64_t(issue_stage * (kStageBytes >> 4));
#pragma unroll
    for (int kk = 0; kk < kBK / kKStep; ++kk) {
      const uint64_t kk_off = stage_off + uint64_t(kk * (kKStep >> 4));
      wgmma_m64n128k32_e4m3_ss(d, desc_a0 + kk_off, desc_b0 + kk_off, kk > 0);
    }
    commit();
    if (++issue_stage == kStages) issue_stage = 0, issue_phase ^= 1;
  }
  // The oldest k-tile in flight is complete (its products in d): release its stage, promote d
  // into acc.
  __device__ __forceinline__ void retire(float (&acc)[64], const float (&d)[64]) {
    __syncwarp();
    if (lane == 0) mbar_arrive(&empty[release_stage]);  // the producer may refill it
    if (++release_stage == kStages) release_stage = 0;
#pragma unroll
    for (int i = 0; i < 64; ++i) acc[i] += d[i];
  }
  // One tile: acc = the sum of its num_ktiles k-tiles' products (d0, d1: the two accumulators).
  __device__ __forceinline__ void tile(float (&acc)[64], float (&d0)[64], float (&d1)[64],
                                       int num_ktiles) {
#pragma unroll
    for (int i = 0; i < 64; ++i) acc[i] = 0.f;
    // k-tiles alternate between d0 (even t) and d1 (odd t); wait<1> leaves only the newest group
    // running, so the older one is complete when it is promoted.
    issue(d0);
    int t = 1;
    for (; t + 1 < num_ktiles; t += 2) {
      issue(d1);
      wait<1>();
      retire(acc, d0);
      issue(d0);
      wait<1>();
      retire(acc, d1);
    }
    if (t < num_ktiles) {  // an even count: one k-tile left for d1
      issue(d1);
      wait<1>();
      retire(acc, d0);
      wait<0>();
      retire(acc, d1);
    } else {  // an odd count: the last k-tile is in d0
      wait<0>();
      retire(acc, d0);
    }
  }
};

// The epilogue from registers: C = scale acc in bf16 for consumer warpgroup wg's 64 rows of the
// tile at (row0, col0). Register 4j + {0, 1} holds row lane / 4 of this warp's 16 rows, columns
// 8j + 2 (lane % 4) + {0, 1}; registers 4j + {2, 3} the same columns 8 rows further down. A column
// pair is one 4-byte bf16x2 store when N is even (col is even, so col < n means col + 1 < n).
// Rows and columns past M and N are skipped. tid: the thread's index in the block.
__device__ __forceinline__ void store_registers(const float (&acc)[64], float scale,
                                                __nv_bfloat16* __restrict__ c, int m, int n,
                                                int row0, int col0, int wg, int tid) {
  const bool pairs = n % 2 == 0 && reinterpret_cast<uintptr_t>(c) % 4 == 0;
  for_each_pair(acc, m, n, row0, col0, wg, tid, [&](int row, int col, float a0, float a1) {
    __nv_bfloat16* out = c + size_t(row) * n + col;
    const float v0 = scale * a0, v1 = scale * a1;
    if (pairs) {
      *reinterpret_cast<__nv_bfloat162*>(out) = __floats2bfloat162_rn(v0, v1);
    } else {
      out[0] = __float2bfloat16_rn(v0);
      if (col + 1 < n) out[1] = __float2bfloat16_rn(v1);
    }
  });
}

// The grid of a persistent kernel (v16 on): one block per tile, at most as many as fit on the
// GPU at once (one per SM: the shared memory allows no second), counted once per GPU the process
// uses.
template <auto kKernel, size_t kSmem>
unsigned persistent_blocks(GemmShape s) {
  static gpu100::PerDevice<int> resident;
  const int max_blocks =
      resident.get([] { return gpu100::resident_blocks(kKernel, kThreads, kSmem); });
  const int64_t tiles = int64_t(gpu100::ceil_div(s.m, kBM)) * gpu100::ceil_div(s.n, kBN);
  return unsigned(std::min<int64_t>(tiles, max_blocks));
}

}  // namespace day04::fp8_gemm
