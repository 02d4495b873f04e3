#pragma once
// day04: the pieces the Hopper GEMMs v11 (gemm_v11_wgmma.cu), v12 (gemm_v12_wgmma_ws.cu) and v13
// (gemm_v13_wgmma_cluster.cu) share: the tile sizes and shared-memory budget, the element types'
// differences, the TMA issue of one k-tile, the wgmma of one k-tile and the epilogue. Device code
// here runs only in sm_90a targets (the kernels that call it compile their bodies there only).
#include <cuda.h>
#include <cuda_bf16.h>

#include <cstdint>
#include <type_traits>

#include "common/math.hpp"
#include "gemm.hpp"
#include "wgmma.cuh"

namespace day04::wgmma_gemm {

using namespace day04::wgmma;

inline constexpr int kBM = 128, kBN = 256, kStages = 4, kThreads = 256;
inline constexpr int kABytes = kBM * 128;              // 16 KB: 128 rows of 128 bytes of k
inline constexpr int kBBytes = kBN * 128;              // 32 KB: 128 bytes of k for 256 columns
inline constexpr int kStageBytes = kABytes + kBBytes;  // 48 KB
inline constexpr size_t kSmemBytes =
    size_t(kStages) * kStageBytes + 1024 /* alignment slack */ + 128;
// v12: 2 consumer warpgroups + 1 producer warpgroup (a whole one: setmaxnreg works on
// warpgroups), whose registers go to the consumers: (40 + 2 x 232) x 128 <= 64 K.
inline constexpr int kThreadsWS = 384, kProducerRegs = 40, kConsumerRegs = 232;

// The index-th output tile in grouped order, as (tile row, tile column): the tiles are walked in
// bands of `group` tile rows, each band column by column, so that the tiles in flight at once (one
// per block, in index order) share a few rows of A and a few columns of B, which then stay in L2.
// In plain row-major order the blocks in flight span one or two rows of tiles and every column of
// B, which at large N no longer fits in L2. (Triton's and CUTLASS's "grouped" or "swizzled"
// rasterisation.)
__device__ __forceinline__ int2 grouped_tile(int index, int tiles_m, int tiles_n, int group) {
  const int per_band = group * tiles_n;
  const int band = index / per_band, first_row = band * group;
  const int rows = min(group, tiles_m - first_row);  // the last band may be shorter
  const int local = index - band * per_band;
  return make_int2(first_row + local % rows, local / rows);
}

// What differs between the two element types.
// kBN: the columns of C a CTA's tile spans (gemm_v13_kernel's tiles are kBM x E::kBN); kStages:
// gemm_v13_kernel's pipeline depth.
struct Bf16 {
  using T = __nv_bfloat16;
  static constexpr int kBK = 64, kKStep = 16;  // k per stage (128 bytes), k per wgmma
  static constexpr int kBN = 256, kStages = 4;
};
struct Tf32 {
  using T = float;
  static constexpr int kBK = 32, kKStep = 8;
  static constexpr int kBN = 256, kStages = 4;
};
// v24's narrow tiles: BF16 in tiles of 128 x 64, for shapes whose 128 x 256 tiles leave SMs idle.
// A stage's B is one 64 k-row x 64-column box, which the two CTAs of a cluster load as one 32-row
// half each, multicast to both.
struct Bf16Narrow {
  using T = __nv_bfloat16;
  static constexpr int kBK = 64, kKStep = 16;
  static constexpr int kBN = 64, kStages = 8;  // the 4 x 48 KB of shared memory as 8 x 24 KB
};
// v25's medium tiles: BF16 in tiles of 128 x 128, for shapes whose 128 x 256 tile pairs fill half
// the GPU's clusters or less and whose 128 x 128 pairs fit on it at once. A stage's B is two
// 64 k-row x 64-column boxes (8 KB apart, as in Bf16), one loaded by each CTA of a cluster and
// multicast to both.
struct Bf16Medium {
  using T = __nv_bfloat16;
  static constexpr int kBK = 64, kKStep = 16;
  static constexpr int kBN = 128, kStages = 6;  // the 4 x 48 KB of shared memory as 6 x 32 KB
};
// v23's TF32 without the transpose: D = C^T = B^T A^T, so that B (K x N, row-major, N-major)
// supplies the wgmma's A operand from registers, loaded from its N-major tile in any layout the
// threads choose, and A (M x K, row-major: K-major) is the wgmma's B operand in shared memory.
struct Tf32Nt {
  using T = float;
  static constexpr int kBK = 32, kKStep = 8;
  static constexpr int kBN = 256, kStages = 4;
};

// The pieces v11 and v12 share. A stage holds A (128 rows x 128 bytes of k) and then B: in BF16
// four boxes of 64 k-rows x 64 columns (8 KB apart), in TF32 one box of 256 rows of the
// transposed B x 32 k.
// One thread issues the TMA boxes of k-tile t of the output tile at (row0, col0) into a stage.
template <typename E>
__device__ __forceinline__ void issue_ktile(uint8_t* stage, const CUtensorMap* map_a,
                                            const CUtensorMap* map_b, int row0, int col0, int t,
                                            uint64_t* full) {
  constexpr int kBK = E::kBK;
  mbar_expect_tx(full, kStageBytes);
  tma_load_2d(stage, map_a, t * kBK, row0, full);
  if constexpr (std::is_same_v<E, Bf16>) {
#pragma unroll
    for (int q = 0; q < kBN / 64; ++q) {
      tma_load_2d(stage + kABytes + q * 8192, map_b, col0 + 64 * q, t * kBK, full);
    }
  } else {
    tma_load_2d(stage + kABytes, map_b, t * kBK, col0, full);
  }
}

// Warpgroup wg's multiplies of one k-tile (issued, not waited for): d += A[wg's 64 rows] * B.
template <typename E>
__device__ __forceinline__ void mma_ktile(float (&d)[E::kBN / 2], const uint8_t* stage, int wg) {
  // The k-tile's two base descriptors; each k-step's is a 32-bit add away (desc_at: the start
  // address is the low 14 bits, address / 16), not rebuilt from an address.
  // A: this warpgroup's 64 rows (8 KB further for warpgroup 1); each k-step is 32 bytes further
  // inside every 128-byte row; SBO = 1024 B between groups of 8 rows.
  const uint64_t da0 = make_desc(stage + wg * 64 * 128, 16, 1024);
  // B in BF16, N-major: a k-step is 16 k-rows = 2048 B further; LBO = 8192 B to the next
  // 64-column box, SBO = 1024 B between groups of 8 k-rows. In TF32, K-major like A: 256 rows of
  // 128 bytes, a k-step is 32 bytes further in each row.
  // Bf16Narrow: one 64-column box, the same k-step; Bf16Medium: two boxes, as Bf16's four.
  constexpr bool kBf16 = std::is_same_v<typename E::T, __nv_bfloat16>;
  const uint64_t db0 = make_desc(stage + kABytes, kBf16 ? 8192 : 16, 1024);
#pragma unroll
  for (int kk = 0; kk < E::kBK / E::kKStep; ++kk) {
    const uint64_t da = desc_at(da0, kk * (32 >> 4));
    if constexpr (E::kBN == 64) {
      wgmma_m64n64k16_bf16_ss_major<0, 1>(d, da, desc_at(db0, kk * (2048 >> 4)), 1);
    } else if constexpr (E::kBN == 128) {
      wgmma_m64n128k16_bf16_ss_major<0, 1>(d, da, desc_at(db0, kk * (2048 >> 4)), 1);
    } else if constexpr (kBf16) {
      wgmma_m64n256k16_bf16(d, da, desc_at(db0, kk * (2048 >> 4)));
    } else {
      wgmma_m64n256k8_tf32(d, da, desc_at(db0, kk * (32 >> 4)));
    }
  }
}

// v23 (Tf32Nt): warpgroup wg's multiplies of one k-tile (issued, not waited for): B's fragments
// loaded from the stage into f, then d += B^T[the warpgroup's 64 columns of B] * A^T[256 rows of
// A], 4 k-steps of 8. The stage's first 16 KB hold this CTA's 128 columns of B as 4 TMA boxes of
// 32 columns x 32 k (128-byte rows in the 128-byte swizzle: chunk c of 16 bytes in row k lies at
// chunk c ^ (k % 8)); warpgroup wg reads boxes 2 wg (a[0], a[2]) and 2 wg + 1 (a[1], a[3]). The
// fragment row g of warp w holds column 4 w + 16 (g / 4) + g % 4 of its box (v23_column), so
// that the 32 lanes of a load, chunks w and w + 4 against k % 8 = t, touch 32 different banks.
// A's part is K-major as the TF32 B^T of v13's form was: the same descriptor.
__device__ __forceinline__ void mma_ktile_nt(float (&d)[128], uint32_t (&f)[16],
                                             const uint8_t* stage, int wg) {
  const int lane = threadIdx.x % 32, w = (threadIdx.x % 128) / 32, g = lane / 4, t = lane % 4;
  const int c = w + 4 * (g / 4), i = g % 4;
  const uint32_t* box = reinterpret_cast<const uint32_t*>(stage + 2 * wg * 4096);
  const int lo = (t * 128 + ((c ^ t) * 16) + i * 4) / 4;              // k = t, in words
  const int hi = ((t + 4) * 128 + ((c ^ (t + 4)) * 16) + i * 4) / 4;  // k = t + 4
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {  // k-step kk: 8 rows of 128 bytes further, the same chunks
    f[4 * kk + 0] = box[lo + kk * 256];
    f[4 * kk + 1] = box[1024 + lo + kk * 256];
    f[4 * kk + 2] = box[hi + kk * 256];
    f[4 * kk + 3] = box[1024 + hi + kk * 256];
  }
  fence();  // the registers written above, before the wgmma reads them
  const uint64_t db0 = make_desc(stage + kABytes, 16, 1024);
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
    const uint32_t a[4] = {f[4 * kk], f[4 * kk + 1], f[4 * kk + 2], f[4 * kk + 3]};
    wgmma_m64n256k8_tf32_rs(d, a, desc_at(db0, kk * (32 >> 4)));
  }
}

