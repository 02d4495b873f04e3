// v4_flash_bf16: FlashAttention-2 on the tensor cores (Dao 2023), with day04's mma.sync / ldmatrix
// / cp.async wrappers (day04_matmul/mma.cuh).
// What changed from v3: both products run on mma.sync.m16n8k16 (bf16 in, fp32 accumulate), about
// 16x the CUDA cores' fp32 FMA rate, and the data movement is shaped for it:
//  - each warp owns 2 m-tiles of 16 query rows, so every K / V fragment it reads from shared
//    memory feeds two mma; at D = 128 its Q fragments are re-read from shared memory by ldmatrix
//    at each k-step (FlashAttention-2's choice: the registers go to the second m-tile), at D = 64
//    they stay in registers;
//  - S = Q K^T lands in mma accumulators whose layout (row g / g + 8, columns 2t, 2t + 1 of each
//    8-key n-tile) is exactly the A-operand layout of the next mma, so P is converted to bf16 in
//    registers and multiplies V with no shared-memory round trip;
//  - K and V tiles of 64 keys stream through a ring of 16-byte cp.async (kStages, 2 here): tile
//    t + 1 is in flight while tile t is computed, with one __syncthreads per tile; V by
//    ldmatrix.trans;
//  - O is rescaled only when some row of the warp saw its running max move (one warp vote);
//  - the softmax runs in the log2 domain (scale * log2 e folded into one FFMA, ex2.approx), row
//    statistics in fp32;
//  - shared rows are padded by 16 bytes so the 8 row addresses of each ldmatrix phase hit 8
//    different bank quads.
// Three details then took it from 304 to 389 TFLOP/s at S 4096 D 128 (230 -> 318 at S 2048 D 64;
// each measured on the H100, README):
//  - only the tiles that cross S or the causal diagonal run the mask code: the others run a copy
//    of the tile with none (the mask's compares and selects had been compiled into every tile:
//    about 1,170 other instructions in the loop beside a D = 128 tile's 256 mma and 80
//    ldmatrix, now about 670);
//  - the row sums l = P 1 run on the tensor core: one extra mma per m-tile and 16 keys, with B
//    all ones, accumulates them beside O (rescaled with it), in place of 64 FADDs per thread per
//    tile and the final shuffles; the normaliser is then the sum of exactly the bf16 P that
//    multiplied V;
//  - the copy of the next K/V tile is started after S = Q K^T instead of before it, so its
//    address arithmetic and 16 cp.async per thread are issued alongside the softmax.
// The costs: 250-255 registers per thread (2 blocks of 4 warps per SM; at D = 128 a 92-byte spill,
// measured faster than the spill-free schedules), 55-104 KB of shared memory per block, and every
// warp re-reads the whole K/V tile (and at D = 128 its Q rows) from shared memory.
// Extra device memory: the row log-sum-exp, 4 B H S bytes. Output O in bf16 (as FlashAttention).
// Causal: tiles past the block's last query are never loaded, and a warp skips the mma work of a
// tile wholly above its own rows.
#include <cuda_bf16.h>

#include <cmath>
#include <cstring>
#include <stdexcept>

#include "attention.hpp"
#include "common/cuda_check.hpp"
#include "common/math.hpp"
#include "common/occupancy.hpp"
#include "flash_util.cuh"
#include "mma.cuh"

