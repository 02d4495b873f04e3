// Conv2d v6: implicit GEMM on BF16 tensor cores with channels-last operands (NHWC x, KRSC w).
// Changed from v5: bf16 operands on mma.sync m16n8k16 (twice TF32's k-depth per instruction, half
// the bytes per operand) and the layouts. Why NHWC: with C innermost, GEMM_K is ordered (r, s, c)
// with c fastest, so for a fixed (r, s) one output pixel's row of A is C contiguous bf16 of x: one
// 16-byte cp.async moves 8 channels (v5 gathers every element with its own 4-byte copy and bounds
// test), the tile lands pixel-major with GEMM_K contiguous, and ldmatrix loads the A fragments
// from it in one instruction per 16 x 16; the KRSC filters are the B rows as stored (GEMM_K
// contiguous per filter): 16-byte copies, and ldmatrix (not transposed) gives the .col fragments.
// Costs: C % 8 == 0 (so a 16-byte chunk never straddles two (r, s)), refused otherwise; x and w
// are converted by the caller (NCHW fp32 -> NHWC bf16, KCRS -> KRSC), once; 8-bit mantissas in.
//
// Tiles: 128 pixels x 64 filters x 32 of GEMM_K per block, 4 warps of 64 x 32 (4 x 4 mma tiles
// of 16 x 8 per warp), 3 cp.async stages of 15 KB in static shared memory. A shared row holds a
// slab's 32 bf16 (64 bytes) padded to 80 bytes: the 8 row addresses of each ldmatrix phase, 80
// bytes apart, cover 8 disjoint groups of 4 banks (conflict-free), and so do the 8 rows a quarter
// warp's cp.async writes.
// (The implicit GEMM in NHWC is CUTLASS's Conv2d fprop with its "optimized" activation iterator;
// the fragment layouts are the PTX ISA's; the mma / ldmatrix / cp.async wrappers are day04's
// mma.cuh.)
#include <cuda_bf16.h>

#include <climits>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "common/arch.hpp"
#include "common/cuda_check.hpp"
#include "common/math.hpp"
#include "conv_day.hpp"
#include "implicit_gemm_nhwc.cuh"
#include "mma.cuh"

