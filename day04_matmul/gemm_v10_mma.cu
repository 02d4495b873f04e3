// GEMM v10: BF16 tensor cores through inline PTX: mma.sync.m16n8k16, ldmatrix and a 3-stage
// cp.async pipeline. Three changes from v9, each removing a stall that WMMA hides from view:
//  - cp.async copies global -> shared without passing through registers, and the copies of slabs
//    t + 1 and t + 2 are in flight while the warps multiply slab t (3 stages instead of 1);
//  - ldmatrix loads a warp's 16 x 16 operand fragments with one instruction per four 8 x 8
//    matrices, straight into the register layout mma.sync expects (.trans for B, which is stored
//    k-major);
//  - rows are padded by 16 bytes so the 8 row addresses of each ldmatrix phase fall in distinct
//    banks.
// Tiles: 128 x 128 x 32 per block, 8 warps of 64 x 32, i.e. 4 x 4 mma tiles of 16 x 8 per warp.
// Fast path: K % 8 == 0, N % 8 == 0 and 16-byte aligned A and B (16-byte cp.async chunks);
// otherwise the same kernel fills the slabs with ordinary predicated loads.
// (The ldmatrix / mma.sync fragment layouts are those of the PTX ISA guide, section 9.7.14; the
// PTX wrappers are in mma.cuh, shared with day05's attention kernels.)
#include <cuda_bf16.h>

#include <cstdint>

#include "common/cuda_check.hpp"
#include "common/math.hpp"
#include "common/occupancy.hpp"
#include "gemm.hpp"
#include "mma.cuh"

namespace day04 {

namespace {

constexpr int kBM = 128, kBN = 128, kBK = 32, kWM = 64, kWN = 32, kThreads = 256, kStages = 3;
constexpr int kLda = kBK + 8;  // bf16 per A row in shared memory: 80 bytes
constexpr int kLdb = kBN + 8;  // bf16 per B row: 272 bytes
constexpr int kAStage = kBM * kLda, kBStage = kBK * kLdb;
constexpr size_t kSmemBytes = sizeof(__nv_bfloat16) * kStages * (kAStage + kBStage);

using mma::cp_async_16;
using mma::cp_async_commit;
using mma::cp_async_wait;
using mma::ldmatrix_x4;
using mma::ldmatrix_x4_trans;
using mma::mma_bf16_16816;

// The epilogue of both v10 kernels: C = alpha * acc + beta * C for the warp's 64 x 32 tile at
// (row0, col0). Lane holds rows lane / 4 and lane / 4 + 8, columns (lane % 4) * 2 + {0, 1}, of each
// 16 x 8 mma tile.
__device__ __forceinline__ void store_warp_tile(const float (&acc)[kWM / 16][kWN / 8][4], float* c,
                                                int m, int n, float alpha, float beta, int row0,
                                                int col0, int lane) {
#pragma unroll
  for (int i = 0; i < kWM / 16; ++i)
#pragma unroll
    for (int j = 0; j < kWN / 8; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = row0 + 16 * i + lane / 4 + 8 * h;
        const int col = col0 + 8 * j + (lane % 4) * 2;
        if (row >= m) continue;
#pragma unroll
        for (int q = 0; q < 2; ++q) {
          if (col + q < n) {
            float* out = c + size_t(row) * n + col + q;
            *out = alpha * acc[i][j][2 * h + q] + (beta != 0.f ? beta * *out : 0.f);
          }
        }
      }
}

// Fills one pipeline stage with the A slab (rows row0.., cols k0..) and the B slab.
template <bool kAsync>
__device__ __forceinline__ void load_stage(__nv_bfloat16* as, __nv_bfloat16* bs,
                                           const __nv_bfloat16* a, const __nv_bfloat16* b, int m,
                                           int n, int k, int row0, int col0, int k0, int tid) {
  if constexpr (kAsync) {
    // A slab: 128 rows x 32 bf16 = 4 chunks of 16 B per row, 512 chunks, 2 per thread.
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int f = tid + i * kThreads, r = f / 4, cc = (f % 4) * 8;
      const bool ok = row0 + r < m && k0 + cc < k;
      const __nv_bfloat16* src = ok ? a + size_t(row0 + r) * k + k0 + cc : a;
      cp_async_16(as + r * kLda + cc, src, ok);
    }
    // B slab: 32 rows x 128 bf16 = 16 chunks per row, 512 chunks, 2 per thread.
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int f = tid + i * kThreads, r = f / 16, cc = (f % 16) * 8;
      const bool ok = k0 + r < k && col0 + cc < n;
      const __nv_bfloat16* src = ok ? b + size_t(k0 + r) * n + col0 + cc : b;
      cp_async_16(bs + r * kLdb + cc, src, ok);
    }
  } else {
    const __nv_bfloat16 zero = __float2bfloat16(0.f);
    for (int e = tid; e < kBM * kBK; e += kThreads) {
      const int r = e / kBK, cc = e % kBK;
      as[r * kLda + cc] = (row0 + r < m && k0 + cc < k) ? a[size_t(row0 + r) * k + k0 + cc] : zero;
    }
    for (int e = tid; e < kBK * kBN; e += kThreads) {
      const int r = e / kBN, cc = e % kBN;
      bs[r * kLdb + cc] = (k0 + r < k && col0 + cc < n) ? b[size_t(k0 + r) * n + col0 + cc] : zero;
    }
  }
}

}  // namespace

