#pragma once
// day08's Hopper implicit GEMM, the parts v9, v10 and v11 share: the tiling, the shared-memory
// stages and the consumer warpgroups (wgmma main loop and epilogue). The kernels differ in their
// producer, which fills each stage's A tile (the im2col rows) and B tile (the filters): v9 gathers
// A with cp.async in a producer warpgroup, v10 asks the TMA engine for it in im2col mode
// (tma_im2col_conv.cuh); and in their element type: bf16 (v9, v10) or fp32 read as TF32 (v11).
//
// Tiles: 128 output pixels x kBN filters x 128 bytes of GEMM_K per stage (kBK = 64 bf16 or 32
// fp32 values); kBN = 64 when K <= 64 (wgmma m64n64; 32 accumulators per thread; sized for 2
// blocks per SM), else 128 (m64n128; 64 accumulators; one block per SM), or for v10 and v11 256
// where K is a multiple of 256 (m64n256; 128 accumulators; tma_im2col_conv.cuh says when), or
// 128 in ping-pong (a warpgroup's 128 x 128 tile: 128 accumulators). A wgmma k-step is 32 bytes of
// k in either type: k16 in bf16, k8 in TF32, so a stage is 4 k-steps in both.
// Threads: warpgroups 0 and 1 consume (pixels 64 wg .. 64 wg + 63 of the tile, or in the
// ping-pong tiling every other tile whole); the producer's threads follow them. Shared memory, from
// a 1024-byte boundary: kStages x [A: 128 rows x 128 bytes | B: kBN rows x 128 bytes], then the 2 x
// kStages + 2 mbarriers. Both operands are K-major (a row is kBK consecutive GEMM_K values of one
// pixel or one filter), in the 128-byte swizzle: the 16-byte chunk j of row r sits at r * 128 + 16
// (j ^ (r % 8)), which the TMA writes, which v9's producer writes for A, and which the descriptors
// (swizzle mode 128B, 1024 bytes per 8 rows) read. The stages go round between producer and
// consumers on mbarriers: `full` (the stage's A and B have landed) and `empty` (the consumer
// warps that read it are done with it: all 8, or one warpgroup's 4 in ping-pong). Blocks are
// persistent: each loops over output tiles (filter tiles fastest), and the stages and their barrier
// phases run on from one tile to the next, counted by `it` (one per slab), so the producer fills
// the next tile's stages while the consumers store this one's outputs. Every function here is
// called only from kernel bodies compiled for sm_90a.
#include <cuda.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "common/arch.hpp"
#include "common/cuda_check.hpp"
#include "common/math.hpp"
#include "common/occupancy.hpp"
#include "conv.hpp"
#include "implicit_gemm_nhwc.cuh"
#include "tile_walk.hpp"
#include "wgmma.cuh"

