// GEMM v21 (BF16), gemm_v21_wgmma_staged_bf16.cu: v17 with its outputs written through shared
// memory by the TMA.
// What changed, and why it is faster:
//  - v17's epilogue stores each consumer thread's 128 sums straight from the registers: 64 eight-
//    byte stores a thread while the same warps would otherwise issue the next tile's products.
//  - Here each consumer warpgroup writes its 64 x 256 fp32 part of the tile in 4 passes of 64
//    columns through a 16 KB staging tile (two 64 x 32 boxes in the 128-byte swizzle): the
//    warps write their pairs (8-byte shared stores, a warp's 8 rows in 8 different 16-byte
//    columns: no bank conflict), one thread hands the boxes to the TMA and the next pass waits
//    only until the copy has read the staging tile. The last pass's copy runs while the
//    warpgroup multiplies the next tile.
//  - Measured in one build against v17 (an H200, two rounds, results/h200/profiles.txt): 4096^3
//    710 -> 731 TFLOP/s, 8192^3 772 -> 782, 4096 x 4096 x 14336 798 -> 803, 16384 x 6144 x 4096
//    737 -> 751: 0.5-3%, where FP8's v20 gained 15-17% from the same step. v17's register stores
//    already fill whole 32-byte sectors (4 lanes x 8 bytes of one row), where FP8's v19 wrote
//    each sector half at a time, and for the same time of products (a BF16 tile of 128 x 256
//    takes as long as four FP8 tiles of 128 x 128) v17 issues 64 stores a thread, v19 128: the
//    stores v21 takes off the warps cost v17 less to begin with.
// What it costs: 33 KB of shared memory (231 KB with v13's 4 stages), and the TMA's rules for C:
// rows of whole 16-byte units (N % 4 == 0, which v13's N % 8 == 0 covers) and a 16-byte aligned
// C. With beta != 0 (C is read) or another C, v17's register epilogue runs.
#include <cuda.h>
#include <cuda_bf16.h>

#include "common/arch.hpp"
#include "common/math.hpp"
#include "gemm.hpp"
#include "gemm_v13_kernel.cuh"
#include "tma.hpp"

namespace day04 {

// A named namespace, not an anonymous one: in builds without sm_90a the kernel's body, the only
// caller of the epilogue, is compiled out, and nvcc warns about an unused function of internal
// linkage.
namespace v21 {

// Bands of 8 pair rows (2048 rows of C), where v17 has 4: with the staged stores the wider band
// measured 1-2% faster at 8192^3, 4096 x 14336 x 4096 and 16384 x 6144 x 4096 and 2.4% at 16384^3
// (one round; an H200, results/h200/profiles.txt); 2 pair rows were 1-3% slower there.
constexpr int kGroupPairRows = 8;

// C = alpha A B through shared memory and the TMA (beta == 0).
struct StoreCStaged {
  static constexpr int kStagingBytes = 2 * 16384;  // 16 KB a consumer warpgroup
  CUtensorMap map_c;                               // fp32 C in 64-row x 32-column boxes
  float alpha;
  __device__ __forceinline__ void operator()(const float (&d)[128], int row0, int col0, int wg,
                                             uint8_t* staging) const {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    using namespace day04::wgmma;
    const int tid = threadIdx.x % 128, lane = tid % 32, warp = tid / 32;
    constexpr int kBox = 64 * 128;  // bytes: 64 rows of 32 fp32
#pragma unroll
    for (int pass = 0; pass < wgmma_gemm::kBN / 64; ++pass) {
      // The staging tile is free once the previous copy (this tile's or the last tile's) has
      // read it.
      if (tid == 0) bulk_wait_read_all();
      asm volatile("bar.sync %0, 128;\n" ::"r"(1 + wg) : "memory");
      // Register 4j + 2h + {0, 1}: row 16 warp + lane / 4 + 8 h, columns 8 j + 2 (lane % 4) + {0,
      // 1}; this pass's j are 8 pass .. 8 pass + 7. Column c of the pass is in box c / 32, 16-byte
      // chunk (c % 32) / 4 of its row, at byte 4 (c % 4) inside it.
#pragma unroll
      for (int jj = 0; jj < 8; ++jj) {
        const int j = 8 * pass + jj, col = 8 * jj + 2 * (lane % 4);
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int row = 16 * warp + lane / 4 + 8 * h;
          uint8_t* const addr =
              staging + (col / 32) * kBox + swizzle128(row, (col % 32) / 4) + 4 * (col % 4);
          *reinterpret_cast<float2*>(addr) =
              make_float2(alpha * d[4 * j + 2 * h], alpha * d[4 * j + 2 * h + 1]);
        }
      }
      fence_proxy_async_smem();  // the stores, before the TMA (async proxy) reads them
      asm volatile("bar.sync %0, 128;\n" ::"r"(1 + wg) : "memory");
      if (tid == 0) {  // parts past C's edges are not written
        tma_store_2d(&map_c, staging, col0 + 64 * pass, row0 + 64 * wg);
        tma_store_2d(&map_c, staging + kBox, col0 + 64 * pass + 32, row0 + 64 * wg);
        bulk_commit();
      }
    }
#else
    (void)d, (void)row0, (void)col0, (void)wg, (void)staging;
#endif
  }
};

}  // namespace v21

void gemm_v21_wgmma_staged_bf16(GemmShape s, float alpha, const __nv_bfloat16* a,
                                const __nv_bfloat16* b, float beta, float* c, cudaStream_t stream) {
  check_gemm_args(s, a, b, c);
  gpu100::require_build(gpu100::ArchNeed::kSm90a, "v21_wgmma_staged_bf16");
  if (beta != 0.f || !wgmma_gemm::tma_bf16_ok(s, a, b) || !gpu100::aligned16(c)) {
    gemm_v17_wgmma_grouped_bf16(s, alpha, a, b, beta, c, stream);
    return;
  }
  const v21::StoreCStaged epilogue{make_tma_map_2d(c, s.m, s.n, 64, 32), alpha};
  wgmma_gemm::launch_v13(s, a, b, epilogue, stream, v21::kGroupPairRows);
}

}  // namespace day04
