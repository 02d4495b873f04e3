// Conv2d v9: v6's implicit GEMM on Hopper's warpgroup MMA (kernel code only in sm_90a targets;
// refused elsewhere), bf16 NHWC x and KRSC filters, fp32 accumulation. What changed from v6, and
// why it should be faster:
//  - wgmma instead of mma.sync: a warpgroup (4 warps) issues one asynchronous m64nNk16 whose A and
//    B come straight from shared memory through matrix descriptors: no ldmatrix, no fragment
//    registers, and one instruction does what 32 (N = 64) or 64 (N = 128) of v6's m16n8k16 do;
//  - warp specialisation: a producer warpgroup gathers the im2col tile of A with 16-byte cp.async
//    (zero-filled in the padding, as v6) straight into the 128-byte swizzled layout wgmma reads;
//    one of its threads loads the filters' tile (B: the KRSC weights are a plain [K][R*S*C]
//    matrix) as one TMA box; 2 consumer warpgroups only multiply. 4 stages go round between them
//    on mbarriers, `full` (the hardware arrives for each producer thread once its cp.async have
//    landed; the TMA counts its bytes) and `empty` (all 8 consumer warps are done with the stage):
//    no __syncthreads in the loop, and 3 stages of copies are in flight while one is multiplied;
//  - 64 of GEMM_K per stage (one 128-byte swizzle row), twice v6's, and the A gather goes through
//    L1 (cp.async.ca): neighbouring pixels' windows overlap, so a 3x3 filter's taps re-read x;
//  - persistent blocks: as many as fit the GPU, each looping over output tiles, with the stages
//    running on from one tile to the next, so the producer gathers the next tile while the
//    consumers store this one (a layer with few slabs per tile, such as the ResNet stem's 4 or a
//    64-channel 3x3's 9, would otherwise wait on each tile's pipeline fill and epilogue).
// Costs: sm_90a only; 384 threads and 101 KB (N = 64) or 133 KB (N = 128) of shared memory per
// block; C % 8 == 0 as v6, or C = 4 with S even (a stem's input, two taps per 16 bytes); the
// weights' TMA map (cuTensorMapEncodeTiled) is made on the host at each call, and one
// generic-to-async proxy fence per stage and consumer thread (consume_tiles). (Ideas: CUTLASS's
// Hopper implicit GEMM convolution, its warp-specialised mainloops with a cp.async producer and
// wgmma consumers, and its NHWC activation iterator; the PTX ISA for wgmma, its matrix descriptors
// and swizzled layouts, cp.async.mbarrier.arrive, mbarriers and proxy fences; day04's v12 for the
// pipeline and its wrappers (wgmma.cuh, tma.hpp), day05's v5 for the warpgroup roles.)
//
// The tiling, the stages and the consumer warpgroups are in implicit_gemm_wgmma.cuh (v10 shares
// them); this file holds v9's producer warpgroup and the launcher.
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
#include "common/mbarrier.cuh"
#include "conv_day.hpp"
#include "implicit_gemm_nhwc.cuh"
#include "implicit_gemm_wgmma.cuh"
#include "mma.cuh"
#include "tma.hpp"
#include "wgmma.cuh"

#if !GPU100_SM90A_CODE
#pragma nv_diag_suppress 177  // this target compiles the kernel bodies out, leaving their constants
#endif

namespace day08 {

namespace {

using bf16 = __nv_bfloat16;
using namespace day04::wgmma;  // descriptors, wgmma, mbarriers, TMA (day04's wgmma.cuh)
using day04::mma::cp_async_16_ca;
using day04::mma::cp_async_8_ca;
using nhwc::Params;  // the shape and the GEMM_K walk, shared with v6 (implicit_gemm_nhwc.cuh)
using nhwc::RscPos;

constexpr const char* kName = "v9_implicit_gemm_wgmma_bf16_nhwc";

// v9's tiling: the shared one with a producer warpgroup. Its copy roles: thread pt copies chunk
// pt % 8 (channels 8 (pt % 8) .. + 7 of the slab) of rows pt / 8 + kRowsPerPass i, i <
// kRowsPerThread (16 rows per pass, 8 passes). ptxas (CUDA 13.0) gives the kernel 62 to 72
// registers per thread with kBN = 64 (2 blocks fit an SM) and 94 or 96 with kBN = 128.
template <int kBN>
struct V9Config : wgmma_conv::Config<bf16, kBN, 128> {
  static constexpr int kRowsPerPass = 128 / 8;
  static constexpr int kRowsPerThread = 128 / kRowsPerPass;
};

// Y = float: the day's variant, fp32 NKPQ out (+ bias). Y = bf16: conv.hpp's fused layer form,
// bf16 NPQK out with bias, residual and ReLU. blockIdx.z picks the convolution of the group (and
// its weights' TMA map); blockIdx.x the first of the output tiles the block loops over.
// kPairs: C = 4 (S even), each 16-byte chunk of a row is taps (r, s) and (r, s + 1) of one pixel,
// copied as two 8-byte cp.async (the stems' layout); otherwise C % 8 == 0, one 16-byte cp.async of
// 8 channels of one tap.
template <class C, class Y, bool kPairs>
__global__ void __launch_bounds__(C::kThreads, C::kMinBlocks)
    conv2d_v9_kernel(Params g, const ConvGroup<bf16, Y> grp, int tiles_m, int tiles_n,
                     const __grid_constant__ CUtensorMap map_w0,
                     const __grid_constant__ CUtensorMap map_w1) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int kBM = C::kBM, kBN = C::kBN, kBK = C::kBK, kStages = C::kStages;
  extern __shared__ uint8_t smem_raw[];
  const wgmma_conv::Stages<C> sm(smem_raw);
  const ConvOperands<bf16, Y> op = blockIdx.z == 0 ? grp.op[0] : grp.op[1];
  const CUtensorMap* map_w = blockIdx.z == 0 ? &map_w0 : &map_w1;
  const int tid = threadIdx.x, wg = tid / 128;
  const int num_slabs = gpu100::ceil_div(g.RSC, kBK);
  const int tiles = tiles_m * tiles_n;
  // full: one cp.async arrival per producer thread, plus the expect_tx arrival of the thread that
  // issues the TMA box (with its bytes).
  wgmma_conv::init_stages(sm, C::kProducerThreads + 1);
  __syncthreads();  // the last block-wide barrier: from here the roles only meet on mbarriers