// The column of B (within the warpgroup's 64) that accumulator row r (0..15) of warp w holds in
// v23: rows r < 8 come from box 0, rows r >= 8 from box 1, each in mma_ktile_nt's order.
__device__ __forceinline__ int v23_column(int w, int r) {
  const int g = r % 8;
  return 32 * (r / 8) + 4 * w + 16 * (g / 4) + g % 4;
}

// Epilogue of warpgroup wg: C = alpha d + beta C on its 64 x 256 part of the tile. Register
// 4j + {0, 1}: row lane / 4, columns 8j + 2 (lane % 4) + {0, 1} of this warp's 16-row slice;
// registers 4j + {2, 3}: the same columns, 8 rows further down. When N is even and C 8-byte
// aligned, each column pair is one 8-byte access (col is even, so col < n means col + 1 < n too).
__device__ __forceinline__ void store_tile(const float (&d)[128], float* __restrict__ c, int m,
                                           int n, int row0, int col0, int wg, float alpha,
                                           float beta) {
  const bool pairs = n % 2 == 0 && reinterpret_cast<uintptr_t>(c) % 8 == 0;
  for_each_pair(d, m, n, row0, col0, wg, threadIdx.x, [&](int row, int col, float d0, float d1) {
    float* out = c + size_t(row) * n + col;
    const float v0 = alpha * d0, v1 = alpha * d1;
    if (pairs) {
      float2 r = make_float2(v0, v1);
      if (beta != 0.f) {
        const float2 old = *reinterpret_cast<const float2*>(out);
        r.x += beta * old.x;
        r.y += beta * old.y;
      }
      *reinterpret_cast<float2*>(out) = r;
    } else {
      out[0] = v0 + (beta != 0.f ? beta * out[0] : 0.f);
      if (col + 1 < n) out[1] = v1 + (beta != 0.f ? beta * out[1] : 0.f);
    }
  });
}

// The BF16 shapes and pointers TMA can describe (16-byte row strides and addresses); v11-v13
// send every other BF16 call to v10.
inline bool tma_bf16_ok(GemmShape s, const void* a, const void* b) {
  return s.k % 8 == 0 && s.n % 8 == 0 && gpu100::aligned16(a) && gpu100::aligned16(b);
}

// TF32's operands made K-major for the TMA (v11, and v13, v17 and v21 in TF32): B (K x N) becomes
// B^T (N x K4) by day04's padded transpose, K4 = K rounded up to 4 so that every row is a multiple
// of 16 bytes, the pad columns zeroed; A is copied into a zero-padded M x K4 buffer when K % 4 != 0
// or A is not 16-byte aligned, and used in place otherwise. The copies are enqueued on `stream`
// (their time is the caller's) into buffers that live as long as the calling thread and only grow,
// so that timed runs allocate nothing. Host code (gemm_v11_wgmma.cu).
struct Tf32Operands {
  const float* a;    // M x k4
  const float* b_t;  // N x k4
  int k4;
};
Tf32Operands tf32_k_major(GemmShape s, const float* a, const float* b, cudaStream_t stream);

}  // namespace day04::wgmma_gemm
