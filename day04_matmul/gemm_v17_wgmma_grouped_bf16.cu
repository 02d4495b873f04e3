// GEMM v17 (BF16), gemm_v17_wgmma_grouped_bf16.cu: v13 with its tile pairs in grouped order. What
// changed, and why it is faster:
//  - v13's clusters take their pairs of tiles (256 rows x 256 columns of C) in row-major order,
//    66 at a time on 132 SMs. At 16384^3 a row of pairs is 64 pairs wide, so the pairs in flight
//    cover about one row of pairs and every column of B: the 512 MB of B stream from DRAM again
//    for every row of pairs, and the GEMM slows down (661 TFLOP/s on an H200 against 772 at
//    8192^3, in the size sweep).
//  - Here the pairs are taken in bands of 4 pair rows (1024 rows of C), each band column by
//    column (wgmma_gemm::grouped_tile). The 66 pairs in flight then span 4 pair rows and about 17
//    columns: at each k-step they read 4 slices of A and 17 of B instead of 1 and 64, and each
//    slice is read from L2 by 4 to 17 clusters at about the same time.
// What it costs: nothing in the kernel (the order is one function of the pair index); small
// problems, whose pairs all fit in one wave, see no difference.
// The kernel is v13's (gemm_v13_kernel.cuh) with its order argument set, and so is the staging of
// shapes TMA cannot describe.
// TF32 (v17_wgmma_grouped_tf32): the same order on v13's TF32 form; measured (an H200) level with
// it at 4096^3 (348 TFLOP/s) and 6% faster at 4096 x 14336 x 4096 (347 against 326-327).
#include <cuda_bf16.h>

#include "common/arch.hpp"
#include "gemm.hpp"

namespace day04 {

namespace {
constexpr int kGroupPairRows = 4;  // pair rows per band: 1024 rows of C
}  // namespace

void gemm_v17_wgmma_grouped_bf16(GemmShape s, float alpha, const __nv_bfloat16* a,
                                 const __nv_bfloat16* b, float beta, float* c,
                                 cudaStream_t stream) {
  check_gemm_args(s, a, b, c);
  gpu100::require_build(gpu100::ArchNeed::kSm90a, "v17_wgmma_grouped_bf16");
  gemm_v13_ordered(s, alpha, a, b, beta, c, stream, kGroupPairRows);
}

void gemm_v17_wgmma_grouped_tf32(GemmShape s, float alpha, const float* a, const float* b,
                                 float beta, float* c, cudaStream_t stream) {
  check_gemm_args(s, a, b, c);
  gpu100::require_build(gpu100::ArchNeed::kSm90a, "v17_wgmma_grouped_tf32");
  gemm_v13_ordered_tf32(s, alpha, a, b, beta, c, stream, kGroupPairRows);
}

}  // namespace day04