  // Slab number `it` (counted over this block's tiles) uses stage it % kStages, in phase
  // it / kStages of that stage's barriers.
  if (wg == C::kConsumerWGs) {
    // ---- producer warpgroup: the A gather (every thread) and the B box (thread 0) ----
    const bf16* __restrict__ x = op.x;
    const int pt = tid - 128 * C::kConsumerWGs;
    // Chunk cj of rows row0 + 16 i: a warp copies 4 rows x 128 bytes per pass (4 pixels' 64
    // channels of one (r, s) when C >= 64: contiguous in x for neighbouring pixels at stride 1).
    const int cj = pt % 8, row0 = pt / 8;
    int it = 0;
    for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
      const int m_tile = tile / tiles_n;
      const int m0 = m_tile * kBM, k0 = (tile - m_tile * tiles_n) * kBN;
      // The pixel part of each row's address, computed once per tile: the image base n*H*W*C and
      // the window corner (ih0, iw0); a pixel past the end gets an ih0 that fails every row test
      // (zero-filled).
      // rowoff: the element offset of the window's corner (it may lie in the padding, even be
      // negative: it is only used where the tap's pixel is inside the image).
      int rowoff[C::kRowsPerThread], ih0[C::kRowsPerThread], iw0[C::kRowsPerThread];
#pragma unroll
      for (int i = 0; i < C::kRowsPerThread; ++i) {
        const int m = m0 + row0 + C::kRowsPerPass * i;
        if (m < g.M) {
          const int n = m / g.PQ, pq = m - n * g.PQ, p = pq / g.Q, q = pq - p * g.Q;
          ih0[i] = p * g.stride - g.pad;
          iw0[i] = q * g.stride - g.pad;
          rowoff[i] = n * g.HWC + (ih0[i] * g.w + iw0[i]) * g.c;
        } else {
          rowoff[i] = 0;
          ih0[i] = INT_MIN / 2;
          iw0[i] = 0;
        }
      }
      RscPos kp;  // the GEMM_K position of this thread's chunk in the next slab
      kp.init(8 * cj, g);
      int gk = 8 * cj;
      // Row row0 + 16 i of a tile, chunk cj: the swizzle's XOR term is the same for every i
      // (16 i is a multiple of 8), so the destinations are dst0 + 2048 i.
      const int dst0 = wgmma_conv::swizzle128(row0, cj);
      for (int t = 0; t < num_slabs; ++t, ++it) {
        const int st = it % kStages;
        // The stage last held slab it - kStages: wait until the 8 consumer warps are done with it.
        if (it >= kStages) mbar_wait(&sm.empty[st], (it / kStages - 1) & 1);
        if (pt == 0) {
          // B: filters k0 .. k0 + kBN - 1, GEMM_K t * 64 ..: one box; rows past K and columns past
          // R*S*C are zero-filled by the TMA (and still counted in its bytes).
          mbar_expect_tx(&sm.full[st], C::kBBytes);
          tma_load_2d(sm.b(st), map_w, t * kBK, k0, &sm.full[st]);
        }
        // A: this thread's kRowsPerThread chunks of 8 channels at (r, s, c) = kp; zero-filled in
        // the padding, past the last pixel and past GEMM_K (C*R*S % 8 == 0: a chunk is wholly in
        // or out). The tap's offset from the window corner is the same for every row: computed
        // once per slab, each row adds it to its corner and checks its bounds (the gather's
        // integer work is most of the producer's instructions).
        const bool kvalid = gk < g.RSC;
        const int rd = kp.r * g.dil, sd = kp.s * g.dil;
        const int off = (rd * g.w + sd) * g.c + kp.c;
        uint8_t* as = sm.a(st) + dst0;
#pragma unroll
        for (int i = 0; i < C::kRowsPerThread; ++i) {
          const bool row_ok = kvalid && unsigned(ih0[i] + rd) < unsigned(g.h);
          const int iw = iw0[i] + sd;
          const bool ok = row_ok && unsigned(iw) < unsigned(g.w);
          uint8_t* dst = as + C::kRowsPerPass * 128 * i;
          if constexpr (kPairs) {
            // Taps s and s + 1 (kp.c == 0, kp.s even): columns iw and iw + dil, 4 channels each.
            const bool ok1 = row_ok && unsigned(iw + g.dil) < unsigned(g.w);
            cp_async_8_ca(dst, x + (ok ? rowoff[i] + off : 0), ok);
            cp_async_8_ca(dst + 8, x + (ok1 ? rowoff[i] + off + 4 * g.dil : 0), ok1);
          } else {
            cp_async_16_ca(dst, x + (ok ? rowoff[i] + off : 0), ok);
          }
        }
        // The hardware arrives on full[st] for this thread once these copies (and all its
        // earlier ones) have landed; the thread goes on to the next stage at once.
        gpu100::mbar::cp_async_arrive_noinc(&sm.full[st]);
        kp.advance(g);
        gk += kBK;
      }
    }
    // Nothing in flight when this thread leaves (the consumers' waits already imply it).
    day04::mma::cp_async_commit();
    day04::mma::cp_async_wait<0>();
    return;
  }