namespace day08::wgmma_conv {

using bf16 = __nv_bfloat16;

// One tiling. T: the operands' element type (bf16, or float for TF32); kBN: filters per block
// (the wgmma's N); kProducerThreads: the producer's threads (v9: a warpgroup, v10 and v11: one
// warp, or a warpgroup for ping-pong); kStages: the pipeline's depth; kPingPong: below.
template <class T_, int kBN_, int kProducerThreads_, int kStages_ = 4, bool kPingPong_ = false,
          int kStagedBoxes_ = 0>
struct Config {
  using T = T_;
  static constexpr int kBM = 128, kBN = kBN_, kBK = 128 / int(sizeof(T)), kStages = kStages_;
  static constexpr int kConsumerWGs = 2, kConsumerWarps = 4 * kConsumerWGs;
  // Ping-pong (consume_tiles_pingpong): each consumer warpgroup owns whole 128 x kBN tiles, the
  // two take the block's tiles in turn, and one's epilogue runs under the other's main loop. A
  // slab is then read by one warpgroup: its 4 warps release the stage. Such a tiling is never
  // split (split-K's paths are the cooperative consumers').
  static constexpr bool kPingPong = kPingPong_;
  static constexpr int kReleasers = kPingPong ? 4 : kConsumerWarps;
  static constexpr bool kSplittable = !kPingPong && kStages <= 4;
  // Ping-pong: a thread of a consumer warpgroup holds a tile's kBN sums and the producer is a whole
  // warpgroup, so that setmaxnreg (which works on warpgroups) can move registers from it to the
  // consumers: 384 threads start at 168 each (65536 / 384), then 40 / 232.
  static constexpr int kProducerRegs = 40, kConsumerRegs = 232;
  // Staged output (ping-pong, NPQK out of the operands' type; consume_tiles_pingpong's
  // store_staged): each consumer warpgroup has kStagedBoxes boxes of 128 rows x 128 bytes of shared
  // memory (16 KB each, 128-byte swizzle), where the TMA brings its tile's residual and from where
  // the TMA stores the outputs, a pass at a time: with two boxes, 128 bf16 columns (the whole tile)
  // or 64 fp32 columns (half of it); with one box, half or a quarter.
  static constexpr int kStagedBoxes = kStagedBoxes_;
  static constexpr bool kStagedOut = kStagedBoxes > 0;
  // Half tiles (tile_walk.hpp): a last wave that would fill at most half of the grid runs as
  // 64-row halves, and y and the residual move in 64-row boxes. bf16 only: TF32's staged tiles run
  // at the network's l2, which has no such wave, and carrying the half path made that layer 3%
  // slower (more code for the warps to fetch).
  static constexpr bool kHalfTiles = kStagedOut && std::is_same_v<T, __nv_bfloat16>;
  static constexpr int kOutBoxRows = kHalfTiles ? 64 : kBM;  // rows of a y / residual box
  static constexpr int kBoxCols = 128 / int(sizeof(T));      // a box's columns: 64 bf16, 32 fp32
  static constexpr int kPassCols = kStagedOut ? kStagedBoxes * kBoxCols : kBN;
  static constexpr int kPasses = kBN / kPassCols;                     // 1, 2 or 4
  static constexpr int kStagingBytes = 2 * kStagedBoxes * kBM * 128;  // both warpgroups'
  static_assert(!kPingPong || (kProducerThreads_ == 128 &&
                               kProducerRegs * 128 + kConsumerRegs * 256 <= 65536),
                "ping-pong: a producer warpgroup, and the register file's 64 K");
  static constexpr int kProducerThreads = kProducerThreads_;
  static constexpr int kThreads = 128 * kConsumerWGs + kProducerThreads;
  static constexpr int kABytes = kBM * 128, kBBytes = kBN * 128;  // 128 bytes = kBK per row
  static constexpr int kStageBytes = kABytes + kBBytes;
  // The bias kept in shared memory for K up to this (the staged tiling keeps less, to make room for
  // its 5th and 6th stages).
  static constexpr int kBiasFloats = kStagedOut ? 256 : 1024;
  static constexpr size_t kSmemBytes = size_t(kStages) * kStageBytes + kStagingBytes +
                                       (2 * kStages + 4) * sizeof(uint64_t) +
                                       kBiasFloats * sizeof(float) + 1024 /* alignment */;
  // Two blocks per SM where their shared memory fits (kBN = 64 in 4 stages: 101 KB; kBN = 128 in 3
  // stages: 101 KB), so one block's epilogue and pipeline fill overlap the other's main loop; kBN =
  // 128 in 4 stages: 133 KB, one block; kBN = 256: 197 KB, one block (the bias's 4 KB included).
  static constexpr int kMinBlocks =
      2 * (kStages * (kABytes + kBBytes) + kStagingBytes + 2048 + kBiasFloats * 4) <= 227 * 1024
          ? 2
          : 1;
  static_assert(kBN == 64 || kBN == 128 || kBN == 256, "wgmma m64n64, m64n128 or m64n256");
  static_assert(!kPingPong || kBN <= 128, "a ping-pong warpgroup holds a whole tile's sums");
  static_assert(!kStagedOut || (kPingPong && kBN == 128 && kStagedBoxes <= 2),
                "staged output: the ping-pong tiling of 128 filters, one or two boxes");
  static_assert(std::is_same_v<T, bf16> || std::is_same_v<T, float>, "bf16 or TF32 operands");
  static_assert(kBM == 64 * kConsumerWGs, "one m64 row block per consumer warpgroup");
  static_assert(kSmemBytes <= 227 * 1024, "over the 227 KB of shared memory a block may use");
};

// The byte offset of 16-byte chunk j of row r in a tile of 128-byte rows, 128-byte swizzle.
using day04::wgmma::swizzle128;

// Two bf16 outputs of a staged epilogue (store_staged below, and v12's): the sums v0 and v1 with
// their biases added, plus (when residual) the residual pair held in res as ldmatrix gave it, the
// ReLU, then rounded to bf16 and packed as the 32-bit word stmatrix takes.
__device__ __forceinline__ uint32_t finish_bf16x2(float v0, float v1, uint32_t res, bool residual,
                                                  bool relu) {
  if (residual) {
    const __nv_bfloat162 r2 = *reinterpret_cast<const __nv_bfloat162*>(&res);
    v0 += __low2float(r2), v1 += __high2float(r2);
  }
  if (relu) v0 = fmaxf(v0, 0.f), v1 = fmaxf(v1, 0.f);
  const __nv_bfloat162 o2 = __floats2bfloat162_rn(v0, v1);
  return *reinterpret_cast<const uint32_t*>(&o2);
}

// The block's stages and barriers in its dynamic shared memory.
template <class C>
struct Stages {
  uint8_t* base;   // 1024-byte aligned: the 128-byte swizzle repeats every 1024 bytes
  uint64_t* full;  // [kStages]
  uint64_t* empty;
  uint64_t* turn;      // [2]: ping-pong, warpgroup wg may start its next main loop
  uint64_t* res_full;  // [2]: staged output, warpgroup wg's residual tile has landed
  float* bias;         // [C::kBiasFloats]
  __device__ explicit Stages(uint8_t* smem_raw)
      : base(smem_raw + ((1024 - (day04::wgmma::smem_addr(smem_raw) & 1023)) & 1023)),
        full(reinterpret_cast<uint64_t*>(base + C::kStages * C::kStageBytes + C::kStagingBytes)),
        empty(full + C::kStages),
        turn(empty + C::kStages),
        res_full(turn + 2),
        bias(reinterpret_cast<float*>(res_full + 2)) {}
  // Warpgroup wg's staging tile (kStagedOut): kStagedBoxes boxes of 128 rows x 128 bytes,
  // 1024-aligned.
  __device__ uint8_t* staging(int wg) const {
    return base + C::kStages * C::kStageBytes + wg * (C::kStagingBytes / 2);
  }
  __device__ uint8_t* a(int st) const { return base + st * C::kStageBytes; }
  __device__ uint8_t* b(int st) const { return base + st * C::kStageBytes + C::kABytes; }
};

// Thread 0 sets up the barriers: `full` completes with `full_arrivals` arrivals (and the
// transaction bytes the producer announces), `empty` with one arrival per consumer warp. The caller
// then synchronises the block once; from there the roles meet only on the mbarriers. `turn`
// (ping-pong only) completes with the 4 warps of the other consumer warpgroup.
template <class C>
__device__ __forceinline__ void init_stages(const Stages<C>& sm, int full_arrivals) {
  if (threadIdx.x == 0) {
    for (int st = 0; st < C::kStages; ++st) {
      day04::wgmma::mbar_init(&sm.full[st], full_arrivals);
      day04::wgmma::mbar_init(&sm.empty[st], C::kReleasers);
    }
    for (int wg = 0; wg < 2; ++wg) {
      day04::wgmma::mbar_init(&sm.turn[wg], 4);
      day04::wgmma::mbar_init(&sm.res_full[wg], 1);
    }
    day04::wgmma::mbar_fence_init();
  }
}

// One k-step, 32 bytes of k: d (64 x kBN) += A (64 x 16) * B (16 x kBN) in bf16, or A (64 x 8)
// * B (8 x kBN) in TF32, both from shared memory, both K-major.
template <class T, int kBN>
__device__ __forceinline__ void wgmma_kstep(float (&d)[kBN / 2], uint64_t desc_a, uint64_t desc_b) {
  using namespace day04::wgmma;
  if constexpr (std::is_same_v<T, float>) {
    if constexpr (kBN == 256) {
      wgmma_m64n256k8_tf32(d, desc_a, desc_b);
    } else if constexpr (kBN == 128) {
      wgmma_m64n128k8_tf32_ss(d, desc_a, desc_b, 1);
    } else {
      wgmma_m64n64k8_tf32_ss(d, desc_a, desc_b, 1);
    }
  } else if constexpr (kBN == 256) {
    wgmma_m64n256k16_bf16<0>(d, desc_a, desc_b);  // B K-major
  } else if constexpr (kBN == 128) {
    wgmma_m64n128k16_bf16_ss(d, desc_a, desc_b, 1);
  } else {
    wgmma_m64n64k16_bf16_ss(d, desc_a, desc_b, 1);
  }
}

// Split-K, for layers with too few output tiles to fill the GPU (a small batch, a deep layer):
// each tile's num_slabs slabs are cut into `splits` ranges, and the partial sums of a tile's
// ranges are added before its epilogue. Two ways, each its own kernel instance (SplitPath):
//  - kWorkspace: the ranges are work units (tile-major) that the persistent blocks loop over. A
//    unit parks its fp32 sums in `partial` ([group][tile][split][kBN / 2][256 consumer threads],
//    each thread its own registers); the unit that brings a tile's last sum (counted in
//    `counters`, [group][tile], zero between launches) adds them in split order and runs the
//    epilogue: one block reads every range's 64 KB (at kBN = 128) and adds them alone.
//  - kCluster: the `splits` ranges of a tile run in the `splits` CTAs of one thread-block cluster
//    (CTA rank = range), one tile per cluster, no persistent loop. Each CTA parks its sums in its
//    own shared memory (ParkedTile), and after a cluster barrier CTA r adds rows
//    [r 128 / splits, (r + 1) 128 / splits) of the tile from all the CTAs' shared memory
//    (distributed shared memory), in rank order, and runs the epilogue for those rows: the
//    reduction is spread over the cluster instead of one block, and no partial sum goes through
//    L2. `partial` and `counters` are unused.
// splits = 1 (kNone): no split, the plain loop.
enum class SplitPath { kNone, kWorkspace, kCluster };
constexpr int kMaxClusterSplits = 8;  // the largest portable cluster
struct SplitK {
  int splits = 1;
  float* partial = nullptr;
  int* counters = nullptr;
};
struct SlabRange {
  int begin, end;
};
__host__ __device__ inline SlabRange split_slabs(int num_slabs, int splits, int split) {
  return {num_slabs * split / splits, num_slabs * (split + 1) / splits};
}

// A cluster split's parked tile (kCluster): the 128 x kBN fp32 sums of one CTA's slab range, in
// its stage memory (free once its last slab is consumed; see consume_tiles). Two planes, one per
// half of each 8-filter group: plane p (0 or 1) holds filters 8 o + 4 p .. 8 o + 4 p + 3 of every
// group o, so filter f of row r is float
//   (f % 8) / 4 * kPlane + r * kRow + 4 (f / 8) + f % 4,
// with kRow = kBN / 2 + 4 and kPlane = 128 kRow + 16 (68 KB at kBN = 128, of the 128 KB of stages).
// Why: the reduction gives each thread 8 consecutive filters of one pixel (one 16-byte bf16
// store, nhwc::store8) and reads them as two 16-byte loads, one per plane; the 8 threads of a
// quarter warp take 8 consecutive groups of one row, so each load instruction reads 128
// contiguous bytes of a plane (all 32 banks once). The writes come from the wgmma layout (lane
// (gq, tq): rows gq and gq + 8, filters 8 j + 2 tq + {0, 1}): one 8-byte store per register
// pair, plane tq / 2; in a half warp (gq 0..3) the rows add 4 gq banks (kRow % 32 = 4: the 4
// padding floats), tq % 2 and the pair's two floats 0..3, the plane 16 (kPlane % 32 = 16): the
// 32 banks once, no conflict.
template <class C>
struct ParkedTile {
  static constexpr int kRow = C::kBN / 2 + 4, kPlane = C::kBM * kRow + 16;
  static constexpr size_t kBytes = size_t(2) * kPlane * sizeof(float);
  static_assert(kRow % 32 == 4 && kPlane % 32 == 16, "the bank arithmetic above");
  static_assert(kBytes <= size_t(C::kStages) * C::kStageBytes, "fits in the stages");
  __device__ static int index(int row, int f) {
    return (f % 8) / 4 * kPlane + row * kRow + 4 * (f / 8) + f % 4;
  }
};

// Whether the bf16 NPQK epilogue may store 16 bytes a lane: K % 8 == 0 and y and the residual
// 16-byte aligned (uniform across the grid).
template <class Y, bool kNpqk, class Op>
__device__ __forceinline__ bool octets_ok(const nhwc::Params& g, const Op& op) {
  if constexpr (kNpqk && std::is_same_v<Y, bf16>) {
    return g.k % 8 == 0 && gpu100::aligned16(op.y) &&
           (op.residual == nullptr || gpu100::aligned16(op.residual));
  } else {
    return false;
  }
}

// The offset of output pixel m in an fp32 NKPQ y (filter k at + k PQ): computed once per pixel by
// store_sums' callers (dead code in the NPQK instances).
__device__ __forceinline__ size_t nkpq_offset(const nhwc::Params& g, int m) {
  const int n = m / g.PQ;
  return size_t(n) * g.k * g.PQ + (m - n * g.PQ);
}

// The epilogue of output pixel m < M (at `pixel` = nkpq_offset(g, m) in an NKPQ y), filters k ..
// k + kN - 1 (kN = 2: a register pair; 8: a group, with k % 8 == 0), from their fp32 sums: bias,
// and for the NPQK forms residual and ReLU, then the store. Every path of consume_tiles stores
// through here: the register epilogue (pairs, or groups gathered across a quad) and the cluster
// reduction (groups). Filters past K are skipped (K is even: a pair is whole or absent). octets:
// K % 8 == 0 and y and the residual 16-byte aligned, so a group of bf16 goes out as one 16-byte
// store (nhwc::store8). res: the residual of these filters, already loaded by the caller (a uint4
// for a group of 8 with octets, a float2 for a pair), or nullptr to load it here.
template <class Y, bool kNpqk, int kN, class Op>
__device__ __forceinline__ void store_sums(const nhwc::Params& g, const Op& op, bool relu, int m,
                                           size_t pixel, int k, float (&v)[kN], bool octets,
                                           const void* res = nullptr) {
  static_assert(kN == 2 || kN == 8, "a register pair or a group of 8 filters");
  if constexpr (!kNpqk) {
    static_assert(std::is_same_v<Y, float>, "the day's variants write fp32");
    // fp32 NKPQ: in the register epilogue, for one register the 8 lanes of a tq write 8
    // consecutive pixels (32 bytes) of one output plane, as v6.
    float* yp = op.y + pixel;
#pragma unroll
    for (int e = 0; e < kN; ++e) {
      if (k + e < g.k)
        yp[size_t(k + e) * g.PQ] = v[e] + (op.bias != nullptr ? op.bias[k + e] : 0.f);
    }
  } else {
    if constexpr (kN == 8 && std::is_same_v<Y, bf16>) {
      if (octets) {
        if (k >= g.k) return;
        if (op.bias != nullptr) {
#pragma unroll
          for (int e = 0; e < 8; ++e) v[e] += op.bias[k + e];
        }
        nhwc::store8(op, relu, size_t(m) * g.k + k, v, static_cast<const uint4*>(res));
        return;
      }
    }
    // NPQK: the two filters of a pair are adjacent channels of one pixel.
#pragma unroll
    for (int e = 0; e < kN; e += 2) {
      if (k + e < g.k) {
        nhwc::store_pair(op, relu, m, k + e, g.k, v[e], v[e + 1],
                         res != nullptr ? static_cast<const float2*>(res) + e / 2 : nullptr);
      }
    }
  }
}

// The register epilogue: this thread's accumulators d[4 j + 2 h + e] (the m64nN layout) are pixel
// m_base + 8 h (m_base = m0 + 64 wg + 16 w4 + gq), filter k0 + 8 j + 2 tq + e. Stored through
// store_sums as groups of 8 gathered across the quad where `octets` (bf16 NPQK), else as pairs.
// Every lane of the warp calls it (the exchange is a shuffle).
template <class Y, bool kNpqk, int kBN, class Op>
__device__ __forceinline__ void store_registers(const nhwc::Params& g, const Op& op, bool relu,
                                                int m_base, int k0, int tq,
                                                const float (&d)[kBN / 2], bool octets) {
  if constexpr (kNpqk && std::is_same_v<Y, bf16>) {
    if (octets) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int m = m_base + 8 * h;
        // The residual's 16-byte pieces two at a time, both loaded before their stores: half the
        // memory latencies in a row (a store to y may alias the residual as far as the compiler
        // knows, so it would not move a later load above it). Two, not all four or eight: the
        // 3-stage tiling's 96 registers a thread hold no more (four spilled 116 bytes).
        constexpr int kPre = 2;
        const bool pre = op.residual != nullptr && m < g.M;
#pragma unroll
        for (int j0 = 0; j0 < kBN / 32; j0 += kPre) {
          uint4 res[kPre];
          if (pre) {
#pragma unroll
            for (int e = 0; e < kPre; ++e) {
              const int k = k0 + 32 * (j0 + e) + 8 * tq;
              res[e] = k < g.k ? *reinterpret_cast<const uint4*>(op.residual + size_t(m) * g.k + k)
                               : make_uint4(0, 0, 0, 0);
            }
          }
#pragma unroll
          for (int e = 0; e < kPre; ++e) {
            const int jj = j0 + e;
            float2 p[4];
#pragma unroll
            for (int t = 0; t < 4; ++t) {
              p[t] = make_float2(d[4 * (4 * jj + t) + 2 * h], d[4 * (4 * jj + t) + 2 * h + 1]);
            }
            float v[8];
            nhwc::gather_octet(p, tq, v);  // every lane, before the pixel test
            if (m < g.M) {
              store_sums<Y, kNpqk, 8>(g, op, relu, m, 0, k0 + 32 * jj + 8 * tq, v, true,
                                      pre ? &res[e] : nullptr);
            }
          }
        }
      }
      return;
    }
  }
  // Pairs, 4 at a time with their residual pairs loaded first (as above).
  constexpr int kChunk = 4;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int m = m_base + 8 * h;
    if (m >= g.M) continue;
    const size_t pixel = nkpq_offset(g, m);