namespace day05 {

namespace {

using bf16 = __nv_bfloat16;
using day04::mma::cp_async_16;
using day04::mma::cp_async_commit;
using day04::mma::cp_async_wait;
using day04::mma::ldmatrix_x4;
using day04::mma::ldmatrix_x4_trans;
using day04::mma::mma_bf16_16816;

using flash::fast_exp2;
using flash::kLn2;
using flash::kLog2e;
using flash::pack_bf16;

// The tiling of one instantiation. kD: head dimension; kBKV: keys per K/V tile; kWarps warps per
// block, each with kMTiles m-tiles of 16 query rows; kMinBlocks: the __launch_bounds__ occupancy;
// kQInRegs: Q fragments loaded once and kept in registers (D / 4 registers per m-tile), or
// re-read from shared memory with ldmatrix at every k-step of every tile (FlashAttention-2's
// choice, which frees those registers for a second m-tile or a wider key tile); kStages: K/V
// tiles in the cp.async ring (tiles t + 1 .. t + kStages - 1 in flight while tile t computes).
template <int kD_, int kBKV_, int kWarps_, int kMTiles_, int kMinBlocks_, bool kQInRegs_,
          int kStages_>
struct V4Config {
  static constexpr int kD = kD_, kBKV = kBKV_, kWarps = kWarps_, kMTiles = kMTiles_;
  static constexpr int kMinBlocks = kMinBlocks_;
  static constexpr bool kQInRegs = kQInRegs_;
  static constexpr int kStages = kStages_;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kWarpRows = 16 * kMTiles;
  static constexpr int kBQ = kWarpRows * kWarps;  // queries per block
  static constexpr int kLd = kD + 8;              // bf16 per shared row: 16-byte pad
  static constexpr int kQElems = kBQ * kLd, kKVElems = kBKV * kLd;
  // Q, then kStages stages of K, then kStages stages of V.
  static constexpr size_t kSmemBytes = sizeof(bf16) * (kQElems + 2 * kStages * kKVElems);
  static_assert(kStages >= 2, "at least double buffering");
  static_assert(kD % 16 == 0 && kBKV % 16 == 0, "mma tiles are 16 deep");
  static_assert((kBQ * kD / 8) % kThreads == 0 && (kBKV * kD / 8) % kThreads == 0,
                "tiles must split evenly into 16-byte chunks per thread");
};

// D = 128: FlashAttention-2's layout, 4 warps x 2 m-tiles (32 rows per warp, 128 per block), Q
// re-read from shared memory, 64-key tiles. Per 16-deep k-step of S = Q K^T a warp issues 2
// ldmatrix for Q and BKV / 16 = 4 for K, then BKV / 4 = 16 mma (0.375 ldmatrix per mma); in P V
// each V fragment feeds 2 mma. O (128 registers), the row sums (8) and S / P (64 at 64 keys) take
// 255 registers and a 92-byte spill (ptxas 13.0, sm_90a); 128 threads x 255 registers x 2 blocks
// fit the register file. 35 KB of Q + 2 x 35 KB of K/V = 104 KB per block, 2 blocks per SM. The
// tilings were timed on the H100 (B 8, H 16, S 4096, non-causal) with the earlier tile code, the
// one that compiled the mask into every tile: 32-key tiles with 3 stages 275 TFLOP/s, 64 keys
// with 2 stages 304, 64 keys with 3 stages 182 (a spill), 8 warps x 1 m-tile with Q in registers
// 239; with the mask-free tiles, 32 keys / 3 stages 342 against 349 for this tiling, and 64 keys
// / 3 stages 280 (138 KB of shared memory: one block per SM).
using ConfigD128 = V4Config<128, 64, 4, 2, 2, false, 2>;
// D = 64: 4 warps x 2 m-tiles, Q fragments kept in registers (32 of them), 64-key tiles, 2
// stages: 250 registers, no spill, 18 KB of Q + 2 x 18 KB of K/V = 55 KB per block. Timed as
// above (S 2048, non-causal), earlier tile code: 229 TFLOP/s, against 224 with Q re-read from
// shared memory and 3 stages, 181 with 32-key tiles, 163 with 8 warps x 1 m-tile: at D = 64 a
// k-step has only 4 Q fragments, and keeping them in registers beats re-reading them. With the
// mask-free tiles, Q re-read (2 stages) and Q in registers with 3 stages both measured 299-302,
// the same as this tiling.
using ConfigD64 = V4Config<64, 64, 4, 2, 2, true, 2>;

// Starts the copy of rows [row0, row0 + kRows) of a head's [S][kD] matrix into smem [kRows][kLd]:
// 16-byte chunks, kD / 8 per row, consecutive threads on consecutive chunks (coalesced). Each
// thread's chunks sit at a fixed column and at rows kRowsPerPass apart, so the loop has a
// compile-time trip count and the chunk addresses are one base plus constant offsets. kCheck:
// rows past S are zero-filled (never read from global); without it the caller guarantees
// row0 + kRows <= S and no per-chunk test is compiled.
template <class C, int kRows, bool kCheck = true>
__device__ __forceinline__ void load_tile_async(bf16* dst, const bf16* __restrict__ src, int row0,
                                                int s, int tid) {
  constexpr int kPerRow = C::kD / 8, kRowsPerPass = C::kThreads / kPerRow;
  static_assert(C::kThreads % kPerRow == 0 && kRows % kRowsPerPass == 0, "whole passes only");
  const int r0 = tid / kPerRow, col = (tid % kPerRow) * 8;
  bf16* d = dst + r0 * C::kLd + col;
  const bf16* g = src + (size_t(row0) + r0) * C::kD + col;
#pragma unroll
  for (int i = 0; i < kRows / kRowsPerPass; ++i) {
    const int di = i * kRowsPerPass * C::kLd, gi = i * kRowsPerPass * C::kD;
    if constexpr (kCheck) {
      const bool valid = row0 + r0 + i * kRowsPerPass < s;
      cp_async_16(d + di, valid ? g + gi : src, valid);
    } else {
      cp_async_16(d + di, g + gi, true);
    }
  }
}

// The K/V copy pipeline of one block: a ring of kStages shared-memory stages, tile t in stage
// t % kStages, one cp.async commit group per tile (empty past the last tile, so that "kStages - 2
// groups still in flight" always means tile t has landed).
template <class C>
struct V4Pipe {
  bf16* sk;  // kStages x [kBKV][kLd]
  bf16* sv;
  const bf16* kg;  // this head's K and V in global memory
  const bf16* vg;
  int num_tiles, s, tid;

