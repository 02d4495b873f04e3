// Conv2d v12: v10 for the layer whose filters fit in shared memory (3x3 at stride 1, C <= 64,
// K <= 64: a ResNet's first stage), with each input pixel brought once per tile instead of once
// per tap (kernel code only in sm_90a targets; refused elsewhere). bf16 NHWC x and KRSC filters,
// fp32 accumulation. What changed from v10, and why it should be faster:
//  - v10's im2col copy brings a tap's 128 x 64 slab of A for each of the 9 taps: every input pixel
//    crosses from L2 to shared memory 9 times, and the 64 x 576 filters come again with every
//    tile. At C = K = 64 the tile's GEMM is short (9 slabs), so those copies, not the tensor cores,
//    set the pace (Nsight Compute on v10 at this layer: L2 the busiest unit at 65% of its peak,
//    the SM's issue slots 45% busy; results/h100/profiles.txt).
//  - here a block loads all 9 x 64 x 64 filters into shared memory once (72 KB) and keeps them
//    for every tile it takes. A warpgroup's tile is 8 x 8 output pixels (wgmma's M = 64) x 64
//    filters; its input is the 10 x 10 pixel halo around them, brought by one TMA copy of whole
//    128-byte pixels (64 channels), zero-filled past the image's edges and past C: 12.5 KB
//    instead of v10's 9 x 8 KB per 64 pixels.
//  - the trick that lets the tensor core read the halo in place: the halo is stored as rows of
//    128 bytes (one pixel each) in the 128-byte swizzle, [10 rows][10 columns][64 channels], so
//    the 8 pixels of one output row under tap (r, s) are 8 consecutive rows of it, starting
//    (row + r) x 10 + s rows in. The next output row is 10 pixels (SBO = 1280 bytes) further. The
//    swizzle is a function of the shared-memory address, so the tensor core finds each row's
//    chunks wherever the matrix starts, and the 9 taps are 9 descriptors into the same tile: 36
//    wgmma m64n64k16 per tile, with no copy and no barrier in between.
//  - three consumer warpgroups per block, each working on its own tiles from its own two halo
//    stages: while one stores its outputs, the others keep the tensor cores busy. A one-warp
//    producer fills the stages of all three.
//  - the fused form's bf16 NPQK outputs go through shared memory and the TMA: while a warpgroup's
//    multiplies run, one of its threads asks the TMA for the tile's residual (an 8 x 8-pixel box
//    of 64 channels, 8 KB, in the 128-byte swizzle) into the warpgroup's staging box; the warps
//    then read it with ldmatrix and write their bf16 outputs over it with stmatrix, in the
//    accumulators' own layout, and one thread stores the box with one TMA copy, which clips the
//    pixels past the image and the channels past K. No thread computes an output address or holds
//    the residual in registers, and the box is 8 KB of bf16 where fp32 sums needed 18.
// Measured (H100, N = 32, C = K = 64 at 104 x 136, results/h100/profiles.txt): an earlier form
// brought the halo in 8 copies of 8 channels (16 bytes of every 128-byte pixel a copy, a core
// matrix per output row in the no-swizzle layout), which left L2 at 83% of its peak with the SM
// 34% busy: 0.1075 ms. The whole-pixel copy takes it to 0.082 ms. In the network's l1 layers
// (the fused form with residual and ReLU) the staged outputs took the layer from 1.16 to 0.76 ms
// and the whole-pixel copy to 0.73 ms. Loading the fused form's residual right after issuing the
// tile's multiplies (not one piece after another between the stores) took them to 0.635 ms.
// Then the staged outputs through the TMA, on an H200 (an A/B in one run, results/h200/
// profiles.txt): l1's eight convolutions 0.620 to 0.532 ms (430 to 501 TFLOP/s); the graphed bf16
// network at N = 32 2.00 to 1.91 ms. The previous form wrote fp32 sums to shared memory, read
// them back as 8 channels of a pixel, and loaded the residual and stored the outputs 16 bytes a
// thread: 107 registers a thread now, 128 and a 20-byte spill before. (A third halo stage per
// warpgroup, which the smaller box makes room for, bought nothing: 0.538 ms.)
// Costs: sm_90a only; 3x3 filters, stride 1 and dilation 1 (any padding); C <= 64 and a multiple of
// 8, K <= 64 (channels and filters past them are zeros in shared memory, so smaller layers do the
// work of C = K = 64); tiles of 8 x 8 pixels compute the outputs past the image's last row and
// column too (none at 104 x 136, a tenth at 52 x 68); 16-byte aligned x and w; the staged outputs
// need K % 8 == 0 and 16-byte aligned y and residual (otherwise each thread stores its register
// pairs: halo_wgmma::store_registers). (Ideas: the canonical layouts of the PTX ISA's wgmma matrix
// descriptors; keeping a small layer's filters resident and reading the halo in place, as direct
// convolutions on shared memory do (v2, the PMPP book's tiled convolution), here fed to the tensor
// cores; staging the epilogue through shared memory and storing it by TMA, as CUTLASS's Hopper
// epilogues do.)
#include <cuda.h>
#include <cuda_bf16.h>