#pragma unroll
    for (int j0 = 0; j0 < kBN / 8; j0 += kChunk) {
      float2 res[kChunk];
      bool pre = false;
      if constexpr (kNpqk) {
        pre = op.residual != nullptr;
        if (pre) {
#pragma unroll
          for (int e = 0; e < kChunk; ++e) {
            const int k = k0 + 8 * (j0 + e) + 2 * tq;
            res[e] = k < g.k ? nhwc::load_pair(op.residual + size_t(m) * g.k + k)
                             : make_float2(0.f, 0.f);
          }
        }
      }
#pragma unroll
      for (int e = 0; e < kChunk; ++e) {
        const int j = j0 + e;
        float v[2] = {d[4 * j + 2 * h], d[4 * j + 2 * h + 1]};
        store_sums<Y, kNpqk, 2>(g, op, relu, m, pixel, k0 + 8 * j + 2 * tq, v, false,
                                pre ? &res[e] : nullptr);
      }
    }
  }
}

// ld.shared::cluster of 16 bytes at a distributed-shared-memory address (mapa's result).
__device__ __forceinline__ float4 ld_cluster_f4(uint32_t addr) {
  float4 v;
  asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];\n"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "r"(addr)
               : "memory");
  return v;
}
// The address of this CTA's shared-memory address `addr` in the shared memory of cluster CTA
// `rank`.
__device__ __forceinline__ uint32_t map_cluster(uint32_t addr, uint32_t rank) {
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(addr), "r"(rank));
  return remote;
}

