// bwd_v2_flash_mma: FlashAttention-2's tiled backward (Dao 2023, its backward algorithm) on
// mma.sync.m16n8k16 bf16 with fp32 accumulation: the second rung of the backward ladder
// (attention_backward.hpp has the math; v4_flash_bf16.cu the forward whose fragment tricks this
// reuses). What changed from bwd v1: no S x S matrix in memory. One block owns a tile of Bc = 64
// keys of one head, keeps K_j and V_j in shared memory and dK_j, dV_j in registers, and walks the
// query tiles i of Br rows (under the causal mask from the first tile that sees key tile j):
//   S^T = K_j Q_i^T  ->  P^T = exp(c S^T - lse_i)   (keys are the mma's M: C rows are keys)
//   dV_j += P^T dO_i          (P^T's accumulators rounded to bf16 are the A fragments: v4's trick)
//   dP^T = V_j dO_i^T  ->  dS^T = P^T o (dP^T - D_i)
//   dK_j += dS^T Q_i          (A from registers again)
//   dQ_i += dS K_j            (dS^T through shared memory, read back by ldmatrix.trans; the
//                              [Br x D] partial added to an fp32 accumulator by atomics)
// Three kernels: a pre-pass (D_i = dO_i . O_i, the fp32 dQ accumulator zeroed), the main kernel,
// a post-pass (dQ = c x the accumulator, rounded to bf16); the passes are bwd_util.cu's. Why it is
// faster than v1: every score lives in registers (bf16 for a moment in shared memory for dQ), so
// the DRAM bytes are O(S D) per head and the time is the five products' on the tensor cores. What
// it costs: dQ's partial sums go through L2 as fp32 atomics, S / Bc of them per element of dQ (64
// at S = 4096), and the S^T and dP^T products recompute what the forward and dV already had.
// bwd_v2b_flash_mma_dq_pass (this file too) gets dQ without atomics, by a separate pass: the
// main kernel without dQ, then bwd_v2b_dq_kernel, one block per query tile looping over the key
// tiles (S and dP recomputed), dQ in registers and written once: no atomics, 1.4x the mma work.
// bwd_v2c_flash_mma_128_keys (this file): bwd v2 with 128 keys per block (8 warps of 16 keys, the
// same work per warp) instead of 64. Each query tile a block loads now serves twice the keys, so
// dQ's partials are summed over 128 keys before they leave the block: half the atomics (S / 128
// per element of dQ), and half the Q / dO traffic from L2 per key. What it costs: 120.5 KB of
// shared memory per block at D = 128 (K, V, Q, dO and dS^T), more than sm_86 / sm_89 allow, so it
// refuses D = 128 there; one block of 8 warps per SM, as v2's two blocks of 4. Measured on an H200
// (Nsight Compute, main kernel, B 8 H 16 S 4096 D 128): 18.66 to 12.79 ms, L2 sectors of reductions
// 1.61 G to 0.81 G.
// bwd_v2d_flash_mma_vector_red (this file): bwd v2c with dQ's partials added by 8-byte vector
// reductions (red.global.add.v2.f32, sm_90). A scalar atomic of one warp touches 8 rows x 32
// bytes, each 32-byte L2 sector holding 4 of the warp's floats at a stride of 8 bytes, and the
// next column's atomic touches the same 8 sectors again; one vector reduction fills each sector
// with 8 floats: half the reduction instructions and half the sector operations in L2. Measured
// the same way: 12.79 to 10.81 ms, 0.81 G to 0.40 G sectors; the whole call 1.20x v2b at D = 128.
#include <cuda_bf16.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

#include "attention_backward.hpp"
#include "bwd_util.hpp"
#include "common/cuda_check.hpp"
#include "common/device_info.hpp"
#include "common/math.hpp"
#include "common/occupancy.hpp"
#include "flash_util.cuh"
#include "mma.cuh"

#if !GPU100_SM80_CODE
#pragma nv_diag_suppress 177
#endif