#include <climits>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "common/arch.cuh"
#include "common/cuda_check.hpp"
#include "common/math.hpp"
#include "common/occupancy.hpp"
#include "conv_day.hpp"
#include "halo_wgmma.cuh"
#include "implicit_gemm_nhwc.cuh"
#include "implicit_gemm_wgmma.cuh"
#include "tma.hpp"
#include "wgmma.cuh"

#if !GPU100_SM90A_CODE
#pragma nv_diag_suppress 177  // this target compiles the kernel body out, leaving its constants
#endif

namespace day08 {

namespace {
using bf16 = __nv_bfloat16;
constexpr const char* kName = "v12_halo_wgmma_bf16_nhwc";

// The tiling (all sizes in bytes unless named otherwise).
struct Tiling {
  static constexpr int kR = 3, kS = 3, kTaps = kR * kS;
  static constexpr int kTH = halo_wgmma::kTH, kTW = halo_wgmma::kTW;  // 8 x 8 pixels (M = 64)
  static constexpr int kHH = kTH + kR - 1, kHW = kTW + kS - 1;        // its 10 x 10 input pixels
  static constexpr int kChunks = 8;  // the filters' chunks of 8 channels: C <= 64
  static constexpr int kBN = 64;     // filters (wgmma's N)
  static constexpr int kConsumerWGs = 3, kStages = 2;
  static constexpr int kThreads = 128 * kConsumerWGs + 32;  // + the producer warp
  // One halo: [10 rows][10 columns][64 channels = 128 bytes] in the 128-byte swizzle, one copy;
  // a stage starts at a 1024-byte boundary (the swizzle's period).
  static constexpr int kHaloBytes = kHH * kHW * 128;
  static constexpr int kStageBytes = (kHaloBytes + 1023) / 1024 * 1024;
  // The filters: [tap][chunk][64 filters][8 channels].
  static constexpr int kFilterChunkBytes = kBN * 16;
  static constexpr int kTapBytes = kChunks * kFilterChunkBytes;
  static constexpr int kFilterBytes = kTaps * kTapBytes;
  static constexpr int kRings = kConsumerWGs * kStages;
  // A warpgroup's staged outputs: its tile's 64 pixels x 64 bf16 outputs, one 128-byte row a
  // pixel in the 128-byte swizzle (the layout of the TMA box that brings the residual in and takes
  // the outputs out).
  static constexpr int kOutBytes = 64 * 128;
  static constexpr size_t kSmemBytes = size_t(kFilterBytes) + size_t(kRings) * kStageBytes +
                                       size_t(kConsumerWGs) * kOutBytes +
                                       (2 * kRings + kConsumerWGs) * sizeof(uint64_t) + 1024;
  static_assert(kFilterBytes % 1024 == 0, "the halo stages start at 1024-byte boundaries");
  static_assert(kSmemBytes <= 227 * 1024, "over the 227 KB of shared memory a block may use");
  static_assert(kTH * kTW == 64, "one wgmma M = 64 per warpgroup");
};
using T = Tiling;

using halo_wgmma::Params;
using halo_wgmma::tile_pos;
using halo_wgmma::TilePos;

// The tensor maps: x's halos, and for the staged outputs y and the residual as [n][p][q][k] in
// boxes of 8 x 8 pixels x 64 channels (the same 128-byte swizzle), one each per convolution of
// the group (r0 and r1 unused without a residual).
struct Maps {
  CUtensorMap x0, x1, y0, y1, r0, r1;
};

// kNpqk false: the day's variant, fp32 NKPQ out (+ bias); true: conv.hpp's fused form, bf16 NPQK
// out with bias, residual and ReLU. blockIdx.z picks the convolution of the group. Warpgroup wg of
// block b takes tiles b + gridDim.x (wg + 3 round), round = 0, 1, ...: with few tiles (a batch of
// one) every block gets a tile before any gets a second.
template <class Y, bool kNpqk>
__global__ void __launch_bounds__(T::kThreads, 1)
    conv2d_v12_kernel(const Params a, const ConvGroup<bf16, Y> grp,
                      const __grid_constant__ Maps maps) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using namespace day04::wgmma;
  extern __shared__ uint8_t smem_raw[];
  uint8_t* const filters = smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023);
  uint8_t* const halos = filters + T::kFilterBytes;          // [warpgroup][stage]
  uint8_t* const outs = halos + T::kRings * T::kStageBytes;  // [warpgroup], 1024-aligned
  uint64_t* const full = reinterpret_cast<uint64_t*>(outs + T::kConsumerWGs * T::kOutBytes);
  uint64_t* const empty = full + T::kRings;
  uint64_t* const res_full = empty + T::kRings;  // [warpgroup]: its tile's residual has landed
  const auto tile_of = [&](int wg, int round) {
    return int(blockIdx.x) + int(gridDim.x) * (wg + T::kConsumerWGs * round);
  };
  if (threadIdx.x == 0) {
    for (int i = 0; i < T::kRings; ++i) {
      mbar_init(&full[i], 1);   // the producer's expect_tx arrival, and the copy's bytes
      mbar_init(&empty[i], 4);  // the 4 warps of the stage's warpgroup
    }
    for (int i = 0; i < T::kConsumerWGs; ++i) mbar_init(&res_full[i], 1);
    mbar_fence_init();
  }
  __syncthreads();  // the last block-wide barrier

