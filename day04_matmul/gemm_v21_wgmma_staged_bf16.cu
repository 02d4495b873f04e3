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
//  - Its tile order takes bands of 8 pair rows (2048 rows of C, kStagedGroupPairRows) where v17
//    takes 4: with the staged stores the wider band measured 1-2% faster at 8192^3, 4096 x 14336 x
//    4096 and 16384 x 6144 x 4096 and 2.4% at 16384^3 (one round); 2 pair rows were 1-3% slower.
// The epilogue, StoreCStaged<false>, lives in gemm_v13_kernel.cuh beside v13's own (v22 uses its
// adding form).
// What it costs: 33 KB of shared memory (231 KB with v13's 4 stages), and the TMA's rules for C:
// rows of whole 16-byte units (N % 4 == 0, which v13's N % 8 == 0 covers) and a 16-byte aligned
// C. With beta != 0 (C is read) or another C, v17's register epilogue runs.
// TF32 (v21_wgmma_staged_tf32): the same epilogue on v17's TF32 form; measured (an H200) 348 -> 356
// TFLOP/s at 4096^3 and 347 -> 356 at 4096 x 14336 x 4096. Its remaining gap to cuBLAS at 4096^3
// (0.91x) is B's transpose, about 35 of its 386 us (Nsight Compute).
#include <cuda.h>
#include <cuda_bf16.h>

#include "common/arch.hpp"
#include "common/math.hpp"
#include "gemm.hpp"
#include "gemm_v13_kernel.cuh"
#include "tma.hpp"

namespace day04 {

void gemm_v21_wgmma_staged_bf16(GemmShape s, float alpha, const __nv_bfloat16* a,
                                const __nv_bfloat16* b, float beta, float* c, cudaStream_t stream) {
  check_gemm_args(s, a, b, c);
  gpu100::require_build(gpu100::ArchNeed::kSm90a, "v21_wgmma_staged_bf16");
  if (!wgmma_gemm::staged_bf16_ok(s, a, b, beta, c)) {
    gemm_v17_wgmma_grouped_bf16(s, alpha, a, b, beta, c, stream);
    return;
  }
  const wgmma_gemm::StoreCStaged<false> epilogue{make_tma_map_2d(c, s.m, s.n, 64, 32), alpha};
  wgmma_gemm::launch_v13(s, a, b, epilogue, stream, wgmma_gemm::kStagedGroupPairRows);
}

// TF32: the same epilogue on v13's TF32 form (B transposed first, its time included). C's rows
// must be whole 16-byte units for the TMA (N % 4 == 0); other shapes, and beta != 0, run v17's
// TF32 form.
void gemm_v21_wgmma_staged_tf32(GemmShape s, float alpha, const float* a, const float* b,
                                float beta, float* c, cudaStream_t stream) {
  check_gemm_args(s, a, b, c);
  gpu100::require_build(gpu100::ArchNeed::kSm90a, "v21_wgmma_staged_tf32");
  if (beta != 0.f || s.n % 4 != 0 || !gpu100::aligned16(c)) {
    gemm_v17_wgmma_grouped_tf32(s, alpha, a, b, beta, c, stream);
    return;
  }
  const wgmma_gemm::Tf32Operands ops = wgmma_gemm::tf32_k_major(s, a, b, stream);
  const wgmma_gemm::StoreCStaged<false> epilogue{make_tma_map_2d(c, s.m, s.n, 64, 32), alpha};
  wgmma_gemm::launch_v13_tf32(GemmShape{s.m, s.n, ops.k4}, ops.a, ops.b_t, epilogue, stream,
                              wgmma_gemm::kStagedGroupPairRows);
}

}  // namespace day04
