// Conv2d v13: v12 on fp32 operands as TF32, for the 3x3 layers of C, K <= 64 (kernel code only in
// sm_90a targets; refused elsewhere). fp32 NHWC x and KRSC filters, fp32 accumulation. What
// changed from v11 and v12, and why it should be faster:
//  - v11 brings a tap's 128 x 32 slab of A for each of the 9 taps and both channel halves: every
//    input pixel crosses from L2 to shared memory 9 times, 4 bytes a channel. At the network's
//    first stage (C = K = 64) Nsight Compute put v11's L2 at 76% of its peak, the busiest unit,
//    with the tensor cores far from theirs (results/h100/profiles.txt).
//  - v12's answer carries over: the filters stay in shared memory, and each 8 x 8 output tile
//    brings its 10 x 10 pixel halo once, which the 9 taps read in place through shifted
//    descriptors. In fp32 the numbers double. A pixel's 64 channels are 256 bytes, two rows of
//    the 128-byte swizzle, so the halo comes in two copies (channels 0-31 and 32-63), each
//    [10 rows][10 columns][128 bytes]; a tap's 8 k-steps (k8, 32 bytes each) are 4 in one half
//    and 4 in the other. The filters, [tap][16 chunks of 4 channels][64 filters][16 bytes], fill
//    147 KB: v12's 72 KB twice.
//  - so the shared memory holds one halo stage per consumer warpgroup (3 x 26 KB) instead of two,
//    and no staging box for the outputs. A warpgroup hands its stage back to the producer as soon
//    as its 72 wgmma are done, before its epilogue, so the next tile's halo comes in while this
//    tile's outputs go out: each thread has loaded its residual while the multiplies ran, in the
//    accumulators' own layout, and stores its finished pairs of outputs straight from registers
//    (8 bytes each; a warp's store is 8 pixels x 32 bytes, whole sectors). With three warpgroups,
//    two compute while one stores.
//    Measured against the form before it, which kept the stage through the epilogue (its sums
//    went through the stage to come out 8 channels of a pixel per thread, 16-byte stores): the
//    network's l1 in TF32 (eight fused convolutions, N = 32) 1.137 to 1.043 ms, 235 to 256
//    TFLOP/s; a third form, the outputs stored from the stage by the TMA (which holds the stage
//    until the copies have read it), 1.18 ms. One build, three forms, two rounds each, on an
//    H200 (results/h200/profiles.txt). One stage per warpgroup leaves the halo's latency as the
//    thing to hide: the shorter the stage is held, the less of it shows.
//  - so each stage works as two, one per channel half: the halo's two copies have their own
//    barriers, the warpgroup multiplies half 0 (9 taps x 4 k-steps) as soon as its copy lands and
//    half 1 as soon as that one does, and hands half 0 back while half 1's multiplies still run.
//    The next tile's first copy then travels under this tile's second half and epilogue, with no
//    more shared memory. The producer warp gives each warpgroup its own lane, so no copy waits
//    behind another warpgroup's release. Predicted: most of the halo's latency hidden, l1 from
//    1.04 ms towards the 0.9 ms the tensor pipe's 57% -> 65% would give. Measured (one build, both
//    forms, two rounds each, H200): l1's eight convolutions 1.039 / 1.040 to 1.019 / 1.024 ms
//    (257 to 261 TFLOP/s): 2%, not the 10% predicted, so most of what the tiles still wait for
//    is not the halo's latency (the TF32 network at N = 32: 3.599 to 3.585 ms).
//  - Nsight Compute on that form's fused l1 launch (139 us): tensor pipe 52%, the L1 data pipe 83%
//    of its peak, 52.5 points of it shared memory (the wgmma operand reads) and about 30 the
//    epilogue's 8-byte residual loads and output stores (a warp instruction touches eight 32-byte
//    pieces of eight pixels), long-scoreboard stalls the largest. So the epilogue works 16 bytes a
//    thread: lanes tq and tq ^ 1 swap one pair each by shuffle, after which a thread holds four
//    consecutive filters, and a warp's load or store is 8 pixels x 64 bytes: half the
//    instructions and wavefronts. Predicted: the epilogue's share of the pipe from 30 to about 15
//    points, l1 from 1.02 to 0.93-0.97 ms. Measured (one build, both forms, two rounds each, H200):
//    l1's eight convolutions 1.027 / 1.026 to 0.990 / 0.990 ms (260 to 270 TFLOP/s), 4%; the TF32
//    network at N = 32 on two streams 3.740 to 3.691 ms.
// Costs: sm_90a only; 3x3 filters, stride 1 and dilation 1 (any padding); C <= 64 and a multiple
// of 4, K <= 64 (channels and filters past them are zeros in shared memory); tiles of 8 x 8 pixels
// compute the outputs past the image's last row and column; 16-byte aligned x and w; the
// epilogue above needs K % 8 == 0 and 16-byte aligned y and residual (otherwise each thread reads
// its residual and stores its pairs one at a time, halo_wgmma::store_registers). The tensor cores
// read the fp32 bits of x and w as TF32 (truncation), as v11's. (Ideas: v12's, and the same
// canonical layouts of the PTX ISA's wgmma descriptors, in their tf32 form.)
#include <cuda.h>

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
constexpr const char* kName = "v13_halo_wgmma_tf32_nhwc";