namespace day05 {

namespace {

using bf16 = __nv_bfloat16;
using day04::mma::cp_async_16;
using day04::mma::cp_async_4;
using day04::mma::cp_async_commit;
using day04::mma::cp_async_wait;
using day04::mma::ldmatrix_x4;
using day04::mma::ldmatrix_x4_trans;
using day04::mma::mma_bf16_16816;

using flash::fast_exp2;
using flash::kLog2e;
using flash::pack_bf16;

constexpr size_t kAlign = 256;  // each buffer of the workspace starts on this boundary

// The tiling of one instantiation. kD: head dimension; kBc keys per block (16 per warp: the
// mma's M, 64 or 128: a warp per 16); kBr queries per tile of the loop; kStages: Q / dO / lse / D
// tiles in the cp.async ring (1: the next tile is loaded while dQ's partial is computed; 2: one
// tile ahead).
template <int kD_, int kBr_, int kStages_, int kMinBlocks_, int kBc_ = 64>
struct BwdConfig {
  static constexpr int kD = kD_, kBr = kBr_, kStages = kStages_, kMinBlocks = kMinBlocks_;
  static constexpr int kBc = kBc_, kWarps = kBc / 16, kThreads = 32 * kWarps;
  static constexpr int kLd = kD + 8;    // bf16 per shared row of K, V, Q, dO: 16-byte pad
  static constexpr int kLdS = kBr + 8;  // bf16 per shared row of dS^T: 16-byte pad
  static constexpr int kKVElems = kBc * kLd, kQElems = kBr * kLd;
  // dQ's partial: each m-tile of 16 queries is split over kWarps / (kBr / 16) warps by columns.
  static constexpr int kWarpsPerMTile = kWarps / (kBr / 16);
  static constexpr int kDqCols = kD / kWarpsPerMTile;  // dQ columns per warp
  // bf16: K, V, then kStages x (Q, dO), then dS^T; fp32: kStages x (lse, D).
  static constexpr size_t kSmemBytes =
      sizeof(bf16) * (2 * kKVElems + 2 * kStages * kQElems + kBc * kLdS) +
      sizeof(float) * 2 * kStages * kBr;
  static_assert(kD % 16 == 0 && kBr % 16 == 0, "mma tiles are 16 deep");
  static_assert(kStages == 1 || kStages == 2, "one or two stages");
  static_assert(kWarps % (kBr / 16) == 0 && kDqCols % 32 == 0, "dQ's split over warps");
  static_assert(2 * kBr <= kThreads, "one thread per lse / D element");
  static_assert(kSmemBytes <= 227 * 1024, "sm_90 allows 227 KB per block");
  static constexpr bool kFitsEverySm80Gpu = kSmemBytes <= 99 * 1024;  // sm_86 / sm_89: 99 KB
};

// D = 128: 64 queries per tile, one stage (K, V, Q, dO, dS^T: 77.5 KB; two stages would take
// 112 KB, over the 99 KB per block of sm_86 / sm_89). dK and dV take 64 + 64 accumulator
// registers per thread, S^T / P^T and dP^T 32 + 32.
using BwdD128 = BwdConfig<128, 64, 1, 2>;
// D = 64: 64 queries per tile, two stages (64 KB).
using BwdD64 = BwdConfig<64, 64, 2, 2>;
static_assert(BwdD128::kFitsEverySm80Gpu && BwdD64::kFitsEverySm80Gpu, "v2 and v2b run anywhere");
// bwd v2c and v2d: 128 keys per block, 8 warps, one block per SM (255 registers a thread). D = 128:
// one stage as in v2, 120.5 KB (over the 99 KB of sm_86 / sm_89: refused there); D = 64: two
// stages, 91 KB.
using BwdWideD128 = BwdConfig<128, 64, 1, 1, 128>;
using BwdWideD64 = BwdConfig<64, 64, 2, 1, 128>;
static_assert(!BwdWideD128::kFitsEverySm80Gpu && BwdWideD64::kFitsEverySm80Gpu, "see above");

// How the main kernel adds dQ's partials: not at all (v2b: a separate pass), by scalar fp32
// atomics (v2, v2c), or by 8-byte vector reductions (v2d; sm_90 code).
enum class DqAdd { kNone, kScalar, kVector2 };

// ---- the main kernel ---------------------------------------------------------------------------

// Starts the copy of rows [row0, row0 + kRows) of a head's [S][kD] matrix into smem [kRows][kLd]:
// 16-byte chunks, consecutive threads on consecutive chunks of a row (coalesced); rows past S are
// zero-filled and never read.
template <class C, int kRows>
__device__ __forceinline__ void load_rows_async(bf16* dst, const bf16* __restrict__ src, int row0,
                                                int s, int tid) {
  constexpr int kPerRow = C::kD / 8, kRowsPerPass = C::kThreads / kPerRow;
  static_assert(C::kThreads % kPerRow == 0 && kRows % kRowsPerPass == 0, "whole passes only");
  const int r0 = tid / kPerRow, col = (tid % kPerRow) * 8;
#pragma unroll
  for (int i = 0; i < kRows / kRowsPerPass; ++i) {
    const int r = r0 + i * kRowsPerPass;
    const bool valid = row0 + r < s;
    cp_async_16(dst + r * C::kLd + col, valid ? src + (size_t(row0) + r) * C::kD + col : src,
                valid);
  }
}

// The shared-memory buffers of one block (see BwdConfig::kSmemBytes for the order).
template <class C>
struct BwdSmem {
  bf16 *k, *v, *q, *dout, *ds;  // q, dout: kStages x [kBr][kLd]; ds: [kBc][kLdS]
  float *lse, *delta;           // kStages x [kBr]
  __device__ explicit BwdSmem(unsigned char* raw) {
    k = reinterpret_cast<bf16*>(raw);
    v = k + C::kKVElems;
    q = v + C::kKVElems;
    dout = q + C::kStages * C::kQElems;
    ds = dout + C::kStages * C::kQElems;
    lse = reinterpret_cast<float*>(ds + C::kBc * C::kLdS);
    delta = lse + C::kStages * C::kBr;
  }
};

// Starts the copy of query tile `tile` (Q, dO, lse, D) into its stage, then commits the group
// (an empty group past the last tile, so the wait counts stay uniform).
template <class C>
__device__ __forceinline__ void issue_query_tile(const BwdSmem<C>& sm, const bf16* qg,
                                                 const bf16* dog, const float* lseg,
                                                 const float* deltag, int tile, int num_tiles,
                                                 int s, int tid) {
  if (tile < num_tiles) {
    const int st = tile % C::kStages, i0 = tile * C::kBr;
    load_rows_async<C, C::kBr>(sm.q + st * C::kQElems, qg, i0, s, tid);
    load_rows_async<C, C::kBr>(sm.dout + st * C::kQElems, dog, i0, s, tid);
    // lse and D: one float per thread (4-byte copies: a row of S floats is 16-byte aligned only
    // when S % 4 == 0). Past S: 0, and the mask sets those queries' P to 0.
    if (tid < 2 * C::kBr) {
      const bool is_lse = tid < C::kBr;
      const int r = is_lse ? tid : tid - C::kBr;
      const float* src = is_lse ? lseg : deltag;
      float* dst = (is_lse ? sm.lse : sm.delta) + st * C::kBr + r;
      const bool valid = i0 + r < s;
      cp_async_4(dst, valid ? src + i0 + r : src, valid);
    }
  }
  cp_async_commit();
}

// One query tile for one warp's 16 keys: S^T, P^T, dV, dP^T, dS^T, dK, and dS^T into shared
// memory for dQ. Accumulator element acc[n][e] is key kw0 + g + 8 (e / 2), query
// i0 + 8 n + 2 t4 + e % 2 (the C layout of mma.m16n8k16). kMask: keys and queries past S and,
// if causal, the pairs with key > query get P = 0; kMask = false compiles to no mask code.
// kDsToSmem: dS^T is also written to shared memory (for the atomics' dQ = dS K).
template <class C, bool kMask, bool kDsToSmem>
__device__ __forceinline__ void bwd_v2_tile(float (&dv)[C::kD / 8][4], float (&dk)[C::kD / 8][4],
                                            const bf16* sk_w, const bf16* sv_w, const bf16* sq,
                                            const bf16* sdo, const float* slse, const float* sdelta,
                                            bf16* sds_w, int kw0, int i0, int s, bool causal,
                                            float scale_log2, int lane) {
  constexpr int kD = C::kD, kBr = C::kBr, kLd = C::kLd, kLdS = C::kLdS;
  constexpr int kNT = kBr / 8;  // 8-query n-tiles of S^T
  const int g = lane / 4, t4 = lane % 4;
  // The lane's row address for an A operand of 16 rows stored row-major (K's or V's warp rows):
  // lanes 0-15 rows 0-15 at column 0, lanes 16-31 the same rows at column 8 (a0..a3).
  const int a_off = (lane % 16) * kLd + (lane / 16) * 8;
  // For a B operand stored [n][k] (Q or dO as B^T, no transpose): rows 8 (lane / 16) + lane % 8,
  // column 8 ((lane / 8) % 2): registers 0-1 are n-tile 2 jp, 2-3 n-tile 2 jp + 1.
  const int bn_off = ((lane / 16) * 8 + lane % 8) * kLd + ((lane / 8) % 2) * 8;
  // For a B operand stored [k][n] (Q or dO as B, ldmatrix.trans): rows 8 ((lane / 8) % 2) +
  // lane % 8, column 8 (lane / 16).
  const int bt_off = (((lane / 8) % 2) * 8 + lane % 8) * kLd + (lane / 16) * 8;

  // ---- S^T = K_j Q_i^T: 16 keys x kBr queries ----
  float sacc[kNT][4];
#pragma unroll
  for (int n = 0; n < kNT; ++n) sacc[n][0] = sacc[n][1] = sacc[n][2] = sacc[n][3] = 0.f;
#pragma unroll
  for (int kk = 0; kk < kD / 16; ++kk) {
    uint32_t ka[4];
    ldmatrix_x4(ka, sk_w + a_off + 16 * kk);
#pragma unroll
    for (int jp = 0; jp < kBr / 16; ++jp) {
      uint32_t qb[4];
      ldmatrix_x4(qb, sq + 16 * jp * kLd + bn_off + 16 * kk);
      const uint32_t b0[2] = {qb[0], qb[1]}, b1[2] = {qb[2], qb[3]};
      mma_bf16_16816(sacc[2 * jp], ka, b0);
      mma_bf16_16816(sacc[2 * jp + 1], ka, b1);
    }
  }

  // ---- P^T = exp(c S^T - lse) in the log2 domain; masked pairs 0 ----
#pragma unroll
  for (int n = 0; n < kNT; ++n) {
    const float2 l = *reinterpret_cast<const float2*>(slse + 8 * n + 2 * t4);
    const float m[2] = {l.x * kLog2e, l.y * kLog2e};
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      float& x = sacc[n][e];
      x = fast_exp2(fmaf(x, scale_log2, -m[e % 2]));
      if constexpr (kMask) {
        const int key = kw0 + g + 8 * (e / 2), query = i0 + 8 * n + 2 * t4 + e % 2;
        if (key >= s || query >= s || (causal && key > query)) x = 0.f;
      }
    }
  }

