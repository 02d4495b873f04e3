// Conv2d v10: v9 with its A tile brought by the TMA engine in im2col mode (kernel code only in
// sm_90a targets; refused elsewhere). bf16 NHWC x and KRSC filters, fp32 accumulation. What changed
// from v9, and why it should be faster:
//  - v9's producer warpgroup computes, for each of a slab's 128 rows, whether the tap falls in the
//    image and where, and issues 8 cp.async per thread per slab: address arithmetic, not the tensor
//    cores, sets its pace (on the network's stem Nsight Compute put the integer pipe first, 50%
//    busy: results/h100/mc_resnet18_ladder/4_persistent_v9_blocks_ncu_stem.txt). Here one
//    instruction per slab, cp.async.bulk.tensor.4d ... im2col, names the tile's first output pixel
//    and the filter tap (r, s); the copy engine walks the 128 output pixels itself (w fastest,
//    across rows and images), applies the stride, zero-fills the taps that fall in the padding and
//    the pixels past the last image, and writes the 128-byte-swizzled rows the wgmma reads. The
//    tensor map (cuTensorMapEncodeIm2col, day04's make_tma_map_im2col_nhwc) holds the layout of x,
//    the padding and the stride.
//  - GEMM_K is walked tap by tap: a slab is one (r, s) and 64 channels. The filters' box for it
//    starts at column (r S + s) C + c0 of the [K][R S C] weights. Where C is not a multiple of 64
//    the last slab of a tap reads channels past C, which the im2col copy zero-fills in A: the B
//    columns they meet (the next tap's weights) multiply zeros. That wastes tensor-core work, so
//    the fused layer form takes v10 for C % 64 == 0 (every 3x3 and 1x1 layer of a ResNet) and v9
//    for the rest.
//  - the producer is one warp, one of whose threads issues both copies; the stage's `full` barrier
//    waits for one arrival and the two copies' bytes.
// Costs: sm_90a only; C % 8 == 0 (the tensor's rows are 16-byte multiples for the TMA), a 16-byte
// aligned x and w, a stride of at most 8 and window corners within [-128, 127] (the im2col
// descriptor's limits); two tensor maps per convolution made on the host at each call.
// The tiling, the stages and the consumer warpgroups are v9's (implicit_gemm_wgmma.cuh).
// (Ideas: the PTX ISA's im2col tensor mode and cuTensorMapEncodeIm2col; CUTLASS's Hopper implicit
// GEMM convolution, whose producer issues im2col TMA copies.)
#include <cuda.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "common/arch.cuh"
#include "common/arch.hpp"
#include "common/cuda_check.hpp"
#include "common/math.hpp"
#include "conv_day.hpp"
#include "implicit_gemm_nhwc.cuh"
#include "implicit_gemm_wgmma.cuh"
#include "tma.hpp"
#include "wgmma.cuh"

#if !GPU100_SM90A_CODE
#pragma nv_diag_suppress 177  // this target compiles the kernel bodies out, leaving their constants
#endif

namespace day08 {

namespace {

using bf16 = __nv_bfloat16;
using nhwc::Params;

constexpr const char* kName = "v10_tma_im2col_wgmma_bf16_nhwc";

// The shared tiling with a one-warp producer.
template <int kBN>
using V10Config = wgmma_conv::Config<kBN, 32>;

// The im2col maps of x and the 2D maps of the weights, one each per convolution of the group.
struct V10Maps {
  CUtensorMap x0, x1, w0, w1;
};

// Y = float: the day's variant, fp32 NKPQ out (+ bias). Y = bf16: conv.hpp's fused layer form,
// bf16 NPQK out with bias, residual and ReLU. blockIdx.z picks the convolution of the group (and
// its maps); blockIdx.x the first of the output tiles the block loops over.
template <class C, class Y>
__global__ void __launch_bounds__(C::kThreads, C::kMinBlocks)
    conv2d_v10_kernel(Params g, const ConvGroup<bf16, Y> grp, int tiles_m, int tiles_n,
                      int c_blocks, const __grid_constant__ V10Maps maps) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using namespace day04::wgmma;
  constexpr int kBM = C::kBM, kBN = C::kBN, kBK = C::kBK, kStages = C::kStages;
  extern __shared__ uint8_t smem_raw[];
  const wgmma_conv::Stages<C> sm(smem_raw);
  const ConvOperands<bf16, Y> op = blockIdx.z == 0 ? grp.op[0] : grp.op[1];
  const int num_slabs = g.r * g.s * c_blocks;  // one tap x 64 channels each
  // full: the producer's one expect_tx arrival, with the two copies' bytes.
  wgmma_conv::init_stages(sm, 1);
  __syncthreads();  // the last block-wide barrier: from here the roles only meet on mbarriers