// The bias of every filter, copied once into shared memory by the consumer threads (0 .. 255),
// which then meet on named barrier 1 (the producer is not part of it): the epilogue reads it
// there instead of loading it from global memory for every output (a long wait that nothing
// hides where a block has one tile per SM). Returns the operands with the bias pointer moved
// there (left in global memory for K over C::kBiasFloats).
template <class C, class Op>
__device__ __forceinline__ Op bias_to_shared(const nhwc::Params& g, Op op, const Stages<C>& sm) {
  if (op.bias != nullptr && g.k <= C::kBiasFloats) {
    for (int i = threadIdx.x; i < g.k; i += 128 * C::kConsumerWGs) sm.bias[i] = op.bias[i];
    op.bias = sm.bias;
  }
  asm volatile("bar.sync 1, %0;\n" ::"n"(128 * C::kConsumerWGs) : "memory");
  return op;
}

// This warp (lane: the calling thread's) is done reading stage st: one of the arrivals
// (C::kReleasers) the producer waits for.
template <class C>
__device__ __forceinline__ void release_stage(const Stages<C>& sm, int st, int lane) {
  __syncwarp();
  if (lane == 0) day04::wgmma::mbar_arrive(&sm.empty[st]);
}

// The consumer warpgroups (threads 0 .. 255): for each of the block's work units (a tile, or with
// split-K one slab range of a tile), its slabs of 4 wgmma k-steps each, then the epilogue straight
// from the registers while the producer fills the next unit's stages. Warpgroup wg owns pixels 64
// wg .. 64 wg + 63 of the tile; warp w4 of it rows 16 w4 .. 16 w4 + 15 of those; lane (gq, tq):
// rows gq and gq + 8, filters 8 j + 2 tq + {0, 1} (the m64nN accumulator layout, wgmma.cuh).
// kAFromGenericProxy: A was written by cp.async (v9), which the wgmma reads through the async
// proxy, so a proxy fence follows each wait; A brought by TMA (v10) is already in that proxy.
// kNpqk false: the day's variants, fp32 NKPQ out (+ bias). kNpqk true: conv.hpp's fused layer
// forms, NPQK out (bf16, or fp32 for v11) with bias, residual and ReLU; bf16 16 bytes a lane
// (nhwc::gather_octet, nhwc::store8) where K % 8 == 0 and y and the residual are 16-byte aligned.
// kSplit: SplitK's paths; kCluster needs a grid of exactly tiles x splits blocks in clusters of
// `splits` (one unit per block) and every consumer thread to reach its cluster barriers.
template <class C, class Y, bool kAFromGenericProxy, bool kNpqk,
          SplitPath kSplit = SplitPath::kNone>