  if (threadIdx.x >= 128 * T::kConsumerWGs) {
    // ---- producer warp: one thread brings each tile's halo ----
    if (threadIdx.x != 128 * T::kConsumerWGs) return;
    const CUtensorMap* map = blockIdx.z == 0 ? &maps.x0 : &maps.x1;
    for (int round = 0;; ++round) {
      if (tile_of(0, round) >= a.tiles) break;
      for (int wg = 0; wg < T::kConsumerWGs; ++wg) {
        const int t = tile_of(wg, round);
        if (t >= a.tiles) break;
        const int st = round % T::kStages, ring = wg * T::kStages + st;
        // The stage held this warpgroup's tile of round - kStages: wait until it is done with it.
        if (round >= T::kStages) mbar_wait(&empty[ring], (round / T::kStages - 1) & 1);
        const TilePos tp = tile_pos(a, t);
        uint8_t* dst = halos + ring * T::kStageBytes;
        // Rows p0 - pad .. p0 - pad + 9 and columns q0 - pad .. of image n, all 64 channels
        // (zeros outside the image and past C).
        mbar_expect_tx(&full[ring], T::kHaloBytes);
        tma_load_4d(dst, map, 0, tp.q0 - a.pad, tp.p0 - a.pad, tp.n, &full[ring]);
      }
    }
    return;
  }

  // ---- consumer warpgroups ----
  const ConvOperands<bf16, Y> op = blockIdx.z == 0 ? grp.op[0] : grp.op[1];
  const int tid = threadIdx.x, wg = tid / 128;
  const int lane = tid % 32, w4 = (tid / 32) % 4, gq = lane / 4, tq = lane % 4;
  // The filters, once per block: [tap][chunk j][filter f][8 channels] from KRSC, zeros past C and
  // K. Written by the generic proxy, read by wgmma (the async proxy): a proxy fence, then a barrier
  // of the consumer threads (the producer does not wait for it).
  for (int i = tid; i < T::kTaps * T::kChunks * T::kBN; i += 128 * T::kConsumerWGs) {
    const int f = i % T::kBN, j = (i / T::kBN) % T::kChunks, tap = i / (T::kBN * T::kChunks);
    uint4 v = make_uint4(0, 0, 0, 0);
    if (f < a.k && 8 * j < a.c) {
      v = *reinterpret_cast<const uint4*>(op.w + (size_t(f) * T::kTaps + tap) * a.c + 8 * j);
    }
    *reinterpret_cast<uint4*>(filters + size_t(i) * 16) = v;
  }
  fence_proxy_async_smem();
  asm volatile("bar.sync 1, %0;\n" ::"n"(128 * T::kConsumerWGs) : "memory");

  // The staged epilogue: this warpgroup's box of outputs, and the biases of this thread's
  // filters 8 j + 2 tq + e (zero past K).
  uint8_t* const out = outs + wg * T::kOutBytes;
  const CUtensorMap* const map_y = blockIdx.z == 0 ? &maps.y0 : &maps.y1;
  const CUtensorMap* const map_r = blockIdx.z == 0 ? &maps.r0 : &maps.r1;
  const bool residual = op.residual != nullptr;
  float bias16[16];
#pragma unroll
  for (int i = 0; i < 16; ++i) {
    const int k = 8 * (i / 2) + 2 * tq + i % 2;
    bias16[i] = op.bias != nullptr && k < a.k ? op.bias[k] : 0.f;
  }

