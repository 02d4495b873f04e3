// GEMM v24 (BF16), gemm_v24_wgmma_narrow_bf16.cu: v22 with a narrower tile for shapes whose
// 128 x 256 tiles leave the GPU's clusters idle.
// What changed, and why it is faster:
//  - v21 and v22 give each CTA a 128 x 256 tile. At 1024^3 that is 32 CTAs of 132 SMs; v22 then
//    cuts K into slices, but at 1024^3 it only went from 120 to 122 TFLOP/s: the slices' inputs and
//    their 16 MB of fp32 additions crowd the L2 in the same few microseconds (Nsight Compute).
//  - Here the same kernel runs tiles of 128 x 64 (gemm_v13_kernel with E = Bf16Narrow): 4x the
//    tiles, each CTA a whole K, no additions. Each warpgroup multiplies 64 x 64 per wgmma
//    (m64n64k16); a stage's B is one box of 64 k-rows x 64 columns, and the two CTAs of a cluster
//    (two tiles one above the other) each load one 32-row half of it, multicast to both. The
//    epilogue is v21's in one pass of 64 columns.
//  - Which tile: narrow where the wide pairs leave clusters idle, the narrow pairs fit on the
//    GPU at once and keep at least as many SMs busy as v22's slices would, and those slices would
//    be short (16 k-tiles or fewer). Otherwise v22 runs (K split where its pairs still leave
//    clusters idle): a 64-column tile's products read shared memory at the rate it can give (per
//    k-step, 4 KB of A and 2 x 2 KB of B for 64 x 64 x 16 x 2 products in each warpgroup), so per
//    SM they run slower than the wide tile's, and long slices of the wide tile win (at 256 x 4096
//    x 14336 both keep 128 SMs on the same products each: v22 1.16x faster).
//  - Its pipeline holds 8 stages of 24 KB (v21: 4 of 48 KB): a k-tile of the narrow tile is about
//    260 cycles of products, and 4 of them did not cover the TMA's latency (1024^3: 171 TFLOP/s
//    with 4 stages, 204 with 8).
//  - Predicted at 1024^3: 64 tile pairs of 128 x 64 on 128 SMs, 16 k-tiles each of about 260
//    cycles on the tensor cores (4,100 in all, 2.3 us). Each CTA reads 320 KB from L2 (its 128
//    rows of A, half of its 64 columns of B), about 3 us at 60 bytes a cycle: the kernel near 5-6
//    us against v21's 16 (cuBLAS's kernel, 128 x 64 tiles on 128 CTAs too, takes 7.4).
//    Measured (an H200, results/h200/profiles.txt): the kernel 8.8 us, the call 0.0104 ms against
//    v22's 0.0173 (204 against 123 TFLOP/s; cuBLAS 0.0090 ms, 238).
// What it costs: a second instance of v13's kernel (E = Bf16Narrow, StoreCStaged<false, 64>), and
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
using wgmma_gemm::Bf16Narrow;
using Narrow = wgmma_gemm::StoreCStaged<false, Bf16Narrow::kBN>;

// v22's slices of this many k-tiles or fewer run the narrow tiles instead. Measured (an H200,
// results/h200/profiles.txt): narrow faster at slices of 4 to 16 k-tiles (1024^3, 768^3, 1024 x
// 1024 x 2048 and x 4096, 512 x 2048 x 4096: 1.1-1.6x), v22 faster at 56 (256 x 4096 x 14336:
// 1.16x); nothing measured between.
constexpr int kMaxSliceKtiles = 16;

// Whether shape s runs the narrow tiles: the wide tile pairs leave clusters idle; the narrow ones
// fit on the GPU at once, and keep at least as many SMs busy as v22's (pair, slice) items would;
// and v22's slices would be short.
bool narrow_for(GemmShape s) {
  // Both kernels take the same threads and shared memory, so as many clusters of either fit. (The
  // wide kernel is not asked here: this file would compile its own copy of it, and two copies of
  // one kernel in two files may not share the attribute set on one of them.)
  const int64_t clusters = wgmma_gemm::v13_max_clusters<Narrow, false, Bf16Narrow>();
  const int64_t wide = wgmma_gemm::v13_pairs<Bf16>(s),
                narrow = wgmma_gemm::v13_pairs<Bf16Narrow>(s);
  if (wide >= clusters || narrow > clusters) return false;
  const int splits = v22_splits(s);
  if (narrow < wide * splits) return false;
  return gpu100::ceil_div(gpu100::ceil_div(s.k, Bf16::kBK), splits) <= kMaxSliceKtiles;
}

}  // namespace

bool v24_narrow(GemmShape s) {
  return narrow_for(s);
}

std::string v24_row_note(GemmShape s) {
  if (!gpu100::build_has(gpu100::ArchNeed::kSm90a)) return "";  // no kernel to ask about
  std::string note = v13_row_note(s);  // shapes the TMA cannot describe go to v17, staged
  if (!note.empty()) return note;
  if (narrow_for(s)) return "128 x 64 tiles";
  note = v22_row_note(s);
  return note.empty() ? "" : "128 x 256 tiles, " + note;
}

void gemm_v24_wgmma_narrow_bf16(GemmShape s, float alpha, const __nv_bfloat16* a,
                                const __nv_bfloat16* b, float beta, float* c, cudaStream_t stream) {
  check_gemm_args(s, a, b, c);
  gpu100::require_build(gpu100::ArchNeed::kSm90a, "v24_wgmma_narrow_bf16");
  // Calls the staged epilogue cannot take, and shapes the wide tile serves as well, run v22
  // (which sends the former on to v21 and v17).
  if (!wgmma_gemm::staged_bf16_ok(s, a, b, beta, c) || !narrow_for(s)) {
    gemm_v22_wgmma_splitk_bf16(s, alpha, a, b, beta, c, stream);
    return;
  }
  const Narrow epilogue{make_tma_map_2d(c, s.m, s.n, 64, 32), alpha};
  wgmma_gemm::launch_v13_maps<Narrow, false, Bf16Narrow>(
      s, make_tma_map_2d(a, s.m, s.k, wgmma_gemm::kBM, Bf16Narrow::kBK),
      make_tma_map_2d(b, s.k, s.n, Bf16Narrow::kBK / 2, Bf16Narrow::kBN), epilogue, stream,
      wgmma_gemm::kStagedGroupPairRows);
}

}  // namespace day04
