// Conv2d v5: implicit GEMM on tensor cores, TF32 mma.sync m16n8k8 (fp32 NCHW in and out).
// The same GEMM view and the same cp.async gather as v4 (implicit_gemm.cuh), with the inner
// product moved from FFMA to mma.sync: one m16n8k8 instruction is 1024 multiply-adds, so the FMA
// issue limit of v4 disappears and the kernel becomes bound by the gather and shared-memory
// traffic instead. Inputs are rounded to TF32 (10-bit mantissa, cvt.rna) as the fragments are
// read; accumulation stays fp32.
// Tiles: 256 pixels x 64 filters x 32 of GEMM_K per block, 3 cp.async stages (126 KB of shared
// memory, one block of 8 warps per SM), 8 warps of 64 x 32 = 4 x 4 mma tiles. Per 8-deep k-step
// a warp loads and converts 4 x 4 A and 4 x 2 B registers for 16 mma (1.5 per mma); with the
// earlier 128 x 64 tile and 32 x 32 warps it was 2 x 4 + 4 x 2 for 8 (2 per mma). Measured on the
// H100 (ResNet layer, one A/B run, the tile written into this file and rebuilt): 0.200 ms against
// 0.223 ms for 128 x 64. Shared layouts, chosen so every fragment read is conflict-free without
// ldmatrix (which moves 16-bit elements):
//   As[kk][m], pitch 264 (= 8 mod 32): lane (g, t) = (lane / 4, lane % 4) reads As[t][g] -> bank
//   8t + g, 32 distinct banks.
//   Bs[k][kk], pitch 36 (= 4 mod 32): lane reads Bs[g][t] -> bank 4g + t, 32 distinct banks; the
//   rows are the KCRS weights as stored, so the copy is 16-byte cp.async when C*R*S % 4 == 0.
// (Fragment layouts: PTX ISA, warp-level matrix instructions; the mma wrappers are day04's
// mma.cuh.)
#include <cstdint>

#include "common/arch.hpp"
#include "common/cuda_check.hpp"
#include "common/math.hpp"
#include "common/occupancy.hpp"
#include "conv_day.hpp"
#include "implicit_gemm.cuh"
#include "mma.cuh"

namespace day08 {

namespace {

constexpr int kBM = 256, kBN = 64, kBK = 32, kThreads = 256, kStages = 3;
constexpr int kWM = 64, kWN = 32, kMi = kWM / 16, kNi = kWN / 8;
constexpr int kPitchA = kBM + 8, kPitchB = kBK + 4;
constexpr int kAStage = kBK * kPitchA, kBStage = kBN * kPitchB;
constexpr size_t kSmemBytes = sizeof(float) * kStages * (kAStage + kBStage);
static_assert((kBM / kWM) * (kBN / kWN) * 32 == kThreads, "one warp per warp tile");

// A: warp w gathers GEMM_K rows 4w .. 4w+3 for 8 chunks of 32 pixels (32 copies per thread).
using Gather = igemm::AGather<kBM / 32, kBK / (kThreads / 32)>;

// blockIdx.z picks the convolution of the group (conv.hpp's fused form).
template <bool kVecB>
__global__ void __launch_bounds__(kThreads)
    conv2d_implicit_gemm_tf32_kernel(igemm::Params g, const ConvGroup<float> grp) {
  const ConvOperands<float> op = blockIdx.z == 0 ? grp.op[0] : grp.op[1];
  const float* __restrict__ x = op.x;
  const float* __restrict__ w = op.w;
  extern __shared__ __align__(16) float smem[];
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int m0 = blockIdx.x * kBM, k0 = blockIdx.y * kBN;
  const int num_slabs = gpu100::ceil_div(g.CRS, kBK);
  auto a_stage = [&](int st) { return smem + st * (kAStage + kBStage); };
  auto b_stage = [&](int st) { return smem + st * (kAStage + kBStage) + kAStage; };

  Gather ga;
  ga.init(g, m0, warp * (kBK / (kThreads / 32)), lane);

  auto load_slab = [&](int stage, int slab) {
    ga.load(x, a_stage(stage), kPitchA, g, lane);
    float* bs = b_stage(stage);
    if constexpr (kVecB) {
      // 64 filters x 8 chunks of 16 bytes: 2 chunks per thread, 8 threads per filter row.
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const int f = tid + j * kThreads, n = f / 8, kq = (f % 8) * 4;
        const int gk = slab * kBK + kq;
        const bool ok = k0 + n < g.s.k && gk < g.CRS;  // C*R*S % 4 == 0: whole chunk in or out
        igemm::cp_async_16(bs + n * kPitchB + kq, ok ? w + size_t(k0 + n) * g.CRS + gk : w, ok);
      }
    } else {
      // Scalar: lane = GEMM_K row (32 consecutive weights of one filter), warp = filter + 8j.
#pragma unroll
      for (int j = 0; j < kBN / (kThreads / 32); ++j) {
        const int n = warp + 8 * j, gk = slab * kBK + lane;
        const bool ok = k0 + n < g.s.k && gk < g.CRS;
        igemm::cp_async_4(bs + n * kPitchB + lane, ok ? w + size_t(k0 + n) * g.CRS + gk : w, ok);
      }
    }
  };

#pragma unroll
  for (int st = 0; st < kStages - 1; ++st) {
    if (st < num_slabs) load_slab(st, st);
    igemm::cp_async_commit();
  }