  // ---- dV_j += P^T dO_i: M = 16 keys, N = kD, K = kBr queries ----
#pragma unroll
  for (int kk = 0; kk < kBr / 16; ++kk) {
    // A fragment of P^T for queries 16 kk .. 16 kk + 15 from the accumulators of n-tiles 2 kk
    // and 2 kk + 1 (v4's P V trick).
    const uint32_t pa[4] = {pack_bf16(sacc[2 * kk][0], sacc[2 * kk][1]),
                            pack_bf16(sacc[2 * kk][2], sacc[2 * kk][3]),
                            pack_bf16(sacc[2 * kk + 1][0], sacc[2 * kk + 1][1]),
                            pack_bf16(sacc[2 * kk + 1][2], sacc[2 * kk + 1][3])};
#pragma unroll
    for (int jp = 0; jp < kD / 16; ++jp) {
      uint32_t ob[4];
      ldmatrix_x4_trans(ob, sdo + 16 * kk * kLd + bt_off + 16 * jp);
      const uint32_t b0[2] = {ob[0], ob[1]}, b1[2] = {ob[2], ob[3]};
      mma_bf16_16816(dv[2 * jp], pa, b0);
      mma_bf16_16816(dv[2 * jp + 1], pa, b1);
    }
  }

  // ---- dP^T = V_j dO_i^T: 16 keys x kBr queries (the form of S^T) ----
  float pacc[kNT][4];
#pragma unroll
  for (int n = 0; n < kNT; ++n) pacc[n][0] = pacc[n][1] = pacc[n][2] = pacc[n][3] = 0.f;
#pragma unroll
  for (int kk = 0; kk < kD / 16; ++kk) {
    uint32_t va[4];
    ldmatrix_x4(va, sv_w + a_off + 16 * kk);
#pragma unroll
    for (int jp = 0; jp < kBr / 16; ++jp) {
      uint32_t ob[4];
      ldmatrix_x4(ob, sdo + 16 * jp * kLd + bn_off + 16 * kk);
      const uint32_t b0[2] = {ob[0], ob[1]}, b1[2] = {ob[2], ob[3]};
      mma_bf16_16816(pacc[2 * jp], va, b0);
      mma_bf16_16816(pacc[2 * jp + 1], va, b1);
    }
  }

  // ---- dS^T = P^T o (dP^T - D_i), rounded to bf16 once: dK's A fragments and dQ's shared tile
  // (masked pairs have P = 0, so dS = 0 there) ----
  uint32_t dsp[kNT][2];  // [n][h]: key g + 8 h, queries 8 n + 2 t4, +1
#pragma unroll
  for (int n = 0; n < kNT; ++n) {
    const float2 d = *reinterpret_cast<const float2*>(sdelta + 8 * n + 2 * t4);
    dsp[n][0] = pack_bf16(sacc[n][0] * (pacc[n][0] - d.x), sacc[n][1] * (pacc[n][1] - d.y));
    dsp[n][1] = pack_bf16(sacc[n][2] * (pacc[n][2] - d.x), sacc[n][3] * (pacc[n][3] - d.y));
    if constexpr (kDsToSmem) {
      // dS^T into shared memory [key][query]: the 32 lanes' 4-byte stores fall in 32 banks (row
      // stride kLdS / 2 = 4 words mod 32).
      *reinterpret_cast<uint32_t*>(sds_w + g * kLdS + 8 * n + 2 * t4) = dsp[n][0];
      *reinterpret_cast<uint32_t*>(sds_w + (g + 8) * kLdS + 8 * n + 2 * t4) = dsp[n][1];
    }
  }

