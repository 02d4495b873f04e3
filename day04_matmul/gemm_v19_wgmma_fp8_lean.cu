// GEMM v19 (FP8 e4m3), gemm_v19_wgmma_fp8_lean.cu: v18 with its main loop's bookkeeping cut down.
// What changed, and why it is faster:
//  - Nsight Compute on v16 beside cuBLASLt's FP8 kernel at 4096^3 (an H200), both on 128 x 128 x
//    128 tiles in 6 stages: v16 executes a third more instructions (42 M against 32 M) and its ALU
//    pipe is 19% busy against 7.6%. Per k-tile each consumer warp rebuilt 8 shared-memory
//    descriptors from addresses (masks, shifts, ors on 64 bits) and divided its k-tile count by
//    the stage count twice (stage = g % 6, phase = g / 6).
//  - Here each consumer builds its two descriptors once, for stage 0 and k-step 0. A stage is
//    kStageBytes further on and a k-step 32 bytes, and a descriptor's low 14 bits are the address
//    / 16, so the descriptor of stage s, k-step kk is the base + s x kStageBytes / 16 + 2 kk: one
//    64-bit add. The stage and its phase bit are counters that wrap (one for the k-tiles issued,
//    one for those released) instead of a division.
//  - Measured as a trial form of v18 in one build (two rounds each, an H200): 1092 -> 1148 TFLOP/s
//    at 4096^3, 1219 -> 1271 at 8192^3, 1166 -> 1219 at 4096 x 14336 x 4096; 42.7 M -> 35.8 M
//    instructions (results/h200/profiles.txt).
// What it costs: nothing; the address field must not carry into bit 14, which holds for any
// shared-memory address (< 228 KB, so / 16 < 2^14).
// The rest is v18's: grouped tile order, persistent blocks, two wgmma accumulators per consumer
// warpgroup, promotion every 128 of k, a TMA producer warpgroup, 6 stages of 32 KB, the epilogue.
// The new main loop is LeanMainLoop in fp8_gemm.cuh, where v20 uses it too; this file keeps the
// kernel around it.
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <cstdint>

#include "common/arch.cuh"
#include "common/arch.hpp"
#include "common/cuda_check.hpp"
#include "common/math.hpp"
#include "common/occupancy.hpp"
#include "fp8_gemm.cuh"
#include "gemm.hpp"
#include "tma.hpp"
#include "wgmma.cuh"
#include "wgmma_gemm.cuh"

#if !GPU100_SM90A_CODE
#pragma nv_diag_suppress 177  // this target compiles the kernel body out, leaving its constants
#endif

namespace day04 {

namespace {

using namespace day04::wgmma;

using namespace day04::fp8_gemm;  // the tile, the stages, the producer, the epilogue

constexpr int kGroupRows = 8;  // tile rows per band of the grouped order: 1024 rows of C

// One block per SM, looping over the 128 x 128 output tiles (tile blockIdx.x, then + gridDim.x,
// ...). Warpgroups 0 and 1 consume (rows 64 wg .. 64 wg + 63 of the tile), warpgroup 2 produces.
__global__ void __launch_bounds__(kThreads, 1)
    gemm_v19_kernel(int m, int n, int k, const float* __restrict__ scale_a,
                    const float* __restrict__ scale_b, __nv_bfloat16* __restrict__ c,
                    const __grid_constant__ CUtensorMap map_a,
                    const __grid_constant__ CUtensorMap map_bt) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ uint8_t smem_raw[];
  // The 128-byte swizzle repeats every 1024 bytes: stages start on a 1024-byte boundary.
  uint8_t* smem = smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023);
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + kStages * kStageBytes);
  uint64_t* empty = full + kStages;

  const int tid = threadIdx.x, wg = tid / 128, lane = tid % 32;
  const int tiles_m = gpu100::ceil_div(m, kBM), tiles_n = gpu100::ceil_div(n, kBN);
  const int num_tiles = tiles_m * tiles_n;
  const int num_ktiles = gpu100::ceil_div(k, kBK);  // the last one zero-filled past K by TMA

  if (tid == 0) init_barriers(full, empty);
  __syncthreads();  // the only block-wide barrier: the producer warpgroup leaves below

  // The g-th k-tile this block handles (counted across its tiles) uses stage g % kStages, in
  // phase g / kStages of that stage's barriers.
  if (wg == 2) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kProducerRegs));
    if (tid == 256) {
      produce_persistent(smem, full, empty, &map_a, &map_bt, num_tiles, num_ktiles, [&](int tile) {
        const int2 tc = wgmma_gemm::grouped_tile(tile, tiles_m, tiles_n, kGroupRows);
        return make_int2(tc.x * kBM, tc.y * kBN);
      });
    }
    return;
  }
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kConsumerRegs));

  const float scale = *scale_a * *scale_b;  // read once, long before the epilogue needs it
  float acc[64], d0[64], d1[64];            // the promoted fp32 sum; two wgmma accumulators
  LeanMainLoop main_loop(smem, full, empty, wg, lane);
  for (int tile = blockIdx.x; tile < num_tiles; tile += gridDim.x) {
    const int2 tc = wgmma_gemm::grouped_tile(tile, tiles_m, tiles_n, kGroupRows);
    const int row0 = tc.x * kBM, col0 = tc.y * kBN;
    main_loop.tile(acc, d0, d1, num_ktiles);

    store_registers(acc, scale, c, m, n, row0, col0, wg, tid);
  }
#else
  (void)m, (void)n, (void)k, (void)scale_a, (void)scale_b, (void)c, (void)map_a, (void)map_bt;
#endif
}

}  // namespace

void gemm_v19_wgmma_fp8_lean(GemmShape s, const __nv_fp8_e4m3* a, const __nv_fp8_e4m3* b_t,
                             const float* scale_a, const float* scale_b, __nv_bfloat16* c,
                             cudaStream_t stream) {
  check_gemm_fp8_args(s, a, b_t, scale_a, scale_b, c);  // before any CUDA call
  gpu100::require_build(gpu100::ArchNeed::kSm90a, "v19_wgmma_fp8_lean");
  const unsigned blocks = persistent_blocks<gemm_v19_kernel, kSmemBytes>(s);  // one block per SM
  gemm_v19_kernel<<<blocks, kThreads, kSmemBytes, stream>>>(
      s.m, s.n, s.k, scale_a, scale_b, c, make_tma_map_2d(a, s.m, s.k, kBM, kBK),
      make_tma_map_2d(b_t, s.n, s.k, kBN, kBK));
  CUDA_CHECK_LAST();
}

}  // namespace day04