  // Waits until tile t has landed for every thread; the barrier also says that every warp is
  // done with tile t - 1, so its stage may be refilled.
  __device__ __forceinline__ void wait(int t) const {
    if (t > 0) {
      cp_async_wait<C::kStages - 2>();
      __syncthreads();
    }
  }
  // Starts tile t into its stage (the stage tile t - kStages used); full tiles skip the row test.
  __device__ __forceinline__ void issue(int t) const {
    if (t < num_tiles) {
      const int st = t % C::kStages, row0 = t * C::kBKV;
      bf16* dk = sk + st * C::kKVElems;
      bf16* dv = sv + st * C::kKVElems;
      if (row0 + C::kBKV <= s) {
        load_tile_async<C, C::kBKV, false>(dk, kg, row0, s, tid);
        load_tile_async<C, C::kBKV, false>(dv, vg, row0, s, tid);
      } else {
        load_tile_async<C, C::kBKV>(dk, kg, row0, s, tid);
        load_tile_async<C, C::kBKV>(dv, vg, row0, s, tid);
      }
    }
    cp_async_commit();
  }
};

// One warp's running state across the K/V loop: its Q fragments (kQInRegs; otherwise a 1-element
// dummy, and each k-step reloads them from shared memory), the O accumulators (rows g, g + 8;
// columns 8 j + 2 t4 + {0, 1}), the per-row max (h = 0: row g, h = 1: g + 8) and the row sums
// as the accumulators of P times a B of ones (every column holds the row's sum).
template <class C>
struct V4Warp {
  uint32_t qf[C::kQInRegs ? C::kMTiles : 1][C::kQInRegs ? C::kD / 16 : 1][4];
  float oacc[C::kMTiles][C::kD / 8][4];
  float m_run[C::kMTiles][2];
  float lacc[C::kMTiles][4];
};

// One K/V tile for one warp: S = Q K^T, (kMask: the keys past S and, if causal, above the
// diagonal set to -inf), the online softmax, O += P V and l += P 1. kMask = false compiles to no
// mask code. after_s() runs once the S mma are issued (the caller starts the next K/V copy there).
template <class C, bool kMask, class AfterS>
__device__ __forceinline__ void flash_v4_tile(V4Warp<C>& w, const bf16* sq_lane, const bf16* skt,
                                              const bf16* svt, int kv0, int warp_first, int s,
                                              bool causal, float scale_log2, int lane,
                                              AfterS after_s) {
  constexpr int kD = C::kD, kBKV = C::kBKV, kMT = C::kMTiles, kLd = C::kLd;
  constexpr int kNT = kBKV / 8;  // 8-key n-tiles of S
  constexpr int kDT = kD / 8;    // 8-column n-tiles of O
  const int g = lane / 4, t4 = lane % 4;
  // ---- S = Q K^T: kMT x kNT accumulators of 16 x 8 ----
  float sacc[kMT][kNT][4];
#pragma unroll
  for (int i = 0; i < kMT; ++i)
#pragma unroll
    for (int j = 0; j < kNT; ++j)
      sacc[i][j][0] = sacc[i][j][1] = sacc[i][j][2] = sacc[i][j][3] = 0.f;
#pragma unroll
  for (int kk = 0; kk < kD / 16; ++kk) {
    // This k-step's Q fragments: from the registers, or one ldmatrix per m-tile (the warp's own
    // rows of sq, written before the loop and never overwritten until the epilogue).
    uint32_t qa[kMT][4];
#pragma unroll
    for (int i = 0; i < kMT; ++i) {
      if constexpr (C::kQInRegs) {
#pragma unroll
        for (int r = 0; r < 4; ++r) qa[i][r] = w.qf[i][kk][r];
      } else {
        ldmatrix_x4(qa[i], sq_lane + 16 * i * kLd + 16 * kk);
      }
    }
#pragma unroll
    for (int jp = 0; jp < kBKV / 16; ++jp) {
      // B = K^T is "col" (n-major) = K's rows as stored: no transpose. Matrix q = lane / 8:
      // keys 16 jp + (q / 2) * 8 + 0..7, columns 16 kk + (q % 2) * 8 + 0..7, so registers 0-1
      // are n-tile 2 jp (k 0-7, 8-15) and registers 2-3 n-tile 2 jp + 1.
      uint32_t kb[4];
      ldmatrix_x4(
          kb, skt + (16 * jp + (lane / 16) * 8 + lane % 8) * kLd + 16 * kk + ((lane / 8) % 2) * 8);
      const uint32_t b0[2] = {kb[0], kb[1]}, b1[2] = {kb[2], kb[3]};
#pragma unroll
      for (int i = 0; i < kMT; ++i) {
        mma_bf16_16816(sacc[i][2 * jp], qa[i], b0);
        mma_bf16_16816(sacc[i][2 * jp + 1], qa[i], b1);
      }
    }
  }

  after_s();

  // ---- mask, online softmax; P overwrites S in the accumulators ----
  // sacc[i][j][2 h + e]: row wrow0 + 16 i + g + 8 h, key kv0 + 8 j + 2 t4 + e.
  float alpha[kMT][2];  // exp2(m_old - m_new) per row: 1 when the row's max did not move
#pragma unroll
  for (int i = 0; i < kMT; ++i) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = warp_first + 16 * i + g + 8 * h;
      float mx = -INFINITY;
#pragma unroll
      for (int j = 0; j < kNT; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          float& x = sacc[i][j][2 * h + e];
          if constexpr (kMask) {
            const int key = kv0 + 8 * j + 2 * t4 + e;
            if (key >= s || (causal && key > row)) x = -INFINITY;
          }
          mx = fmaxf(mx, x);
        }
      // The row's 8-key n-tiles are spread over the 4 lanes of a quad.
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float m_new = fmaxf(w.m_run[i][h], mx);  // raw score units (scale > 0 commutes)
      const float m_scaled = m_new == -INFINITY ? 0.f : m_new * scale_log2;
      alpha[i][h] = fast_exp2(w.m_run[i][h] * scale_log2 - m_scaled);  // 0 at first
      w.m_run[i][h] = m_new;
#pragma unroll
      for (int j = 0; j < kNT; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          float& x = sacc[i][j][2 * h + e];
          x = fast_exp2(fmaf(x, scale_log2, -m_scaled));  // masked: exp2(-inf) = 0
        }
    }
  }
  // Rescale O only when the max moved for some row of the warp (one vote; the branch is
  // warp-uniform). Once the running max settles (after a few tiles on typical inputs) this
  // skips kMT x kD FMULs per thread per tile (128 at D = 128: ~6% of the issue slots of the
  // tile's mma). alpha is exactly 1 when m did not move (exp2(0)), so skipping changes nothing.
  bool moved = false;
#pragma unroll
  for (int i = 0; i < kMT; ++i) moved = moved || alpha[i][0] != 1.f || alpha[i][1] != 1.f;
  if (__any_sync(0xffffffffu, moved)) {
#pragma unroll
    for (int i = 0; i < kMT; ++i)
#pragma unroll
      for (int j = 0; j < kDT; ++j) {
        w.oacc[i][j][0] *= alpha[i][0];
        w.oacc[i][j][1] *= alpha[i][0];
        w.oacc[i][j][2] *= alpha[i][1];
        w.oacc[i][j][3] *= alpha[i][1];
      }
#pragma unroll
    for (int i = 0; i < kMT; ++i) {
      w.lacc[i][0] *= alpha[i][0];
      w.lacc[i][1] *= alpha[i][0];
      w.lacc[i][2] *= alpha[i][1];
      w.lacc[i][3] *= alpha[i][1];
    }
  }