// The tiling (all sizes in bytes unless named otherwise).
struct Tiling {
  static constexpr int kR = 3, kS = 3, kTaps = kR * kS;
  static constexpr int kTH = halo_wgmma::kTH, kTW = halo_wgmma::kTW;  // 8 x 8 pixels (M = 64)
  static constexpr int kHH = kTH + kR - 1, kHW = kTW + kS - 1;        // its 10 x 10 input pixels
  static constexpr int kHalfChannels = 32;  // fp32 channels in a 128-byte row
  static constexpr int kChunks = 16;        // the filters' chunks of 4 channels: C <= 64
  static constexpr int kBN = 64;            // filters (wgmma's N)
  static constexpr int kConsumerWGs = 3;
  static constexpr int kThreads = 128 * kConsumerWGs + 32;  // + the producer warp
  // One half of a halo: [10 rows][10 columns][32 channels = 128 bytes] in the 128-byte swizzle,
  // starting at a 1024-byte boundary (the swizzle's period); a stage holds both halves.
  static constexpr int kHalfBytes = kHH * kHW * 128;
  static constexpr int kHalfStride = (kHalfBytes + 1023) / 1024 * 1024;
  static constexpr int kStageBytes = 2 * kHalfStride;
  // The filters: [tap][chunk][64 filters][4 channels].
  static constexpr int kFilterChunkBytes = kBN * 16;
  static constexpr int kTapBytes = kChunks * kFilterChunkBytes;
  static constexpr int kFilterBytes = kTaps * kTapBytes;
  static constexpr size_t kSmemBytes = size_t(kFilterBytes) + size_t(kConsumerWGs) * kStageBytes +
                                       4 * kConsumerWGs * sizeof(uint64_t) + 1024;
  static_assert(kFilterBytes % 1024 == 0, "the halo stages start at 1024-byte boundaries");
  static_assert(kSmemBytes <= 227 * 1024, "over the 227 KB of shared memory a block may use");
  static_assert(kTH * kTW == 64, "one wgmma M = 64 per warpgroup");
};
using T = Tiling;

using halo_wgmma::Maps;
using halo_wgmma::Params;
using halo_wgmma::tile_pos;
using halo_wgmma::TilePos;

using day04::mma::round_tf32;  // an output value as the next TF32 layer reads it

