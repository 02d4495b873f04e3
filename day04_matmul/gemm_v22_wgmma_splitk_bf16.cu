// GEMM v22 (BF16), gemm_v22_wgmma_splitk_bf16.cu: v21 with K split into slices when the tile pairs
// alone leave the GPU's clusters idle.
// What changed, and why it is faster:
//  - v21 gives each 2-CTA cluster one pair of 128 x 256 tiles at a time. At 1024^3 that is 16
//    pairs, 32 of the 132 SMs; the other 100 wait, and v21 runs at half of cuBLAS's rate there
//    (cuBLAS picks smaller tiles).
//  - Here, when the pairs are fewer than the clusters that fit, each pair's k-tiles are cut into
//    `splits` slices (as many as fill the GPU, at least kMinKtilesPerSlice k-tiles each), and each
//    (pair, slice) is a work item of its own. An item's partial sums go out through v21's staged
//    epilogue, but with the TMA's reducing copy (cp.reduce.async.bulk .add): the L2 adds the
//    slices of a tile into C, which is zeroed first. No second kernel, no workspace.
//  - Predicted at 1024^3: 64 items instead of 16, each 4 k-tiles of 64; the products spread over
//    4x the SMs, against one 4 MB memset of C and 16 MB of fp32 additions in L2 (4 slices of C).
//  - Measured (an H200, against v21, results/h200/profiles.txt): 256 x 4096 x 14336 219 -> 574
//    TFLOP/s (4 slices, level with cuBLAS), 1024 x 2048 x 8192 408 -> 607, 512 x 4096 x 4096 369 ->
//    465 (2 slices each); 1024^3 120 -> 122 only: its inputs and 16 MB of additions crowd the L2 in
//    the same few microseconds (Nsight Compute), so small squares want smaller tiles instead.
// What it costs: the memset (in the time), fp32 additions whose order varies from run to run (the
// sums differ in their last bits between runs; the check's tolerance covers it), and it needs
// beta == 0 as v21's epilogue does. Shapes with enough pairs run v21 unchanged.
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "common/arch.hpp"
#include "common/cuda_check.hpp"
#include "common/math.hpp"
#include "gemm.hpp"
#include "gemm_v13_kernel.cuh"
#include "tma.hpp"

namespace day04 {

namespace {

using Epilogue = wgmma_gemm::StoreCStaged<true>;
constexpr int kMinKtilesPerSlice = 4;  // as deep as the pipeline: each slice fills it once

// The number of k-slices for shape s: 1 when the tile pairs already fill the clusters that fit.
int splits_for(GemmShape s) {
  const int64_t pairs = wgmma_gemm::v13_pairs(s);
  const int max_clusters = wgmma_gemm::v13_max_clusters<Epilogue, true>();
  const int ktiles = gpu100::ceil_div(s.k, wgmma_gemm::Bf16::kBK);
  if (pairs >= max_clusters) return 1;
  const int64_t by_clusters = max_clusters / pairs, by_k = ktiles / kMinKtilesPerSlice;
  return static_cast<int>(std::max<int64_t>(1, std::min(by_clusters, by_k)));
}

}  // namespace

int v22_splits(GemmShape s) {
  return splits_for(s);
}

std::string v22_row_note(GemmShape s) {
  if (!gpu100::build_has(gpu100::ArchNeed::kSm90a)) return "";  // no kernel to ask about
  std::string note = v13_row_note(s);  // shapes the TMA cannot describe go to v17, staged
  if (!note.empty()) return note;
  const int splits = splits_for(s);
  if (splits == 1) return "";
  return "K in " + std::to_string(splits) +
         " slices, each added into C by the TMA (C zeroed first, in the time)";
}

void gemm_v22_wgmma_splitk_bf16(GemmShape s, float alpha, const __nv_bfloat16* a,
                                const __nv_bfloat16* b, float beta, float* c, cudaStream_t stream) {
  check_gemm_args(s, a, b, c);
  gpu100::require_build(gpu100::ArchNeed::kSm90a, "v22_wgmma_splitk_bf16");
  // Calls the staged epilogue cannot take, and shapes whose pairs fill the GPU, run v21 (which
  // sends the former on to v17).
  const int splits = wgmma_gemm::staged_bf16_ok(s, a, b, beta, c) ? splits_for(s) : 1;
  if (splits == 1) {
    gemm_v21_wgmma_staged_bf16(s, alpha, a, b, beta, c, stream);
    return;
  }
  CUDA_CHECK(cudaMemsetAsync(c, 0, size_t(s.m) * size_t(s.n) * sizeof(float), stream));
  const Epilogue epilogue{make_tma_map_2d(c, s.m, s.n, 64, 32), alpha};
  wgmma_gemm::launch_v13<Epilogue, true>(s, a, b, epilogue, stream,
                                         wgmma_gemm::kStagedGroupPairRows, splits);
}

}  // namespace day04