__device__ __forceinline__ void consume_tiles(const nhwc::Params& g,
                                              const ConvOperands<typename C::T, Y>& op_in,
                                              bool relu, int tiles_m, int tiles_n, int num_slabs,
                                              const Stages<C>& sm, const SplitK& sk = SplitK{}) {
  using namespace day04::wgmma;
  constexpr int kBM = C::kBM, kBN = C::kBN, kStages = C::kStages, kAcc = kBN / 2;
  const int tid = threadIdx.x, wg = tid / 128;
  const int lane = tid % 32, w4 = (tid / 32) % 4, gq = lane / 4, tq = lane % 4;
  const ConvOperands<typename C::T, Y> op = bias_to_shared(g, op_in, sm);
  auto release = [&](int st) { release_stage(sm, st, lane); };
  // Without split-K (kNone, a compile-time 1) a unit is a tile and its range every slab: the
  // compiler drops the divisions and the branches below.
  const int splits = kSplit != SplitPath::kNone ? sk.splits : 1;
  const int tiles = tiles_m * tiles_n;
  // The descriptors of stage 0, k-step 0 (this warpgroup's 64 A rows, and B); stage st and k-step
  // kk are st x kStageBytes + 32 kk bytes further on, and a descriptor's low 14 bits are the
  // address / 16, so each multiply's pair is two 32-bit adds away (desc_at), not rebuilt from an
  // address.
  // The stage and its phase are counters that wrap, not it % kStages and it / kStages.
  const uint64_t desc_a0 = make_desc(sm.a(0) + wg * 64 * 128, 16, 1024);
  const uint64_t desc_b0 = make_desc(sm.b(0), 16, 1024);
  int st = 0, prev_st = 0;  // the stage of the block's next slab, and of the one before it
  uint32_t phase = 0;       // the phase of st's barriers that the next slab completes
  for (int unit = blockIdx.x; unit < tiles * splits; unit += gridDim.x) {
    const int tile = unit / splits, split = unit - tile * splits;
    const int m_tile = tile / tiles_n;
    const int m0 = m_tile * kBM, k0 = (tile - m_tile * tiles_n) * kBN;
    const SlabRange slabs = split_slabs(num_slabs, splits, split);
    float d[kAcc];
#pragma unroll
    for (int i = 0; i < kAcc; ++i) d[i] = 0.f;
    for (int t = slabs.begin; t < slabs.end; ++t) {
      mbar_wait(&sm.full[st], phase);  // the slab's A and B have landed
      if constexpr (kAFromGenericProxy) fence_proxy_async_smem();
      fence();  // wgmma.fence: the accumulator registers, before this slab's multiplies
      // 4 k-steps: each is 32 bytes further inside every 128-byte row (the swizzle is applied by
      // the hardware on the address); this warpgroup's 64 A rows start 8 KB into the A tile.
      const uint32_t stage_off = uint32_t(st * (C::kStageBytes >> 4));
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
        const uint32_t off = stage_off + 2 * kk;  // + 32 kk bytes
        wgmma_kstep<typename C::T, kBN>(d, desc_at(desc_a0, off), desc_at(desc_b0, off));
      }
      commit();
      wait<1>();  // the previous slab's multiplies are done (this one's may still run)
      if (t > slabs.begin) release(prev_st);
      prev_st = st;
      if (++st == kStages) st = 0, phase ^= 1;
    }
    wait<0>();         // the tile's last multiplies
    release(prev_st);  // its stage too: the producer is filling the next tile's

    if constexpr (kSplit == SplitPath::kWorkspace) {
      __shared__ int last_split;  // whether this block brought the tile's last partial sum
      // ---- split-K: park this slab range's sums; the block that brings the tile's last one
      // adds all of them, in split order (the same bits whichever block is last), and stores.
      const size_t tile_id = size_t(blockIdx.z) * tiles + tile;
      float* part = sk.partial + (tile_id * sk.splits + split) * kAcc * 256;
#pragma unroll
      for (int i = 0; i < kAcc; ++i) part[i * 256 + tid] = d[i];  // coalesced across threads
      __threadfence();                                            // the sums, before the count
      asm volatile("bar.sync 1, 256;\n" ::: "memory");  // the consumers only (not the producer)
      if (tid == 0) last_split = atomicAdd(&sk.counters[tile_id], 1) == sk.splits - 1;
      asm volatile("bar.sync 1, 256;\n" ::: "memory");
      if (!last_split) continue;
      __threadfence();  // the other blocks' sums, after their counts
      const float* all = sk.partial + tile_id * sk.splits * kAcc * 256;
#pragma unroll
      for (int i = 0; i < kAcc; ++i) d[i] = 0.f;
      for (int sp = 0; sp < sk.splits; ++sp) {
#pragma unroll
        for (int i = 0; i < kAcc; ++i) d[i] += __ldcg(all + (size_t(sp) * kAcc + i) * 256 + tid);
      }
      if (tid == 0) sk.counters[tile_id] = 0;  // ready for the next launch
    }

    if constexpr (kSplit == SplitPath::kCluster) {
      // ---- cluster split-K: this CTA is cluster rank `split` (the launcher's clusters are
      // `splits` consecutive blocks along x, one tile each). The stages are free: every slab of
      // this unit was waited for on `full` by every consumer thread (all TMA writes have landed),
      // and the producer brings nothing more (one unit per block). Both warpgroups' last wgmma
      // reads of them must be done (each waited for its own, wait<0> above): a consumer barrier.
      using Parked = ParkedTile<C>;
      float* parked = reinterpret_cast<float*>(sm.base);
      asm volatile("bar.sync 1, 256;\n" ::: "memory");  // the consumers only (not the producer)
      // The stages were last written by the TMA and read by wgmma (the async proxy); the parked
      // tile is written by st.shared (the generic proxy) and read back through the cluster.
      fence_proxy_async_smem();
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = 64 * wg + 16 * w4 + gq + 8 * h;
#pragma unroll
        for (int j = 0; j < kBN / 8; ++j) {
          *reinterpret_cast<float2*>(parked + Parked::index(row, 8 * j + 2 * tq)) =
              make_float2(d[4 * j + 2 * h], d[4 * j + 2 * h + 1]);
        }
      }
      // Every CTA's parked tile, written, before any CTA reads one (release / acquire at
      // cluster scope). The producer warp has exited, which the cluster barrier allows for (it
      // waits for the non-exited threads). barrier.cluster is .aligned: every warp converged.
      __syncwarp();
      cluster_sync();
      // CTA `split` finishes rows [split rows, (split + 1) rows) of the tile. Thread -> data:
      // item i (tid, tid + 256, ...) is row split rows + i / (kBN / 8), filters 8 (i % (kBN / 8))
      // .. + 7: consecutive threads take consecutive 8-filter groups of a row (ParkedTile's
      // reads; the epilogue's 16-byte stores of a warp cover 2 (kBN = 128) or 4 (kBN = 64) whole
      // rows of the tile, 256 contiguous bytes of y each at kBN = 128).
      const int rows = kBM / sk.splits, groups_per_row = kBN / 8;
      const uint32_t parked_addr = smem_addr(parked);
      for (int i = tid; i < rows * groups_per_row; i += 256) {
        const int row = split * rows + i / groups_per_row, o = i % groups_per_row;
        const uint32_t lo = parked_addr + 4u * uint32_t(Parked::index(row, 8 * o));
        const uint32_t hi = lo + 4u * Parked::kPlane;
        // The ranks' loads 4 at a time (8 loads in flight; all 8 ranks' would spill the
        // 64-filter instance's registers under its 2-blocks-per-SM bound), each batch summed in
        // rank order: the same bits every run, in the workspace path's order.
        constexpr int kBatch = 4;
        float v[8];
#pragma unroll
        for (int r0 = 0; r0 < kMaxClusterSplits; r0 += kBatch) {
          if (r0 >= sk.splits) break;
          float4 a[kBatch], b[kBatch];
#pragma unroll
          for (int q = 0; q < kBatch; ++q) {
            if (r0 + q < sk.splits) {
              a[q] = ld_cluster_f4(map_cluster(lo, uint32_t(r0 + q)));
              b[q] = ld_cluster_f4(map_cluster(hi, uint32_t(r0 + q)));
            }
          }
#pragma unroll
          for (int q = 0; q < kBatch; ++q) {
            if (r0 + q == 0) {
              v[0] = a[0].x, v[1] = a[0].y, v[2] = a[0].z, v[3] = a[0].w;
              v[4] = b[0].x, v[5] = b[0].y, v[6] = b[0].z, v[7] = b[0].w;
            } else if (r0 + q < sk.splits) {
              v[0] += a[q].x, v[1] += a[q].y, v[2] += a[q].z, v[3] += a[q].w;
              v[4] += b[q].x, v[5] += b[q].y, v[6] += b[q].z, v[7] += b[q].w;
            }
          }
        }
        const int m = m0 + row;
        if (m < g.M) {
          store_sums<Y, kNpqk, 8>(g, op, relu, m, nkpq_offset(g, m), k0 + 8 * o, v,
                                  octets_ok<Y, kNpqk>(g, op));
        }
      }
      // No CTA exits (and frees its shared memory) while another may still read it.
      __syncwarp();
      cluster_sync();
    } else {
      store_registers<Y, kNpqk, kBN>(g, op, relu, m0 + 64 * wg + 16 * w4 + gq, k0, tq, d,
                                     octets_ok<Y, kNpqk>(g, op));
    }
  }
}

