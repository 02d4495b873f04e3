// GEMM v15 (FP8 e4m3), gemm_v15_wgmma_fp8_overlap.cu: v14 with two wgmma accumulators, so that
// one k-tile's promotion runs while the next k-tile's products are on the tensor cores. What
// changed, and why it is faster:
//  - v14's consumer warpgroup issues a k-tile's 4 wgmma, waits for all of them (wait_group 0),
//    then adds them into its fp32 sum. Nothing of its own is queued on the tensor cores during
//    the wait's tail and the 64 adds; the other warpgroup's products should fill the gap, but the
//    two warpgroups drift into step (they wait on the same stages) and leave it open together.
//    Nsight Compute on v14 at 4096^3 (H200): the tensor pipe busy 56% of the time, L2 at 62% of
//    its peak, issue slots at 36%: neither memory nor issue is the limit, the gaps are.
//  - Here the warpgroup owns two wgmma accumulators and alternates: it issues k-tile t into one,
//    then waits only for k-tile t - 1 (wait_group 1), releases t - 1's stage and promotes t - 1
//    from the other while t runs. Its own next products are always queued behind the adds.
// What it costs: 64 more registers per consumer thread (192 for the three accumulators, of 232),
// and a loop unrolled by two so that each accumulator is a fixed set of registers.
// The rest is v14's: 128 x 128 tiles, one per block; 2 consumer warpgroups of 64 x 128 and a TMA
// producer warpgroup; 6 stages of 32 KB; the epilogue C = scale_a scale_b acc in bf16.
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>

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

#if !GPU100_SM90A_CODE
#pragma nv_diag_suppress 177  // this target compiles the kernel body out, leaving its constants
#endif

namespace day04 {

namespace {

using namespace day04::wgmma;

using namespace day04::fp8_gemm;  // the tile, the stages, the producer, the epilogue

// One block per 128 x 128 output tile (blockIdx.x along N, blockIdx.y along M). Warpgroups 0 and
// 1 consume (rows 64 wg .. 64 wg + 63 of the tile), warpgroup 2 produces.
__global__ void __launch_bounds__(kThreads, 1)
    gemm_v15_kernel(int m, int n, int k, const float* __restrict__ scale_a,
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
  const int row0 = blockIdx.y * kBM, col0 = blockIdx.x * kBN;
  const int num_ktiles = gpu100::ceil_div(k, kBK);  // the last one zero-filled past K by TMA

  if (tid == 0) init_barriers(full, empty);
  __syncthreads();  // the only block-wide barrier: the producer warpgroup leaves below

  // k-tile t uses stage t % kStages, in phase t / kStages of that stage's barriers.
  if (wg == 2) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kProducerRegs));
    if (tid == 256) {
      for (int t = 0; t < num_ktiles; ++t) {
        const int s = t % kStages;
        if (t >= kStages) mbar_wait(&empty[s], (t / kStages - 1) & 1);  // all 8 warps done
        uint8_t* stage = smem + s * kStageBytes;
        mbar_expect_tx(&full[s], kStageBytes);  // whole boxes count, zero-filled parts too
        tma_load_2d(stage, &map_a, t * kBK, row0, &full[s]);
        tma_load_2d(stage + kABytes, &map_bt, t * kBK, col0, &full[s]);
      }
    }
    return;
  }
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kConsumerRegs));

  const float scale = *scale_a * *scale_b;  // read once, long before the epilogue needs it
  float acc[64], d0[64], d1[64];            // the promoted fp32 sum; two wgmma accumulators
#pragma unroll
  for (int i = 0; i < 64; ++i) acc[i] = 0.f;
  // Issue k-tile t's 4 wgmma into d (v14's products: this warpgroup's 64 rows of A, all 128 rows
  // of B^T, both K-major; kk == 0 starts d from zero).
  auto issue = [&](float(&d)[64], int t) {
    const int s = t % kStages;
    mbar_wait(&full[s], (t / kStages) & 1);  // k-tile t has landed
    const uint8_t* stage = smem + s * kStageBytes;
    fence();  // d was read by the adds below: order those reads before the wgmma writes it
#pragma unroll
    for (int kk = 0; kk < kBK / kKStep; ++kk) {
      wgmma_m64n128k32_e4m3_ss(d, make_desc(stage + wg * 64 * 128 + kk * kKStep, 16, 1024),
                               make_desc(stage + kABytes + kk * kKStep, 16, 1024), kk > 0);
    }
    commit();
  };
  // k-tile t's products (in d) are complete: release its stage, promote d into acc.
  auto retire = [&](const float(&d)[64], int t) {
    __syncwarp();
    if (lane == 0) mbar_arrive(&empty[t % kStages]);  // the producer may refill it
#pragma unroll
    for (int i = 0; i < 64; ++i) acc[i] += d[i];
  };
  // k-tiles alternate between d0 (even t) and d1 (odd t); wait<1> leaves only the newest group
  // running, so the older one is complete when it is promoted.
  issue(d0, 0);
  int t = 1;
  for (; t + 1 < num_ktiles; t += 2) {
    issue(d1, t);
    wait<1>();
    retire(d0, t - 1);
    issue(d0, t + 1);
    wait<1>();
    retire(d1, t);
  }
  if (t < num_ktiles) {  // an even count: one k-tile left for d1
    issue(d1, t);
    wait<1>();
    retire(d0, t - 1);
    wait<0>();
    retire(d1, t);
  } else {  // an odd count: the last k-tile is in d0
    wait<0>();
    retire(d0, t - 1);
  }

  store_registers(acc, scale, c, m, n, row0, col0, wg, tid);
#else
  (void)m, (void)n, (void)k, (void)scale_a, (void)scale_b, (void)c, (void)map_a, (void)map_bt;
#endif
}

}  // namespace

void gemm_v15_wgmma_fp8_overlap(GemmShape s, const __nv_fp8_e4m3* a, const __nv_fp8_e4m3* b_t,
                                const float* scale_a, const float* scale_b, __nv_bfloat16* c,
                                cudaStream_t stream) {
  check_gemm_fp8_args(s, a, b_t, scale_a, scale_b, c);  // before any CUDA call
  gpu100::require_build(gpu100::ArchNeed::kSm90a, "v15_wgmma_fp8_overlap");
  static gpu100::PerDevice<bool> configured;  // per GPU: set on each it runs on
  configured.get([] {
    CUDA_CHECK(cudaFuncSetAttribute(gemm_v15_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    int(kSmemBytes)));
    return true;
  });
  const dim3 grid(unsigned(gpu100::ceil_div(s.n, kBN)), unsigned(gpu100::ceil_div(s.m, kBM)));
  gemm_v15_kernel<<<grid, kThreads, kSmemBytes, stream>>>(s.m, s.n, s.k, scale_a, scale_b, c,
                                                          make_tma_map_2d(a, s.m, s.k, kBM, kBK),
                                                          make_tma_map_2d(b_t, s.n, s.k, kBN, kBK));
  CUDA_CHECK_LAST();
}

}  // namespace day04