  if (threadIdx.x >= 128 * C::kConsumerWGs) {
    // ---- producer warp: one thread issues the A (im2col) and B (filters) copies of each slab ----
    if (threadIdx.x != 128 * C::kConsumerWGs) return;
    const CUtensorMap* map_x = blockIdx.z == 0 ? &maps.x0 : &maps.x1;
    const CUtensorMap* map_w = blockIdx.z == 0 ? &maps.w0 : &maps.w1;
    const int tiles = tiles_m * tiles_n;
    int it = 0;  // slab `it` uses stage it % kStages, in phase it / kStages of its barriers
    for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
      const int m_tile = tile / tiles_n;
      const int m0 = m_tile * kBM, k0 = (tile - m_tile * tiles_n) * kBN;
      // The first output pixel of the tile and its window's corner in x (in the padding, for the
      // image's first row or column): the copies start there, the engine walks the rest.
      const int n0 = m0 / g.PQ, pq = m0 - n0 * g.PQ, p0 = pq / g.Q, q0 = pq - p0 * g.Q;
      const int h0 = p0 * g.stride - g.pad, w0 = q0 * g.stride - g.pad;
      for (int r = 0; r < g.r; ++r)
        for (int s = 0; s < g.s; ++s)
          for (int cb = 0; cb < c_blocks; ++cb, ++it) {
            const int st = it % kStages;
            // The stage last held slab it - kStages: wait until the 8 consumer warps are done.
            if (it >= kStages) mbar_wait(&sm.empty[st], (it / kStages - 1) & 1);
            mbar_expect_tx(&sm.full[st], C::kABytes + C::kBBytes);
            // A: 128 pixels x channels 64 cb .. 64 cb + 63 of tap (r, s).
            tma_load_im2col_4d(sm.a(st), map_x, kBK * cb, w0, h0, n0, uint16_t(s * g.dil),
                               uint16_t(r * g.dil), &sm.full[st]);
            // B: filters k0 .. k0 + kBN - 1 at the same (r, s, c): rows past K and columns past
            // R*S*C are zero-filled by the TMA (and counted in its bytes).
            tma_load_2d(sm.b(st), map_w, (r * g.s + s) * g.c + kBK * cb, k0, &sm.full[st]);
          }
    }
    return;
  }

  // ---- consumer warpgroups (implicit_gemm_wgmma.cuh); A and B both came by TMA ----
  wgmma_conv::consume_tiles<C, Y, false>(g, op, grp.relu, tiles_m, tiles_n, num_slabs, sm);
#else
  // Built for an architecture without wgmma: the launcher never calls this.
  (void)g, (void)grp, (void)tiles_m, (void)tiles_n, (void)c_blocks, (void)maps;
#endif
}

CUtensorMap im2col_map(const ConvShape& s, const bf16* x, int pixels, int channels) {
  return day04::make_tma_map_im2col_nhwc(
      x, s.n, s.h, s.w, s.c, -s.pad, -s.pad, s.pad - (s.r - 1) * s.dilation,
      s.pad - (s.s - 1) * s.dilation, s.stride, s.stride, pixels, channels);
}

template <class C, class Y>
void launch_v10(const ConvShape& s, const ConvGroup<bf16, Y>& grp, cudaStream_t stream) {
  const Params g = nhwc::make_params(s, C::kBK);
  const wgmma_conv::PersistentGrid p =
      wgmma_conv::persistent_grid<C, conv2d_v10_kernel<C, Y>>(kName, g.M, s.k, grp.count);
  // x in im2col boxes of 128 pixels x 64 channels; the weights as a K x R*S*C matrix in boxes of
  // kBN filters x 64 of GEMM_K (128 bytes: the 128-byte swizzle the descriptors expect). A group
  // of one passes its maps twice.
  V10Maps maps;
  maps.x0 = im2col_map(s, grp.op[0].x, C::kBM, C::kBK);
  maps.w0 = day04::make_tma_map_2d(grp.op[0].w, s.k, g.RSC, C::kBN, C::kBK);
  maps.x1 = grp.count > 1 ? im2col_map(s, grp.op[1].x, C::kBM, C::kBK) : maps.x0;
  maps.w1 =
      grp.count > 1 ? day04::make_tma_map_2d(grp.op[1].w, s.k, g.RSC, C::kBN, C::kBK) : maps.w0;
  conv2d_v10_kernel<C, Y><<<p.grid, C::kThreads, C::kSmemBytes, stream>>>(
      g, grp, p.tiles_m, p.tiles_n, gpu100::ceil_div(s.c, C::kBK), maps);
  CUDA_CHECK_LAST();
}

}  // namespace

std::string v10_refusal(const ConvShape& s, bool /*bias*/) {
  if (s.c % 8 != 0) {
    return "C = " + std::to_string(s.c) +
           " is not a multiple of 8 (the TMA reads rows of whole 16-byte units; pad C with zeros)";
  }
  if (s.stride > 8) return "stride " + std::to_string(s.stride) + " is over the TMA's 8";
  const int reach = (std::max(s.r, s.s) - 1) * s.dilation;
  if (s.pad > 128 || reach - s.pad > 128) {
    return "the window's corners (padding " + std::to_string(s.pad) + ", reach " +
           std::to_string(reach) + ") are outside the im2col copy's [-128, 127]";
  }
  return "";
}

namespace detail {
template <class Y>
void conv2d_v10_group(const ConvShape& s, const ConvGroup<bf16, Y>& grp, cudaStream_t stream) {
  wgmma_conv::check_launch(kName, v10_refusal(s, false), s, grp, "TMA copies");
  if (s.k <= 64) {
    launch_v10<V10Config<64>, Y>(s, grp, stream);
  } else {
    launch_v10<V10Config<128>, Y>(s, grp, stream);
  }
}
template void conv2d_v10_group(const ConvShape&, const ConvGroup<bf16, bf16>&, cudaStream_t);
}  // namespace detail

void conv2d_v10_tma_im2col_wgmma_bf16_nhwc(const ConvShape& s, const bf16* x, const bf16* w,
                                           const float* bias, float* y, cudaStream_t stream) {
  check_conv_args(s);
  ConvGroup<bf16, float> grp;
  grp.op[0] = {x, w, bias, nullptr, y};
  detail::conv2d_v10_group(s, grp, stream);
}

}  // namespace day08
