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
//    filters; its input is the 10 x 10 pixel halo around them, brought by the TMA engine in 8
//    copies of 8 channels each (day04's make_tma_map_nhwc_8ch), zero-filled past the image's
//    edges: 12.5 KB instead of v10's 9 x 8 KB per 64 pixels.
//  - the trick that lets the tensor core read the halo in place: with no swizzle, a wgmma operand
//    is built of 8-row x 16-byte core matrices, each 128 contiguous bytes, at two strides: LBO
//    between core matrices along k, SBO between groups of 8 rows (day04's make_desc_no_swizzle).
//    The halo is stored [8-channel chunk][10 rows][10 columns][8 channels], so the 8 pixels of
//    one output row under tap (r, s) are 8 consecutive halo pixels: one core matrix, starting
//    ((row + r) x 10 + s) x 16 bytes into the chunk. The next output row is 10 pixels (SBO = 160
//    bytes) further, the next 8 channels one chunk (LBO) further. So the 9 taps are 9 descriptors
//    into the same tile: 36 wgmma m64n64k16 per tile, with no copy and no barrier in between.
//  - three consumer warpgroups per block, each working on its own tiles from its own two halo
//    stages: while one stores its outputs, the others keep the tensor cores busy. A one-warp
//    producer fills the stages of all three.
// Costs: sm_90a only; 3x3 filters, stride 1 and dilation 1 (any padding); C <= 64 and a multiple of
// 8, K <= 64 (channels and filters past them are zeros in shared memory, so smaller layers do the
// work of C = K = 64); tiles of 8 x 8 pixels compute the outputs past the image's last row and
// column too (none at 104 x 136, a tenth at 52 x 68); 16-byte aligned x and w.
// What limits it (Nsight Compute at the network's l1, N = 32: results/h100/profiles.txt): L2, at
// 83% of its peak, with DRAM at 46% and the SM 34% busy (shared memory its busiest pipe). A trial
// with a cp.async producer warpgroup (whole 128-byte lines of x per warp), two accumulator sets so
// one tile's multiplies overlap the last one's stores, and 16-byte stores was no faster (L2 at
// 84%), so the simpler kernel stays. (Ideas: the no-swizzle canonical layout of the PTX ISA's wgmma
// matrix descriptors; keeping a small layer's filters resident and reading the halo in place, as
// direct convolutions on shared memory do (v2, the PMPP book's tiled convolution), here fed to the
// tensor cores.)
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
  static constexpr int kTH = 8, kTW = 8;  // a warpgroup's tile: 8 x 8 output pixels (M = 64)
  static constexpr int kHH = kTH + kR - 1, kHW = kTW + kS - 1;  // its 10 x 10 input pixels
  static constexpr int kChunks = 8;                             // 8 channels each: C <= 64
  static constexpr int kBN = 64;                                // filters (wgmma's N)
  static constexpr int kConsumerWGs = 3, kStages = 2;
  static constexpr int kThreads = 128 * kConsumerWGs + 32;  // + the producer warp
  // One 8-channel copy of the halo: [10][10][16 bytes]; chunks start at 128-byte boundaries.
  static constexpr int kCopyBytes = kHH * kHW * 16;
  static constexpr int kChunkBytes = (kCopyBytes + 127) / 128 * 128;
  static constexpr int kStageBytes = kChunks * kChunkBytes;
  // The filters: [tap][chunk][64 filters][8 channels].
  static constexpr int kFilterChunkBytes = kBN * 16;
  static constexpr int kTapBytes = kChunks * kFilterChunkBytes;
  static constexpr int kFilterBytes = kTaps * kTapBytes;
  static constexpr int kRings = kConsumerWGs * kStages;
  static constexpr size_t kSmemBytes =
      size_t(kFilterBytes) + size_t(kRings) * kStageBytes + 2 * kRings * sizeof(uint64_t) + 128;
  static_assert(kSmemBytes <= 227 * 1024, "over the 227 KB of shared memory a block may use");
  static_assert(kTH * kTW == 64, "one wgmma M = 64 per warpgroup");
};
using T = Tiling;