template <bool kAsync>
__global__ void __launch_bounds__(kThreads)
    gemm_v10_kernel(int m, int n, int k, float alpha, const __nv_bfloat16* __restrict__ a,
                    const __nv_bfloat16* __restrict__ b, float beta, float* c) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  __nv_bfloat16* as = reinterpret_cast<__nv_bfloat16*>(smem_raw);  // kStages x [kBM][kLda]
  __nv_bfloat16* bs = as + kStages * kAStage;                      // kStages x [kBK][kLdb]
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int row0 = blockIdx.y * kBM, col0 = blockIdx.x * kBN;
  const int wm0 = (warp / (kBN / kWN)) * kWM, wn0 = (warp % (kBN / kWN)) * kWN;

  float acc[kWM / 16][kWN / 8][4] = {};  // 4 x 4 tiles of 16 x 8, 4 floats per lane each
  const int num_slabs = gpu100::ceil_div(k, kBK);

  // Prologue: start the first kStages - 1 slabs.
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < num_slabs) {
      load_stage<kAsync>(as + s * kAStage, bs + s * kBStage, a, b, m, n, k, row0, col0, s * kBK,
                         tid);
    }
    cp_async_commit();
  }

  for (int t = 0; t < num_slabs; ++t) {
    cp_async_wait<kStages - 2>();  // this thread's copies of slab t have landed...
    __syncthreads();               // ...and everyone's; slab t - 1's buffer is free again
    const int next = t + kStages - 1;
    if (next < num_slabs) {
      const int s = next % kStages;
      load_stage<kAsync>(as + s * kAStage, bs + s * kBStage, a, b, m, n, k, row0, col0, next * kBK,
                         tid);
    }
    cp_async_commit();  // possibly empty: keeps the group count in step

    const __nv_bfloat16* at = as + (t % kStages) * kAStage;
    const __nv_bfloat16* bt = bs + (t % kStages) * kBStage;
#pragma unroll
    for (int kk = 0; kk < kBK; kk += 16) {
      uint32_t fa[kWM / 16][4], fb[kWN / 8][2];
#pragma unroll
      for (int i = 0; i < kWM / 16; ++i) {
        // Lanes 0-15 address rows 0-15 at k offset 0, lanes 16-31 the same rows at k offset 8.
        ldmatrix_x4(fa[i], at + (wm0 + 16 * i + lane % 16) * kLda + kk + (lane / 16) * 8);
      }
#pragma unroll
      for (int j = 0; j < kWN / 16; ++j) {
        // Four 8 x 8 blocks of B (k rows, n columns): lanes 8q..8q+7 address k rows
        // (q % 2) * 8 + 0..7 at column offset (q / 2) * 8. .trans hands each lane the (k, n)
        // pairs of the mma B fragment; registers 0-1 are n-tile 2j, registers 2-3 n-tile 2j + 1.
        uint32_t r[4];
        const int q = lane / 8;
        ldmatrix_x4_trans(r,
                          bt + (kk + (q % 2) * 8 + lane % 8) * kLdb + wn0 + 16 * j + (q / 2) * 8);
        fb[2 * j][0] = r[0], fb[2 * j][1] = r[1], fb[2 * j + 1][0] = r[2], fb[2 * j + 1][1] = r[3];
      }
#pragma unroll
      for (int i = 0; i < kWM / 16; ++i)
#pragma unroll
        for (int j = 0; j < kWN / 8; ++j) mma_bf16_16816(acc[i][j], fa[i], fb[j]);
    }
  }
  cp_async_wait<0>();

  store_warp_tile(acc, c, m, n, alpha, beta, row0 + wm0, col0 + wn0, lane);
}