  float acc[kMi][kNi][4];
#pragma unroll
  for (int i = 0; i < kMi; ++i)
#pragma unroll
    for (int j = 0; j < kNi; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;

  const int wm0 = (warp % (kBM / kWM)) * kWM, wn0 = (warp / (kBM / kWM)) * kWN;
  const int gq = lane / 4, tq = lane % 4;  // the (g, t) of the fragment layouts
  for (int t = 0; t < num_slabs; ++t) {
    igemm::cp_async_wait<kStages - 2>();  // this thread's copies of slab t have landed
    __syncthreads();  // everyone's have; and every warp has finished with slab t - 1's stage
    const int next = t + kStages - 1;
    if (next < num_slabs) load_slab(next % kStages, next);  // into slab t - 1's stage
    igemm::cp_async_commit();

    const float* as = a_stage(t % kStages);
    const float* bs = b_stage(t % kStages);
#pragma unroll
    for (int ks = 0; ks < kBK / 8; ++ks) {
      uint32_t af[kMi][4], bf[kNi][2];
#pragma unroll
      for (int i = 0; i < kMi; ++i) {
        const float* a0 = as + (ks * 8 + tq) * kPitchA + wm0 + 16 * i + gq;
        af[i][0] = day04::mma::to_tf32(__float_as_uint(a0[0]));
        af[i][1] = day04::mma::to_tf32(__float_as_uint(a0[8]));
        af[i][2] = day04::mma::to_tf32(__float_as_uint(a0[4 * kPitchA]));
        af[i][3] = day04::mma::to_tf32(__float_as_uint(a0[4 * kPitchA + 8]));
      }
#pragma unroll
      for (int j = 0; j < kNi; ++j) {
        const float* b0 = bs + (wn0 + 8 * j + gq) * kPitchB + ks * 8 + tq;
        bf[j][0] = day04::mma::to_tf32(__float_as_uint(b0[0]));
        bf[j][1] = day04::mma::to_tf32(__float_as_uint(b0[4]));
      }
#pragma unroll
      for (int i = 0; i < kMi; ++i)
#pragma unroll
        for (int j = 0; j < kNi; ++j) day04::mma::mma_tf32_1688(acc[i][j], af[i], bf[j]);
    }
  }
  igemm::cp_async_wait<0>();  // no copy may be in flight when the block exits

  // Epilogue: acc[i][j][2h + e] is pixel wm0 + 16i + g + 8h, filter wn0 + 8j + 2t + e. For a
  // fixed register the 8 lanes of one t write 8 consecutive pixels (32 bytes) of one plane.
  // y = relu?(acc + bias[k] + residual), the residual read at y's own index.
#pragma unroll
  for (int i = 0; i < kMi; ++i)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int m = m0 + wm0 + 16 * i + gq + 8 * h;
      if (m >= g.M) continue;
      const int n = m / g.PQ;
      const size_t pix = size_t(n) * g.s.k * g.PQ + (m - n * g.PQ);
      float* yp = op.y + pix;
      const float* res = op.residual != nullptr ? op.residual + pix : nullptr;
#pragma unroll
      for (int j = 0; j < kNi; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int k = k0 + wn0 + 8 * j + 2 * tq + e;
          if (k < g.s.k) {
            float v = acc[i][j][2 * h + e] + (op.bias != nullptr ? op.bias[k] : 0.f);
            if (res != nullptr) v += res[size_t(k) * g.PQ];
            yp[size_t(k) * g.PQ] = grp.relu ? fmaxf(v, 0.f) : v;
          }
        }
    }
}

template <bool kVecB>
void launch(const igemm::Params& g, const ConvGroup<float>& grp, cudaStream_t stream) {
  // The opt-in to > 48 KB of shared memory, once per kernel and GPU.
  static gpu100::PerDevice<bool> configured;
  configured.get([] {
    CUDA_CHECK(cudaFuncSetAttribute(conv2d_implicit_gemm_tf32_kernel<kVecB>,
                                    cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(kSmemBytes)));
    return true;
  });
  const dim3 grid(gpu100::ceil_div(g.M, kBM), gpu100::ceil_div(g.s.k, kBN), grp.count);
  conv2d_implicit_gemm_tf32_kernel<kVecB><<<grid, kThreads, kSmemBytes, stream>>>(g, grp);
  CUDA_CHECK_LAST();
}

}  // namespace

namespace detail {
void conv2d_v5_group(const ConvShape& s, const ConvGroup<float>& grp, cudaStream_t stream) {
  gpu100::require_build(gpu100::ArchNeed::kSm80, "v5_implicit_gemm_tf32");
  const igemm::Params g = igemm::make_params(s, kBK);
  bool vec_b = g.CRS % 4 == 0;  // 16-byte weight copies: every filter row starts on 16 bytes
  for (int i = 0; i < grp.count; ++i) {
    vec_b = vec_b && reinterpret_cast<uintptr_t>(grp.op[i].w) % 16 == 0;
  }
  if (vec_b) {
    launch<true>(g, grp, stream);
  } else {
    launch<false>(g, grp, stream);
  }
}
}  // namespace detail

void conv2d_v5_implicit_gemm_tf32(const ConvShape& s, const float* x, const float* w,
                                  const float* bias, float* y, cudaStream_t stream) {
  check_conv_args(s);
  ConvGroup<float> grp;
  grp.op[0] = {x, w, bias, nullptr, y};
  detail::conv2d_v5_group(s, grp, stream);
}

}  // namespace day08