namespace day08 {

namespace {

using bf16 = __nv_bfloat16;
using day04::mma::cp_async_16;
using day04::mma::cp_async_commit;
using day04::mma::cp_async_wait;
using day04::mma::ldmatrix_x4;
using day04::mma::mma_bf16_16816;
using nhwc::Params;  // the shape and the GEMM_K walk (implicit_gemm_nhwc.cuh), shared with v9
using nhwc::RscPos;

constexpr int kBM = 128, kBN = 64, kBK = 32, kWM = 64, kWN = 32, kStages = 3;
constexpr int kWarps = (kBM / kWM) * (kBN / kWN), kThreads = 32 * kWarps;
constexpr int kMi = kWM / 16, kNi = kWN / 8;  // mma tiles per warp: 4 x 4
constexpr int kPitch = kBK + 8;               // bf16 per shared row: 80 bytes
constexpr int kAStage = kBM * kPitch, kBStage = kBN * kPitch;
// Copy roles: a slab row is kBK / 8 = 4 chunks of 16 bytes; lane l copies chunk l / 8 of rows
// 8 (warp + kWarps i) + l % 8, i.e. a warp covers 8 rows x 4 chunks per pass, all warps 32 rows.
constexpr int kRowsPerPass = 8 * kWarps;
constexpr int kAPasses = kBM / kRowsPerPass, kBPasses = kBN / kRowsPerPass;  // 4 and 2
static_assert(kBK / 8 == 4, "4 chunks of 8 channels per slab row: lane / 8 picks the chunk");
static_assert(kBM % kRowsPerPass == 0 && kBN % kRowsPerPass == 0, "whole copy passes");
static_assert(sizeof(bf16) * kStages * (kAStage + kBStage) <= 48 * 1024, "static shared memory");

// Y = float: the day's variant, fp32 NKPQ out. Y = bf16: conv.hpp's fused layer form, bf16 NPQK
// out with the residual and the ReLU. blockIdx.z picks the convolution of the group.
template <class Y>
__global__ void __launch_bounds__(kThreads)
    conv2d_bf16_nhwc_kernel(Params g, const ConvGroup<bf16, Y> grp) {
  const ConvOperands<bf16, Y> op = blockIdx.z == 0 ? grp.op[0] : grp.op[1];
  const bf16* __restrict__ x = op.x;
  const bf16* __restrict__ w = op.w;
  __shared__ __align__(16) bf16 as[kStages][kAStage];  // [pixel][kk], pitch kPitch
  __shared__ __align__(16) bf16 bs[kStages][kBStage];  // [filter][kk], pitch kPitch
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int m0 = blockIdx.x * kBM, k0 = blockIdx.y * kBN;
  const int num_slabs = gpu100::ceil_div(g.RSC, kBK);

  // This thread's copies: chunk cj (channels 8 cj .. 8 cj + 7 of the slab) of rows row0 + 32 i.
  // The pixel part of each A address is computed once: image base n*H*W*C and the window corner
  // (ih0, iw0); a pixel past the end gets an ih0 that fails every row test (zero-filled).
  const int cj = lane / 8, row0 = 8 * warp + lane % 8;
  int nbase[kAPasses], ih0[kAPasses], iw0[kAPasses];
#pragma unroll
  for (int i = 0; i < kAPasses; ++i) {
    const int m = m0 + row0 + kRowsPerPass * i;
    if (m < g.M) {
      const int n = m / g.PQ, pq = m - n * g.PQ, p = pq / g.Q, q = pq - p * g.Q;
      nbase[i] = n * g.HWC;
      ih0[i] = p * g.stride - g.pad;
      iw0[i] = q * g.stride - g.pad;
    } else {
      nbase[i] = 0;
      ih0[i] = INT_MIN / 2;
      iw0[i] = 0;
    }
  }
  int wbase[kBPasses];  // the filter's KRSC row, -1 past K
#pragma unroll
  for (int i = 0; i < kBPasses; ++i) {
    const int f = k0 + row0 + kRowsPerPass * i;
    wbase[i] = f < g.k ? f * g.RSC : -1;
  }
  RscPos kp;  // GEMM_K position of this thread's chunk in the next slab to load
  kp.init(8 * cj, g);
  int gk = 8 * cj;

  auto load_slab = [&](int stage) {
    const bool kvalid = gk < g.RSC;  // C*R*S % 8 == 0: a chunk is wholly in or out
    const int rd = kp.r * g.dil, sd = kp.s * g.dil;
#pragma unroll
    for (int i = 0; i < kAPasses; ++i) {
      const int ih = ih0[i] + rd, iw = iw0[i] + sd;
      const bool ok = kvalid && unsigned(ih) < unsigned(g.h) && unsigned(iw) < unsigned(g.w);
      const bf16* src = ok ? x + (nbase[i] + (ih * g.w + iw) * g.c + kp.c) : x;
      cp_async_16(&as[stage][(row0 + kRowsPerPass * i) * kPitch + 8 * cj], src, ok);
    }
#pragma unroll
    for (int i = 0; i < kBPasses; ++i) {
      const bool ok = kvalid && wbase[i] >= 0;
      cp_async_16(&bs[stage][(row0 + kRowsPerPass * i) * kPitch + 8 * cj],
                  ok ? w + (wbase[i] + gk) : w, ok);
    }
    kp.advance(g);
    gk += kBK;
  };

  // Prologue: slabs 0 .. kStages - 2 in flight (one commit group each, empty past the end).
#pragma unroll
  for (int st = 0; st < kStages - 1; ++st) {
    if (st < num_slabs) load_slab(st);
    cp_async_commit();
  }

  float acc[kMi][kNi][4];
#pragma unroll
  for (int i = 0; i < kMi; ++i)
#pragma unroll
    for (int j = 0; j < kNi; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;

  // Warp tile (wm0, wn0). ldmatrix row addresses: for A's 16 x 16 tile, lanes 0-15 give rows
  // 0-15 at column 0 and lanes 16-31 rows 0-15 at column 8 (matrices a[0..3] in mma order); for
  // B, a pair of 8-filter tiles: lanes 0-7 / 8-15 give filters 0-7 at columns 0 / 8 (b[j][0],
  // b[j][1]), lanes 16-23 / 24-31 filters 8-15 (b[j+1][0], b[j+1][1]).
  const int wm0 = (warp % (kBM / kWM)) * kWM, wn0 = (warp / (kBM / kWM)) * kWN;
  const int a_off = (wm0 + lane % 16) * kPitch + 8 * (lane / 16);
  const int b_off = (wn0 + 8 * (lane / 16) + lane % 8) * kPitch + 8 * ((lane / 8) % 2);

  for (int t = 0; t < num_slabs; ++t) {
    cp_async_wait<kStages - 2>();  // this thread's copies of slab t have landed
    __syncthreads();  // everyone's have; and every warp has finished reading slab t - 1's stage
    if (t + kStages - 1 < num_slabs) load_slab((t + kStages - 1) % kStages);  // t - 1's stage
    cp_async_commit();

    const bf16* a = as[t % kStages];
    const bf16* b = bs[t % kStages];
#pragma unroll
    for (int ks = 0; ks < kBK / 16; ++ks) {
      uint32_t af[kMi][4], bfr[kNi][2];
#pragma unroll
      for (int i = 0; i < kMi; ++i) ldmatrix_x4(af[i], a + a_off + 16 * i * kPitch + 16 * ks);
#pragma unroll
      for (int jp = 0; jp < kNi / 2; ++jp) {
        uint32_t r4[4];
        ldmatrix_x4(r4, b + b_off + 16 * jp * kPitch + 16 * ks);
        bfr[2 * jp][0] = r4[0];
        bfr[2 * jp][1] = r4[1];
        bfr[2 * jp + 1][0] = r4[2];
        bfr[2 * jp + 1][1] = r4[3];
      }
#pragma unroll
      for (int i = 0; i < kMi; ++i)
#pragma unroll
        for (int j = 0; j < kNi; ++j) mma_bf16_16816(acc[i][j], af[i], bfr[j]);
    }
  }
  cp_async_wait<0>();  // only empty groups remain; no copy may be in flight when the block exits

  // Epilogue: acc[i][j][2h + e] is pixel wm0 + 16i + gq + 8h, filter wn0 + 8j + 2tq + e.
  const int gq = lane / 4, tq = lane % 4;
#pragma unroll
  for (int i = 0; i < kMi; ++i)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int m = m0 + wm0 + 16 * i + gq + 8 * h;
      if (m >= g.M) continue;
      if constexpr (std::is_same_v<Y, float>) {
        // fp32 NKPQ: for one register the 8 lanes of a tq write 8 consecutive pixels (32 bytes)
        // of one output plane: whole sectors.
        const int n = m / g.PQ;
        float* yp = op.y + size_t(n) * g.k * g.PQ + (m - n * g.PQ);
#pragma unroll
        for (int j = 0; j < kNi; ++j)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int k = k0 + wn0 + 8 * j + 2 * tq + e;
            if (k < g.k) {
              yp[size_t(k) * g.PQ] = acc[i][j][2 * h + e] + (op.bias != nullptr ? op.bias[k] : 0.f);
            }
          }
      } else {
        // bf16 NPQK: the two filters of a register pair are adjacent channels of one pixel.
#pragma unroll
        for (int j = 0; j < kNi; ++j) {
          const int k = k0 + wn0 + 8 * j + 2 * tq;
          if (k >= g.k) continue;  // K is even: k + 1 < K too
          nhwc::store_pair(op, grp.relu, m, k, g.k, acc[i][j][2 * h], acc[i][j][2 * h + 1]);
        }
      }
    }
}

}  // namespace

