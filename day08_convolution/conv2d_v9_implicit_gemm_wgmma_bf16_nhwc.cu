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
// Costs: sm_90a only; 384 threads and 97 KB (N = 64) or 129 KB (N = 128) of shared memory per
// block; C % 8 == 0 as v6, or C = 4 with S even (a stem's input, two taps per 16 bytes); the
// weights' TMA map (cuTensorMapEncodeTiled) is made on the host at each call, and one
// generic-to-async proxy fence per stage and consumer thread (below). (Ideas: CUTLASS's Hopper
// implicit GEMM convolution, its warp-specialised mainloops with a cp.async producer and wgmma
// consumers, and its NHWC activation iterator; the PTX ISA for wgmma, its matrix descriptors and
// swizzled layouts, cp.async.mbarrier.arrive, mbarriers and proxy fences; day04's v12 for the
// pipeline and its wrappers (wgmma.cuh, tma.hpp), day05's v5 for the warpgroup roles.)
//
// Tiles: 128 output pixels x kBN filters x 64 of GEMM_K per stage; kBN = 64 when K <= 64 (wgmma
// m64n64k16; 32 accumulators per thread; sized for 2 blocks per SM), else 128 (m64n128k16; 64
// accumulators; one block per SM).
// Threads: warpgroups 0 and 1 consume (pixels 64 wg .. 64 wg + 63 of the tile), warpgroup 2
// produces. Shared memory, from a 1024-byte boundary: kStages x [A: 128 rows x 128 bytes | B: kBN
// rows x 128 bytes], then the 2 x kStages mbarriers. Both operands are K-major (a row is 64
// consecutive GEMM_K values of one pixel or one filter), in the 128-byte swizzle: the 16-byte
// chunk j of row r sits at r * 128 + 16 (j ^ (r % 8)), which is what the TMA writes for B, what the
// producer writes for A, and what the descriptors (swizzle mode 128B, 1024 bytes per 8 rows) read.
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

// One tiling. kBN: filters per block (the wgmma's N).
template <int kBN_>
struct V9Config {
  static constexpr int kBM = 128, kBN = kBN_, kBK = 64, kStages = 4;
  static constexpr int kConsumerWGs = 2, kConsumerWarps = 4 * kConsumerWGs;
  static constexpr int kThreads = 128 * (kConsumerWGs + 1);  // + the producer warpgroup
  static constexpr int kProducerThreads = 128;
  static constexpr int kABytes = kBM * 128, kBBytes = kBN * 128;  // 128 bytes = kBK bf16 per row
  static constexpr int kStageBytes = kABytes + kBBytes;
  static constexpr size_t kSmemBytes =
      size_t(kStages) * kStageBytes + 2 * kStages * sizeof(uint64_t) + 1024 /* alignment */;
  // The producer's copy roles: thread pt copies chunk pt % 8 (channels 8 (pt % 8) .. + 7 of the
  // slab) of rows pt / 8 + kRowsPerPass i, i < kRowsPerThread (16 rows per pass, 8 passes).
  static constexpr int kRowsPerPass = kProducerThreads / 8;
  static constexpr int kRowsPerThread = kBM / kRowsPerPass;
  // kBN = 64: 97 KB of shared memory and at most 85 registers per thread (ptxas, CUDA 13.0: 64
  // for the fp32 epilogue, 72 for the bf16 one), so that 2 blocks fit an SM and one block's
  // epilogue and pipeline fill can overlap the other's main loop; kBN = 128: 129 KB (90 and 92
  // registers), one block per SM.
  static constexpr int kMinBlocks = kBN == 64 ? 2 : 1;
  static_assert(kBN == 64 || kBN == 128, "wgmma m64n64k16 or m64n128k16");
  static_assert(kBM == 64 * kConsumerWGs, "one m64 row block per consumer warpgroup");
  static_assert(kBM % kRowsPerPass == 0, "whole copy passes");
  static_assert(kSmemBytes <= 227 * 1024, "over the 227 KB of shared memory a block may use");
};

// d (64 x kBN) += A (64 x 16) * B (16 x kBN), both from shared memory, both K-major.
template <int kBN>
__device__ __forceinline__ void wgmma_k16(float (&d)[kBN / 2], uint64_t desc_a, uint64_t desc_b) {
  if constexpr (kBN == 128) {
    wgmma_m64n128k16_bf16_ss(d, desc_a, desc_b, 1);
  } else {
    wgmma_m64n64k16_bf16_ss(d, desc_a, desc_b, 1);
  }
}

