// GEMM v13 (BF16), gemm_v13_wgmma_cluster.cu: v12 on clusters of 2 CTAs with TMA multicast. What
// changed, and why it is faster: the two CTAs of a cluster compute vertically adjacent tiles (rows
// row0 and row0 + 128, the same 256 columns), so they need the same B tile. Each CTA loads its own
// A box and half of the B boxes, and multicasts those to both CTAs: every B byte leaves L2 once for
// two tiles, so a pair of tiles reads 2 x 16 + 32 = 64 KB per k-tile instead of 96 KB. (Arithmetic:
// at 700 TFLOP/s, v12's 128 x 256 tiles read 768 bytes per 65536 FLOPs from L2, about 8 TB/s.) The
// price is a cluster-wide hand-over: a stage of CTA r is written by both CTAs' producers, so a
// producer may refill stage s only when the consumers of both CTAs have released it: each consumer
// warp arrives on the `empty` barrier of both CTAs (16 arrivals per phase), the second one remotely
// (mapa + mbarrier.arrive.shared::cluster; the producer waits with cluster-scope acquire). The
// `full` barrier of each CTA expects the whole 48 KB, whichever CTA's copy brought it. No CTA may
// exit while its partner can still write into its shared memory or arrive on its barriers: a
// cluster barrier ends the kernel.
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
#include "gemm.hpp"
#include "tma.hpp"
#include "transpose.hpp"
#include "wgmma_gemm.cuh"

#if !GPU100_SM90A_CODE
#pragma nv_diag_suppress 177  // this target compiles the kernel bodies out, leaving their constants
#endif

namespace day04 {

using namespace wgmma_gemm;

__global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(kThreadsWS, 1)
    gemm_v13_kernel(int m, int n, int k, float alpha, float beta, float* __restrict__ c,
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
  const uint32_t rank = cluster_rank();
  const int tiles_n = gpu100::ceil_div(n, kBN);
  const int pairs_m = gpu100::ceil_div(gpu100::ceil_div(m, kBM), 2);
  const int num_pairs = tiles_n * pairs_m;  // one per cluster at a time
  const int num_ktiles = gpu100::ceil_div(k, kBK);
  const int cluster = blockIdx.x / 2, num_clusters = gridDim.x / 2;

  if (tid == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbar_init(&full[s], 1);
      mbar_init(&empty[s], 16);  // 8 consumer warps x 2 CTAs
    }
    mbar_fence_init();
  }
  cluster_sync();  // both CTAs' barriers exist before either copies or arrives

  if (wg == 2) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kProducerRegs));
    if (tid == 256) {
      int it = 0;
      for (int p = cluster; p < num_pairs; p += num_clusters) {
        const int row0 = ((p / tiles_n) * 2 + int(rank)) * kBM, col0 = (p % tiles_n) * kBN;
        for (int t = 0; t < num_ktiles; ++t, ++it) {
          const int s = it % kStages;
          if (it >= kStages) mbar_wait_cluster(&empty[s], (it / kStages - 1) & 1);
          mbar_expect_tx(&full[s], kStageBytes);  // A here + all of B, from both CTAs
          tma_load_2d(stage(s), &map_a, t * kBK, row0, &full[s]);
#pragma unroll
          for (int q = 2 * int(rank); q < 2 * int(rank) + 2; ++q) {
            tma_load_2d_multicast(stage(s) + kABytes + q * 8192, &map_b, col0 + 64 * q, t * kBK,
                                  &full[s], 0x3);
          }
        }
      }
    }
  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kConsumerRegs));
    auto release = [&](int s) {  // this warp is done with stage s, in both CTAs' books
      __syncwarp();
      if (lane == 0) {
        mbar_arrive_cluster(&empty[s], 0);
        mbar_arrive_cluster(&empty[s], 1);
      }
    };
    int it = 0;
    for (int p = cluster; p < num_pairs; p += num_clusters) {
      const int row0 = ((p / tiles_n) * 2 + int(rank)) * kBM, col0 = (p % tiles_n) * kBN;
      float d[128];
#pragma unroll
      for (int i = 0; i < 128; ++i) d[i] = 0.f;
      for (int t = 0; t < num_ktiles; ++t, ++it) {
        const int s = it % kStages;
        mbar_wait(&full[s], (it / kStages) & 1);
        fence();
        mma_ktile<Bf16>(d, stage(s), wg);
        commit();
        wait<1>();
        if (t >= 1) release((it - 1) % kStages);
      }
      wait<0>();
      release((it - 1) % kStages);
      store_tile(d, c, m, n, row0, col0, wg, alpha, beta);  // rows past m (odd tile count) skip
    }
  }
  __syncwarp();    // the producer warp's lanes reconverge after thread 256's loop
  cluster_sync();  // the partner may still arrive on our barriers until here
#else
  (void)m, (void)n, (void)k, (void)alpha, (void)beta, (void)c, (void)map_a, (void)map_b;
#endif
}

void gemm_v13_wgmma_cluster_bf16(GemmShape s, float alpha, const __nv_bfloat16* a,
                                 const __nv_bfloat16* b, float beta, float* c,
                                 cudaStream_t stream) {
  check_gemm_args(s, a, b, c);
  gpu100::require_build(gpu100::ArchNeed::kSm90a, "v13_wgmma_cluster_bf16");
  if (!tma_bf16_ok(s, a, b)) {
    gemm_v10_mma_bf16(s, alpha, a, b, beta, c, stream);  // TMA cannot describe these strides
    return;
  }
  // How many 2-CTA clusters of this kernel fit on the GPU at once (the GPCs' SM counts decide).
  static const int max_clusters = [] {
    CUDA_CHECK(cudaFuncSetAttribute(gemm_v13_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    int(kSmemBytes)));
    cudaLaunchConfig_t config{};
    config.gridDim = dim3(2);
    config.blockDim = dim3(kThreadsWS);
    config.dynamicSmemBytes = kSmemBytes;
    cudaLaunchAttribute attr{};
    attr.id = cudaLaunchAttributeClusterDimension;
    attr.val.clusterDim.x = 2;
    attr.val.clusterDim.y = 1;
    attr.val.clusterDim.z = 1;
    config.attrs = &attr;
    config.numAttrs = 1;
    int clusters = 0;
    CUDA_CHECK(cudaOccupancyMaxActiveClusters(&clusters, gemm_v13_kernel, &config));
    if (clusters < 1) throw std::runtime_error("v13: no 2-CTA cluster fits on this GPU");
    return clusters;
  }();
  const int64_t pairs =
      int64_t(gpu100::ceil_div(gpu100::ceil_div(s.m, kBM), 2)) * gpu100::ceil_div(s.n, kBN);
  const int clusters = static_cast<int>(std::min<int64_t>(pairs, max_clusters));
  gemm_v13_kernel<<<2 * clusters, kThreadsWS, kSmemBytes, stream>>>(
      s.m, s.n, s.k, alpha, beta, c, make_tma_map_2d(a, s.m, s.k, kBM, Bf16::kBK),
      make_tma_map_2d(b, s.k, s.n, Bf16::kBK, 64));
  CUDA_CHECK_LAST();
}

}  // namespace day04