// The staged epilogue of a ping-pong warpgroup's 128 x 128 tile (C::kStagedOut: NPQK out in the
// operands' type, K a multiple of 8 bf16 or 4 fp32, y and the residual 16-byte aligned): bias,
// residual and ReLU added in registers, the results written to the warpgroup's staging tile and
// stored by one TMA copy per box (rows past M and columns past K are clipped by the copy). The
// launcher gives each warpgroup one box (C::kStagedBoxes = 1), so a tile goes out in passes of 64
// bf16 or 32 fp32 columns; the 16 KB this saves per warpgroup is two more pipeline stages.
// The residual's boxes, brought into the same staging tile by the TMA (res_full), are read in the
// same layout before being overwritten. In place of the register epilogue's loads, shuffles and
// stores to global memory, a warp spends a few shared-memory instructions: fewer instructions
// beside the other warpgroup's main loop.
// bf16: stmatrix and ldmatrix, 4 8 x 8 matrices a warp at once in the accumulators' own layout.
// Warp w4's rows of row block h are 64 h + 16 w4 .. + 15; for the pass's 16 columns 16 p ..
// 16 p + 15, lane l names row (l / 8) % 2 * 8 + l % 8 and 16-byte chunk 2 p +
// l / 16 of them (matrix l / 8), and receives or gives, in register q, row l / 4 + 8 (q % 2),
// columns 16 p + 8 (q / 2) + 2 (l % 4) and + 1: the accumulators d[h][4 (2 p + q / 2) + 2 (q % 2)
// + {0, 1}].
// fp32 (the TF32 network): each register pair is one 8-byte shared load (the residual) and store,
// rounded to TF32 as nhwc::store_pair does. Lane (gq, tq) writes row gq (+ 8) at columns 8 j + 2
// tq, + 1: 16-byte chunk 2 (j % 4) + tq / 2 of the row, whose swizzle (the chunk XOR row % 8 = gq)
// spreads a warp's 8 rows over all 32 banks: 256 bytes in two wavefronts, no conflict. Between the
// passes the previous pass's store must have read the staging tile before the next one's residual
// may land there (its latency is spent beside the other warpgroup's main loop). n: the warpgroup's
// tile count so far (res_full completes once per pass). half: -1 for a whole tile, else which 64
// rows of it this half tile holds (C::kHalfTiles; its sums are in d[0]).
template <class C, class Op>
__device__ __forceinline__ void store_staged(const nhwc::Params& g, const Op& op, bool relu,
                                             const Stages<C>& sm, int wg, int m0, int k0,
                                             const float (&d)[2][C::kBN / 2], bool residual, int n,
                                             int half, const CUtensorMap* map_y,
                                             const CUtensorMap* map_r) {
  using namespace day04::wgmma;
  const int tid = threadIdx.x % 128, lane = tid % 32, w4 = tid / 32, tq = lane % 4;
  uint8_t* const stage = sm.staging(wg);
  constexpr int kBox = C::kBM * 128;  // bytes per box
  // The maps' boxes are kRows rows: kBM / kRows of them a staging box for a whole tile (whose
  // rows 64 h come from d[h]), one for a half tile (kRows = 64: its rows 64 half, from d[0]).
  constexpr int kRows = C::kOutBoxRows;
  const int h_begin = half < 0 ? 0 : half, h_end = half < 0 ? C::kBM / kRows : half + 1;
  // The tile is free (the previous store has read it: its issuing thread waited at the main
  // loop's start) and, with a residual, holds pass 0's.
  asm volatile("bar.sync %0, 128;\n" ::"r"(2 + wg) : "memory");
#pragma unroll
  for (int pass = 0; pass < C::kPasses; ++pass) {
    const int kp = k0 + pass * C::kPassCols;  // this pass's first column
    if (pass > 0) {
      // The previous pass's store has read the staging tile: this pass's residual may land.
      if (tid == 0) {
        bulk_wait_read_all();
        if (residual) {
          mbar_expect_tx(&sm.res_full[wg], C::kStagedBoxes * (h_end - h_begin) * kRows * 128);
#pragma unroll
          for (int b = 0; b < C::kStagedBoxes; ++b) {
            for (int h = h_begin; h < h_end; ++h) {
              tma_load_2d(stage + b * kBox + h * kRows * 128, map_r, kp + b * C::kBoxCols,
                          m0 + kRows * h, &sm.res_full[wg]);
            }
          }
        }
      }
      asm volatile("bar.sync %0, 128;\n" ::"r"(2 + wg) : "memory");
    }
    if (residual) mbar_wait(&sm.res_full[wg], uint32_t(n * C::kPasses + pass) & 1);
    if constexpr (std::is_same_v<typename C::T, bf16>) {
      const int mi = lane / 8;
#pragma unroll
      for (int hd = 0; hd < 2; ++hd) {  // hd: the accumulators d[hd], rows 64 h of the tile
        if (half >= 0 && hd > 0) continue;
        const int h = half < 0 ? hd : half;
        const int row = 64 * h + 16 * w4 + (mi % 2) * 8 + lane % 8;
#pragma unroll
        for (int p = 0; p < C::kPassCols / 16; ++p) {
          const int chunk = 2 * p + mi / 2;  // in the pass: the box chunk / 8, chunk % 8 inside it
          uint8_t* const addr = stage + (chunk / 8) * kBox + swizzle128(row, chunk % 8);
          uint32_t res[4] = {0, 0, 0, 0};
          if (residual) day04::mma::ldmatrix_x4(res, addr);
          uint32_t out[4];
#pragma unroll
          for (int q = 0; q < 4; ++q) {
            const int jp = 2 * p + q / 2, j = pass * (C::kPassCols / 8) + jp;
            const int k = kp + 8 * jp + 2 * tq;
            float v0 = d[hd][4 * j + 2 * (q % 2)], v1 = d[hd][4 * j + 2 * (q % 2) + 1];
            if (op.bias != nullptr && k < g.k) v0 += op.bias[k], v1 += op.bias[k + 1];
            out[q] = finish_bf16x2(v0, v1, res[q], residual, relu);
          }
          day04::mma::stmatrix_x4(addr, out);
        }
      }
    } else {
      const int gq = lane / 4;
#pragma unroll
      for (int hd = 0; hd < 2; ++hd) {  // as above
        if (half >= 0 && hd > 0) continue;
        const int h = half < 0 ? hd : half;
#pragma unroll
        for (int jj = 0; jj < C::kPassCols / 8; ++jj) {  // this pass's groups of 8 columns
          const int j = pass * (C::kPassCols / 8) + jj, col = 8 * jj + 2 * tq;
          const int k = kp + col;
#pragma unroll
          for (int q = 0; q < 2; ++q) {
            const int row = 64 * h + 16 * w4 + gq + 8 * q;
            uint8_t* const addr = stage + (col / C::kBoxCols) * kBox +
                                  swizzle128(row, (col % C::kBoxCols) / 4) + 4 * (col % 4);
            float v0 = d[hd][4 * j + 2 * q], v1 = d[hd][4 * j + 2 * q + 1];
            if (op.bias != nullptr && k < g.k) v0 += op.bias[k], v1 += op.bias[k + 1];
            if (residual) {
              const float2 r = *reinterpret_cast<const float2*>(addr);
              v0 += r.x, v1 += r.y;
            }
            if (relu) v0 = fmaxf(v0, 0.f), v1 = fmaxf(v1, 0.f);
            // Rounded to TF32, to nearest, as nhwc::store_pair.
            *reinterpret_cast<float2*>(addr) =
                make_float2(day04::mma::round_tf32(v0), day04::mma::round_tf32(v1));
          }
        }
      }
    }
    // Every warp's writes, then one thread's copies (the TMA reads shared memory through the
    // async proxy).
    fence_proxy_async_smem();
    asm volatile("bar.sync %0, 128;\n" ::"r"(2 + wg) : "memory");
    if (tid == 0) {
#pragma unroll
      for (int b = 0; b < C::kStagedBoxes; ++b) {
        for (int h = h_begin; h < h_end; ++h) {
          tma_store_2d(map_y, stage + b * kBox + h * kRows * 128, kp + b * C::kBoxCols,
                       m0 + kRows * h);
        }
      }
      bulk_commit();
    }
  }
}

