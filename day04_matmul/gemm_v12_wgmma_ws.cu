// GEMM v12 (BF16), gemm_v12_wgmma_ws.cu: v11 made warp-specialised and persistent. What changed,
// and why it is faster:
//  - the copies belong to a producer warpgroup: one thread of it issues every TMA box, and
//    setmaxnreg gives its registers to the two consumer warpgroups. Stages are handed over with
//    mbarriers both ways, `full` (the bytes landed) and `empty` (all 8 consumer warps are done
//    with the stage), so the consumers never meet at a __syncthreads (v11 has one per k-tile) and
//    a stage is refilled as soon as its last reader is done;
//  - the grid is one block per SM, each looping over output tiles (tile blockIdx.x, + gridDim.x,
//    ...). The producer runs ahead into the next tile's k-tiles while the consumers are still in
//    the previous tile's epilogue, so the pipeline is not drained and refilled at every tile (at
//    4096^3 a tile is 64 k-tiles, and v11 pays the fill, the drain and the stores of the epilogue
//    with no copy in flight).
// (The producer / consumer split and the persistent tile loop are those of CUTLASS's
// warp-specialised Hopper GEMMs and of FlashAttention-3; day05's v5 is built the same way.)
#include <cuda.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>

#include "common/arch.cuh"
#include "common/arch.hpp"
#include "common/cuda_check.hpp"
#include "common/device_buffer.hpp"
#include "common/math.hpp"
#include "common/occupancy.hpp"
#include "gemm.hpp"
#include "tma.hpp"
#include "transpose.hpp"
#include "wgmma_gemm.cuh"

#if !GPU100_SM90A_CODE
#pragma nv_diag_suppress 177  // this target compiles the kernel bodies out, leaving their constants
#endif

namespace day04 {

using namespace wgmma_gemm;

__global__ void __launch_bounds__(kThreadsWS, 1)
    gemm_v12_kernel(int m, int n, int k, float alpha, float beta, float* __restrict__ c,
                    const __grid_constant__ CUtensorMap map_a,
                    const __grid_constant__ CUtensorMap map_b) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int kBK = Bf16::kBK;
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023);
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + kStages * kStageBytes);
  uint64_t* empty = full + kStages;
  auto stage = [&](int s) { return smem + s * kStageBytes; };

  const int tid = threadIdx.x, wg = tid / 128, lane = tid % 32;
  const int tiles_n = gpu100::ceil_div(n, kBN);
  const int num_out_tiles = tiles_n * gpu100::ceil_div(m, kBM);
  const int num_ktiles = gpu100::ceil_div(k, kBK);

  if (tid == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbar_init(&full[s], 1);   // the producer's expect_tx arrival
      mbar_init(&empty[s], 8);  // one arrival per consumer warp
    }
    mbar_fence_init();
  }
  __syncthreads();  // the last block-wide barrier: the producer warpgroup leaves below

  // `it` counts the k-tiles this block has gone through over all its output tiles: k-tile `it`
  // uses stage it % kStages, in phase it / kStages of that stage's barriers.
  if (wg == 2) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kProducerRegs));
    if (tid == 256) {
      int it = 0;
      for (int tile = blockIdx.x; tile < num_out_tiles; tile += gridDim.x) {
        const int row0 = (tile / tiles_n) * kBM, col0 = (tile % tiles_n) * kBN;
        for (int t = 0; t < num_ktiles; ++t, ++it) {
          const int s = it % kStages;
          if (it >= kStages) mbar_wait(&empty[s], (it / kStages - 1) & 1);
          issue_ktile<Bf16>(stage(s), &map_a, &map_b, row0, col0, t, &full[s]);
        }
      }
    }
    return;
  }
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kConsumerRegs));

  auto release = [&](int s) {  // this warp is done reading stage s
    __syncwarp();
    if (lane == 0) mbar_arrive(&empty[s]);
  };
  int it = 0;
  for (int tile = blockIdx.x; tile < num_out_tiles; tile += gridDim.x) {
    const int row0 = (tile / tiles_n) * kBM, col0 = (tile % tiles_n) * kBN;
    float d[128];
#pragma unroll
    for (int i = 0; i < 128; ++i) d[i] = 0.f;
    for (int t = 0; t < num_ktiles; ++t, ++it) {
      const int s = it % kStages;
      mbar_wait(&full[s], (it / kStages) & 1);  // k-tile t has landed
      fence();
      mma_ktile<Bf16>(d, stage(s), wg);
      commit();
      wait<1>();  // k-tile t - 1's multiplies are done: its stage goes back to the producer
      if (t >= 1) release((it - 1) % kStages);
    }
    wait<0>();
    release((it - 1) % kStages);
    store_tile(d, c, m, n, row0, col0, wg, alpha, beta);
  }
#else
  (void)m, (void)n, (void)k, (void)alpha, (void)beta, (void)c, (void)map_a, (void)map_b;
#endif
}

void gemm_v12_wgmma_ws_bf16(GemmShape s, float alpha, const __nv_bfloat16* a,
                            const __nv_bfloat16* b, float beta, float* c, cudaStream_t stream) {
  check_gemm_args(s, a, b, c);
  gpu100::require_build(gpu100::ArchNeed::kSm90a, "v12_wgmma_ws_bf16");
  if (!tma_bf16_ok(s, a, b)) {
    gemm_v10_mma_bf16(s, alpha, a, b, beta, c, stream);  // TMA cannot describe these strides
    return;
  }
  static gpu100::PerDevice<int> num_sms_per_gpu;  // per GPU: asked on each it runs on
  const int num_sms = num_sms_per_gpu.get([] {
    int device = 0, sms = 0;
    CUDA_CHECK(cudaGetDevice(&device));
    CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    CUDA_CHECK(cudaFuncSetAttribute(gemm_v12_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    int(kSmemBytes)));
    return sms;
  });
  const int64_t tiles = int64_t(gpu100::ceil_div(s.m, kBM)) * gpu100::ceil_div(s.n, kBN);
  const int grid = static_cast<int>(std::min<int64_t>(tiles, num_sms));  // one block per SM
  gemm_v12_kernel<<<grid, kThreadsWS, kSmemBytes, stream>>>(
      s.m, s.n, s.k, alpha, beta, c, make_tma_map_2d(a, s.m, s.k, kBM, Bf16::kBK),
      make_tma_map_2d(b, s.k, s.n, Bf16::kBK, 64));
  CUDA_CHECK_LAST();
}

}  // namespace day04
