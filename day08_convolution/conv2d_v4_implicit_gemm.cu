// Conv2d v4: implicit GEMM on CUDA cores, driving day04's WarpTile (tiles.cuh).
// GEMM_M = N*P*Q output pixels, GEMM_N = K filters, GEMM_K = C*R*S (implicit_gemm.cuh explains
// the mapping). Block tile 128 pixels x 64 filters x 16 of GEMM_K, 4 warps of 64 x 32, 8 x 8
// outputs per thread (day04's v7/v8 register tiling). Changed from v3: no im2col matrix; the A
// tile is gathered straight from x into shared memory with 4-byte cp.async (zero-fill for the
// padding), 3 stages deep so the gather of slabs t+1 and t+2 overlaps the FMAs of slab t; the
// weights are read in their KCRS layout (B is column-major: no transform, and the whole tensor
// is small enough to stay in L2). Costs: 4-byte copies (many load instructions per FMA compared
// with a plain GEMM's 16-byte ones) and integer address arithmetic per element.
// (The implicit-GEMM formulation is CUTLASS's; the register tiling is SGEMM_CUDA's / day04's.)
#include <cstdint>

#include "common/cuda_check.hpp"
#include "common/math.hpp"
#include "conv_day.hpp"
#include "implicit_gemm.cuh"
#include "tiles.cuh"

namespace day08 {

namespace {

constexpr int kBM = 128, kBN = 64, kBK = 16, kWM = 64, kWN = 32, kThreads = 128, kStages = 3;
constexpr int kPitchA = kBM + day04::tiles::kAPad;  // As[kk][m], the layout WarpTile reads
using Warp = day04::tiles::WarpTile<kBM, kBN, kBK, kWM, kWN>;
static_assert(Warp::TM == 8 && Warp::TN == 8, "8 x 8 outputs per thread");
static_assert((kBM / kWM) * (kBN / kWN) * 32 == kThreads, "one warp per warp tile");

// Gather roles. A: warp w loads GEMM_K rows 4w .. 4w+3 of the slab for the block's 128 pixels
// (4 chunks of 32, lane = pixel): 16 copies per thread. B: thread t loads filter t % 64 at GEMM_K
// rows t / 64 + 2j, j = 0..7, into Bs[kk][k] (a warp writes 32 consecutive words).
using Gather = igemm::AGather<kBM / 32, kBK / (kThreads / 32)>;

// kVecOut: P*Q % 4 == 0, so the 4 consecutive pixels a thread owns in a row of its register
// tile are 4 consecutive words of one output plane: one float4 store.
// blockIdx.z picks the convolution of the group (conv.hpp's fused form; the day's variant is a
// group of one with a bias and nothing else).
template <bool kVecOut>
__global__ void __launch_bounds__(kThreads)
    conv2d_implicit_gemm_kernel(igemm::Params g, const ConvGroup<float> grp) {
  const ConvOperands<float> op = blockIdx.z == 0 ? grp.op[0] : grp.op[1];
  const float* __restrict__ x = op.x;
  const float* __restrict__ w = op.w;
  __shared__ __align__(16) float as[kStages][kBK * kPitchA];
  __shared__ __align__(16) float bs[kStages][kBK * kBN];
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int m0 = blockIdx.x * kBM, k0 = blockIdx.y * kBN;

  Gather ga;
  ga.init(g, m0, warp * (kBK / (kThreads / 32)), lane);
  const int bn = tid % kBN, bkk = tid / kBN;  // B role
  const int wrow = k0 + bn < g.s.k ? (k0 + bn) * g.CRS : -1;
  const int num_slabs = gpu100::ceil_div(g.CRS, kBK);

  auto load_slab = [&](int stage, int slab) {
    ga.load(x, as[stage], kPitchA, g, lane);
#pragma unroll
    for (int j = 0; j < kBK / 2; ++j) {
      const int kk = bkk + 2 * j, gk = slab * kBK + kk;
      const bool ok = wrow >= 0 && gk < g.CRS;
      igemm::cp_async_4(&bs[stage][kk * kBN + bn], ok ? w + wrow + gk : w, ok);
    }
  };

  // The 3-stage pipeline (implicit_gemm.cuh): the copies of slabs t + 1 and t + 2 fly while
  // slab t is multiplied.
  Warp tile;
  tile.zero();
  const int wm0 = (warp % (kBM / kWM)) * kWM, wn0 = (warp / (kBM / kWM)) * kWN;
  igemm::pipelined_slabs<kStages>(num_slabs, load_slab,
                                  [&](int st) { tile.mma(as[st], bs[st], wm0, wn0, lane); });

  // Epilogue: bias, residual and ReLU in the store (implicit_gemm.cuh).
  igemm::store_nkpq<kVecOut>(tile, op, grp.relu, g, m0, k0, wm0, wn0, lane);
}

}  // namespace

namespace detail {
// The group form behind both entry points (conv2d_fused checks the group first).
void conv2d_v4_group(const ConvShape& s, const ConvGroup<float>& grp, cudaStream_t stream) {
  const igemm::Params g = igemm::make_params(s, kBK);
  const dim3 grid(gpu100::ceil_div(g.M, kBM), gpu100::ceil_div(s.k, kBN), grp.count);
  bool aligned = true;  // the float4 stores
  for (int i = 0; i < grp.count; ++i) {
    aligned = aligned && reinterpret_cast<uintptr_t>(grp.op[i].y) % 16 == 0;
  }
  if (g.PQ % 4 == 0 && aligned) {
    conv2d_implicit_gemm_kernel<true><<<grid, kThreads, 0, stream>>>(g, grp);
  } else {
    conv2d_implicit_gemm_kernel<false><<<grid, kThreads, 0, stream>>>(g, grp);
  }
  CUDA_CHECK_LAST();
}
}  // namespace detail

void conv2d_v4_implicit_gemm(const ConvShape& s, const float* x, const float* w, const float* bias,
                             float* y, cudaStream_t stream) {
  check_conv_args(s);
  ConvGroup<float> grp;
  grp.op[0] = {x, w, bias, nullptr, y};
  detail::conv2d_v4_group(s, grp, stream);
}

}  // namespace day08