// A ping-pong warpgroup's main loop over a tile's slabs, starting at the block's slab `it`:
// kHalves = 2, a whole tile, both 64-row halves of each slab's A into d[0] and d[1]; kHalves = 1,
// a half tile, the rows 64 a_half of A into d[0]. Then the other warpgroup's turn, and the last
// multiplies waited for. Returns the slab count after the tile. A whole tile and a half tile run
// separate copies of this loop: a multiply skipped inside one loop would make ptxas serialise
// every wgmma of the kernel (its warning C7520).
template <class C, int kHalves>
__device__ __forceinline__ int pingpong_main_loop(const Stages<C>& sm, float (&d)[2][C::kBN / 2],
                                                  int it, int num_slabs, int a_half, int wg,
                                                  int lane) {
  using namespace day04::wgmma;
  // As consume_tiles: the descriptors of stage 0 advanced by adds, the stage and phase wrapping
  // counters (one division for the tile, none per slab).
  uint64_t desc_a0[kHalves];
#pragma unroll
  for (int h = 0; h < kHalves; ++h) {
    desc_a0[h] = make_desc(sm.a(0) + (kHalves == 2 ? h : a_half) * 64 * 128, 16, 1024);
  }
  const uint64_t desc_b0 = make_desc(sm.b(0), 16, 1024);
  int st = it % C::kStages, prev_st = 0;
  uint32_t phase = (it / C::kStages) & 1;
  for (int t = 0; t < num_slabs; ++t, ++it) {
    mbar_wait(&sm.full[st], phase);
    fence();
    const uint32_t stage_off = uint32_t(st * (C::kStageBytes >> 4));
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      const uint32_t off = stage_off + 2 * kk;  // + 32 kk bytes
#pragma unroll
      for (int h = 0; h < kHalves; ++h) {
        wgmma_kstep<typename C::T, C::kBN>(d[h], desc_at(desc_a0[h], off), desc_at(desc_b0, off));
      }
    }
    commit();
    wait<1>();
    if (t > 0) release_stage(sm, prev_st, lane);
    prev_st = st;
    if (++st == C::kStages) st = 0, phase ^= 1;
  }
  // Every multiply of the tile is issued: the other warpgroup may start its next tile's.
  __syncwarp();
  if (lane == 0) mbar_arrive(&sm.turn[1 - wg]);
  wait<0>();
  return it;
}