  // ---- consumer warpgroups (implicit_gemm_wgmma.cuh); A came through the generic proxy ----
  wgmma_conv::consume_tiles<C, Y, true, std::is_same_v<Y, bf16>>(g, op, grp.relu, tiles_m, tiles_n,
                                                                 num_slabs, sm);
#else
  // Built for an architecture without wgmma: the launcher never calls this.
  (void)g, (void)grp, (void)tiles_m, (void)tiles_n, (void)map_w0, (void)map_w1;
#endif
}

template <class C, class Y, bool kPairs>
void launch_v9(const ConvShape& s, const ConvGroup<bf16, Y>& grp, cudaStream_t stream) {
  const Params g = nhwc::make_params(s, C::kBK);
  const wgmma_conv::PersistentGrid p =
      wgmma_conv::persistent_grid<C, conv2d_v9_kernel<C, Y, kPairs>>(kName, g.M, s.k, grp.count);
  // The weights as a K x R*S*C matrix, read in boxes of kBN filters x 64 of GEMM_K (128 bytes:
  // the 128-byte swizzle the descriptors expect). A group of one passes its map twice.
  const CUtensorMap map0 = day04::make_tma_map_2d(grp.op[0].w, s.k, g.RSC, C::kBN, C::kBK);
  const CUtensorMap map1 =
      grp.count > 1 ? day04::make_tma_map_2d(grp.op[1].w, s.k, g.RSC, C::kBN, C::kBK) : map0;
  conv2d_v9_kernel<C, Y, kPairs>
      <<<p.grid, C::kThreads, C::kSmemBytes, stream>>>(g, grp, p.tiles_m, p.tiles_n, map0, map1);
  CUDA_CHECK_LAST();
}

}  // namespace

namespace detail {
template <class Y>
void conv2d_v9_group(const ConvShape& s, const ConvGroup<bf16, Y>& grp, cudaStream_t stream) {
  wgmma_conv::check_launch(kName, v9_refusal(s, false), s, grp, std::is_same_v<Y, bf16>,
                           "16-byte cp.async, TMA");
  const bool pairs = s.c % 8 != 0;  // C = 4, S even (v9_refusal)
  if (s.k <= 64) {
    pairs ? launch_v9<V9Config<64>, Y, true>(s, grp, stream)
          : launch_v9<V9Config<64>, Y, false>(s, grp, stream);
  } else {
    pairs ? launch_v9<V9Config<128>, Y, true>(s, grp, stream)
          : launch_v9<V9Config<128>, Y, false>(s, grp, stream);
  }
}
template void conv2d_v9_group(const ConvShape&, const ConvGroup<bf16, bf16>&, cudaStream_t);
}  // namespace detail

void conv2d_v9_implicit_gemm_wgmma_bf16_nhwc(const ConvShape& s, const bf16* x, const bf16* w,
                                             const float* bias, float* y, cudaStream_t stream) {
  check_conv_args(s);
  ConvGroup<bf16, float> grp;
  grp.op[0] = {x, w, bias, nullptr, y};
  detail::conv2d_v9_group(s, grp, stream);
}

}  // namespace day08