// The byte offset of 16-byte chunk j of row r in a tile of 128-byte rows, 128-byte swizzle.
__device__ __forceinline__ int swizzle128(int r, int j) {
  return r * 128 + ((j ^ (r & 7)) << 4);
}

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
  // The 128-byte swizzle repeats every 1024 bytes: every tile must start on a 1024-byte boundary
  // (each stage's A and B sizes are multiples of 1024).
  uint8_t* smem = smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023);
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + kStages * C::kStageBytes);  // [kStages]
  uint64_t* empty = full + kStages;                                               // [kStages]
  auto a_tile = [&](int st) { return smem + st * C::kStageBytes; };
  auto b_tile = [&](int st) { return smem + st * C::kStageBytes + C::kABytes; };

  const ConvOperands<bf16, Y> op = blockIdx.z == 0 ? grp.op[0] : grp.op[1];
  const CUtensorMap* map_w = blockIdx.z == 0 ? &map_w0 : &map_w1;
  const int tid = threadIdx.x, wg = tid / 128;
  const int num_slabs = gpu100::ceil_div(g.RSC, kBK);
  // Persistent: block b takes tiles b, b + gridDim.x, ... (filter tiles fastest: the blocks that
  // share an A tile run together, so its gather is served by L2). The stages and their barrier
  // phases run on across tiles, counted by `it` (one per slab), so the producer fills the next
  // tile's stages while the consumers store this one's outputs.
  const int tiles = tiles_m * tiles_n;

  if (tid == 0) {
    for (int st = 0; st < kStages; ++st) {
      // full: one cp.async arrival per producer thread, plus the expect_tx arrival of the thread
      // that issues the TMA box (with its bytes); empty: one arrival per consumer warp.
      mbar_init(&full[st], C::kProducerThreads + 1);
      mbar_init(&empty[st], C::kConsumerWarps);
    }
    mbar_fence_init();
  }
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
      const int dst0 = swizzle128(row0, cj);
      for (int t = 0; t < num_slabs; ++t, ++it) {
        const int st = it % kStages;
        // The stage last held slab it - kStages: wait until the 8 consumer warps are done with it.
        if (it >= kStages) mbar_wait(&empty[st], (it / kStages - 1) & 1);
        if (pt == 0) {
          // B: filters k0 .. k0 + kBN - 1, GEMM_K t * 64 ..: one box; rows past K and columns past
          // R*S*C are zero-filled by the TMA (and still counted in its bytes).
          mbar_expect_tx(&full[st], C::kBBytes);
          tma_load_2d(b_tile(st), map_w, t * kBK, k0, &full[st]);
        }
        // A: this thread's kRowsPerThread chunks of 8 channels at (r, s, c) = kp; zero-filled in
        // the padding, past the last pixel and past GEMM_K (C*R*S % 8 == 0: a chunk is wholly in
        // or out). The tap's offset from the window corner is the same for every row: computed
        // once per slab, each row adds it to its corner and checks its bounds (the gather's
        // integer work is most of the producer's instructions).
        const bool kvalid = gk < g.RSC;
        const int rd = kp.r * g.dil, sd = kp.s * g.dil;
        const int off = (rd * g.w + sd) * g.c + kp.c;
        uint8_t* as = a_tile(st) + dst0;
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
        gpu100::mbar::cp_async_arrive_noinc(&full[st]);
        kp.advance(g);
        gk += kBK;
      }
    }
    // Nothing in flight when this thread leaves (the consumers' waits already imply it).
    day04::mma::cp_async_commit();
    day04::mma::cp_async_wait<0>();
    return;
  }

  // ---- consumer warpgroups: wg owns pixels 64 wg .. 64 wg + 63 of the tile; warp w4 of it rows
  // 16 w4 .. 16 w4 + 15 of those; lane (gq, tq): rows gq and gq + 8, filters 8 j + 2 tq + {0, 1}
  // (the m64nN accumulator layout, wgmma.cuh) ----
  const int lane = tid % 32, w4 = (tid / 32) % 4, gq = lane / 4, tq = lane % 4;
  // This warp is done reading stage st: one of the 8 arrivals the producer waits for.
  auto release = [&](int st) {
    __syncwarp();
    if (lane == 0) mbar_arrive(&empty[st]);
  };
  int it = 0;
  for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const int m_tile = tile / tiles_n;
    const int m0 = m_tile * kBM, k0 = (tile - m_tile * tiles_n) * kBN;
    float d[kBN / 2];
