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
// exit while its partner can still write into its shared memory or arrive on its barriers. A
// cluster barrier at the end of the kernel did that at first; now the producer, after its last
// copy, waits until the last stages are released by the consumers of both CTAs (as CUTLASS's
// producers do before they exit), and each CTA leaves once its own epilogue is done instead of
// waiting for its partner's. One A/B on an H200 (a trial build, three rounds, the best variant at
// each shape; results/h200/profiles.txt), ms: 1024^3 0.0105-0.0107 -> 0.0098-0.0102 (the kernel
// 8.93 -> 8.19-8.22 us under Nsight Compute), 2048^3 0.0298 -> 0.0289-0.0291, 512 x 4096 x 4096
// 0.0312-0.0317 -> 0.0305-0.0309, 4096^3 0.1838-0.1843 -> 0.1829-0.1837.
// The kernel is in gemm_v13_kernel.cuh, templated on its epilogue (here: C = alpha A B + beta C in
// fp32), so that day05 can run the same main loop with its own.
// Shapes TMA cannot describe (K or N not a multiple of 8: row strides that are no multiple of 16
// bytes, or misaligned pointers) had gone to v10's mma.sync kernel (no TMA, no wgmma). Here A
// and B are first copied into zero-padded buffers, [M, K8] and [K8, N8] (K8, N8: K, N rounded up
// to 8), and the TMA kernel runs on those; the zero columns of A meet the zero rows of B, so the
// product is unchanged, and the epilogue writes only the N real columns of C. The copies (2 x 2
// bytes per element of A and B, predicted about 0.05 ms at 4097^3) are part of the variant's time.
// TF32 (v13_wgmma_cluster_tf32): the same kernel, E = Tf32, on v11's K-major operands (B
// transposed first, in the time: wgmma_gemm::tf32_k_major). What changes from v11's TF32 is what
// changed from v11 to v13 in BF16 (a producer warpgroup, persistent clusters, multicast); in TF32 a
// stage holds B^T's 256 rows x 32 k, and each CTA multicasts one 128-row half. Measured against
// v11 on an H200 (results/h200/profiles.txt): 341 -> 350 TFLOP/s at 4096^3, 305 -> 344-357 at
// 8192^3, 250-254 -> 326-327 at 4096 x 14336 x 4096.
#include <cuda_bf16.h>

#include <string>

#include "common/arch.hpp"
#include "common/device_buffer.hpp"
#include "gemm.hpp"
#include "gemm_v13_kernel.cuh"
#include "wgmma_gemm.cuh"

namespace day04 {

namespace {

// dst [rows_p, cols_p] (cols_p % 8 == 0, 16-byte aligned) = src [rows, cols], zeros past rows
// and cols: one thread per 8 outputs, read as 2-byte loads (src's rows may start anywhere),
// written as one 16-byte store.
__global__ void stage_padded_kernel(const __nv_bfloat16* __restrict__ src, int rows, int cols,
                                    uint4* __restrict__ dst, int rows_p, int cols_p) {
  const int chunks = cols_p / 8;
  const int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= int64_t(rows_p) * chunks) return;
  const int r = int(t / chunks), c0 = int(t - int64_t(r) * chunks) * 8;
  uint32_t h[8];
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    h[j] = r < rows && c0 + j < cols ? __bfloat16_as_ushort(src[size_t(r) * cols + c0 + j]) : 0u;
  }
  dst[t] = make_uint4(h[0] | h[1] << 16, h[2] | h[3] << 16, h[4] | h[5] << 16, h[6] | h[7] << 16);
}

void stage_padded(const __nv_bfloat16* src, int rows, int cols,
                  gpu100::DeviceBuffer<__nv_bfloat16>& dst, int rows_p, int cols_p,
                  cudaStream_t stream) {
  const size_t count = size_t(rows_p) * cols_p;
  if (dst.size() < count) dst = gpu100::DeviceBuffer<__nv_bfloat16>(count);
  const int64_t threads = int64_t(rows_p) * (cols_p / 8);
  constexpr int kBlock = 256;
  stage_padded_kernel<<<unsigned(gpu100::ceil_div<int64_t>(threads, kBlock)), kBlock, 0, stream>>>(
      src, rows, cols, reinterpret_cast<uint4*>(dst.data()), rows_p, cols_p);
  CUDA_CHECK_LAST();
}

}  // namespace

std::string v13_row_note(GemmShape s) {
  if (s.k % 8 == 0 && s.n % 8 == 0) return "";
  return "K or N not a multiple of 8: A and B staged into zero-padded [M, K8] and [K8, N8] "
         "buffers for the TMA (the copies are in the time)";
}

// v13's launcher, with the order of its tile pairs (0: row-major) for v17 to reuse.
void gemm_v13_ordered(GemmShape s, float alpha, const __nv_bfloat16* a, const __nv_bfloat16* b,
                      float beta, float* c, cudaStream_t stream, int group) {
  if (!wgmma_gemm::tma_bf16_ok(s, a, b)) {  // strides TMA cannot describe: stage A and B
    const int k8 = gpu100::round_up(s.k, 8), n8 = gpu100::round_up(s.n, 8);
    thread_local gpu100::DeviceBuffer<__nv_bfloat16> staged_a, staged_b;  // they only grow
    stage_padded(a, s.m, s.k, staged_a, s.m, k8, stream);
    stage_padded(b, s.k, s.n, staged_b, k8, n8, stream);
    wgmma_gemm::launch_v13(GemmShape{s.m, n8, k8}, staged_a.data(), staged_b.data(),
                           wgmma_gemm::StoreC{c, s.m, s.n, alpha, beta}, stream, group);
    return;
  }
  wgmma_gemm::launch_v13(s, a, b, wgmma_gemm::StoreC{c, s.m, s.n, alpha, beta}, stream, group);
}

void gemm_v13_wgmma_cluster_bf16(GemmShape s, float alpha, const __nv_bfloat16* a,
                                 const __nv_bfloat16* b, float beta, float* c,
                                 cudaStream_t stream) {
  check_gemm_args(s, a, b, c);
  gpu100::require_build(gpu100::ArchNeed::kSm90a, "v13_wgmma_cluster_bf16");
  gemm_v13_ordered(s, alpha, a, b, beta, c, stream, 0);
}

// TF32: the same kernel on K-major operands (B transposed first, as in v11, its time included),
// each CTA multicasting half of B^T's tile.
void gemm_v13_ordered_tf32(GemmShape s, float alpha, const float* a, const float* b, float beta,
                           float* c, cudaStream_t stream, int group) {
  const wgmma_gemm::Tf32Operands ops = wgmma_gemm::tf32_k_major(s, a, b, stream);
  wgmma_gemm::launch_v13_tf32(GemmShape{s.m, s.n, ops.k4}, ops.a, ops.b_t,
                              wgmma_gemm::StoreC{c, s.m, s.n, alpha, beta}, stream, group);
}

void gemm_v13_wgmma_cluster_tf32(GemmShape s, float alpha, const float* a, const float* b,
                                 float beta, float* c, cudaStream_t stream) {
  check_gemm_args(s, a, b, c);
  gpu100::require_build(gpu100::ArchNeed::kSm90a, "v13_wgmma_cluster_tf32");
  gemm_v13_ordered_tf32(s, alpha, a, b, beta, c, stream, 0);
}

}  // namespace day04