// kNpqk false: the day's variant, fp32 NKPQ out (+ bias); true: conv.hpp's fused form, fp32 NPQK
// out (rounded to TF32) with bias, residual and ReLU. blockIdx.z picks the convolution of the
// group. Warpgroup wg of block b takes tiles b + gridDim.x (wg + 3 round), round = 0, 1, ...
template <bool kNpqk>
__global__ void __launch_bounds__(T::kThreads, 1)
    conv2d_v13_kernel(const Params a, const ConvGroup<float> grp,
                      const __grid_constant__ Maps maps) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using namespace day04::wgmma;
  extern __shared__ uint8_t smem_raw[];
  uint8_t* const filters = smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023);
  uint8_t* const halos = filters + T::kFilterBytes;  // [warpgroup]
  // One full and one empty barrier per channel half of each warpgroup's stage: [warpgroup][half].
  uint64_t* const full = reinterpret_cast<uint64_t*>(halos + T::kConsumerWGs * T::kStageBytes);
  uint64_t* const empty = full + 2 * T::kConsumerWGs;
  const auto tile_of = [&](int wg, int round) {
    return int(blockIdx.x) + int(gridDim.x) * (wg + T::kConsumerWGs * round);
  };
  if (threadIdx.x == 0) {
    for (int i = 0; i < 2 * T::kConsumerWGs; ++i) {
      mbar_init(&full[i], 1);   // the producer's expect_tx arrival, and the copy's bytes
      mbar_init(&empty[i], 4);  // the 4 warps of the stage's warpgroup
    }
    mbar_fence_init();
  }
  __syncthreads();  // the last block-wide barrier

  if (threadIdx.x >= 128 * T::kConsumerWGs) {
    // ---- producer warp: lane wg brings warpgroup wg's halos, each in two copies (channels 0-31
    // and 32-63), each copy as soon as its half of the stage is free. One lane per warpgroup, so
    // that no warpgroup's copy waits behind another's release. ----
    const int wg = int(threadIdx.x) - 128 * T::kConsumerWGs;
    if (wg >= T::kConsumerWGs) return;
    const CUtensorMap* map = blockIdx.z == 0 ? &maps.x0 : &maps.x1;
    for (int round = 0;; ++round) {
      const int t = tile_of(wg, round);
      if (t >= a.tiles) break;
      const TilePos tp = tile_pos(a, t);
      uint8_t* dst = halos + wg * T::kStageBytes;
      for (int h = 0; h < 2; ++h) {
        uint64_t* const f = &full[2 * wg + h];
        // The half held this warpgroup's last tile: wait until its multiplies on it are done.
        if (round > 0) mbar_wait(&empty[2 * wg + h], (round - 1) & 1);
        // Rows p0 - pad .. p0 - pad + 9 and columns q0 - pad .. of image n, channels 32 h ..
        // 32 h + 31 (zeros outside the image and past C).
        mbar_expect_tx(f, T::kHalfBytes);
        tma_load_4d(dst + h * T::kHalfStride, map, h * T::kHalfChannels, tp.q0 - a.pad,
                    tp.p0 - a.pad, tp.n, f);
      }
    }
    return;
  }

  // ---- consumer warpgroups ----
  const ConvOperands<float, float> op = blockIdx.z == 0 ? grp.op[0] : grp.op[1];
  const int tid = threadIdx.x, wg = tid / 128;
  const int lane = tid % 32, w4 = (tid / 32) % 4, gq = lane / 4, tq = lane % 4;
  // The filters, once per block: [tap][chunk j][filter f][4 channels] from KRSC, zeros past C and
  // K. Written by the generic proxy, read by wgmma (the async proxy): a proxy fence, then a barrier
  // of the consumer threads (the producer does not wait for it).
  for (int i = tid; i < T::kTaps * T::kChunks * T::kBN; i += 128 * T::kConsumerWGs) {
    const int f = i % T::kBN, j = (i / T::kBN) % T::kChunks, tap = i / (T::kBN * T::kChunks);
    float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
    if (f < a.k && 4 * j < a.c) {
      v = *reinterpret_cast<const float4*>(op.w + (size_t(f) * T::kTaps + tap) * a.c + 4 * j);
    }
    *reinterpret_cast<float4*>(filters + size_t(i) * 16) = v;
  }
  fence_proxy_async_smem();
  asm volatile("bar.sync 1, %0;\n" ::"n"(128 * T::kConsumerWGs) : "memory");

  // The fused epilogue: the biases of this thread's filters 8 j + 2 tq + e (zero past K).
  float bias16[16];