  // ---- O += P V ----
#pragma unroll
  for (int kk = 0; kk < kBKV / 16; ++kk) {
    // A fragment of P for keys 16 kk .. 16 kk + 15 from the S accumulators of n-tiles 2 kk and
    // 2 kk + 1: a0 = (row g, keys 2 t4, +1), a1 = (row g + 8, same keys), a2 / a3 = the same
    // with keys + 8.
    uint32_t pa[kMT][4];
#pragma unroll
    for (int i = 0; i < kMT; ++i) {
      pa[i][0] = pack_bf16(sacc[i][2 * kk][0], sacc[i][2 * kk][1]);
      pa[i][1] = pack_bf16(sacc[i][2 * kk][2], sacc[i][2 * kk][3]);
      pa[i][2] = pack_bf16(sacc[i][2 * kk + 1][0], sacc[i][2 * kk + 1][1]);
      pa[i][3] = pack_bf16(sacc[i][2 * kk + 1][2], sacc[i][2 * kk + 1][3]);
    }
    {
      const uint32_t ones[2] = {0x3F803F80u, 0x3F803F80u};
#pragma unroll
      for (int i = 0; i < kMT; ++i) mma_bf16_16816(w.lacc[i], pa[i], ones);
    }
#pragma unroll
    for (int jp = 0; jp < kD / 16; ++jp) {
      // B = V (keys x columns) is stored k-major: ldmatrix.trans. Matrix q = lane / 8: keys
      // 16 kk + (q % 2) * 8 + 0..7, columns 16 jp + (q / 2) * 8 + 0..7; registers 0-1 are
      // n-tile 2 jp (keys 0-7, 8-15), registers 2-3 n-tile 2 jp + 1.
      uint32_t vb[4];
      ldmatrix_x4_trans(
          vb, svt + (16 * kk + ((lane / 8) % 2) * 8 + lane % 8) * kLd + 16 * jp + (lane / 16) * 8);
      const uint32_t b0[2] = {vb[0], vb[1]}, b1[2] = {vb[2], vb[3]};
#pragma unroll
      for (int i = 0; i < kMT; ++i) {
        mma_bf16_16816(w.oacc[i][2 * jp], pa[i], b0);
        mma_bf16_16816(w.oacc[i][2 * jp + 1], pa[i], b1);
      }
    }
  }
}

