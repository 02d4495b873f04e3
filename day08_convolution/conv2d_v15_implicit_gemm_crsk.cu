// Conv2d v15: v4's implicit GEMM with the filters laid out for the copy.
// Changed from v4: v4 reads B, the KCRS filters, where they lie. Column k of B is filter k's
// C*R*S weights, so the 64 filters of one GEMM_K row sit C*R*S words apart, and every 4-byte
// cp.async a warp issues for B touches 32 different 128-byte cache lines, one per lane: 32 warp
// instructions and 1,024 line lookups in L1 per slab for 4 KB of weights, where the gathered A
// tile (8 KB) costs about 64 instructions and 200 lookups. v15 transposes the filters once into
// CRSK order: B row-major, GEMM_K rows of K filters, the row pitch rounded up to 4 floats and the
// pad zeroed. A slab's B tile is then 16 rows of contiguous floats, and it comes in 16-byte
// cp.async chunks, as day04's SGEMM v8 copies its tiles: 8 warp instructions and 32 lookups.
// The A gather (implicit_gemm.cuh), the 3-stage pipeline, day04's WarpTile and the fused epilogue
// are v4's. The transpose is a small kernel (the filters are read and written once; at
// ResNet-18's widest layer, 4.7 MB) whose time is part of this variant's; a network transposes
// its filters once, at load (conv.hpp's conv2d_fused_crsk).
// With B cheap, the block tile can grow: 128 pixels x 128 filters with 8 warps where K > 64,
// halving the A gathers per FMA (each gathered pixel serves 128 filters instead of 64).
// Measured (H100, results/h100/day08_convolution*.json): 0.498 ms at MC-ResNet18's l4 stride-2
// layer (v4 1.133: 33.5 TFLOP/s, 2.28x), 1.47 ms at the 7x8 stem (v4 1.89), 0.413 ms at the
// ResNet layer (v4 0.517). Nsight Compute at the stride-2 layer: v4's L1 at 77% of its peak with
// the schedulers issuing on 31% of their cycles, v15's L1 at 55% and issue at 67%.
#include <cstdint>
#include <stdexcept>

#include "common/cuda_check.hpp"
#include "common/math.hpp"
#include "common/occupancy.hpp"
#include "conv_day.hpp"
#include "implicit_gemm.cuh"
#include "tiles.cuh"

namespace day08 {

namespace {

constexpr int kBM = 128, kBK = 16, kWM = 64, kWN = 32, kStages = 3;
constexpr int kPitchA = kBM + day04::tiles::kAPad;  // As[kk][m], the layout WarpTile reads

// The filters' row pitch in CRSK: K rounded up to 4 floats, so every row starts on 16 bytes.
int crsk_pitch(const ConvShape& s) {
  return gpu100::round_up(s.k, 4);
}

// wt[g][k] = w[k][g] for g = (c, r, s) < C*R*S, k < K; wt[g][k] = 0 for K <= k < pitch.
// One thread per element of wt, consecutive threads along k: the writes are coalesced and the
// reads, C*R*S words apart, hit the lines the neighbouring rows of the same filters bring into L2.
__global__ void transpose_filters_kernel(const float* __restrict__ w, float* __restrict__ wt, int k,
                                         int crs, int pitch) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= int64_t(crs) * pitch) return;
  const int g = int(i / pitch), kk = int(i - int64_t(g) * pitch);
  wt[i] = kk < k ? w[int64_t(kk) * crs + g] : 0.f;
}

// The block: kBM pixels x BN filters, 2 x (BN / 32) warps of 64 x 32 (8 x 8 outputs a thread).
template <int BN>
struct Tile {
  static constexpr int kThreads = (kBM / kWM) * (BN / kWN) * 32;  // 128 or 256
  static constexpr int kWarps = kThreads / 32;
  using Warp = day04::tiles::WarpTile<kBM, BN, kBK, kWM, kWN>;
  // A: warp w gathers GEMM_K rows w * kKRows .. of the slab for the block's 128 pixels.
  using Gather = igemm::AGather<kBM / 32, kBK / kWarps>;
  static constexpr int kStageFloats = kBK * kPitchA + kBK * BN;  // As, then Bs
  static constexpr size_t kSmemBytes = sizeof(float) * kStages * kStageFloats;
  // B: kBK rows x BN / 4 chunks of 16 bytes, kChunks a thread.
  static constexpr int kChunks = kBK * BN / 4 / kThreads;
  static_assert(kBK % kWarps == 0 && kChunks * kThreads * 4 == kBK * BN, "the copies split evenly");
  static_assert(Warp::TM == 8 && Warp::TN == 8, "8 x 8 outputs per thread");
};