#pragma unroll
  for (int i = 0; i < 16; ++i) {
    const int k = 8 * (i / 2) + 2 * tq + i % 2;
    bias16[i] = op.bias != nullptr && k < a.k ? op.bias[k] : 0.f;
  }

  const uint64_t desc_b = make_desc_no_swizzle(filters, T::kFilterChunkBytes, 128);
  uint8_t* const halo = halos + wg * T::kStageBytes;
  const uint64_t desc_a = make_desc(halo, 16, T::kHW * 128);
  for (int round = 0;; ++round) {
    const int t = tile_of(wg, round);
    if (t >= a.tiles) break;
    float d[32];
#pragma unroll
    for (int i = 0; i < 32; ++i) d[i] = 0.f;
    // Opaque copies of the descriptors: their 144 per-wgmma offsets are then added in each tile
    // rather than hoisted out of the loop into registers (which spilled).
    uint64_t da = desc_a, db = desc_b;
    asm volatile("" : "+l"(da), "+l"(db));
    // Channel half h (its k-steps 4 h .. 4 h + 3) as soon as its copy has landed: 9 taps x 4
    // k-steps of 8 channels, one commit group per half. A for tap (r, s): output row g's 8 pixels
    // are half-rows (g + r) x 10 + s .. + 7, so the tap's matrix starts r x 10 + s rows into the
    // half, its 8-row groups 10 rows (1280 bytes) apart, and a k-step is 32 bytes further along
    // the rows. B: k-step kk is chunks 2 kk and 2 kk + 1 of the tap.
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      mbar_wait(&full[2 * wg + h], round & 1);
      fence();  // before each half's first wgmma (ptxas would insert it after the wait otherwise)
#pragma unroll
      for (int r = 0; r < T::kR; ++r)
#pragma unroll
        for (int s = 0; s < T::kS; ++s)
#pragma unroll
          for (int k4 = 0; k4 < 4; ++k4) {
            const int kk = 4 * h + k4;
            const int a_off = h * T::kHalfStride + (r * T::kHW + s) * 128 + k4 * 32;
            const int b_off = (r * T::kS + s) * T::kTapBytes + 2 * kk * T::kFilterChunkBytes;
            wgmma_m64n64k8_tf32_ss(d, da + (a_off >> 4), db + (b_off >> 4), 1);
          }
      commit();
    }
    // While the tensor cores work: the residual this thread adds, 16 bytes at a time. The epilogue
    // below swaps pairs between lanes tq and tq ^ 1, so each thread ends with four consecutive
    // filters kq .. kq + 3 of filter group jw = 2 m + (tq & 1) (kq = 2 (tq & ~1)), and loads the
    // residual of those: a warp's load is 8 pixels x 64 bytes. Zero past P, Q and K. a.staged:
    // whole aligned rows of y and the residual (K % 8 == 0, 16-byte aligned).
    const TilePos tp = tile_pos(a, t);
    const bool fast = kNpqk && a.staged;
    const int jodd = tq & 1, kq = 2 * (tq & ~1);
    float4 res4[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) res4[i] = make_float4(0.f, 0.f, 0.f, 0.f);
    if (fast && op.residual != nullptr) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int p = tp.p0 + 2 * w4 + h, q = tp.q0 + gq;
        if (p >= a.p || q >= a.q) continue;
        const float* rp = op.residual + ((size_t(tp.n) * a.p + p) * size_t(a.q) + q) * a.k;