// Ping-pong consumers (C::kPingPong): the block's tiles are its j-th (blockIdx.x + j gridDim.x),
// and warpgroup wg takes j = wg, wg + 2, ...: a whole 128 x kBN tile, two m64nN multiplies per
// k-step (rows 0-63 and 64-127 of the slab's A, the same B), kBN fp32 sums a thread. The producer
// streams the tiles' slabs in j order as for the cooperative consumers, so tile j's first slab is
// the block's slab j num_slabs. The main loops take turns: warpgroup wg starts tile j's only once
// the other has issued every multiply of tile j - 1 (the `turn` barriers), then runs its epilogue
// while the other's main loop keeps the tensor cores busy. The turns also keep the full barriers'
// phases apart: every slab before tile j's was waited for before any of tile j's is.
// Staged output (C::kStagedOut): map_y and map_r are this convolution's y and residual as
// [M][K] maps in boxes of C::kOutBoxRows rows x 128 bytes (map_r unused without a residual).
template <class C, class Y, bool kNpqk>
__device__ __forceinline__ void consume_tiles_pingpong(const nhwc::Params& g,
                                                       const ConvOperands<typename C::T, Y>& op_in,
                                                       bool relu, int tiles_m, int tiles_n,
                                                       int num_slabs, const Stages<C>& sm,
                                                       const CUtensorMap* map_y = nullptr,
                                                       const CUtensorMap* map_r = nullptr) {
  using namespace day04::wgmma;
  constexpr int kBN = C::kBN, kStages = C::kStages, kHalf = kBN / 2;
  const int tid = threadIdx.x, wg = tid / 128;
  const int lane = tid % 32, w4 = (tid / 32) % 4, gq = lane / 4, tq = lane % 4;
  const ConvOperands<typename C::T, Y> op = bias_to_shared(g, op_in, sm);
  auto release = [&](int st) { release_stage(sm, st, lane); };
  const int tiles = tiles_m * tiles_n;
  const bool octets = octets_ok<Y, kNpqk>(g, op);
  // Whole tiles and, with C::kHalfTiles, the last wave's halves (tile_walk).
  const TileWalk walk = C::kHalfTiles ? tile_walk(tiles, gridDim.x) : TileWalk{tiles, tiles};
  for (int j = wg, n = 0; blockIdx.x + int64_t(j) * gridDim.x < walk.units; j += 2, ++n) {
    int tile = blockIdx.x + j * gridDim.x, half = -1;
    if constexpr (C::kHalfTiles) unit_tile(walk, tile, tile, half);
    const int m_tile = tile / tiles_n;
    const int m0 = m_tile * C::kBM, k0 = (tile - m_tile * tiles_n) * kBN;
    // Tile j - 1's multiplies are issued: the other warpgroup's n-th (wg 1) or n - 1-th (wg 0)
    // arrival on this warpgroup's turn barrier.
    if (j > 0) mbar_wait(&sm.turn[wg], (n - 1 + wg) & 1);
    if constexpr (C::kStagedOut) {
      // This tile's residual (its first pass's) into the staging tile while the main loop runs,
      // once the previous tile's store (issued by this thread) has read it.
      if (threadIdx.x % 128 == 0) {
        bulk_wait_read_all();
        if (op.residual != nullptr) {
          uint8_t* const stage = sm.staging(wg);
          constexpr int kRows = C::kOutBoxRows;  // as store_staged's
          const int h_begin = half < 0 ? 0 : half, h_end = half < 0 ? C::kBM / kRows : half + 1;
          mbar_expect_tx(&sm.res_full[wg], C::kStagedBoxes * (h_end - h_begin) * kRows * 128);
#pragma unroll
          for (int b = 0; b < C::kStagedBoxes; ++b) {
            for (int h = h_begin; h < h_end; ++h) {
              tma_load_2d(stage + b * C::kBM * 128 + h * kRows * 128, map_r, k0 + b * C::kBoxCols,
                          m0 + kRows * h, &sm.res_full[wg]);
            }
          }
        }
      }
    }
    float d[2][kHalf];
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int i = 0; i < kHalf; ++i) d[h][i] = 0.f;
    int it = j * num_slabs;
    if (!C::kHalfTiles || half < 0) {
      it = pingpong_main_loop<C, 2>(sm, d, it, num_slabs, 0, wg, lane);
    } else {
      it = pingpong_main_loop<C, 1>(sm, d, it, num_slabs, half, wg, lane);
    }
    release((it - 1) % kStages);
    if constexpr (C::kStagedOut) {
      store_staged<C>(g, op, relu, sm, wg, m0, k0, d, op.residual != nullptr, n, half, map_y,
                      map_r);
    } else {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        store_registers<Y, kNpqk, kBN>(g, op, relu, m0 + 64 * h + 16 * w4 + gq, k0, tq, d[h],
                                       octets);
      }
    }
  }
  // The staged output's last copies finish before the block exits (their source is this block's
  // shared memory).
  if constexpr (C::kStagedOut) {
    if (threadIdx.x % 128 == 0) bulk_wait_all();
  }
}

// ---- host side: what v9's, v10's and v11's launchers share ---------------------------------

// The group launcher's checks, before any CUDA call (std::invalid_argument, or ArchUnavailable for
// the build): the variant's refusal of the shape ("" when it takes it), an even K for an NPQK
// output (two channels per store), 16-byte aligned x and w (`aligned_for` says what needs it), and
// sm_90a code for this GPU.
template <class T, class Y>
void check_launch(const char* name, const std::string& refusal, const ConvShape& s,
                  const ConvGroup<T, Y>& grp, bool npqk, const char* aligned_for) {
  if (!refusal.empty()) throw std::invalid_argument(std::string(name) + ": " + refusal);
  if (npqk && s.k % 2 != 0) {
    throw std::invalid_argument(std::string(name) +
                                ": K must be even for an NPQK output (two channels per store)");
  }
  nhwc::require_aligned16(name, grp, aligned_for);
  gpu100::require_build(gpu100::ArchNeed::kSm90a, name);
}

// The persistent launch: M x K in tiles of C's kBM x kBN, and as many blocks as fit on the GPU at
// once (shared among the group's convolutions; gpu100::resident_blocks, asked once per kernel and
// GPU), each looping over tiles; fewer when there are fewer tiles. Throws std::invalid_argument
// when the tiles overflow a grid's int.
struct PersistentGrid {
  int tiles_m, tiles_n;
  int resident;  // blocks per convolution of the group that fit on the GPU at once
  dim3 grid;
};
template <class C, auto kKernel>
PersistentGrid persistent_grid(const char* name, int m, int k, int group_count) {
  static gpu100::PerDevice<int> resident_per_gpu;
  const int resident = resident_per_gpu.get(
      [] { return gpu100::resident_blocks(kKernel, C::kThreads, C::kSmemBytes); });
  PersistentGrid p;
  p.tiles_n = gpu100::ceil_div(k, C::kBN);
  p.tiles_m = gpu100::ceil_div(m, C::kBM);
  const int64_t tiles = int64_t(p.tiles_m) * p.tiles_n;
  if (tiles > int64_t(INT_MAX)) {
    throw std::invalid_argument(std::string(name) + ": more output tiles than a grid holds");
  }
  p.resident = std::max(1, resident / group_count);
  const int64_t blocks = std::min<int64_t>(tiles, p.resident);
  p.grid = dim3(static_cast<unsigned>(blocks), 1, group_count);
  return p;
}

}  // namespace day08::wgmma_conv