void gemm_v10_mma_bf16(GemmShape s, float alpha, const __nv_bfloat16* a, const __nv_bfloat16* b,
                       float beta, float* c, cudaStream_t stream) {
  check_gemm_args(s, a, b, c);
  gpu100::require_build(gpu100::ArchNeed::kSm80, "v10_mma_bf16");
  static gpu100::PerDevice<bool> attr_set;  // per GPU: set on each it runs on
  attr_set.get([] {
    CUDA_CHECK(cudaFuncSetAttribute(gemm_v10_kernel<true>,
                                    cudaFuncAttributeMaxDynamicSharedMemorySize, int(kSmemBytes)));
    CUDA_CHECK(cudaFuncSetAttribute(gemm_v10_kernel<false>,
                                    cudaFuncAttributeMaxDynamicSharedMemorySize, int(kSmemBytes)));
    return true;
  });
  const dim3 grid(gpu100::ceil_div(s.n, kBN), gpu100::ceil_div(s.m, kBM));
  const bool aligned = gpu100::aligned16(a) && gpu100::aligned16(b);
  if (s.k % 8 == 0 && s.n % 8 == 0 && aligned) {
    gemm_v10_kernel<true>
        <<<grid, kThreads, kSmemBytes, stream>>>(s.m, s.n, s.k, alpha, a, b, beta, c);
  } else {
    gemm_v10_kernel<false>
        <<<grid, kThreads, kSmemBytes, stream>>>(s.m, s.n, s.k, alpha, a, b, beta, c);
  }
  CUDA_CHECK_LAST();
}

// ---- the same pipeline for TF32 --------------------------------------------------------------
// v10_mma_tf32: fp32 inputs, mma.sync.m16n8k8 in TF32. What differs from the BF16 kernel:
//  - a k-step is 8 (a 32-bit element per register), and each fragment element is rounded to TF32
//    (cvt.rna) after it leaves shared memory;
//  - A's fragments still come from ldmatrix (an 8 x 8 matrix of b16 is an 8 x 4 matrix of fp32,
//    and each lane receives exactly its (row, k) element); B's cannot (.trans would split the
//    32-bit elements), so each lane reads its two B values with 32-bit loads, which the padded
//    row of 136 floats keeps free of bank conflicts ((8 k + n) % 32 is distinct over the warp);
//  - tiles of 128 x 128 x 32 floats: 35 KB per stage, 107 KB for 3 stages (two blocks per SM).
namespace tf32 {

constexpr int kBK = 32, kLda = kBK + 4, kLdb = kBN + 8;
constexpr int kAStage = kBM * kLda, kBStage = kBK * kLdb;
constexpr size_t kSmemBytes = sizeof(float) * kStages * (kAStage + kBStage);

using mma::mma_tf32_1688;
using mma::to_tf32;

template <bool kAsync>
__device__ __forceinline__ void load_stage(float* as, float* bs, const float* a, const float* b,
                                           int m, int n, int k, int row0, int col0, int k0,
                                           int tid) {
  if constexpr (kAsync) {
    // A slab: 128 rows x 8 chunks of 4 floats; B slab: 32 rows x 32 chunks. 4 + 4 per thread.
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int f = tid + i * kThreads, r = f / 8, cc = (f % 8) * 4;
      const bool ok = row0 + r < m && k0 + cc < k;
      cp_async_16(as + r * kLda + cc, ok ? a + size_t(row0 + r) * k + k0 + cc : a, ok);
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int f = tid + i * kThreads, r = f / 32, cc = (f % 32) * 4;
      const bool ok = k0 + r < k && col0 + cc < n;
      cp_async_16(bs + r * kLdb + cc, ok ? b + size_t(k0 + r) * n + col0 + cc : b, ok);
    }
  } else {
    for (int e = tid; e < kBM * kBK; e += kThreads) {
      const int r = e / kBK, cc = e % kBK;
      as[r * kLda + cc] = (row0 + r < m && k0 + cc < k) ? a[size_t(row0 + r) * k + k0 + cc] : 0.f;
    }
    for (int e = tid; e < kBK * kBN; e += kThreads) {
      const int r = e / kBN, cc = e % kBN;
      bs[r * kLdb + cc] = (k0 + r < k && col0 + cc < n) ? b[size_t(k0 + r) * n + col0 + cc] : 0.f;
    }
  }
}

}  // namespace tf32