template <class C>
__global__ void __launch_bounds__(C::kThreads, C::kMinBlocks)
    flash_v4_kernel(const bf16* __restrict__ q, const bf16* __restrict__ k,
                    const bf16* __restrict__ v, bf16* __restrict__ o, float* __restrict__ lse,
                    int s, bool causal, float scale_log2, int num_q_blocks, int o_heads) {
  constexpr int kD = C::kD, kBKV = C::kBKV, kMT = C::kMTiles, kLd = C::kLd;
  constexpr int kDT = kD / 8;  // 8-column n-tiles of O
  extern __shared__ __align__(16) unsigned char smem_raw[];
  bf16* sq = reinterpret_cast<bf16*>(smem_raw);  // [kBQ][kLd]
  bf16* sk = sq + C::kQElems;                    // kStages x [kBKV][kLd]
  bf16* sv = sk + C::kStages * C::kKVElems;      // kStages x [kBKV][kLd]

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int g = lane / 4, t4 = lane % 4;  // mma fragment coordinates: row group, column pair
  // Blocks of one head are consecutive (K and V shared in L2); query tiles last to first, so the
  // longest causal blocks start first.
  const int64_t bh = blockIdx.x / num_q_blocks;
  const int q0 = (num_q_blocks - 1 - static_cast<int>(blockIdx.x % num_q_blocks)) * C::kBQ;
  const size_t base = size_t(bh) * s * kD;
  const bf16* qg = q + base;
  const bf16* kg = k + base;
  const bf16* vg = v + base;
  // Where this head's O rows go: [B, H, S, D] like Q, or token-major [B, S, H, D] (o_heads = H).
  const size_t o_base =
      o_heads > 0 ? (size_t(bh / o_heads) * s * o_heads + bh % o_heads) * kD : base;
  const size_t o_row_stride = o_heads > 0 ? size_t(o_heads) * kD : size_t(kD);
  const int wrow0 = warp * C::kWarpRows;  // the warp's first row within the block
  const int warp_first = q0 + wrow0, warp_last = warp_first + C::kWarpRows - 1;
  const bool warp_active = warp_first < s;  // warps wholly past S only join the barriers

  const int kv_end = causal ? min(s, q0 + C::kBQ) : s;
  const int num_tiles = gpu100::ceil_div(kv_end, kBKV);

  // Prologue: kStages - 1 commit groups: Q with tile 0's K and V, then tiles 1 .. kStages - 2.
  const V4Pipe<C> pipe{sk, sv, kg, vg, num_tiles, s, tid};
  load_tile_async<C, C::kBQ>(sq, qg, q0, s, tid);
#pragma unroll
  for (int st = 0; st < C::kStages - 1; ++st) pipe.issue(st);

  V4Warp<C> w;
#pragma unroll
  for (int i = 0; i < kMT; ++i) {
#pragma unroll
    for (int j = 0; j < kDT; ++j)
      w.oacc[i][j][0] = w.oacc[i][j][1] = w.oacc[i][j][2] = w.oacc[i][j][3] = 0.f;
    w.m_run[i][0] = w.m_run[i][1] = -INFINITY;
    w.lacc[i][0] = w.lacc[i][1] = w.lacc[i][2] = w.lacc[i][3] = 0.f;
  }

  cp_async_wait<C::kStages - 2>();  // this thread's copies of Q and tile 0 have landed...
  __syncthreads();                  // ...and everyone's
  // Q fragments of the warp's own rows. Lanes 0-15 address rows 0-15 at column 16 kk, lanes 16-31
  // the same rows at 16 kk + 8: the four 8 x 8 matrices are a0 (rows 0-7, k 0-7), a1 (rows 8-15,
  // k 0-7), a2 (rows 0-7, k 8-15), a3 (rows 8-15, k 8-15).
  const bf16* sq_lane = sq + (wrow0 + lane % 16) * kLd + (lane / 16) * 8;
  if constexpr (C::kQInRegs) {
#pragma unroll
    for (int i = 0; i < kMT; ++i)
#pragma unroll
      for (int kk = 0; kk < kD / 16; ++kk)
        ldmatrix_x4(w.qf[i][kk], sq_lane + 16 * i * kLd + 16 * kk);
  }

  // Tiles 0 .. n_full - 1 need no mask for any row of the block and run a copy of the tile code
  // with no mask arithmetic at all; only the rest (a tail past S; under causal, the tiles that
  // cross the block's diagonal) pay for it. During tile t every thread starts the copy of tile
  // t + kStages - 1 into the stage tile t - 1 used (free since the barrier): after S in the
  // unmasked loop, before it in the short masked one.
  const int n_full = min(s, causal ? q0 + 1 : s) / kBKV;
  int t = 0;
  for (; t < n_full; ++t) {
    pipe.wait(t);
    const int tn = t + C::kStages - 1;
    if (!warp_active) {  // warps wholly past S only copy and join the barriers
      pipe.issue(tn);
      continue;
    }
    const int st = t % C::kStages;
    flash_v4_tile<C, false>(w, sq_lane, sk + st * C::kKVElems, sv + st * C::kKVElems, t * kBKV,
                            warp_first, s, causal, scale_log2, lane, [&] { pipe.issue(tn); });
  }
  for (; t < num_tiles; ++t) {
    pipe.wait(t);
    pipe.issue(t + C::kStages - 1);
    const int kv0 = t * kBKV;
    if (!warp_active || (causal && kv0 > warp_last)) continue;  // nothing unmasked for this warp
    const int st = t % C::kStages;
    flash_v4_tile<C, true>(w, sq_lane, sk + st * C::kKVElems, sv + st * C::kKVElems, kv0,
                           warp_first, s, causal, scale_log2, lane, [] {});
  }

  // ---- epilogue: O / l in bf16, staged through the warp's own Q rows, 16-byte stores ----
  // (Each warp reads only its own Q rows, so no other warp touches them; the __syncwarp orders
  // this warp's last ldmatrix of Q before its lanes overwrite those rows. The 4-byte stores of a
  // quad's 8 rows fall in 32 distinct banks: row stride kLd / 2 = 4 (mod 32).)
  __syncwarp();
#pragma unroll
  for (int i = 0; i < kMT; ++i) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float l = w.lacc[i][2 * h];
      const float inv = l > 0.f ? 1.f / l : 0.f;
      const int r = wrow0 + 16 * i + g + 8 * h;
#pragma unroll
      for (int j = 0; j < kDT; ++j) {
        *reinterpret_cast<uint32_t*>(sq + r * kLd + 8 * j + 2 * t4) =
            pack_bf16(w.oacc[i][j][2 * h] * inv, w.oacc[i][j][2 * h + 1] * inv);
      }
      const int row = q0 + r;
      if (t4 == 0 && row < s && lse != nullptr) {
        lse[size_t(bh) * s + row] = (w.m_run[i][h] * scale_log2 + log2f(l)) * kLn2;
      }
    }
  }
  __syncwarp();
  constexpr int kPerRow = kD / 8;