#pragma unroll
        for (int m = 0; m < T::kBN / 16; ++m) {
          const int k = 8 * (2 * m + jodd) + kq;
          if (k < a.k) res4[2 * m + h] = *reinterpret_cast<const float4*>(rp + k);
        }
      }
    }
    // Each half goes back to the producer once the multiplies that read it are done: channel half 0
    // while half 1's still run, so the next tile's first copy is on its way under them.
    wait<1>();
    __syncwarp();
    if (lane == 0) mbar_arrive(&empty[2 * wg]);
    wait<0>();
    __syncwarp();
    if (lane == 0) mbar_arrive(&empty[2 * wg + 1]);

    // ---- epilogue: d[4 j + 2 h + e] is row 16 w4 + gq + 8 h of the tile (output row 2 w4 + h,
    // column gq), filter 8 j + 2 tq + e ----
    if (fast) {
      // Bias first (in the accumulators' layout); then the swap of pairs between lanes tq and
      // tq ^ 1 (the even lane sends its pair of filter group 2 m + 1 and receives its neighbour's
      // of group 2 m, the odd lane the other way round); then the residual, ReLU and the rounding
      // to TF32 (as the next TF32 layer reads it). Every lane shuffles (the stores below are
      // guarded, the shuffles are not).
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int p = tp.p0 + 2 * w4 + h, q = tp.q0 + gq;
        const bool inside = p < a.p && q < a.q;
        float* const yp =
            op.y + ((size_t(tp.n) * a.p + (inside ? p : 0)) * size_t(a.q) + (inside ? q : 0)) * a.k;
#pragma unroll
        for (int m = 0; m < T::kBN / 16; ++m) {
          const int j0 = 2 * m, j1 = 2 * m + 1;
          const float2 p0 = make_float2(d[4 * j0 + 2 * h] + bias16[2 * j0],
                                        d[4 * j0 + 2 * h + 1] + bias16[2 * j0 + 1]);
          const float2 p1 = make_float2(d[4 * j1 + 2 * h] + bias16[2 * j1],
                                        d[4 * j1 + 2 * h + 1] + bias16[2 * j1 + 1]);
          const float2 send = jodd ? p0 : p1;
          const float rx = __shfl_xor_sync(0xffffffffu, send.x, 1);
          const float ry = __shfl_xor_sync(0xffffffffu, send.y, 1);
          float4 v = jodd ? make_float4(rx, ry, p1.x, p1.y) : make_float4(p0.x, p0.y, rx, ry);
          const float4 r = res4[2 * m + h];
          v.x += r.x, v.y += r.y, v.z += r.z, v.w += r.w;
          if (grp.relu) {
            v.x = fmaxf(v.x, 0.f), v.y = fmaxf(v.y, 0.f), v.z = fmaxf(v.z, 0.f),
            v.w = fmaxf(v.w, 0.f);
          }
          const int k = 8 * (2 * m + jodd) + kq;
          if (inside && k < a.k) {
            *reinterpret_cast<float4*>(yp + k) =
                make_float4(round_tf32(v.x), round_tf32(v.y), round_tf32(v.z), round_tf32(v.w));
          }
        }
      }
    } else {
      halo_wgmma::store_registers<T::kBN, kNpqk>(d, a, tp, w4, gq, tq, op, grp.relu);
    }
  }
#else
  // Built for an architecture without wgmma: the launcher never calls this.
  (void)a, (void)grp, (void)maps;
#endif
}

// x [n][h][w][c] in boxes of 10 x 10 pixels x 32 channels (128 bytes a pixel, channels past C
// zero-filled), in the 128-byte swizzle; two boxes (channels 0 and 32 on) make a halo.
CUtensorMap halo_map(const ConvShape& s, const float* x) {
  const long long c = s.c, w = s.w, h = s.h;
  return day04::make_tma_map_4d(x, {c, w, h, (long long)s.n}, {c, w * c, h * w * c},
                                {T::kHalfChannels, T::kHW, T::kHH, 1}, true);
}

template <bool kNpqk>
void launch(const ConvShape& s, const ConvGroup<float>& grp, cudaStream_t stream) {
  const Params a = halo_wgmma::make_params(kName, s, grp, kNpqk);
  constexpr auto kKernel = conv2d_v13_kernel<kNpqk>;
  static gpu100::PerDevice<int> resident_per_gpu;
  const int resident = resident_per_gpu.get(
      [] { return gpu100::resident_blocks(kKernel, T::kThreads, T::kSmemBytes); });
  const int blocks = halo_wgmma::blocks(a, resident, grp.count);
  Maps maps;
  maps.x0 = halo_map(s, grp.op[0].x);
  maps.x1 = grp.count > 1 ? halo_map(s, grp.op[1].x) : maps.x0;
  kKernel<<<dim3(unsigned(blocks), 1, unsigned(grp.count)), T::kThreads, T::kSmemBytes, stream>>>(
      a, grp, maps);
  CUDA_CHECK_LAST();
}

}  // namespace

std::string v13_refusal(const ConvShape& s, bool /*bias*/) {
  return halo_wgmma::refusal(s, 4);
}

namespace detail {
void conv2d_v13_group(const ConvShape& s, const ConvGroup<float>& grp, cudaStream_t stream) {
  wgmma_conv::check_launch(kName, v13_refusal(s, false), s, grp, true, "TMA copies");
  launch<true>(s, grp, stream);
}
}  // namespace detail

void conv2d_v13_halo_wgmma_tf32_nhwc(const ConvShape& s, const float* x, const float* w,
                                     const float* bias, float* y, cudaStream_t stream) {
  check_conv_args(s);
  ConvGroup<float> grp;
  grp.op[0] = {x, w, bias, nullptr, y};
  wgmma_conv::check_launch(kName, v13_refusal(s, false), s, grp, false, "TMA copies");
  launch<false>(s, grp, stream);
}

}  // namespace day08