  // ---- dK_j += dS^T Q_i: M = 16 keys, N = kD, K = kBr queries ----
#pragma unroll
  for (int kk = 0; kk < kBr / 16; ++kk) {
    const uint32_t da[4] = {dsp[2 * kk][0], dsp[2 * kk][1], dsp[2 * kk + 1][0], dsp[2 * kk + 1][1]};
#pragma unroll
    for (int jp = 0; jp < kD / 16; ++jp) {
      uint32_t qb[4];
      ldmatrix_x4_trans(qb, sq + 16 * kk * kLd + bt_off + 16 * jp);
      const uint32_t b0[2] = {qb[0], qb[1]}, b1[2] = {qb[2], qb[3]};
      mma_bf16_16816(dk[2 * jp], da, b0);
      mma_bf16_16816(dk[2 * jp + 1], da, b1);
    }
  }
}

// Adds the column pair (a, b) to dst[0], dst[1] (8-byte aligned) in the fp32 accumulator: two
// scalar atomics (RED, the result unused), or with kVector2 one 8-byte vector reduction, which
// sm_90 has (the host refuses a kVector2 variant on older code, where this falls back).
template <DqAdd kAdd>
__device__ __forceinline__ void add_pair(float* dst, float a, float b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  constexpr bool kVector = kAdd == DqAdd::kVector2;
#else
  constexpr bool kVector = false;
#endif
  if constexpr (kVector) {
    asm volatile("red.global.add.v2.f32 [%0], {%1, %2};\n" ::"l"(dst), "f"(a), "f"(b) : "memory");
  } else {
    atomicAdd(dst, a);
    atomicAdd(dst + 1, b);
  }
}

// dQ_i += dS K_j for the warp's slice: queries qw0 .. qw0 + 15 of the tile, columns
// col0 .. col0 + kDqCols - 1, 32 at a time; added to the fp32 accumulator by add_pair. A = dS
// (queries x keys), stored as dS^T [key][query]: ldmatrix.trans with matrix q at keys 8 (q / 2),
// queries 8 (q % 2). B = K_j (keys x columns), stored k-major: ldmatrix.trans.
template <class C, DqAdd kAdd>
__device__ __forceinline__ void bwd_v2_dq(float* __restrict__ dq_acc_head, const bf16* sk,
                                          const bf16* sds, int qw0, int col0, int i0, int s,
                                          int lane) {
  constexpr int kD = C::kD, kLd = C::kLd, kLdS = C::kLdS, kKSteps = C::kBc / 16;
  const int g = lane / 4, t4 = lane % 4;
  uint32_t a[kKSteps][4];
#pragma unroll
  for (int kk = 0; kk < kKSteps; ++kk) {
    ldmatrix_x4_trans(
        a[kk], sds + (16 * kk + (lane / 16) * 8 + lane % 8) * kLdS + qw0 + ((lane / 8) % 2) * 8);
  }
  const int bt_off = (((lane / 8) % 2) * 8 + lane % 8) * kLd + (lane / 16) * 8;
  const int q_lo = i0 + qw0 + g, q_hi = q_lo + 8;
#pragma unroll
  for (int c0 = col0; c0 < col0 + C::kDqCols; c0 += 32) {
    float acc[4][4];
#pragma unroll
    for (int n = 0; n < 4; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.f;
#pragma unroll
    for (int kk = 0; kk < kKSteps; ++kk) {
#pragma unroll
      for (int jp = 0; jp < 2; ++jp) {
        uint32_t kb[4];
        ldmatrix_x4_trans(kb, sk + 16 * kk * kLd + bt_off + c0 + 16 * jp);
        const uint32_t b0[2] = {kb[0], kb[1]}, b1[2] = {kb[2], kb[3]};
        mma_bf16_16816(acc[2 * jp], a[kk], b0);
        mma_bf16_16816(acc[2 * jp + 1], a[kk], b1);
      }
    }
#pragma unroll
    for (int n = 0; n < 4; ++n) {
      const int col = c0 + 8 * n + 2 * t4;
      if (q_lo < s) add_pair<kAdd>(dq_acc_head + size_t(q_lo) * kD + col, acc[n][0], acc[n][1]);
      if (q_hi < s) add_pair<kAdd>(dq_acc_head + size_t(q_hi) * kD + col, acc[n][2], acc[n][3]);
    }
  }
}

// One block per (key tile of kBc keys, head): blocks of one head are consecutive (Q and dO shared
// in L2), key tile 0 first (under the causal mask it has the most query tiles). Warp w owns keys
// j0 + 16 w .. j0 + 16 w + 15 for S^T, dV, dP^T, dK, and queries / columns of the tile for dQ.
// kAdd = kNone (bwd v2b): no dQ here (dq_acc unused); bwd_v2b_dq_kernel computes it.
template <class C, DqAdd kAdd>
__global__ void __launch_bounds__(C::kThreads, C::kMinBlocks)
    bwd_v2_kernel(const bf16* __restrict__ q, const bf16* __restrict__ k,
                  const bf16* __restrict__ v, const bf16* __restrict__ dout,
                  const float* __restrict__ lse, const float* __restrict__ delta,
                  float* __restrict__ dq_acc, bf16* __restrict__ dk, bf16* __restrict__ dv, int s,
                  bool causal, float scale, int num_key_tiles) {
  constexpr int kD = C::kD, kBr = C::kBr, kBc = C::kBc, kLd = C::kLd;
  constexpr int kDT = kD / 8;                       // 8-column n-tiles of dK and dV
  constexpr bool kDqToSmem = kAdd != DqAdd::kNone;  // dS^T to shared memory for dQ = dS K
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const BwdSmem<C> sm(smem_raw);

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int g = lane / 4, t4 = lane % 4;
  const int64_t bh = blockIdx.x / num_key_tiles;
  const int j0 = static_cast<int>(blockIdx.x % num_key_tiles) * kBc;
  const size_t base = size_t(bh) * s * kD;
  const bf16* qg = q + base;
  const bf16* dog = dout + base;
  const float* lseg = lse + size_t(bh) * s;
  const float* deltag = delta + size_t(bh) * s;
  const int kw0 = j0 + 16 * warp;  // the warp's first key
  const float scale_log2 = scale * kLog2e;

  // Query tiles first_tile .. num_tiles - 1: under the causal mask the first is the one holding
  // query j0 (queries before j0 see no key of this tile).
  const int num_tiles = gpu100::ceil_div(s, kBr);
  const int first_tile = causal ? j0 / kBr : 0;

  // Prologue: K and V with the first query tile in one group, then the next kStages - 1 tiles.
  load_rows_async<C, kBc>(sm.k, k + base, j0, s, tid);
  load_rows_async<C, kBc>(sm.v, v + base, j0, s, tid);
#pragma unroll
  for (int st = 0; st < C::kStages; ++st) {
    issue_query_tile<C>(sm, qg, dog, lseg, deltag, first_tile + st, num_tiles, s, tid);
  }

  float dva[kDT][4], dka[kDT][4];
#pragma unroll
  for (int j = 0; j < kDT; ++j) {
    dva[j][0] = dva[j][1] = dva[j][2] = dva[j][3] = 0.f;
    dka[j][0] = dka[j][1] = dka[j][2] = dka[j][3] = 0.f;
  }

  // dQ's slice of this warp: m-tile warp / kWarpsPerMTile, columns by warp % kWarpsPerMTile.
  const int dq_q0 = 16 * (warp / C::kWarpsPerMTile);
  const int dq_c0 = (warp % C::kWarpsPerMTile) * C::kDqCols;
  // A tile needs the mask when it holds queries or keys past S, or (causal) a pair key > query.
  const bool keys_tail = j0 + kBc > s;

  for (int t = first_tile; t < num_tiles; ++t) {
    const int st = t % C::kStages, i0 = t * kBr;
    cp_async_wait<C::kStages - 1>();  // this thread's copies of tile t (and K, V) have landed...
    __syncthreads();  // ...and everyone's; every warp is also done reading dS^T of tile t - 1
    const bf16* sq = sm.q + st * C::kQElems;
    const bf16* sdo = sm.dout + st * C::kQElems;
    const float* slse = sm.lse + st * kBr;
    const float* sdelta = sm.delta + st * kBr;
    const bool masked = keys_tail || i0 + kBr > s || (causal && j0 + kBc - 1 > i0);
    if (masked) {
      bwd_v2_tile<C, true, kDqToSmem>(dva, dka, sm.k + 16 * warp * kLd, sm.v + 16 * warp * kLd, sq,
                                      sdo, slse, sdelta, sm.ds + 16 * warp * C::kLdS, kw0, i0, s,
                                      causal, scale_log2, lane);
    } else {
      bwd_v2_tile<C, false, kDqToSmem>(dva, dka, sm.k + 16 * warp * kLd, sm.v + 16 * warp * kLd, sq,
                                       sdo, slse, sdelta, sm.ds + 16 * warp * C::kLdS, kw0, i0, s,
                                       causal, scale_log2, lane);
    }
    __syncthreads();  // dS^T complete; every warp is done with Q, dO, lse and D of this stage
    issue_query_tile<C>(sm, qg, dog, lseg, deltag, t + C::kStages, num_tiles, s, tid);
    if constexpr (kDqToSmem) {
      bwd_v2_dq<C, kAdd>(dq_acc + base, sm.k, sm.ds, dq_q0, dq_c0, i0, s, lane);
    }
  }

  // ---- epilogue: dK = c x its accumulator, dV, in bf16 (4-byte stores of column pairs) ----
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int key = kw0 + g + 8 * h;
    if (key < s) {
      bf16* dkr = dk + base + size_t(key) * kD;
      bf16* dvr = dv + base + size_t(key) * kD;
#pragma unroll
      for (int j = 0; j < kDT; ++j) {
        *reinterpret_cast<uint32_t*>(dkr + 8 * j + 2 * t4) =
            pack_bf16(dka[j][2 * h] * scale, dka[j][2 * h + 1] * scale);
        *reinterpret_cast<uint32_t*>(dvr + 8 * j + 2 * t4) =
            pack_bf16(dva[j][2 * h], dva[j][2 * h + 1]);
      }
    }
  }
}

// ---- bwd v2b's dQ pass: dQ without atomics ------------------------------------------------------
// One block per (query tile of kBr = 64 rows, head), 4 warps x 16 queries (the mma's M); Q_i and
// dO_i stay in shared memory, each thread's lse and D_i (rows g, g + 8) in registers, dQ_i in
// registers. K_j and V_j tiles of kBc keys stream through a cp.async ring of C::kStages stages
// (under the causal mask only up to the tile holding the block's last query). Per tile:
//   S = Q_i K_j^T, P = exp(c S - lse), dP = dO_i V_j^T, dS = P o (dP - D), dQ_i += dS K_j
// (dS's accumulators rounded to bf16 are the A fragments; K_j by ldmatrix.trans as B). It
// recomputes S and dP, which the main kernel had: 4 of the 2 S^2 D products instead of 1, so the
// backward does 14 B H S^2 D FLOPs in all (the 10 counted), in exchange for no fp32 atomics, no
// accumulator (dQ written once, in bf16) and no dS^T in shared memory in the main kernel.
template <class C>
struct DqSmem {
  bf16 *q, *dout, *k, *v;  // q, dout: [kBr][kLd]; k, v: kStages x [kBc][kLd]
  __device__ explicit DqSmem(unsigned char* raw) {
    q = reinterpret_cast<bf16*>(raw);
    dout = q + C::kQElems;
    k = dout + C::kQElems;
    v = k + C::kStages * C::kKVElems;
  }
  static constexpr size_t kBytes = sizeof(bf16) * (2 * C::kQElems + 2 * C::kStages * C::kKVElems);
};

// Starts the copy of key tile `tile` (K, V) into its stage and commits the group (empty past the
// last tile).
template <class C>
__device__ __forceinline__ void issue_key_tile(const DqSmem<C>& sm, const bf16* kg, const bf16* vg,
                                               int tile, int num_tiles, int s, int tid) {
  if (tile < num_tiles) {
    const int st = tile % C::kStages;
    load_rows_async<C, C::kBc>(sm.k + st * C::kKVElems, kg, tile * C::kBc, s, tid);
    load_rows_async<C, C::kBc>(sm.v + st * C::kKVElems, vg, tile * C::kBc, s, tid);
  }
  cp_async_commit();
}

// One key tile for one warp's 16 queries. Accumulator element acc[n][e] is query
// qw0 + g + 8 (e / 2), key j0 + 8 n + 2 t4 + e % 2. m2[h]: lse x log2 e of row g + 8 h; dl[h]: D.
template <class C, bool kMask>
__device__ __forceinline__ void bwd_v2b_dq_tile(float (&dq)[C::kD / 8][4], const bf16* sq_w,
                                                const bf16* sdo_w, const bf16* sk, const bf16* sv,
                                                const float (&m2)[2], const float (&dl)[2], int qw0,
                                                int j0, int s, bool causal, float scale_log2,
                                                int lane) {
  constexpr int kD = C::kD, kBc = C::kBc, kLd = C::kLd;
  constexpr int kNT = kBc / 8;  // 8-key n-tiles of S
  const int g = lane / 4, t4 = lane % 4;
  const int a_off = (lane % 16) * kLd + (lane / 16) * 8;
  const int bn_off = ((lane / 16) * 8 + lane % 8) * kLd + ((lane / 8) % 2) * 8;
  const int bt_off = (((lane / 8) % 2) * 8 + lane % 8) * kLd + (lane / 16) * 8;

  // ---- S = Q_i K_j^T and dP = dO_i V_j^T: 16 queries x kBc keys each ----
  float sacc[kNT][4], pacc[kNT][4];
#pragma unroll
  for (int n = 0; n < kNT; ++n) {
    sacc[n][0] = sacc[n][1] = sacc[n][2] = sacc[n][3] = 0.f;
    pacc[n][0] = pacc[n][1] = pacc[n][2] = pacc[n][3] = 0.f;
  }
#pragma unroll
  for (int kk = 0; kk < kD / 16; ++kk) {
    uint32_t qa[4], oa[4];
    ldmatrix_x4(qa, sq_w + a_off + 16 * kk);
    ldmatrix_x4(oa, sdo_w + a_off + 16 * kk);
#pragma unroll
    for (int jp = 0; jp < kBc / 16; ++jp) {
      uint32_t kb[4], vb[4];
      ldmatrix_x4(kb, sk + 16 * jp * kLd + bn_off + 16 * kk);
      ldmatrix_x4(vb, sv + 16 * jp * kLd + bn_off + 16 * kk);
      const uint32_t k0[2] = {kb[0], kb[1]}, k1[2] = {kb[2], kb[3]};
      const uint32_t v0[2] = {vb[0], vb[1]}, v1[2] = {vb[2], vb[3]};
      mma_bf16_16816(sacc[2 * jp], qa, k0);
      mma_bf16_16816(sacc[2 * jp + 1], qa, k1);
      mma_bf16_16816(pacc[2 * jp], oa, v0);
      mma_bf16_16816(pacc[2 * jp + 1], oa, v1);
    }
  }

  // ---- P, then dS = P o (dP - D) in bf16 pairs (dsp[n][h]: row g + 8 h, keys 8 n + 2 t4, +1) --
  uint32_t dsp[kNT][2];
#pragma unroll
  for (int n = 0; n < kNT; ++n) {
    float ds[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      float p = fast_exp2(fmaf(sacc[n][e], scale_log2, -m2[e / 2]));
      if constexpr (kMask) {
        const int query = qw0 + g + 8 * (e / 2), key = j0 + 8 * n + 2 * t4 + e % 2;
        if (key >= s || query >= s || (causal && key > query)) p = 0.f;
      }
      ds[e] = p * (pacc[n][e] - dl[e / 2]);
    }
    dsp[n][0] = pack_bf16(ds[0], ds[1]);
    dsp[n][1] = pack_bf16(ds[2], ds[3]);
  }

  // ---- dQ_i += dS K_j: M = 16 queries, N = kD, K = kBc keys; B = K_j [key][d] by .trans ----
#pragma unroll
  for (int kk = 0; kk < kBc / 16; ++kk) {
    const uint32_t da[4] = {dsp[2 * kk][0], dsp[2 * kk][1], dsp[2 * kk + 1][0], dsp[2 * kk + 1][1]};
#pragma unroll
    for (int jp = 0; jp < kD / 16; ++jp) {
      uint32_t kb[4];
      ldmatrix_x4_trans(kb, sk + 16 * kk * kLd + bt_off + 16 * jp);
      const uint32_t b0[2] = {kb[0], kb[1]}, b1[2] = {kb[2], kb[3]};
      mma_bf16_16816(dq[2 * jp], da, b0);
      mma_bf16_16816(dq[2 * jp + 1], da, b1);
    }
  }
}

// One block per (query tile, head); blocks of one head consecutive (K and V shared in L2), the
// last query tile first (under the causal mask it has the most key tiles).
template <class C>
__global__ void __launch_bounds__(C::kThreads, C::kMinBlocks)
    bwd_v2b_dq_kernel(const bf16* __restrict__ q, const bf16* __restrict__ k,
                      const bf16* __restrict__ v, const bf16* __restrict__ dout,
                      const float* __restrict__ lse, const float* __restrict__ delta,
                      bf16* __restrict__ dq, int s, bool causal, float scale, int num_query_tiles) {
  constexpr int kD = C::kD, kBr = C::kBr, kBc = C::kBc, kLd = C::kLd;
  constexpr int kDT = kD / 8;
  static_assert(kBr == 16 * C::kWarps, "one m-tile of 16 queries per warp");
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const DqSmem<C> sm(smem_raw);

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int g = lane / 4, t4 = lane % 4;
  const int64_t bh = blockIdx.x / num_query_tiles;
  const int i0 = (num_query_tiles - 1 - static_cast<int>(blockIdx.x % num_query_tiles)) * kBr;
  const size_t base = size_t(bh) * s * kD;
  const bf16* kg = k + base;
  const bf16* vg = v + base;
  const int qw0 = i0 + 16 * warp;  // the warp's first query
  const float scale_log2 = scale * kLog2e;

  const int kv_end = causal ? min(s, i0 + kBr) : s;
  const int num_tiles = gpu100::ceil_div(kv_end, kBc);

  // Prologue: Q_i and dO_i with key tile 0 in one group, then the next kStages - 1 key tiles.
  load_rows_async<C, kBr>(sm.q, q + base, i0, s, tid);
  load_rows_async<C, kBr>(sm.dout, dout + base, i0, s, tid);
#pragma unroll
  for (int st = 0; st < C::kStages; ++st) issue_key_tile<C>(sm, kg, vg, st, num_tiles, s, tid);

  // This thread's rows g and g + 8: lse x log2 e and D (0 past S; those rows are masked).
  float m2[2], dl[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = qw0 + g + 8 * h;
    m2[h] = row < s ? lse[size_t(bh) * s + row] * kLog2e : 0.f;
    dl[h] = row < s ? delta[size_t(bh) * s + row] : 0.f;
  }
  float dqa[kDT][4];
#pragma unroll
  for (int j = 0; j < kDT; ++j) dqa[j][0] = dqa[j][1] = dqa[j][2] = dqa[j][3] = 0.f;

  const bool queries_tail = i0 + kBr > s;
  for (int t = 0; t < num_tiles; ++t) {
    const int st = t % C::kStages, j0 = t * kBc;
    cp_async_wait<C::kStages - 1>();  // this thread's copies of tile t (and Q, dO) have landed...
    __syncthreads();                  // ...and everyone's
    const bf16* sk = sm.k + st * C::kKVElems;
    const bf16* sv = sm.v + st * C::kKVElems;
    const bool masked = queries_tail || j0 + kBc > s || (causal && j0 + kBc - 1 > i0);
    if (masked) {
      bwd_v2b_dq_tile<C, true>(dqa, sm.q + 16 * warp * kLd, sm.dout + 16 * warp * kLd, sk, sv, m2,
                               dl, qw0, j0, s, causal, scale_log2, lane);
    } else {
      bwd_v2b_dq_tile<C, false>(dqa, sm.q + 16 * warp * kLd, sm.dout + 16 * warp * kLd, sk, sv, m2,
                                dl, qw0, j0, s, causal, scale_log2, lane);
    }
    __syncthreads();  // every warp is done with this stage's K and V
    issue_key_tile<C>(sm, kg, vg, t + C::kStages, num_tiles, s, tid);
  }

  // ---- epilogue: dQ = c x the accumulator, bf16, 4-byte stores of column pairs ----
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = qw0 + g + 8 * h;
    if (row < s) {
      bf16* dqr = dq + base + size_t(row) * kD;
#pragma unroll
      for (int j = 0; j < kDT; ++j) {
        *reinterpret_cast<uint32_t*>(dqr + 8 * j + 2 * t4) =
            pack_bf16(dqa[j][2 * h] * scale, dqa[j][2 * h + 1] * scale);
      }
    }
  }
}