  const uint64_t desc_b = make_desc_no_swizzle(filters, T::kFilterChunkBytes, 128);
  for (int round = 0;; ++round) {
    const int t = tile_of(wg, round);
    if (t >= a.tiles) break;
    const int st = round % T::kStages, ring = wg * T::kStages + st;
    mbar_wait(&full[ring], (round / T::kStages) & 1);  // the halo has landed
    uint8_t* const halo = halos + ring * T::kStageBytes;
    float d[32];
#pragma unroll
    for (int i = 0; i < 32; ++i) d[i] = 0.f;
    fence();
    // 9 taps x 4 k-steps of 16 channels. A for tap (r, s): output row g's 8 pixels are halo
    // pixels (g + r) x 10 + s .. + 7, 128 bytes each, so the tap's matrix starts r x 10 + s rows
    // into the halo, its 8-row groups 10 rows (1280 bytes) apart, and a k-step is 32 bytes
    // further along the rows. The swizzle is a function of the address (bits 4-6 XOR bits 7-9,
    // the pattern the TMA wrote from the 1024-byte boundary), so a matrix may start at any row.
    const uint64_t desc_a = make_desc(halo, 16, T::kHW * 128);
#pragma unroll
    for (int r = 0; r < T::kR; ++r)
#pragma unroll
      for (int s = 0; s < T::kS; ++s)
#pragma unroll
        for (int kk = 0; kk < T::kChunks / 2; ++kk) {
          const int a_off = (r * T::kHW + s) * 128 + kk * 32;
          const int b_off = (r * T::kS + s) * T::kTapBytes + 2 * kk * T::kFilterChunkBytes;
          wgmma_m64n64k16_bf16_ss(d, desc_a + (a_off >> 4), desc_b + (b_off >> 4), 1);
        }
    commit();
    const TilePos tp = tile_pos(a, t);
    if (kNpqk && a.staged && tid % 128 == 0) {
      // While the tensor cores work: the last tile's store has read the staging box (this thread
      // issued it), so the TMA may bring this tile's residual into it.
      bulk_wait_read_all();
      if (residual) {
        mbar_expect_tx(&res_full[wg], T::kOutBytes);
        tma_load_4d(out, map_r, 0, tp.q0, tp.p0, tp.n, &res_full[wg]);
      }
    }
    wait<0>();
    __syncwarp();
    if (lane == 0) mbar_arrive(&empty[ring]);  // the producer may refill the stage

    // ---- epilogue: d[4 j + 2 h + e] is row 16 w4 + gq + 8 h of the tile (output row 2 w4 + h,
    // column gq), filter 8 j + 2 tq + e ----
    if constexpr (kNpqk) {
      if (a.staged) {
        // Through shared memory and the TMA: the residual's box is read and the outputs written
        // in place with ldmatrix / stmatrix, four 8 x 8 matrices a warp at once in the
        // accumulators' own layout (lane l names row 16 w4 + (l / 8) % 2 * 8 + l % 8 and 16-byte
        // chunk 2 p + l / 16; register i holds row gq + 8 (i % 2), filters 16 p + 8 (i / 2) +
        // 2 tq, + 1), then one thread stores the box. The copies clip what lies past P, Q and K.
        asm volatile("bar.sync %0, 128;\n" ::"r"(2 + wg) : "memory");  // the box is free
        if (residual) mbar_wait(&res_full[wg], uint32_t(round) & 1);
        const int row = 16 * w4 + (lane / 8) % 2 * 8 + lane % 8;
#pragma unroll
        for (int p = 0; p < T::kBN / 16; ++p) {
          uint8_t* const addr = out + wgmma_conv::swizzle128(row, 2 * p + lane / 16);
          uint32_t res[4] = {0, 0, 0, 0};
          if (residual) day04::mma::ldmatrix_x4(res, addr);
          uint32_t o[4];
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            const int j = 2 * p + i / 2, h = i % 2;
            // The residual word is zero without a residual: added all the same.
            o[i] = wgmma_conv::finish_bf16x2(d[4 * j + 2 * h] + bias16[2 * j],
                                             d[4 * j + 2 * h + 1] + bias16[2 * j + 1], res[i], true,
                                             grp.relu);
          }
          day04::mma::stmatrix_x4(addr, o);
        }
        // Every warp's writes, then one thread's copy (the TMA reads shared memory through the
        // async proxy).
        fence_proxy_async_smem();
        asm volatile("bar.sync %0, 128;\n" ::"r"(2 + wg) : "memory");
        if (tid % 128 == 0) {
          tma_store_4d(map_y, out, 0, tp.q0, tp.p0, tp.n);
          bulk_commit();
        }
        continue;
      }
    }
    halo_wgmma::store_registers<T::kBN, kNpqk>(d, a, tp, w4, gq, tq, op, grp.relu);
  }
  // The staged outputs' last copy finishes before the block exits (its source is this block's
  // shared memory).
  if (kNpqk && a.staged && tid % 128 == 0) bulk_wait_all();
