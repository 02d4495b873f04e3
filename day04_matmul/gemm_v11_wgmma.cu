// GEMM v11: Hopper wgmma + TMA (kernel code only in sm_90a targets; elsewhere refused), BF16
// and TF32. What changed from v10, and why it is faster:
//  - the tile copies are done by the TMA engine: one thread describes a whole 2D box (a
//    CUtensorMap made on the host) and the hardware moves it into shared memory, in the 128-byte
//    swizzled layout the tensor cores read without bank conflicts, zero-filling outside the matrix,
//    and signals an mbarrier with the byte count when it lands. No thread spends instructions on
//    addresses or predicates;
//  - wgmma: a warpgroup (4 warps, 128 threads) issues one asynchronous m64n256k16 (BF16) or
//    m64n256k8 (TF32) multiply whose operands both come straight from shared memory (through
//    64-bit matrix descriptors): no ldmatrix, no fragment registers. v10's mma.sync needed a warp
//    instruction per 16 x 8 x 16.
// Tiles: 128 x 256 x (128 bytes of k) per block, two warpgroups of 64 x 256 (128 fp32 accumulators
// per thread), a 4-stage TMA pipeline (48 KB per stage). (A 128 x 128 tile with m64n128k16
// measured 483 TFLOP/s in BF16 at 4096^3 on the H100, 0.64x cuBLAS; the wider tile reads each A
// tile for twice the columns.)
// Operand layouts: A is K-major (row-major M x K) in both. In BF16, B is row-major K x N, i.e.
// N-major, which wgmma reads transposed (imm-trans-b = 1). TF32 has no transposed mode: both
// operands must be K-major, so the launcher first transposes B into an N x K scratch buffer with
// day04's padded-tile transpose (t4), and the time of that transpose is part of v11's time.
// TMA needs 16-byte row strides and addresses: BF16 needs K % 8 == 0 and N % 8 == 0 (other
// shapes go to v10); TF32 gets them for any K, B^T's rows being padded to a multiple of 4 floats
// by the transpose and A copied into a padded buffer when K % 4 != 0.
// (Layouts and descriptor fields: the PTX ISA, "Asynchronous warpgroup level matrix multiply".)
#include <cuda.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

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

template <typename E>
__global__ void __launch_bounds__(kThreads, 1)
    gemm_v11_kernel(int m, int n, int k, float alpha, float beta, float* __restrict__ c,
                    const __grid_constant__ CUtensorMap map_a,
                    const __grid_constant__ CUtensorMap map_b) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int kBK = E::kBK;
  extern __shared__ uint8_t smem_raw[];
  // The 128-byte swizzle repeats every 1024 bytes: stage buffers must start on a 1024-byte
  // boundary.
  uint8_t* smem = smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023);
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + kStages * kStageBytes);

  const int tid = threadIdx.x, wg = tid / 128;
  const int row0 = blockIdx.y * kBM, col0 = blockIdx.x * kBN;
  const int num_tiles = gpu100::ceil_div(k, kBK);
  auto stage = [&](int s) { return smem + s * kStageBytes; };

  if (tid == 0) {
    for (int s = 0; s < kStages; ++s) mbar_init(&full[s], 1);
    mbar_fence_init();
  }
  __syncthreads();
  if (tid == 0) {
    for (int t = 0; t < kStages && t < num_tiles; ++t)
      issue_ktile<E>(stage(t), &map_a, &map_b, row0, col0, t, &full[t]);
  }

  float d[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) d[i] = 0.f;

  for (int t = 0; t < num_tiles; ++t) {
    const int s = t % kStages;
    mbar_wait(&full[s], (t / kStages) & 1);  // the TMA boxes of tile t have landed
    fence();
    mma_ktile<E>(d, stage(s), wg);
    commit();
    wait<1>();        // the multiplies of tile t - 1 have finished (tile t's may still run)...
    __syncthreads();  // ...in both warpgroups: stage (t - 1) % kStages is free
    if (tid == 0 && t >= 1 && t - 1 + kStages < num_tiles) {
      const int sp = (t - 1) % kStages;
      issue_ktile<E>(stage(sp), &map_a, &map_b, row0, col0, t - 1 + kStages, &full[sp]);
    }
  }
  wait<0>();
  store_tile(d, c, m, n, row0, col0, wg, alpha, beta);
#else
  // Built for an architecture without wgmma: the launcher never calls this.
  (void)m, (void)n, (void)k, (void)alpha, (void)beta, (void)c, (void)map_a, (void)map_b;
#endif
}