#pragma unroll
    for (int i = 0; i < kBN / 2; ++i) d[i] = 0.f;
    for (int t = 0; t < num_slabs; ++t, ++it) {
      const int st = it % kStages;
      mbar_wait(&full[st], (it / kStages) & 1);  // slab it's A chunks and B box have landed
      // A was written by cp.async (the generic proxy) and wgmma reads it through the async
      // proxy: a proxy fence after the wait, before the reads (B came by TMA, already the async
      // proxy).
      fence_proxy_async_smem();
      fence();  // wgmma.fence: the accumulator registers, before this slab's multiplies
      // 4 k-steps of 16: each is 32 bytes further inside every 128-byte row (the swizzle is
      // applied by the hardware on the address); this warpgroup's 64 A rows start 8 KB into the
      // A tile.
#pragma unroll
      for (int kk = 0; kk < kBK / 16; ++kk) {
        const uint64_t da = make_desc(a_tile(st) + wg * 64 * 128 + kk * 32, 16, 1024);
        const uint64_t db = make_desc(b_tile(st) + kk * 32, 16, 1024);
        wgmma_k16<kBN>(d, da, db);
      }
      commit();
      wait<1>();  // the previous slab's multiplies are done (this one's may still run)
      if (t >= 1) release((it - 1) % kStages);
    }
    wait<0>();                    // the tile's last multiplies
    release((it - 1) % kStages);  // its stage too: the producer is filling the next tile's

    // ---- epilogue (straight from the registers, while the producer fills the next tile's
    // stages): d[4 j + 2 h + e] is pixel m0 + 64 wg + 16 w4 + gq + 8 h, filter
    // k0 + 8 j + 2 tq + e ----
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int m = m0 + 64 * wg + 16 * w4 + gq + 8 * h;
      if (m >= g.M) continue;
      if constexpr (std::is_same_v<Y, float>) {
        // fp32 NKPQ: for one register the 8 lanes of a tq write 8 consecutive pixels (32 bytes)
        // of one output plane, as v6.
        const int n = m / g.PQ;
        float* yp = op.y + size_t(n) * g.k * g.PQ + (m - n * g.PQ);
#pragma unroll
        for (int j = 0; j < kBN / 8; ++j)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int k = k0 + 8 * j + 2 * tq + e;
            if (k < g.k) {
              yp[size_t(k) * g.PQ] = d[4 * j + 2 * h + e] + (op.bias != nullptr ? op.bias[k] : 0.f);
            }
          }
      } else {
        // bf16 NPQK: the two filters of a register pair are adjacent channels of one pixel.
#pragma unroll
        for (int j = 0; j < kBN / 8; ++j) {
          const int k = k0 + 8 * j + 2 * tq;
          if (k >= g.k) continue;  // K is even (the launcher checks): k + 1 < K too
          nhwc::store_bf16_pair(op, grp.relu, m, k, g.k, d[4 * j + 2 * h], d[4 * j + 2 * h + 1]);
        }
      }
    }
  }
#else
  // Built for an architecture without wgmma: the launcher never calls this.
  (void)g, (void)grp, (void)tiles_m, (void)tiles_n, (void)map_w0, (void)map_w1;
#endif
}

template <class C, class Y, bool kPairs>
void launch_v9(const ConvShape& s, const ConvGroup<bf16, Y>& grp, cudaStream_t stream) {
  static const bool attr_set = [] {
    CUDA_CHECK(cudaFuncSetAttribute(conv2d_v9_kernel<C, Y, kPairs>,
                                    cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    int(C::kSmemBytes)));
    return true;
  }();
  (void)attr_set;
  const Params g = nhwc::make_params(s, C::kBK);
  const int tiles_n = gpu100::ceil_div(s.k, C::kBN), tiles_m = gpu100::ceil_div(g.M, C::kBM);
  const int64_t tiles = int64_t(tiles_m) * tiles_n;
  if (tiles > int64_t(INT_MAX)) {
    throw std::invalid_argument(std::string(kName) + ": more output tiles than a grid holds");
  }
  // The weights as a K x R*S*C matrix, read in boxes of kBN filters x 64 of GEMM_K (128 bytes:
  // the 128-byte swizzle the descriptors expect). A group of one passes its map twice.
  const CUtensorMap map0 = day04::make_tma_map_2d(grp.op[0].w, s.k, g.RSC, C::kBN, C::kBK);
  const CUtensorMap map1 =
      grp.count > 1 ? day04::make_tma_map_2d(grp.op[1].w, s.k, g.RSC, C::kBN, C::kBK) : map0;
  // Persistent: as many blocks as fit on the GPU at once (shared among the group's
  // convolutions), each looping over tiles; fewer when there are fewer tiles.
  static const int resident = [] {
    int per_sm = 0, dev = 0, sms = 0;
    CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
        &per_sm, conv2d_v9_kernel<C, Y, kPairs>, C::kThreads, C::kSmemBytes));
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    return std::max(1, per_sm) * sms;
  }();
  const int64_t blocks = std::min<int64_t>(tiles, std::max(1, resident / grp.count));
  const dim3 grid(static_cast<unsigned>(blocks), 1, grp.count);
  conv2d_v9_kernel<C, Y, kPairs>
      <<<grid, C::kThreads, C::kSmemBytes, stream>>>(g, grp, tiles_m, tiles_n, map0, map1);
  CUDA_CHECK_LAST();
}

}  // namespace

namespace detail {
template <class Y>
void conv2d_v9_group(const ConvShape& s, const ConvGroup<bf16, Y>& grp, cudaStream_t stream) {
  if (const std::string why = v9_refusal(s, false); !why.empty()) {
    throw std::invalid_argument(std::string(kName) + ": " + why);
  }
  if constexpr (std::is_same_v<Y, bf16>) {
    if (s.k % 2 != 0) {
      throw std::invalid_argument(std::string(kName) +
                                  ": K must be even for bf16 output (two channels per store)");
    }
  }
  nhwc::require_aligned16(kName, grp, "16-byte cp.async, TMA");
  gpu100::require_build(gpu100::ArchNeed::kSm90a, kName);
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