// blockIdx.z picks the convolution of the group (conv.hpp's fused form). op.w is the CRSK matrix
// (crsk_pitch floats a row). kVecOut: as v4's.
template <int BN, bool kVecOut>
__global__ void __launch_bounds__(Tile<BN>::kThreads)
    conv2d_v15_kernel(igemm::Params g, int pitch, const ConvGroup<float> grp) {
  using T = Tile<BN>;
  const ConvOperands<float> op = blockIdx.z == 0 ? grp.op[0] : grp.op[1];
  const float* __restrict__ x = op.x;
  const float* __restrict__ wt = op.w;
  extern __shared__ __align__(16) float smem[];
  auto as = [&](int st) { return smem + st * T::kStageFloats; };
  auto bs = [&](int st) { return smem + st * T::kStageFloats + kBK * kPitchA; };
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int m0 = blockIdx.x * kBM, k0 = blockIdx.y * BN;

  typename T::Gather ga;
  ga.init(g, m0, warp * (kBK / T::kWarps), lane);
  const int num_slabs = gpu100::ceil_div(g.CRS, kBK);

  auto load_slab = [&](int stage, int slab) {
    ga.load(x, as(stage), kPitchA, g, lane);
#pragma unroll
    for (int i = 0; i < T::kChunks; ++i) {
      const int f = tid + i * T::kThreads, kk = f / (BN / 4), c = (f % (BN / 4)) * 4;
      const int gk = slab * kBK + kk, k = k0 + c;
      const bool ok = gk < g.CRS && k < pitch;  // a chunk is wholly inside a row, or outside
      igemm::cp_async_16(bs(stage) + kk * BN + c, ok ? wt + size_t(gk) * pitch + k : wt, ok);
    }
  };

  // v4's 3-stage pipeline (implicit_gemm.cuh).
  typename T::Warp tile;
  tile.zero();
  const int wm0 = (warp % (kBM / kWM)) * kWM, wn0 = (warp / (kBM / kWM)) * kWN;
  igemm::pipelined_slabs<kStages>(num_slabs, load_slab,
                                  [&](int st) { tile.mma(as(st), bs(st), wm0, wn0, lane); });
  igemm::store_nkpq<kVecOut>(tile, op, grp.relu, g, m0, k0, wm0, wn0, lane);
}

template <int BN, bool kVecOut>
void launch(const igemm::Params& g, int pitch, const ConvGroup<float>& grp, cudaStream_t stream) {
  using T = Tile<BN>;
  static gpu100::PerDevice<bool> opted_in;  // > 48 KB at BN = 128, on every GPU it runs on
  opted_in.get([] {
    CUDA_CHECK(cudaFuncSetAttribute(conv2d_v15_kernel<BN, kVecOut>,
                                    cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(T::kSmemBytes)));
    return true;
  });
  const dim3 grid(gpu100::ceil_div(g.M, kBM), gpu100::ceil_div(g.s.k, BN), grp.count);
  conv2d_v15_kernel<BN, kVecOut><<<grid, T::kThreads, T::kSmemBytes, stream>>>(g, pitch, grp);
  CUDA_CHECK_LAST();
}

template <int BN>
void launch_tile(const igemm::Params& g, int pitch, const ConvGroup<float>& grp,
                 cudaStream_t stream) {
  bool aligned = true;  // the float4 stores
  for (int i = 0; i < grp.count; ++i) aligned = aligned && gpu100::aligned16(grp.op[i].y);
  if (g.PQ % 4 == 0 && aligned) {
    launch<BN, true>(g, pitch, grp, stream);
  } else {
    launch<BN, false>(g, pitch, grp, stream);
  }
}

}  // namespace

namespace detail {
size_t v15_filter_floats(const ConvShape& s) {
  return size_t(s.c) * s.r * s.s * size_t(crsk_pitch(s));
}

void v15_transform_filters(const ConvShape& s, const float* w, float* wt, cudaStream_t stream) {
  const int crs = s.c * s.r * s.s, pitch = crsk_pitch(s);
  const int64_t total = int64_t(crs) * pitch;
  constexpr int kThreads = 256;
  transpose_filters_kernel<<<static_cast<unsigned>(gpu100::ceil_div<int64_t>(total, kThreads)),
                             kThreads, 0, stream>>>(w, wt, s.k, crs, pitch);
  CUDA_CHECK_LAST();
}

void conv2d_v15_group(const ConvShape& s, const ConvGroup<float>& grp, cudaStream_t stream) {
  for (int i = 0; i < grp.count; ++i) {
    if (!gpu100::aligned16(grp.op[i].w)) {
      throw std::invalid_argument("conv2d_v15: the CRSK filters must be 16-byte aligned");
    }
  }
  const igemm::Params g = igemm::make_params(s, kBK);
  // 128 filters a block where K > 64 and the wider blocks still fill the GPU once; else 64 (at
  // N = 1 the deep layers have a few dozen blocks: narrower ones halve each block's work).
  const int64_t wide_blocks = int64_t(gpu100::ceil_div(g.M, kBM)) * gpu100::ceil_div(s.k, 128);
  if (s.k > 64 && wide_blocks >= sm_count()) {
    launch_tile<128>(g, crsk_pitch(s), grp, stream);
  } else {
    launch_tile<64>(g, crsk_pitch(s), grp, stream);
  }
}
}  // namespace detail

void conv2d_v15_implicit_gemm_crsk(const ConvShape& s, const float* x, const float* w,
                                   const float* bias, float* y, cudaStream_t stream) {
  check_conv_args(s);
  // The transposed filters live in day08's scratch buffer, made at every call (as v7's U).
  float* wt =
      static_cast<float*>(conv_scratch(sizeof(float) * detail::v15_filter_floats(s), stream));
  detail::v15_transform_filters(s, w, wt, stream);
  ConvGroup<float> grp;
  grp.op[0] = {x, wt, bias, nullptr, y};
  detail::conv2d_v15_group(s, grp, stream);
}

}  // namespace day08