// ---- workspace: [dQ accumulator: B H S D fp32][D_i: B H S fp32] --------------------------------
size_t dq_acc_bytes(const AttentionShape& s) {
  return gpu100::round_up(size_t(s.elements()) * sizeof(float), kAlign);
}
size_t workspace_for(const AttentionShape& s) {
  return dq_acc_bytes(s) + size_t(s.rows()) * sizeof(float);
}

template <class C, DqAdd kAdd>
void launch_main(const AttentionShape& s, const BackwardTensors<bf16>& t, const float* delta,
                 float* dq_acc, cudaStream_t stream) {
  static gpu100::PerDevice<bool> attr_set;  // the attribute is per GPU: set on each
  attr_set.get([] {
    CUDA_CHECK(cudaFuncSetAttribute(
        bwd_v2_kernel<C, kAdd>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(C::kSmemBytes)));
    return true;
  });
  const int num_key_tiles = gpu100::ceil_div(s.s, C::kBc);
  const int64_t blocks = s.heads() * num_key_tiles;
  bwd_v2_kernel<C, kAdd><<<static_cast<unsigned>(blocks), C::kThreads, C::kSmemBytes, stream>>>(
      t.q, t.k, t.v, t.dout, t.lse, delta, dq_acc, t.dk, t.dv, s.s, s.causal, softmax_scale(s.d),
      num_key_tiles);
  CUDA_CHECK_LAST();
}