struct Params {
  int c, k, pad, p, q, tiles_p, tiles_q, tiles;
};

// x's 8-channel halo maps, one per convolution of the group.
struct Maps {
  CUtensorMap x0, x1;
};

// Tile t: image n, first output row p0 and column q0.
struct TilePos {
  int n, p0, q0;
};
__device__ __forceinline__ TilePos tile_pos(const Params& a, int t) {
  const int tq = t % a.tiles_q, t2 = t / a.tiles_q;
  const int tp = t2 % a.tiles_p;
  return {t2 / a.tiles_p, tp * T::kTH, tq * T::kTW};
}

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
  uint8_t* const filters = smem_raw + ((128 - (smem_addr(smem_raw) & 127)) & 127);
  uint8_t* const halos = filters + T::kFilterBytes;  // [warpgroup][stage]
  uint64_t* const full = reinterpret_cast<uint64_t*>(halos + T::kRings * T::kStageBytes);
  uint64_t* const empty = full + T::kRings;
  const auto tile_of = [&](int wg, int round) {
    return int(blockIdx.x) + int(gridDim.x) * (wg + T::kConsumerWGs * round);
  };
  if (threadIdx.x == 0) {
    for (int i = 0; i < T::kRings; ++i) {
      mbar_init(&full[i], 1);   // the producer's expect_tx arrival, and the copies' bytes
      mbar_init(&empty[i], 4);  // the 4 warps of the stage's warpgroup
    }
    mbar_fence_init();
  }
  __syncthreads();  // the last block-wide barrier

  if (threadIdx.x >= 128 * T::kConsumerWGs) {
    // ---- producer warp: one thread brings each tile's halo, 8 copies of 8 channels ----
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
        mbar_expect_tx(&full[ring], T::kChunks * T::kCopyBytes);
        const TilePos tp = tile_pos(a, t);
        uint8_t* dst = halos + ring * T::kStageBytes;
        // Rows p0 - pad .. p0 - pad + 9 and columns q0 - pad .. of image n (zeros outside it);
        // channels past C are zeros too.
#pragma unroll
        for (int j = 0; j < T::kChunks; ++j) {
          tma_load_4d(dst + j * T::kChunkBytes, map, 8 * j, tp.q0 - a.pad, tp.p0 - a.pad, tp.n,
                      &full[ring]);
        }
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

  const uint64_t desc_b = make_desc_no_swizzle(filters, T::kFilterChunkBytes, 128);
  const int pq = a.p * a.q;
  for (int round = 0;; ++round) {
    const int t = tile_of(wg, round);
    if (t >= a.tiles) break;
    const int st = round % T::kStages, ring = wg * T::kStages + st;
    mbar_wait(&full[ring], (round / T::kStages) & 1);  // the halo has landed
    const uint64_t desc_a =
        make_desc_no_swizzle(halos + ring * T::kStageBytes, T::kChunkBytes, T::kHW * 16);
    float d[32];
#pragma unroll
    for (int i = 0; i < 32; ++i) d[i] = 0.f;
    fence();
    // 9 taps x 4 k-steps of 16 channels. A for tap (r, s): output row g's 8 pixels are halo row
    // g + r, columns s .. s + 7; descriptors count 16-byte units.
#pragma unroll
    for (int r = 0; r < T::kR; ++r)
#pragma unroll
      for (int s = 0; s < T::kS; ++s)
#pragma unroll
        for (int kk = 0; kk < T::kChunks / 2; ++kk) {
          const int a_off = (r * T::kHW + s) * 16 + 2 * kk * T::kChunkBytes;
          const int b_off = (r * T::kS + s) * T::kTapBytes + 2 * kk * T::kFilterChunkBytes;
          wgmma_m64n64k16_bf16_ss(d, desc_a + (a_off >> 4), desc_b + (b_off >> 4), 1);
        }
    commit();
    wait<0>();
    __syncwarp();
    if (lane == 0) mbar_arrive(&empty[ring]);  // the producer may refill the stage

    // ---- epilogue: d[4 j + 2 h + e] is row 16 w4 + gq + 8 h of the tile (output row 2 w4 + h,
    // column gq), filter 8 j + 2 tq + e ----
    const TilePos tp = tile_pos(a, t);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int p = tp.p0 + 2 * w4 + h, q = tp.q0 + gq;
      if (p >= a.p || q >= a.q) continue;
      if constexpr (kNpqk) {
        const int64_t m = (int64_t(tp.n) * a.p + p) * a.q + q;
#pragma unroll
        for (int j = 0; j < T::kBN / 8; ++j) {
          const int k = 8 * j + 2 * tq;
          if (k >= a.k) continue;  // K is even (the launcher checks): k + 1 < K too
          nhwc::store_pair(op, grp.relu, m, k, a.k, d[4 * j + 2 * h], d[4 * j + 2 * h + 1]);
        }
      } else {
        static_assert(std::is_same_v<Y, float>, "the day's variant writes fp32");
        float* yp = op.y + size_t(tp.n) * a.k * pq + size_t(p) * a.q + q;
#pragma unroll
        for (int j = 0; j < T::kBN / 8; ++j)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int k = 8 * j + 2 * tq + e;
            if (k < a.k) {
              yp[size_t(k) * pq] = d[4 * j + 2 * h + e] + (op.bias != nullptr ? op.bias[k] : 0.f);
            }
          }
      }
    }
  }
