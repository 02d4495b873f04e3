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
// The kernel is in gemm_v13_kernel.cuh, templated on its epilogue (here: C = alpha A B + beta C in
// fp32), so that day05 can run the same main loop with its own.
#include <cuda_bf16.h>

#include "common/arch.hpp"
#include "gemm.hpp"
#include "gemm_v13_kernel.cuh"

namespace day04 {

void gemm_v13_wgmma_cluster_bf16(GemmShape s, float alpha, const __nv_bfloat16* a,
                                 const __nv_bfloat16* b, float beta, float* c,
                                 cudaStream_t stream) {
  check_gemm_args(s, a, b, c);
  gpu100::require_build(gpu100::ArchNeed::kSm90a, "v13_wgmma_cluster_bf16");
  if (!wgmma_gemm::tma_bf16_ok(s, a, b)) {
    gemm_v10_mma_bf16(s, alpha, a, b, beta, c, stream);  // TMA cannot describe these strides
    return;
  }
  wgmma_gemm::launch_v13(s, a, b, wgmma_gemm::StoreC{c, s.m, s.n, alpha, beta}, stream);
}

}  // namespace day04