template <class C>
void launch_dq_pass(const AttentionShape& s, const BackwardTensors<bf16>& t, const float* delta,
                    cudaStream_t stream) {
  constexpr size_t kBytes = DqSmem<C>::kBytes;
  static gpu100::PerDevice<bool> attr_set;  // the attribute is per GPU: set on each
  attr_set.get([] {
    CUDA_CHECK(cudaFuncSetAttribute(bwd_v2b_dq_kernel<C>,
                                    cudaFuncAttributeMaxDynamicSharedMemorySize, int(kBytes)));
    return true;
  });
  const int num_query_tiles = gpu100::ceil_div(s.s, C::kBr);
  const int64_t blocks = s.heads() * num_query_tiles;
  bwd_v2b_dq_kernel<C><<<static_cast<unsigned>(blocks), C::kThreads, kBytes, stream>>>(
      t.q, t.k, t.v, t.dout, t.lse, delta, t.dq, s.s, s.causal, softmax_scale(s.d),
      num_query_tiles);
  CUDA_CHECK_LAST();
}

// The shapes a launcher refuses (one line), beyond check_shape's. kWide: v2c and v2d's 128 keys
// per block, whose D = 128 tiling needs more shared memory than sm_86 / sm_89 give a block.
std::string refusal_for(const char* name, const AttentionShape& s, bool wide = false) {
  if (s.d != 64 && s.d != 128) {
    return fmt::format("{}: D must be 64 or 128 (got D = {})", name, s.d);
  }
  if (s.heads() * gpu100::ceil_div<int64_t>(s.s, 64) > int64_t(0x7fffffff)) {
    return fmt::format("{}: {} needs more than 2^31 - 1 blocks", name, shape_label(s));
  }
  if (wide && s.d == 128) {
    const size_t have = gpu100::smem_per_block_optin();  // 0: no GPU to ask
    if (have != 0 && have < BwdWideD128::kSmemBytes) {
      return fmt::format(
          "{}: D = 128 takes {} bytes of shared memory per block, this GPU allows {}", name,
          BwdWideD128::kSmemBytes, have);
    }
  }
  return "";
}