#else
  // Built for an architecture without wgmma: the launcher never calls this.
  (void)a, (void)grp, (void)maps;
#endif
}

template <class Y, bool kNpqk>
void launch(const ConvShape& s, const ConvGroup<bf16, Y>& grp, cudaStream_t stream) {
  Params a;
  a.c = s.c, a.k = s.k, a.pad = s.pad, a.p = s.p(), a.q = s.q();
  a.tiles_p = gpu100::ceil_div(a.p, T::kTH);
  a.tiles_q = gpu100::ceil_div(a.q, T::kTW);
  const int64_t tiles = int64_t(s.n) * a.tiles_p * a.tiles_q;
  if (tiles > int64_t(INT_MAX) / 2) {
    throw std::invalid_argument(std::string(kName) + ": more output tiles than a grid holds");
  }
  a.tiles = int(tiles);
  constexpr auto kKernel = conv2d_v12_kernel<Y, kNpqk>;
  static const int resident = gpu100::resident_blocks(kKernel, T::kThreads, T::kSmemBytes);
  const int blocks = int(std::min<int64_t>(tiles, std::max(1, resident / grp.count)));
  Maps maps;
  maps.x0 = day04::make_tma_map_nhwc_8ch(grp.op[0].x, s.n, s.h, s.w, s.c, T::kHW, T::kHH);
  maps.x1 = grp.count > 1
                ? day04::make_tma_map_nhwc_8ch(grp.op[1].x, s.n, s.h, s.w, s.c, T::kHW, T::kHH)
                : maps.x0;
  kKernel<<<dim3(unsigned(blocks), 1, unsigned(grp.count)), T::kThreads, T::kSmemBytes, stream>>>(
      a, grp, maps);
  CUDA_CHECK_LAST();
}

}  // namespace

std::string v12_refusal(const ConvShape& s, bool /*bias*/) {
  if (s.r != 3 || s.s != 3 || s.stride != 1 || s.dilation != 1) {
    return "takes 3x3 filters at stride 1 and dilation 1 only (its halo tile is 10 x 10 pixels)";
  }
  if (s.c % 8 != 0 || s.c > 64) {
    return "C = " + std::to_string(s.c) +
           ": keeps every filter in shared memory, for C <= 64 and a multiple of 8 (16-byte "
           "copies)";
  }
  if (s.k > 64) {
    return "K = " + std::to_string(s.k) + ": keeps at most 64 filters in shared memory";
  }
  return "";
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