namespace {

template <typename E>
void launch_v11(GemmShape s, float alpha, const CUtensorMap& map_a, const CUtensorMap& map_b,
                float beta, float* c, cudaStream_t stream) {
  static gpu100::PerDevice<bool> attr_set;  // per GPU: set on each it runs on
  attr_set.get([] {
    CUDA_CHECK(cudaFuncSetAttribute(gemm_v11_kernel<E>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    int(kSmemBytes)));
    return true;
  });
  const dim3 grid(gpu100::ceil_div(s.n, kBN), gpu100::ceil_div(s.m, kBM));
  gemm_v11_kernel<E>
      <<<grid, kThreads, kSmemBytes, stream>>>(s.m, s.n, s.k, alpha, beta, c, map_a, map_b);
  CUDA_CHECK_LAST();
}

}  // namespace

std::string wgmma_v10_fallback_note(GemmShape s) {
  if (s.k % 8 == 0 && s.n % 8 == 0) return "";
  return "K or N not a multiple of 8: TMA cannot describe the rows, so this shape ran v10_mma_bf16 "
         "(v13 stages them instead)";
}

void gemm_v11_wgmma_bf16(GemmShape s, float alpha, const __nv_bfloat16* a, const __nv_bfloat16* b,
                         float beta, float* c, cudaStream_t stream) {
  check_gemm_args(s, a, b, c);
  gpu100::require_build(gpu100::ArchNeed::kSm90a, "v11_wgmma_bf16");
  if (!tma_bf16_ok(s, a, b)) {
    gemm_v10_mma_bf16(s, alpha, a, b, beta, c, stream);  // TMA cannot describe these strides
    return;
  }
  launch_v11<Bf16>(s, alpha, make_tma_map_2d(a, s.m, s.k, kBM, Bf16::kBK),
                   make_tma_map_2d(b, s.k, s.n, Bf16::kBK, 64), beta, c, stream);
}

namespace wgmma_gemm {

Tf32Operands tf32_k_major(GemmShape s, const float* a, const float* b, cudaStream_t stream) {
  const int k4 = gpu100::round_up(s.k, 4);
  thread_local gpu100::DeviceBuffer<float> bt, a_staged;
  const size_t count = size_t(k4) * s.n;
  if (bt.size() < count) bt = gpu100::DeviceBuffer<float>(count);
  transpose_v4_padded_tile_ld(b, bt.data(), s.k, s.n, k4, stream);
  const float* a_rows = a;
  if (k4 != s.k || !gpu100::aligned16(a)) {
    // A's rows are no multiple of 16 bytes (or A is misaligned), which TMA cannot describe (this
    // had gone to v10's mma.sync kernel): A is copied into a zero-padded M x K4 buffer
    // first. The zero columns of A and B^T add nothing.
    const size_t a_count = size_t(s.m) * k4;
    if (a_staged.size() < a_count) a_staged = gpu100::DeviceBuffer<float>(a_count);
    CUDA_CHECK(cudaMemcpy2DAsync(a_staged.data(), size_t(k4) * sizeof(float), a,
                                 size_t(s.k) * sizeof(float), size_t(s.k) * sizeof(float),
                                 size_t(s.m), cudaMemcpyDeviceToDevice, stream));
    if (k4 != s.k) {
      CUDA_CHECK(cudaMemset2DAsync(a_staged.data() + s.k, size_t(k4) * sizeof(float), 0,
                                   size_t(k4 - s.k) * sizeof(float), size_t(s.m), stream));
    }
    a_rows = a_staged.data();
  }
  if (k4 != s.k) {
    CUDA_CHECK(cudaMemset2DAsync(bt.data() + s.k, size_t(k4) * sizeof(float), 0,
                                 size_t(k4 - s.k) * sizeof(float), size_t(s.n), stream));
  }
  return Tf32Operands{a_rows, bt.data(), k4};
}

}  // namespace wgmma_gemm

void gemm_v11_wgmma_tf32(GemmShape s, float alpha, const float* a, const float* b, float beta,
                         float* c, cudaStream_t stream) {
  check_gemm_args(s, a, b, c);
  gpu100::require_build(gpu100::ArchNeed::kSm90a, "v11_wgmma_tf32");
  const Tf32Operands ops = tf32_k_major(s, a, b, stream);  // B^T, and A padded if it must be
  launch_v11<Tf32>(GemmShape{s.m, s.n, ops.k4}, alpha,
                   make_tma_map_2d(ops.a, s.m, ops.k4, kBM, Tf32::kBK),
                   make_tma_map_2d(ops.b_t, s.n, ops.k4, kBN, Tf32::kBK), beta, c, stream);
}

}  // namespace day04