#pragma unroll
  for (int c = lane; c < C::kWarpRows * kPerRow; c += 32) {
    const int r = c / kPerRow, col = (c % kPerRow) * 8;
    const int row = warp_first + r;
    if (row < s) {
      *reinterpret_cast<uint4*>(o + o_base + size_t(row) * o_row_stride + col) =
          *reinterpret_cast<const uint4*>(sq + (wrow0 + r) * kLd + col);
    }
  }
}

template <class C>
void launch_v4(const AttentionShape& s, const bf16* q, const bf16* k, const bf16* v, bf16* o,
               float* lse, OLayout layout, cudaStream_t stream) {
  static gpu100::PerDevice<bool> attr_set;  // the attribute is per GPU: set on each
  attr_set.get([] {
    CUDA_CHECK(cudaFuncSetAttribute(flash_v4_kernel<C>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    int(C::kSmemBytes)));
    return true;
  });
  const int num_q_blocks = gpu100::ceil_div(s.s, C::kBQ);
  const int64_t blocks = s.heads() * num_q_blocks;
  if (blocks > int64_t(0x7fffffff)) throw std::invalid_argument("v4_flash_bf16: grid too large");
  flash_v4_kernel<C><<<static_cast<unsigned>(blocks), C::kThreads, C::kSmemBytes, stream>>>(
      q, k, v, o, lse, s.s, s.causal, softmax_scale(s.d) * kLog2e, num_q_blocks,
      layout == OLayout::kBSHD ? s.h : 0);
  CUDA_CHECK_LAST();
}

}  // namespace

