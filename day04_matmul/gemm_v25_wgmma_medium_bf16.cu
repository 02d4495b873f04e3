// GEMM v25 (BF16), gemm_v25_wgmma_medium_bf16.cu: v24 with a 128 x 128 tile for shapes whose
// 128 x 256 tile pairs fill half the GPU's clusters or less.
// What changed, and why it is faster:
//  - At 512 x 4096 x 4096 v21's 128 x 256 tiles make 32 pairs for 66 clusters; v22 cuts K in 2
//    slices (64 items on 128 SMs), which costs a memset of C (8 MB) before the kernel and 16 MB
//    of fp32 additions in L2, and v24's 128 x 64 tiles make 128 pairs, too many for one round.
//  - Here the same kernel runs tiles of 128 x 128 (gemm_v13_kernel with E = Bf16Medium): twice
//    v21's tiles, each CTA a whole K, C stored once, no memset and no additions. Each warpgroup
//    multiplies 64 x 128 per wgmma (m64n128k16); a stage's B is two 64-column boxes, one loaded by
//    each CTA of the cluster and multicast to both; 6 stages of 32 KB; v21's epilogue in 2 passes.
//  - Which tile: medium where the wide pairs leave clusters idle, the medium pairs fit on the GPU
//    at once, v24 would not run its narrow tiles (they keep twice as many SMs busy where they
//    fit), and v22 would cut K into 2 slices or fewer: then each medium CTA does as many products
//    as each of v22's (half the columns, twice the k-tiles) without the additions. With 3 slices
//    or more v22's CTAs do fewer products than a medium CTA would, and v22 runs.
//  - Per k-tile a CTA reads 16 KB of A and 8 KB of B from L2 and receives 32 KB (B's other half
//    from its partner), for about 512 cycles of products: 64 bytes a cycle into the SM, about
//    what v24's narrow tiles took in while their products waited (24 KB a k-tile in about 360
//    cycles at 1024^3), against v21's 48. So the medium tile is for the shapes above only; the
//    wide tile stays faster wherever its pairs fill the GPU.
//  - Predicted at 512 x 4096 x 4096: 128 CTAs, 64 k-tiles of about 512 cycles each (the same 32,800
//    cycles of products as a v22 item), about 19 us at 1.75 GHz, plus the pipeline's fill and
//    the last epilogue (2-3 us): a call near 0.023 ms against v22's 0.036 (cuBLAS 0.028).
//  - Measured (an H200, one build, two rounds, results/h200/profiles.txt), the call in ms, v22 ->
//    v25 (cuBLAS): 512 x 4096 x 4096 0.0357-0.0359 -> 0.0299-0.0301 (0.0279-0.0282), 1024 x 2048 x
//    8192 0.0547-0.0548 -> 0.0500-0.0501 (0.0471-0.0473), 256 x 8192 x 8192 0.0581-0.0582 ->
//    0.0548-0.0550 (0.0544-0.0556), 512 x 3072 x 8192 0.0513-0.0519 -> 0.0479-0.0481 (0.0425-
//    0.0429). The prediction missed by 7 us: the kernel alone takes 27.5 us (Nsight Compute) at
//    1.71 GHz, 47,000 cycles for 32,800 of products (tensor pipe 67% busy). cuBLAS runs the same
//    tile, 128 x 128 x 64 in 6 stages on 128 CTAs in clusters of 2, in 25.7 us (72%) while reading
//    a third fewer L2 sectors: that difference is the next thing to find.
//  - The rule, checked by forcing the medium tiles (a trial switch, not kept): slower than v24's
//    narrow tiles at 1024^3 (0.0124 against 0.0104 ms) and 512 x 2048 x 4096 (0.0273 / 0.0213),
//    and than v22's 4 slices at 1024 x 1024 x 8192 (0.0472 / 0.0345) and 256 x 4096 x 14336
//    (0.0786 / 0.0520).
// What it costs: a third instance of v13's kernel (E = Bf16Medium, StoreCStaged<false, 128>), and
// the choice of tile, made on the host from the shape and the GPU's cluster count.
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <string>

#include "common/arch.hpp"
#include "common/cuda_check.hpp"
#include "common/math.hpp"
#include "gemm.hpp"
#include "gemm_v13_kernel.cuh"
#include "tma.hpp"

namespace day04 {

namespace {

using wgmma_gemm::Bf16;
using wgmma_gemm::Bf16Medium;
using Medium = wgmma_gemm::StoreCStaged<false, Bf16Medium::kBN>;

// Whether shape s runs the medium tiles (see the header comment). Only this file's kernel is
// asked for its cluster count: the other tiles' kernels live in their own files (v24's note).
bool medium_for(GemmShape s) {
  const int64_t clusters = wgmma_gemm::v13_max_clusters<Medium, false, Bf16Medium>();
  const int64_t wide = wgmma_gemm::v13_pairs<Bf16>(s),
                medium = wgmma_gemm::v13_pairs<Bf16Medium>(s);
  if (wide >= clusters || medium > clusters) return false;
  return !v24_narrow(s) && v22_splits(s) <= 2;
}

}  // namespace

std::string v25_row_note(GemmShape s) {
  if (!gpu100::build_has(gpu100::ArchNeed::kSm90a)) return "";  // no kernel to ask about
  std::string note = v13_row_note(s);  // shapes the TMA cannot describe go to v17, staged
  if (!note.empty()) return note;
  if (medium_for(s)) return "128 x 128 tiles";
  return v24_row_note(s);
}

void gemm_v25_wgmma_medium_bf16(GemmShape s, float alpha, const __nv_bfloat16* a,
                                const __nv_bfloat16* b, float beta, float* c, cudaStream_t stream) {
  check_gemm_args(s, a, b, c);
  gpu100::require_build(gpu100::ArchNeed::kSm90a, "v25_wgmma_medium_bf16");
  // Calls the staged epilogue cannot take, and shapes another tile serves better, run v24 (which
  // sends them on to v22, v21 and v17 as before).
  if (!wgmma_gemm::staged_bf16_ok(s, a, b, beta, c) || !medium_for(s)) {
    gemm_v24_wgmma_narrow_bf16(s, alpha, a, b, beta, c, stream);
    return;
  }
  const Medium epilogue{make_tma_map_2d(c, s.m, s.n, 64, 32), alpha};
  wgmma_gemm::launch_v13_maps<Medium, false, Bf16Medium>(
      s, make_tma_map_2d(a, s.m, s.k, wgmma_gemm::kBM, Bf16Medium::kBK),
      make_tma_map_2d(b, s.k, s.n, Bf16Medium::kBK, 64), epilogue, stream,
      wgmma_gemm::kStagedGroupPairRows);
}

}  // namespace day04