namespace detail {
template <class Y>
void conv2d_v6_group(const ConvShape& s, const ConvGroup<bf16, Y>& grp, cudaStream_t stream) {
  if (const std::string why = v6_refusal(s, false); !why.empty()) {
    throw std::invalid_argument("v6_implicit_gemm_bf16_nhwc: " + why);
  }
  nhwc::require_aligned16("v6_implicit_gemm_bf16_nhwc", grp, "16-byte cp.async");
  gpu100::require_build(gpu100::ArchNeed::kSm80, "v6_implicit_gemm_bf16_nhwc");
  const Params g = nhwc::make_params(s, kBK);
  const dim3 grid(gpu100::ceil_div(g.M, kBM), gpu100::ceil_div(s.k, kBN), grp.count);
  conv2d_bf16_nhwc_kernel<Y><<<grid, kThreads, 0, stream>>>(g, grp);
  CUDA_CHECK_LAST();
}
template void conv2d_v6_group(const ConvShape&, const ConvGroup<bf16, bf16>&, cudaStream_t);
}  // namespace detail

void conv2d_v6_implicit_gemm_bf16_nhwc(const ConvShape& s, const bf16* x, const bf16* w,
                                       const float* bias, float* y, cudaStream_t stream) {
  check_conv_args(s);
  ConvGroup<bf16, float> grp;
  grp.op[0] = {x, w, bias, nullptr, y};
  detail::conv2d_v6_group(s, grp, stream);
}

}  // namespace day08