// The checks every launcher makes, in order, before any kernel launch.
void check_arguments(const char* name, const AttentionShape& s, const BackwardTensors<bf16>& t,
                     void* workspace, size_t workspace_bytes, size_t need, bool wide = false,
                     gpu100::ArchNeed arch = gpu100::ArchNeed::kSm80) {
  check_shape(s);
  if (const std::string why = refusal_for(name, s, wide); !why.empty()) {
    throw std::invalid_argument(why);
  }
  if (t.any_null() || workspace == nullptr) {
    throw std::invalid_argument(fmt::format("{}: null tensors or workspace", name));
  }
  const void* const pointers[] = {t.q, t.k, t.v, t.o, t.dout, t.dq, t.dk, t.dv, workspace};
  for (const void* p : pointers) {
    if (!gpu100::aligned16(p)) {
      throw std::invalid_argument(
          fmt::format("{}: the bf16 tensors and the workspace must be 16-byte aligned", name));
    }
  }
  if (workspace_bytes < need) {
    throw std::invalid_argument(
        fmt::format("{}: a workspace of {} bytes, {} needed", name, workspace_bytes, need));
  }
  gpu100::require_build(arch, name);
}

// bwd v2, v2c and v2d: the pre-pass, the main kernel with dQ's adds, the post-pass.
template <class C64, class C128, DqAdd kAdd>
void run_with_atomics(const AttentionShape& s, const BackwardTensors<bf16>& t, void* workspace,
                      cudaStream_t stream) {
  auto* ws = static_cast<char*>(workspace);
  float* dq_acc = reinterpret_cast<float*>(ws);
  float* delta = reinterpret_cast<float*>(ws + dq_acc_bytes(s));
  bwd::launch_prepass(t.dout, t.o, t.lse, delta, nullptr, dq_acc, s.heads(), s.s, s.s, s.d, stream);
  if (s.d == 64) {
    launch_main<C64, kAdd>(s, t, delta, dq_acc, stream);
  } else {
    launch_main<C128, kAdd>(s, t, delta, dq_acc, stream);
  }
  bwd::launch_postpass(dq_acc, t.dq, s.elements(), softmax_scale(s.d), stream);  // D % 16 == 0
}

}  // namespace

