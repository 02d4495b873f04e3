// GEMM v9: tensor cores through WMMA (the C++ warp-matrix API), TF32 and BF16 with fp32
// accumulation. Each warp owns a 64 x 32 tile of C as 4 x 2 accumulator fragments of 16 x 16;
// per k-step it loads A and B fragments from shared memory and issues 8 mma_syncs, each of which
// does 16 x 16 x 8 (TF32) or 16 x 16 x 16 (BF16) multiply-adds in a few tensor-core instructions
// instead of 2048 or 4096 FFMAs. Tiles: 128 x 128 x 32 per block, 8 warps, one shared-memory
// buffer (pipelining is v10's idea). TF32 keeps 10 mantissa bits of each input: expect relative
// errors near 1e-3, against ~1e-6 for fp32. TF32 and BF16 fragments exist from sm_80 on: the
// kernel's code is compiled only for those targets, and the launchers refuse older ones.
#include <mma.h>

#include <type_traits>

#include "common/arch.cuh"
#include "common/arch.hpp"
#include "common/cuda_check.hpp"
#include "common/math.hpp"
#include "gemm.hpp"

#if !GPU100_SM80_CODE
#pragma nv_diag_suppress 177  // this target compiles the kernel body out, leaving its constants
#endif

namespace day04 {

namespace wmma = nvcuda::wmma;

namespace {

constexpr int kBM = 128, kBN = 128, kBK = 32, kWM = 64, kWN = 32, kThreads = 256;
constexpr int kPad =
    8;  // elements of padding per shared row: breaks bank conflicts, keeps 32 B alignment

// TF32 fragments take fp32 storage and a k of 8; BF16 fragments a k of 16.
template <typename T>
struct WmmaTraits;
#if GPU100_SM80_CODE
template <>
struct WmmaTraits<float> {
  using FragType = wmma::precision::tf32;
  static constexpr int kK = 8;
};
template <>
struct WmmaTraits<__nv_bfloat16> {
  using FragType = __nv_bfloat16;
  static constexpr int kK = 16;
};

#endif

}  // namespace

template <typename T>
__global__ void __launch_bounds__(kThreads)
    gemm_v9_kernel(int m, int n, int k, float alpha, const T* __restrict__ a,
                   const T* __restrict__ b, float beta, float* c) {
#if GPU100_SM80_CODE
  using Traits = WmmaTraits<T>;
  constexpr int kK = Traits::kK;
  constexpr int kLda = kBK + kPad, kLdb = kBN + kPad;
  constexpr int kTileBytes = sizeof(T) * (kBM * kLda + kBK * kLdb);
  constexpr int kStageBytes = sizeof(float) * (kThreads / 32) * 16 * 16;  // epilogue staging
  __shared__ __align__(32) unsigned char smem[kTileBytes > kStageBytes ? kTileBytes : kStageBytes];
  T* as = reinterpret_cast<T*>(smem);  // [kBM][kLda]
  T* bs = as + kBM * kLda;             // [kBK][kLdb]

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int row0 = blockIdx.y * kBM, col0 = blockIdx.x * kBN;
  const int wm0 = (warp / (kBN / kWN)) * kWM, wn0 = (warp % (kBN / kWN)) * kWN;

  wmma::fragment<wmma::accumulator, 16, 16, kK, float> acc[kWM / 16][kWN / 16];
#pragma unroll
  for (int i = 0; i < kWM / 16; ++i)
#pragma unroll
    for (int j = 0; j < kWN / 16; ++j) wmma::fill_fragment(acc[i][j], 0.f);

  for (int k0 = 0; k0 < k; k0 += kBK) {
    // Copy the A and B slabs, element by element with zero fill (coalesced along rows).
    for (int e = tid; e < kBM * kBK; e += kThreads) {
      const int r = e / kBK, cc = e % kBK;
      as[r * kLda + cc] =
          (row0 + r < m && k0 + cc < k) ? a[size_t(row0 + r) * k + k0 + cc] : T(0.f);
    }
    for (int e = tid; e < kBK * kBN; e += kThreads) {
      const int r = e / kBN, cc = e % kBN;
      bs[r * kLdb + cc] =
          (k0 + r < k && col0 + cc < n) ? b[size_t(k0 + r) * n + col0 + cc] : T(0.f);
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kBK; kk += kK) {
      wmma::fragment<wmma::matrix_a, 16, 16, kK, typename Traits::FragType, wmma::row_major>
          fa[kWM / 16];
      wmma::fragment<wmma::matrix_b, 16, 16, kK, typename Traits::FragType, wmma::row_major>
          fb[kWN / 16];
#pragma unroll
      for (int i = 0; i < kWM / 16; ++i) {
        wmma::load_matrix_sync(fa[i], as + (wm0 + 16 * i) * kLda + kk, kLda);
        if constexpr (std::is_same_v<T, float>) {
#pragma unroll
          for (int e = 0; e < fa[i].num_elements; ++e)
            fa[i].x[e] = wmma::__float_to_tf32(fa[i].x[e]);
        }
      }
#pragma unroll
      for (int j = 0; j < kWN / 16; ++j) {
        wmma::load_matrix_sync(fb[j], bs + kk * kLdb + wn0 + 16 * j, kLdb);
        if constexpr (std::is_same_v<T, float>) {
#pragma unroll
          for (int e = 0; e < fb[j].num_elements; ++e)
            fb[j].x[e] = wmma::__float_to_tf32(fb[j].x[e]);
        }
      }
#pragma unroll
      for (int i = 0; i < kWM / 16; ++i)
#pragma unroll
        for (int j = 0; j < kWN / 16; ++j) wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
    }
    __syncthreads();
  }

  // Epilogue: each warp stages one 16 x 16 fragment at a time in shared memory (the fragment's
  // register layout is opaque), then its lanes apply alpha / beta and write the elements that lie
  // inside M x N.
  float* stage = reinterpret_cast<float*>(smem) + warp * 256;
#pragma unroll
  for (int i = 0; i < kWM / 16; ++i)
#pragma unroll
    for (int j = 0; j < kWN / 16; ++j) {
      wmma::store_matrix_sync(stage, acc[i][j], 16, wmma::mem_row_major);
      __syncwarp();
      for (int e = lane; e < 256; e += 32) {
        const int row = row0 + wm0 + 16 * i + e / 16, col = col0 + wn0 + 16 * j + e % 16;
        if (row < m && col < n) {
          float* out = c + size_t(row) * n + col;
          *out = alpha * stage[e] + (beta != 0.f ? beta * *out : 0.f);
        }
      }
      __syncwarp();
    }
#endif
}

namespace {

template <typename T>
void launch_v9(GemmShape s, float alpha, const T* a, const T* b, float beta, float* c,
               cudaStream_t stream) {
  check_gemm_args(s, a, b, c);
  gpu100::require_build(gpu100::ArchNeed::kSm80, "v9_wmma");
  const dim3 grid(gpu100::ceil_div(s.n, kBN), gpu100::ceil_div(s.m, kBM));
  gemm_v9_kernel<T><<<grid, kThreads, 0, stream>>>(s.m, s.n, s.k, alpha, a, b, beta, c);
  CUDA_CHECK_LAST();
}

}  // namespace

void gemm_v9_wmma_tf32(GemmShape s, float alpha, const float* a, const float* b, float beta,
                       float* c, cudaStream_t stream) {
  launch_v9<float>(s, alpha, a, b, beta, c, stream);
}

void gemm_v9_wmma_bf16(GemmShape s, float alpha, const __nv_bfloat16* a, const __nv_bfloat16* b,
                       float beta, float* c, cudaStream_t stream) {
  launch_v9<__nv_bfloat16>(s, alpha, a, b, beta, c, stream);
}

}  // namespace day04