void attention_v4_flash_bf16(const AttentionShape& s, const bf16* q, const bf16* k, const bf16* v,
                             bf16* o, void* workspace, size_t workspace_bytes,
                             cudaStream_t stream) {
  attention_v4_flash_bf16(s, q, k, v, o, OLayout::kBHSD, workspace, workspace_bytes, stream);
}

void attention_v4_flash_bf16(const AttentionShape& s, const bf16* q, const bf16* k, const bf16* v,
                             bf16* o, OLayout layout, void* workspace, size_t workspace_bytes,
                             cudaStream_t stream) {
  check_shape(s);
  if (const std::string why = v4_refusal(s); !why.empty()) throw std::invalid_argument(why);
  if (q == nullptr || k == nullptr || v == nullptr || o == nullptr) {
    throw std::invalid_argument("v4_flash_bf16: null pointer");
  }
  if (!gpu100::aligned16(q) || !gpu100::aligned16(k) || !gpu100::aligned16(v) ||
      !gpu100::aligned16(o)) {
    throw std::invalid_argument("v4_flash_bf16: Q, K, V and O must be 16-byte aligned");
  }
  if (workspace == nullptr || workspace_bytes < flash_workspace_bytes(s)) {
    throw std::invalid_argument("v4_flash_bf16: the workspace must hold the B H S log-sum-exp");
  }
  gpu100::require_build(gpu100::ArchNeed::kSm80, "v4_flash_bf16");
  float* lse = static_cast<float*>(workspace);
  if (s.d == 64) {
    launch_v4<ConfigD64>(s, q, k, v, o, lse, layout, stream);
  } else {
    launch_v4<ConfigD128>(s, q, k, v, o, lse, layout, stream);
  }
}

}  // namespace day05