size_t bwd_v2_workspace_bytes(const AttentionShape& s) {
  return workspace_for(s);
}
size_t bwd_v2b_workspace_bytes(const AttentionShape& s) {
  return size_t(s.rows()) * sizeof(float);  // D_i only: dQ is written once, in bf16
}

std::string bwd_v2_refusal(const AttentionShape& s) {
  return refusal_for("bwd_v2_flash_mma", s);
}
std::string bwd_v2b_refusal(const AttentionShape& s) {
  return refusal_for("bwd_v2b_flash_mma_dq_pass", s);
}
std::string bwd_v2c_refusal(const AttentionShape& s) {
  return refusal_for("bwd_v2c_flash_mma_128_keys", s, true);
}
std::string bwd_v2d_refusal(const AttentionShape& s) {
  return refusal_for("bwd_v2d_flash_mma_vector_red", s, true);
}

void attention_bwd_v2_flash_mma(const AttentionShape& s, const BackwardTensors<bf16>& t,
                                void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  check_arguments("bwd_v2_flash_mma", s, t, workspace, workspace_bytes, workspace_for(s));
  run_with_atomics<BwdD64, BwdD128, DqAdd::kScalar>(s, t, workspace, stream);
}

void attention_bwd_v2c_flash_mma_128_keys(const AttentionShape& s, const BackwardTensors<bf16>& t,
                                          void* workspace, size_t workspace_bytes,
                                          cudaStream_t stream) {
  check_arguments("bwd_v2c_flash_mma_128_keys", s, t, workspace, workspace_bytes, workspace_for(s),
                  true);
  run_with_atomics<BwdWideD64, BwdWideD128, DqAdd::kScalar>(s, t, workspace, stream);
}

void attention_bwd_v2d_flash_mma_vector_red(const AttentionShape& s, const BackwardTensors<bf16>& t,
                                            void* workspace, size_t workspace_bytes,
                                            cudaStream_t stream) {
  check_arguments("bwd_v2d_flash_mma_vector_red", s, t, workspace, workspace_bytes,
                  workspace_for(s), true, gpu100::ArchNeed::kSm90);
  run_with_atomics<BwdWideD64, BwdWideD128, DqAdd::kVector2>(s, t, workspace, stream);
}

void attention_bwd_v2b_flash_mma_dq_pass(const AttentionShape& s, const BackwardTensors<bf16>& t,
                                         void* workspace, size_t workspace_bytes,
                                         cudaStream_t stream) {
  check_arguments("bwd_v2b_flash_mma_dq_pass", s, t, workspace, workspace_bytes,
                  bwd_v2b_workspace_bytes(s));
  float* delta = static_cast<float*>(workspace);
  bwd::launch_prepass(t.dout, t.o, t.lse, delta, nullptr, nullptr, s.heads(), s.s, s.s, s.d,
                      stream);
  // The two kernels are independent given D_i (dK, dV from one, dQ from the other); one stream
  // runs them one after the other.
  if (s.d == 64) {
    launch_main<BwdD64, DqAdd::kNone>(s, t, delta, nullptr, stream);
    launch_dq_pass<BwdD64>(s, t, delta, stream);
  } else {
    launch_main<BwdD128, DqAdd::kNone>(s, t, delta, nullptr, stream);
    launch_dq_pass<BwdD128>(s, t, delta, stream);
  }
}

}  // namespace day05