#else
  // Built for an architecture without wgmma: the launcher never calls this.
  (void)a, (void)grp, (void)maps;
#endif
}

// x [n][h][w][c] in boxes of 10 x 10 pixels x 64 channels (128 bytes a pixel, channels past C
// zero-filled), in the 128-byte swizzle.
CUtensorMap halo_map(const ConvShape& s, const bf16* x) {
  const long long c = s.c, w = s.w, h = s.h;
  return day04::make_tma_map_4d(x, {c, w, h, (long long)s.n}, {c, w * c, h * w * c},
                                {T::kBN, T::kHW, T::kHH, 1});
}

// y or the residual [n][p][q][k] in boxes of 8 x 8 pixels x 64 channels (the staged outputs).
CUtensorMap out_map(const ConvShape& s, const bf16* y) {
  const long long k = s.k, q = s.q(), p = s.p();
  return day04::make_tma_map_4d(y, {k, q, p, (long long)s.n}, {k, q * k, p * q * k},
                                {T::kBN, halo_wgmma::kTW, halo_wgmma::kTH, 1});
}

template <class Y, bool kNpqk>
void launch(const ConvShape& s, const ConvGroup<bf16, Y>& grp, cudaStream_t stream) {
  const Params a = halo_wgmma::make_params(kName, s, grp, kNpqk);
  constexpr auto kKernel = conv2d_v12_kernel<Y, kNpqk>;
  static gpu100::PerDevice<int> resident_per_gpu;
  const int resident = resident_per_gpu.get(
      [] { return gpu100::resident_blocks(kKernel, T::kThreads, T::kSmemBytes); });
  const int blocks = halo_wgmma::blocks(a, resident, grp.count);
  Maps maps{};
  maps.x0 = halo_map(s, grp.op[0].x);
  maps.x1 = grp.count > 1 ? halo_map(s, grp.op[1].x) : maps.x0;
  if constexpr (kNpqk) {
    if (a.staged) {
      maps.y0 = out_map(s, grp.op[0].y);
      maps.y1 = grp.count > 1 ? out_map(s, grp.op[1].y) : maps.y0;
      maps.r0 = grp.op[0].residual != nullptr ? out_map(s, grp.op[0].residual) : maps.y0;
      maps.r1 =
          grp.count > 1 && grp.op[1].residual != nullptr ? out_map(s, grp.op[1].residual) : maps.r0;
    }
  }
  kKernel<<<dim3(unsigned(blocks), 1, unsigned(grp.count)), T::kThreads, T::kSmemBytes, stream>>>(
      a, grp, maps);
  CUDA_CHECK_LAST();
}

}  // namespace

std::string v12_refusal(const ConvShape& s, bool /*bias*/) {
  return halo_wgmma::refusal(s, 8);
}

namespace detail {
// Y = float: the day's variant, fp32 NKPQ out (+ bias). Y = bf16: conv.hpp's fused layer form,
// bf16 NPQK out with bias, residual and ReLU.
template <class Y>
void conv2d_v12_group(const ConvShape& s, const ConvGroup<bf16, Y>& grp, cudaStream_t stream) {
  constexpr bool kNpqk = std::is_same_v<Y, bf16>;
  wgmma_conv::check_launch(kName, v12_refusal(s, false), s, grp, kNpqk, "TMA copies");
  launch<Y, kNpqk>(s, grp, stream);
}
template void conv2d_v12_group(const ConvShape&, const ConvGroup<bf16, bf16>&, cudaStream_t);
}  // namespace detail

void conv2d_v12_halo_wgmma_bf16_nhwc(const ConvShape& s, const bf16* x, const bf16* w,
                                     const float* bias, float* y, cudaStream_t stream) {
  check_conv_args(s);
  ConvGroup<bf16, float> grp;
  grp.op[0] = {x, w, bias, nullptr, y};
  detail::conv2d_v12_group(s, grp, stream);
}

}  // namespace day08