template <bool kAsync>
// (Capping it at 128 registers for two blocks per SM makes ptxas spill: one block of 8 warps.)
__global__ void __launch_bounds__(kThreads)
    gemm_v10_tf32_kernel(int m, int n, int k, float alpha, const float* __restrict__ a,
                         const float* __restrict__ b, float beta, float* c) {
  // This kernel's tile constants (the names above are the BF16 kernel's).
  constexpr int kBK = tf32::kBK, kLda = tf32::kLda, kLdb = tf32::kLdb;
  constexpr int kAStage = tf32::kAStage, kBStage = tf32::kBStage;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  float* as = reinterpret_cast<float*>(smem_raw);  // kStages x [kBM][kLda]
  float* bs = as + kStages * kAStage;              // kStages x [kBK][kLdb]
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int row0 = blockIdx.y * kBM, col0 = blockIdx.x * kBN;
  const int wm0 = (warp / (kBN / kWN)) * kWM, wn0 = (warp % (kBN / kWN)) * kWN;
  const int g = lane / 4, t = lane % 4;

  float acc[kWM / 16][kWN / 8][4] = {};
  const int num_slabs = gpu100::ceil_div(k, kBK);
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < num_slabs) {
      tf32::load_stage<kAsync>(as + s * kAStage, bs + s * kBStage, a, b, m, n, k, row0, col0,
                               s * kBK, tid);
    }
    cp_async_commit();
  }
  for (int st = 0; st < num_slabs; ++st) {
    cp_async_wait<kStages - 2>();
    __syncthreads();  // slab st is complete everywhere; slab st - 1's buffer is free
    const int next = st + kStages - 1;
    if (next < num_slabs) {
      const int s = next % kStages;
      tf32::load_stage<kAsync>(as + s * kAStage, bs + s * kBStage, a, b, m, n, k, row0, col0,
                               next * kBK, tid);
    }
    cp_async_commit();

    const float* at = as + (st % kStages) * kAStage;
    const float* bt = bs + (st % kStages) * kBStage;
#pragma unroll
    for (int kk = 0; kk < kBK; kk += 8) {
      uint32_t fa[kWM / 16][4], fb[kWN / 8][2];
#pragma unroll
      for (int i = 0; i < kWM / 16; ++i) {
        ldmatrix_x4(fa[i], at + (wm0 + 16 * i + lane % 16) * kLda + kk + (lane / 16) * 4);
#pragma unroll
        for (int q = 0; q < 4; ++q) fa[i][q] = tf32::to_tf32(fa[i][q]);
      }
#pragma unroll
      for (int j = 0; j < kWN / 8; ++j) {
        const float* col = bt + wn0 + 8 * j + g;
        fb[j][0] = tf32::to_tf32(__float_as_uint(col[(kk + t) * kLdb]));
        fb[j][1] = tf32::to_tf32(__float_as_uint(col[(kk + t + 4) * kLdb]));
      }
#pragma unroll
      for (int i = 0; i < kWM / 16; ++i)
#pragma unroll
        for (int j = 0; j < kWN / 8; ++j) tf32::mma_tf32_1688(acc[i][j], fa[i], fb[j]);
    }
  }
  cp_async_wait<0>();
  store_warp_tile(acc, c, m, n, alpha, beta, row0 + wm0, col0 + wn0, lane);
}

void gemm_v10_mma_tf32(GemmShape s, float alpha, const float* a, const float* b, float beta,
                       float* c, cudaStream_t stream) {
  check_gemm_args(s, a, b, c);
  gpu100::require_build(gpu100::ArchNeed::kSm80, "v10_mma_tf32");
  static gpu100::PerDevice<bool> attr_set;  // per GPU: set on each it runs on
  attr_set.get([] {
    CUDA_CHECK(cudaFuncSetAttribute(gemm_v10_tf32_kernel<true>,
                                    cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    int(tf32::kSmemBytes)));
    CUDA_CHECK(cudaFuncSetAttribute(gemm_v10_tf32_kernel<false>,
                                    cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    int(tf32::kSmemBytes)));
    return true;
  });
  const dim3 grid(gpu100::ceil_div(s.n, kBN), gpu100::ceil_div(s.m, kBM));
  if (vector_path_ok(s, a, b, c)) {
    gemm_v10_tf32_kernel<true>
        <<<grid, kThreads, tf32::kSmemBytes, stream>>>(s.m, s.n, s.k, alpha, a, b, beta, c);
  } else {
    gemm_v10_tf32_kernel<false>
        <<<grid, kThreads, tf32::kSmemBytes, stream>>>(s.m, s.n, s.k, alpha, a, b, beta, c);
  }
  CUDA_CHECK_LAST();
}

}  // namespace day04
