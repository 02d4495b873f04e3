// The stem, its bias and ReLU, and the max pool after it in one kernel (resnet_stem.hpp).
//
// What the fusion removes. Unfused, the bf16 network converts the fp32 input to padded NHWC bf16
// (one pass), convolves it (day08's implicit GEMM, whose gather computes addresses for 3 or 1
// channels per pixel), writes the 208 x 272 x 64 stem output, and reads it back in the pool: at
// N = 32 the stem output alone is 232 MB per trunk, 4x the pooled tensor. Here a block computes
// the stem outputs that a tile of pool windows covers and writes only the maxima: the traffic is
// the fp32 input read once (plus halos, mostly from L2) and the pooled output written once.
//
// A block, per tile of kPH x kPW = 7 x 8 pool outputs, whose windows cover 15 x 17 stem outputs:
//  1. It reads the input window the tile needs, (4 kPH + 7) x (4 kPW + 8) per channel, from fp32
//     NCHW, rounds the values to the MMA's type and parks them in shared memory, zeros outside the
//     image (the convolution's padding). Two ways:
//     - bf16 on a GPU that runs sm_90a code, where x's rows are whole 16-byte units: one TMA copy
//       per tile brings the window (and 3 columns left of it: a copy must start on a 16-byte
//       boundary) into one of two fp32 stages, zero-filled past the image's edges. The copy for
//       the block's next tile is issued as this one starts, so it arrives during this tile's GEMM,
//       and a pass over the stage converts it to bf16, 4 columns per thread. Nsight Compute on the
//       RGB stem before this step: 390 of a warp's 1,208 instructions per tile were the loads'
//       address and bounds arithmetic (results/h100/profiles.txt).
//     - otherwise a warp per window row, a lane per column, so a row's address is computed once,
//       and the loads of several rows are in flight before their stores. Only the tiles at an
//       image's border check each element against it; the others take a copy of the loop without
//       those checks.
//  2. Implicit GEMM on mma.sync: M = the 255 stem outputs (and one spare row; neighbouring tiles
//     share one row and column of them, computed twice), N = 64 channels, K = c x 7 x 8 taps (each
//     filter row widened by a zero tap, so a bf16 pair of taps is one aligned 32-bit load). A warp
//     takes two 16-row m-tiles and all 64 channels, its accumulators starting from the bias. Its A
//     fragments come straight from the input window: element (m, k) of the im2col matrix is at
//     base(m) + off(k), base(m) = 2 (oh W + ow) for stem output (oh, ow) of the tile and
//     off(k) = (ci H + r) W + s. off is a compile-time constant per k step plus the lane's column,
//     so the unrolled K loop has no address arithmetic. B fragments: ldmatrix from the filters,
//     which stay in shared memory for all of the block's tiles.
//  3. The pool, mostly in registers. Which stem output a GEMM row holds is free (base(m) is
//     computed once per thread), so the rows are placed where the pool wants them: in warp w < 7,
//     the lanes of quad row g hold the 2 x 2 stem outputs (2w .. 2w + 1, 2g .. 2g + 1), the
//     top-left corner of pool window (w, g), in their four accumulator rows (two m-tiles, two
//     halves). Warp 7 holds the tile's last stem row and column, which only close windows. Each
//     thread takes the maximum of its 2 x 2 block, and parks three partial maxima for its
//     neighbours in shared memory: its left column (for the window to its left), its top row (for
//     the window above) and its top-left output (for the window up and to the left). One barrier,
//     three 32-byte reads, and a window's 9 outputs are reduced. The ReLU comes last, once per
//     window: the ReLU of a maximum is the maximum of the ReLUs. Stem outputs outside the image
//     count as 0, which leaves a window's ReLU'd maximum unchanged (the pool's padding; every
//     window holds at least one real output); only the tiles at an image's border set any.
//  4. The store: a thread holds 2 channels of each 8, so the 4 lanes of a quad exchange their
//     pairs with shuffles and each stores whole 16-byte pieces of the pool output's row (bf16), or
//     32-byte rows of 8 channels per quad (TF32's 8-byte pairs).
// The blocks are persistent (as many as fit, each looping over tiles), so the filters and the bias
// are read once per block. In TF32 the epilogue runs twice, on 32 channels at a time, so that the
// partial maxima take the same 32 bytes per lane in both precisions.
//
// Gathering a first layer's A fragments from a staged input window is the idea behind CUTLASS's
// "few channels" and "fixed channels" convolution iterators; this code is written from that idea.
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
#include "common/half.hpp"
#include "common/math.hpp"
#include "common/occupancy.hpp"
#include "mma.cuh"
#include "resnet_stem.hpp"
#include "tma.hpp"
#include "wgmma.cuh"

#if !GPU100_SM90A_CODE
#pragma nv_diag_suppress 177  // this target compiles the TMA copies out, leaving their constants
#endif

namespace capstone::resnet {

namespace {

using bf16 = __nv_bfloat16;
namespace mma = day04::mma;

constexpr int kStemK = 64;  // output channels
constexpr int kR = 7;       // filter rows and real taps per row
constexpr int kTaps = 8;    // taps per row in the kernel's layout: the 8th is zero

template <class T, int kC>
struct StemConfig {
  static_assert(std::is_same_v<T, bf16> || std::is_same_v<T, float>, "bf16 or tf32 (float)");
  static constexpr bool kBf16 = std::is_same_v<T, bf16>;
  // 7 x 8 pool outputs per tile: their windows cover 15 x 17 = 255 stem outputs. Warp w < kPH
  // holds the 2 x 2 blocks of pool row w (quad row g: pool column g), warp kPH the last stem row
  // and column: 8 warps of 32 GEMM rows, 256 rows for 255 outputs.
  static constexpr int kPH = 7, kPW = 8;
  static constexpr int kCH = 2 * kPH + 1, kCW = 2 * kPW + 1;
  static constexpr int kM = kCH * kCW;
  static constexpr int kWarps = kPH + 1;
  static constexpr int kThreads = 32 * kWarps;
  // Blocks per SM the registers must allow (two: 128 registers a thread). The K loop, fully
  // unrolled, would otherwise hoist every load.
  static constexpr int kMinBlocks = 2;
  // The input window: stem output (oh, ow) of the tile reads rows 2 oh .. 2 oh + 6 and columns
  // 2 ow .. 2 ow + 7 of it.
  static constexpr int kTH = 2 * (kCH - 1) + kR, kTW = 2 * (kCW - 1) + kTaps;
  static constexpr int kKStep = kBf16 ? 16 : 8;  // m16n8k16 (bf16), m16n8k8 (tf32)
  // The GEMM covers all 64 channels (8 n-tiles per A fragment); the epilogue takes kNT of them per
  // pass: all in bf16, 32 twice in tf32, so that a lane's partial maxima are 32 bytes in both.
  static constexpr int kNTiles = kStemK / 8;
  static constexpr int kNT = kBf16 ? 64 : 32;
  static constexpr int kPasses = kStemK / kNT;
  static constexpr int kRows = kC * kR;  // filter rows (ci, r)
  static constexpr int kKP = (kRows * kTaps + kKStep - 1) / kKStep * kKStep;
  static constexpr int kKSteps = kKP / kKStep;
  static constexpr int kWLd = kKP + 16 / int(sizeof(T));  // an odd number of 16-byte units:
                                                          // ldmatrix's 8 rows hit 8 bank groups
  // The partial maxima: three arrays (left column, top row, top-left output) of (kPH + 1) x
  // (kPW + 1) window positions, each 4 lanes x 32 bytes, plus 16 bytes so that the 8 lanes of a
  // 16-byte access phase (two positions, four lanes each) fall on 8 different bank groups.
  static constexpr int kLaneBytes = 32;
  static constexpr int kPosBytes = 4 * kLaneBytes + 16;
  static constexpr int kPos = (kPH + 1) * (kPW + 1);
  static constexpr int kInElems = kC * kTH * kTW;
  static constexpr size_t kInBytes = size_t(kInElems) * sizeof(T);
  static constexpr size_t kWBytes = size_t(kStemK) * kWLd * sizeof(T);
  static constexpr size_t kPartBytes = size_t(3) * kPos * kPosBytes;
  static constexpr size_t kBiasBytes = kStemK * sizeof(float);
  static constexpr size_t kSmemBytes = kInBytes + kWBytes + kPartBytes + kBiasBytes;
  // The TMA path (bf16, sm_90a): the fp32 window comes by one tensor copy per tile, issued a tile
  // ahead into one of two fp32 stages, then is converted into in_s. A copy's first column must
  // lie on a 16-byte boundary of x: it starts kShift = 3 columns left of the window (the window
  // starts at 4 q0 - 5 for the tile's first pool column q0) and is kStageTW = kTW + 4 wide.
  static constexpr int kShift = 3, kStageTW = kTW + 4;
  static constexpr size_t kStageBytes =
      (size_t(kC) * kTH * kStageTW * sizeof(float) + 127) / 128 * 128;  // 128-byte boundaries
  static constexpr size_t kTmaSmemBytes = 128 + 2 * kStageBytes + kSmemBytes + 2 * sizeof(uint64_t);
  // The input window's rows (channel, row) per warp, loaded in batches of kBatchRows.
  static constexpr int kWarpRows = (kC * kTH + kWarps - 1) / kWarps;
  static constexpr int kBatchRows = kWarpRows > 7 ? (kWarpRows + 1) / 2 : kWarpRows;
  static_assert(kPW == 8, "a quad row (8 of them in a warp) per pool column");
  static_assert(kPW + kPH + 1 <= 16, "warp kPH's 16 pairs of rows take the last row and column");
  static_assert(32 * kWarps >= kM, "every stem output of the tile has a GEMM row");
  static_assert(kNT / 8 * 2 * int(sizeof(T)) == kLaneBytes, "a lane's pairs of a pass: 32 bytes");
  static_assert(kSmemBytes <= 99 * 1024, "fits the 99 KiB of a block on sm_86 and sm_89");
  static_assert(!kBf16 || 2 * kTmaSmemBytes <= 227 * 1024, "two blocks per SM on sm_90");
  static_assert(kTW % 4 == 0, "the window's rows convert 4 columns at a time");
  static_assert(kInBytes % 16 == 0 && kWBytes % 16 == 0 && kPartBytes % 16 == 0,
                "16-byte aligned parts");
  static_assert(kTW <= 64, "two loads per lane cover a window row");
  static_assert((kKP * sizeof(T) / 16) % 2 == 0, "kWLd's padding makes the row stride odd");

  // The window offset of filter row ri's first tap (a row past the real ones, in bf16's last
  // k step, has zero weights: any in-window element will do).
  static constexpr __host__ __device__ int row_off(int ri) {
    return ri < kRows ? (ri / kR) * kTH * kTW + (ri % kR) * kTW : 0;
  }
  // The offsets of A fragment halves h = 0, 1 (columns +0 and +kKStep / 2) in k step ks, less the
  // lane's column (2t in bf16, t in tf32), which base() holds.
  static constexpr __host__ __device__ int off(int ks, int h) {
    return kBf16 ? row_off(2 * ks + h) : row_off(ks) + 4 * h;
  }
  // The tile's stem output (row r, column c) in accumulator row (mi, hf) of quad row g of warp w:
  // warps < kPH the 2 x 2 block at (2w, 2g); warp kPH the last row in m-tile 0 (columns 2g, 2g + 1)
  // and the last column in m-tile 1 (rows 2g, 2g + 1), its quad row kPH the corner (twice).
  static constexpr __host__ __device__ void place(int w, int g, int mi, int hf, int& r, int& c) {
    if (w < kPH) {
      r = 2 * w + mi, c = 2 * g + hf;
    } else if (mi == 0) {
      r = kCH - 1, c = 2 * g + hf;
    } else if (g < kPH) {
      r = 2 * g + hf, c = kCW - 1;
    } else {
      r = kCH - 1, c = kCW - 1;
    }
  }
};

// A 32-bit shared-memory load at a shared-state-space address (a register plus the compile-time
// offsets of the K loop). Volatile, like the ldmatrix and mma wrappers: the loads stay in program
// order among them, so the compiler cannot hoist a whole K loop of fragments into registers.
__device__ __forceinline__ uint32_t lds32(uint32_t addr) {
  uint32_t v;
  asm volatile("ld.shared.b32 %0, [%1];\n" : "=r"(v) : "r"(addr));
  return v;
}

template <class T>
__device__ __forceinline__ T from_float(float v);
template <>
__device__ __forceinline__ bf16 from_float<bf16>(float v) {
  return __float2bfloat16_rn(v);
}
template <>
__device__ __forceinline__ float from_float<float>(float v) {
  return mma::round_tf32(v);
}

// A lane's 32 bytes of one pass: its channel pairs, packed in the output type. In bf16 word jl is
// the pair of n-tile jl (8 of them); in tf32 words 2 jl and 2 jl + 1 (4 n-tiles a pass).
struct Pairs {
  uint32_t w[8];
};
template <class T>
__device__ __forceinline__ void put(Pairs& p, int jl, float v0, float v1) {
  if constexpr (std::is_same_v<T, bf16>) {
    const __nv_bfloat162 b = __floats2bfloat162_rn(v0, v1);
    p.w[jl] = *reinterpret_cast<const uint32_t*>(&b);
  } else {
    p.w[2 * jl] = __float_as_uint(from_float<float>(v0));
    p.w[2 * jl + 1] = __float_as_uint(from_float<float>(v1));
  }
}
// The elementwise maximum, in place: max and rounding commute, so the maxima of rounded values are
// the rounded maxima.
template <class T>
__device__ __forceinline__ void max_into(Pairs& a, const Pairs& b) {
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    if constexpr (std::is_same_v<T, bf16>) {
      const __nv_bfloat162 m = __hmax2(*reinterpret_cast<const __nv_bfloat162*>(&a.w[i]),
                                       *reinterpret_cast<const __nv_bfloat162*>(&b.w[i]));
      a.w[i] = *reinterpret_cast<const uint32_t*>(&m);
    } else {
      a.w[i] = __float_as_uint(fmaxf(__uint_as_float(a.w[i]), __uint_as_float(b.w[i])));
    }
  }
}
// The ReLU, in place.
template <class T>
__device__ __forceinline__ void relu_into(Pairs& a) {
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    if constexpr (std::is_same_v<T, bf16>) {
      const __nv_bfloat162 m =
          __hmax2(*reinterpret_cast<const __nv_bfloat162*>(&a.w[i]), __float2bfloat162_rn(0.f));
      a.w[i] = *reinterpret_cast<const uint32_t*>(&m);
    } else {
      a.w[i] = __float_as_uint(fmaxf(__uint_as_float(a.w[i]), 0.f));
    }
  }
}
__device__ __forceinline__ void park(unsigned char* slot, const Pairs& p) {
  reinterpret_cast<uint4*>(slot)[0] = make_uint4(p.w[0], p.w[1], p.w[2], p.w[3]);
  reinterpret_cast<uint4*>(slot)[1] = make_uint4(p.w[4], p.w[5], p.w[6], p.w[7]);
}
__device__ __forceinline__ Pairs fetch(const unsigned char* slot) {
  const uint4 a = reinterpret_cast<const uint4*>(slot)[0];
  const uint4 b = reinterpret_cast<const uint4*>(slot)[1];
  return Pairs{{a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w}};
}

// The 4 x 4 transpose of words across a quad (lane t holds x[0..3]; after it x[u] is lane u's
// former x[t]) in two butterfly steps of two shuffles, with selects rather than indices that
// depend on the lane (those would put x in local memory). Step 1 swaps, between lanes t and t ^ 1,
// the words whose index differs from t in bit 0; step 2 does the same for bit 1 with t ^ 2.
__device__ __forceinline__ void transpose4(uint32_t (&x)[4], int t) {
  const bool b0 = t & 1, b1 = t & 2;
  uint32_t r0 = __shfl_xor_sync(0xffffffffu, b0 ? x[0] : x[1], 1);
  uint32_t r1 = __shfl_xor_sync(0xffffffffu, b0 ? x[2] : x[3], 1);
  if (b0) {
    x[0] = r0, x[2] = r1;
  } else {
    x[1] = r0, x[3] = r1;
  }
  r0 = __shfl_xor_sync(0xffffffffu, b1 ? x[0] : x[2], 2);
  r1 = __shfl_xor_sync(0xffffffffu, b1 ? x[1] : x[3], 2);
  if (b1) {
    x[0] = r0, x[1] = r1;
  } else {
    x[2] = r0, x[3] = r1;
  }
}

struct StemArgs {
  const float* x;  // fp32 NCHW
  const float* bias;
  int n, h, w;  // input
  int oh, ow;   // stem output
  int P, Q;     // pool output
  int tiles_p, tiles_q, tiles;
};

// Step 1 of a tile: the input window, fp32 NCHW rows rounded to T into shared memory, zeros
// outside the image. Warp w takes rows w, w + kWarps, .. of the kC x kTH rows (channel, row), its
// lanes columns lane and lane + 32; a batch of rows' loads is issued before its stores. kEdge: the
// window crosses the image's border, so each element is checked; otherwise only the counts of rows
// and columns are, and those checks fold away at compile time except in the last batch of rows
// and in the lanes' second column.
template <class T, int kC, bool kEdge>
__device__ __forceinline__ void load_window(const float* xi, T* in_s, int h, int w, int ih0,
                                            int iw0, int warp, int lane) {
  using C = StemConfig<T, kC>;
  constexpr int kAllRows = kC * C::kTH;
#pragma unroll
  for (int j0 = 0; j0 < C::kWarpRows; j0 += C::kBatchRows) {
    float v[C::kBatchRows][2];
#pragma unroll
    for (int j = 0; j < C::kBatchRows; ++j) {
      const int rr = warp + (j0 + j) * C::kWarps;
      const bool row_real = (j0 + j + 1) * C::kWarps <= kAllRows || rr < kAllRows;
      const int ci = rr / C::kTH, ih = ih0 + rr % C::kTH;
      const bool row_in = row_real && (!kEdge || (ih >= 0 && ih < h));
      // 32-bit offsets: an image's kC planes hold fewer than 2^31 elements (check_stem_pool_args).
      const float* xr = xi + (row_in ? (ci * h + ih) * w : 0) + iw0;
#pragma unroll
      for (int k = 0; k < 2; ++k) {
        const int col = lane + 32 * k;
        const bool col_real = 32 * (k + 1) <= C::kTW || col < C::kTW;
        const bool in = row_in && col_real && (!kEdge || (iw0 + col >= 0 && iw0 + col < w));
        v[j][k] = in ? __ldg(xr + col) : 0.f;
      }
    }
#pragma unroll
    for (int j = 0; j < C::kBatchRows; ++j) {
      const int rr = warp + (j0 + j) * C::kWarps;
#pragma unroll
      for (int k = 0; k < 2; ++k) {
        const int col = lane + 32 * k;
        if (rr < kAllRows && col < C::kTW) in_s[rr * C::kTW + col] = from_float<T>(v[j][k]);
      }
    }
  }
}

// The tile's first input row and column (in the padding at an image's top and left border).
template <class C>
__device__ __forceinline__ void tile_origin(const StemArgs& a, int tile, int& img, int& p0, int& q0,
                                            int& ih0, int& iw0) {
  const int tq = tile % a.tiles_q, tp = (tile / a.tiles_q) % a.tiles_p;
  img = tile / (a.tiles_q * a.tiles_p);
  p0 = tp * C::kPH, q0 = tq * C::kPW;                      // the tile's first pool output
  ih0 = 2 * (2 * p0 - 1) - 3, iw0 = 2 * (2 * q0 - 1) - 3;  // 2 x its first stem output - 3
}

// kTma: the window comes by TMA (sm_90a code only; the host launches this form where the GPU runs
// it and the input's rows are whole 16-byte units), else by load_window.
template <class T, int kC, bool kTma>
__global__ void __launch_bounds__(StemConfig<T, kC>::kThreads, StemConfig<T, kC>::kMinBlocks)
    stem_pool_kernel(StemArgs a, const T* __restrict__ wt, T* __restrict__ y,
                     const __grid_constant__ CUtensorMap xmap) {
  // Compiled for every target; in code for GPUs older than sm_80 the mma.sync and cvt.tf32
  // wrappers trap (day04's mma.cuh), and the host refuses the launch first (require_build).
  using C = StemConfig<T, kC>;
  constexpr int kNT = C::kNT;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  static_assert(!kTma || C::kBf16, "the TMA form is bf16's");
  // The TMA path's two stages first, from a 128-byte boundary; then the layout both paths share.
  unsigned char* stage_s = smem_raw;
  unsigned char* smem = smem_raw;
  if constexpr (kTma) {
    stage_s = smem_raw + (128 - mma::smem_addr(smem_raw) % 128) % 128;
    smem = stage_s + 2 * C::kStageBytes;
  }
  uint64_t* bar = reinterpret_cast<uint64_t*>(smem + C::kSmemBytes);  // kTma: one per stage
  T* in_s = reinterpret_cast<T*>(smem);
  auto stage = [&](int st) { return reinterpret_cast<float*>(stage_s + st * C::kStageBytes); };
  T* w_s = reinterpret_cast<T*>(smem + C::kInBytes);
  unsigned char* part_s = smem + C::kInBytes + C::kWBytes;
  float* bias_s = reinterpret_cast<float*>(smem + C::kSmemBytes - C::kBiasBytes);
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;

  // The filters and the bias, once per block: rows of kKP, 16 bytes per copy.
  constexpr int kRowChunks = C::kKP * int(sizeof(T)) / 16;
  for (int i = tid; i < kStemK * kRowChunks; i += C::kThreads) {
    const int row = i / kRowChunks, chunk = i % kRowChunks;
    reinterpret_cast<uint4*>(w_s + row * C::kWLd)[chunk] =
        __ldg(reinterpret_cast<const uint4*>(wt + size_t(row) * C::kKP) + chunk);
  }
  if (tid < kStemK) bias_s[tid] = __ldg(a.bias + tid);
  // TMA: the block's first window, on its way while the filters load.
  auto issue = [&](int tile, int st) {
#if GPU100_SM90A_CODE
    int img = 0, p0 = 0, q0 = 0, ih0 = 0, iw0 = 0;
    tile_origin<C>(a, tile, img, p0, q0, ih0, iw0);
    day04::wgmma::mbar_expect_tx(&bar[st], uint32_t(kC * C::kTH * C::kStageTW * sizeof(float)));
    day04::wgmma::tma_load_4d(stage(st), &xmap, iw0 - C::kShift, ih0, 0, img, &bar[st]);
#else
    (void)tile, (void)st;
#endif
  };
  if constexpr (kTma) {
#if GPU100_SM90A_CODE
    if (tid == 0) {
      day04::wgmma::mbar_init(&bar[0], 1);
      day04::wgmma::mbar_init(&bar[1], 1);
      day04::wgmma::mbar_fence_init();
      if (int(blockIdx.x) < a.tiles) issue(blockIdx.x, 0);
    }
#else
    __trap();  // the host launches the TMA form only where the GPU runs sm_90a code
#endif
  }
  // ldmatrix.x4 row addresses: matrices (n-tile 2jp, k lo), (2jp, k hi), (2jp + 1, lo),
  // (2jp + 1, hi) give b[0], b[1] of n-tile 2jp and of 2jp + 1.
  const int mat = lane / 8;
  const T* w_lane = w_s + (8 * (mat >> 1) + (lane & 7)) * C::kWLd + (mat & 1) * (C::kKStep / 2);
  const uint32_t in_addr = mma::smem_addr(in_s);
  // This thread's four accumulator rows: m-tile mi, half hf (rows g and g + 8).
  int base[2][2];
#pragma unroll
  for (int mi = 0; mi < 2; ++mi) {
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      int r = 0, c = 0;
      C::place(warp, lane / 4, mi, hf, r, c);
      base[mi][hf] = 2 * (r * C::kTW + c) + (C::kBf16 ? 2 : 1) * (lane % 4);
    }
  }

  int it = 0;  // the block's tile count: TMA stage it % 2, in phase it / 2 of its barrier
  for (int tile = blockIdx.x; tile < a.tiles; tile += gridDim.x, ++it) {
    int img = 0, p0 = 0, q0 = 0, ih0 = 0, iw0 = 0;
    tile_origin<C>(a, tile, img, p0, q0, ih0, iw0);
    const int oh0 = 2 * p0 - 1, ow0 = 2 * q0 - 1;  // the tile's first stem output
    // The copy and epilogue indices depend on the thread only. An opaque copy of its index keeps
    // the compiler from computing them once for all tiles and holding them in (spilled) registers
    // through the GEMM.
    int me = tid;
    asm volatile("" : "+r"(me));
    const int me_warp = me / 32, me_lane = me % 32;

    __syncthreads();  // the previous tile's GEMM is done with in_s, its pool with part_s
    if constexpr (kTma) {
      // 1. The next tile's window into the other stage (the previous tile is done with it), then
      //    this tile's converted into in_s, 4 columns a thread at a time.
      const int st = it % 2;
      if (me == 0 && tile + int(gridDim.x) < a.tiles) issue(tile + gridDim.x, st ^ 1);
#if GPU100_SM90A_CODE
      day04::wgmma::mbar_wait(&bar[st], uint32_t(it / 2) % 2);
#endif
      const float* src = stage(st) + C::kShift;
      constexpr int kQuads = C::kTW / 4;  // 4-column groups per window row
      for (int i = me; i < kC * C::kTH * kQuads; i += C::kThreads) {
        const int row = i / kQuads, col = 4 * (i - row * kQuads);
        const float* v = src + row * C::kStageTW + col;
        const __nv_bfloat162 lo = __floats2bfloat162_rn(v[0], v[1]);
        const __nv_bfloat162 hi = __floats2bfloat162_rn(v[2], v[3]);
        *reinterpret_cast<uint2*>(in_s + row * C::kTW + col) = make_uint2(
            *reinterpret_cast<const uint32_t*>(&lo), *reinterpret_cast<const uint32_t*>(&hi));
      }
    } else {
      // 1. The input window, without per-element bounds checks where it lies inside the image
      //    (most tiles: all but the first and last tile rows and columns of an image).
      const float* xi = a.x + int64_t(img) * kC * a.h * a.w;
      if (ih0 >= 0 && ih0 + C::kTH <= a.h && iw0 >= 0 && iw0 + C::kTW <= a.w) {
        load_window<T, kC, false>(xi, in_s, a.h, a.w, ih0, iw0, me_warp, me_lane);
      } else {
        load_window<T, kC, true>(xi, in_s, a.h, a.w, ih0, iw0, me_warp, me_lane);
      }
    }
    __syncthreads();

    // 2. The GEMM: acc[m-tile][n-tile] over the kKSteps k steps, all 64 channels, starting from
    //    the bias (channels 8 j + 2 t and + 1 in the fragment's columns).
    float acc[2][C::kNTiles][4];
#pragma unroll
    for (int j = 0; j < C::kNTiles; ++j) {
      const float2 b = *reinterpret_cast<const float2*>(bias_s + 8 * j + 2 * (lane % 4));
#pragma unroll
      for (auto& am : acc) am[j][0] = am[j][2] = b.x, am[j][1] = am[j][3] = b.y;
    }
#pragma unroll
    for (int ks = 0; ks < C::kKSteps; ++ks) {
      // Both m-tiles' A fragments first, then the filters two n-tiles at a time: 12 fragment
      // registers live instead of 20.
      constexpr int kE = sizeof(T);
      uint32_t af[2][4];
#pragma unroll
      for (int mi = 0; mi < 2; ++mi) {
        af[mi][0] = lds32(in_addr + (base[mi][0] + C::off(ks, 0)) * kE);
        af[mi][1] = lds32(in_addr + (base[mi][1] + C::off(ks, 0)) * kE);
        af[mi][2] = lds32(in_addr + (base[mi][0] + C::off(ks, 1)) * kE);
        af[mi][3] = lds32(in_addr + (base[mi][1] + C::off(ks, 1)) * kE);
      }
#pragma unroll
      for (int jp = 0; jp < C::kNTiles / 2; ++jp) {
        uint32_t b[4];
        mma::ldmatrix_x4(b, w_lane + jp * 16 * C::kWLd + ks * C::kKStep);
#pragma unroll
        for (int mi = 0; mi < 2; ++mi) {
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const uint32_t bf[2] = {b[2 * h], b[2 * h + 1]};
            if constexpr (C::kBf16) {
              mma::mma_bf16_16816(acc[mi][2 * jp + h], af[mi], bf);
            } else {
              mma::mma_tf32_1688(acc[mi][2 * jp + h], af[mi], bf);
            }
          }
        }
      }
    }

    // 3. The pool, then the ReLU on each window's maximum only (they commute, and so does the
    //    rounding to T: the ReLU of a maximum is the maximum of the ReLUs). Stem outputs outside
    //    the image count as 0, which leaves a window's ReLU'd maximum unchanged; only the tiles
    //    at an image's border hold any, so the others skip the check.
    const int g = me_lane / 4, t = me_lane % 4;
    if (oh0 < 0 || oh0 + C::kCH > a.oh || ow0 < 0 || ow0 + C::kCW > a.ow) {
#pragma unroll
      for (int mi = 0; mi < 2; ++mi) {
#pragma unroll
        for (int hf = 0; hf < 2; ++hf) {
          int r = 0, c = 0;
          C::place(me_warp, g, mi, hf, r, c);
          const int oh = oh0 + r, ow = ow0 + c;
          if (oh < 0 || oh >= a.oh || ow < 0 || ow >= a.ow) {
#pragma unroll
            for (int j = 0; j < C::kNTiles; ++j) acc[mi][j][2 * hf] = acc[mi][j][2 * hf + 1] = 0.f;
          }
        }
      }
    }
    // Window position (wp, wq)'s slot of lane t in part_s array k (0: left column, 1: top row,
    // 2: top-left output).
    auto slot = [&](int k, int wp, int wq) {
      return part_s + (k * C::kPos + wp * (C::kPW + 1) + wq) * C::kPosBytes + t * C::kLaneBytes;
    };
    const bool pools = me_warp < C::kPH;  // warp kPH only parks
    const int p = p0 + me_warp, q = q0 + g;
#pragma unroll
    for (int pass = 0; pass < C::kPasses; ++pass) {
      if (pass > 0) __syncthreads();  // the previous pass has read part_s
      Pairs mx, left, top, corner;
#pragma unroll
      for (int jl = 0; jl < kNT / 8; ++jl) {
        const int j = pass * (kNT / 8) + jl;
        float v[2][2][2];
#pragma unroll
        for (int mi = 0; mi < 2; ++mi) {
#pragma unroll
          for (int hf = 0; hf < 2; ++hf) {
#pragma unroll
            for (int e = 0; e < 2; ++e) {
              v[mi][hf][e] = acc[mi][j][2 * hf + e];
            }
          }
        }
        // Warps < kPH: the 2 x 2 block's maximum, left column, top row, corner. Warp kPH: a pair
        // of the last row in m-tile 0 (a top row and its corner, for the windows above it), a
        // pair of the last column in m-tile 1 (a left column and its corner).
        float m2[2], l2[2], t2[2];
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          l2[e] = fmaxf(v[0][0][e], v[1][0][e]);
          t2[e] = fmaxf(v[0][0][e], v[0][1][e]);
          m2[e] = fmaxf(t2[e], fmaxf(v[1][0][e], v[1][1][e]));
        }
        if (pools) {
          put<T>(mx, jl, m2[0], m2[1]);
          put<T>(left, jl, l2[0], l2[1]);
          put<T>(top, jl, t2[0], t2[1]);
          put<T>(corner, jl, v[0][0][0], v[0][0][1]);
        } else {  // mx holds the column pair's top output, a corner too
          put<T>(top, jl, t2[0], t2[1]);
          put<T>(corner, jl, v[0][0][0], v[0][0][1]);
          put<T>(left, jl, fmaxf(v[1][0][0], v[1][1][0]), fmaxf(v[1][0][1], v[1][1][1]));
          put<T>(mx, jl, v[1][0][0], v[1][0][1]);
        }
      }
      if (pools) {
        park(slot(0, me_warp, g), left);
        park(slot(1, me_warp, g), top);
        park(slot(2, me_warp, g), corner);
      } else {
        // The last stem row as the top rows and corners of window row kPH, the last column as
        // the left columns and corners of window column kPW (quad row kPH: the corner output,
        // (kPH, kPW)'s corner; its left column is never read).
        park(slot(1, C::kPH, g), top);
        park(slot(2, C::kPH, g), corner);
        park(slot(0, g, C::kPW), left);
        park(slot(2, g, C::kPW), mx);
      }
      __syncthreads();
      if (pools) {
        max_into<T>(mx, fetch(slot(0, me_warp, g + 1)));
        max_into<T>(mx, fetch(slot(1, me_warp + 1, g)));
        max_into<T>(mx, fetch(slot(2, me_warp + 1, g + 1)));
        relu_into<T>(mx);
      }

      // 4. The store of pool output (p, q)'s kNT channels of this pass. Every lane of the warp
      //    takes part in the exchange; warp kPH and windows past the output store nothing.
      const bool store = pools && p < a.P && q < a.Q;
      T* yp = y + ((int64_t(img) * a.P + p) * a.Q + q) * kStemK + pass * kNT;
      if constexpr (C::kBf16) {
        // Words 4 G + u of lane t hold channels 8 (4 G + u) + 2 t, + 1. A 4 x 4 transpose per
        // group G gives lane t, from each lane u, word 4 G + t: channels 8 (4 G + t) .. + 7.
#pragma unroll
        for (int G = 0; G < 2; ++G) {
          uint32_t o[4] = {mx.w[4 * G], mx.w[4 * G + 1], mx.w[4 * G + 2], mx.w[4 * G + 3]};
          transpose4(o, t);
          if (store) {
            *reinterpret_cast<uint4*>(yp + 8 * (4 * G + t)) = make_uint4(o[0], o[1], o[2], o[3]);
          }
        }
      } else if (store) {
        // 8 bytes per n-tile: a quad writes 32 contiguous bytes.
#pragma unroll
        for (int jl = 0; jl < kNT / 8; ++jl) {
          *reinterpret_cast<uint2*>(yp + 8 * jl + 2 * t) =
              make_uint2(mx.w[2 * jl], mx.w[2 * jl + 1]);
        }
      }
    }
  }
}

// The TMA form where this GPU runs the build's sm_90a code and x's rows, planes and images are
// whole 16-byte units (w % 4 == 0, x 16-byte aligned); else load_window's form.
template <class T, int kC>
void launch(const StemArgs& args, const T* w, T* y, cudaStream_t stream) {
  using C = StemConfig<T, kC>;
  const bool tma = std::is_same_v<T, bf16> && args.w % 4 == 0 &&
                   reinterpret_cast<uintptr_t>(args.x) % 16 == 0 &&
                   gpu100::build_has(gpu100::ArchNeed::kSm90a);
  CUtensorMap map{};
  if (tma) {
    // x as [n][c][h][w], in boxes of kStageTW columns (the window and the kShift columns left of
    // it), kTH rows and all kC channels of one image; what lies outside x (the padding) arrives as
    // zeros.
    const long long dims[4] = {args.w, args.h, kC, args.n};
    const long long strides[3] = {args.w, (long long)args.h * args.w,
                                  (long long)kC * args.h * args.w};
    map = day04::make_tma_map_4d(args.x, dims, strides, {C::kStageTW, C::kTH, kC, 1}, false);
  }
  auto run = [&](auto kernel, size_t smem, gpu100::PerDevice<int>& resident_per_gpu) {
    const int resident =
        resident_per_gpu.get([&] { return gpu100::resident_blocks(kernel, C::kThreads, smem); });
    const int blocks = std::min(args.tiles, resident);
    kernel<<<unsigned(blocks), C::kThreads, smem, stream>>>(args, w, y, map);
    CUDA_CHECK_LAST();
  };
  static gpu100::PerDevice<int> resident_tma, resident_plain;
  if constexpr (C::kBf16) {
    if (tma) {
      run(stem_pool_kernel<T, kC, true>, C::kTmaSmemBytes, resident_tma);
      return;
    }
  }
  run(stem_pool_kernel<T, kC, false>, C::kSmemBytes, resident_plain);
}

constexpr int kTilePH = StemConfig<bf16, 1>::kPH, kTilePW = StemConfig<bf16, 1>::kPW;
static_assert(StemConfig<float, 1>::kPH == kTilePH && StemConfig<float, 1>::kPW == kTilePW,
              "one tile shape");

StemArgs stem_args(const Trunk& t, const float* x, const float* bias, const void* w, const void* y,
                   int n, int h, int wd, const char* who) {
  try {
    check_stem_pool_args(t, n, h, wd);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(std::string(who) + ": " + e.what());
  }
  if (x == nullptr || bias == nullptr || w == nullptr || y == nullptr) {
    throw std::invalid_argument(std::string(who) + ": a null pointer");
  }
  if (reinterpret_cast<uintptr_t>(y) % 16 != 0 || reinterpret_cast<uintptr_t>(w) % 16 != 0 ||
      reinterpret_cast<uintptr_t>(bias) % 8 != 0) {
    throw std::invalid_argument(std::string(who) +
                                ": y and w must be 16-byte aligned, bias 8-byte aligned");
  }
  StemArgs a{};
  a.x = x, a.bias = bias, a.h = h, a.w = wd;
  a.n = n;
  a.oh = t.stem.out(h), a.ow = t.stem.out(wd);
  a.P = t.pool_out(a.oh), a.Q = t.pool_out(a.ow);
  a.tiles_p = gpu100::ceil_div(a.P, kTilePH), a.tiles_q = gpu100::ceil_div(a.Q, kTilePW);
  a.tiles = n * a.tiles_p * a.tiles_q;
  return a;
}

template <class T>
std::vector<T> stem_filters(const std::vector<float>& w, int c, int k_step) {
  if ((c != 1 && c != 3) || w.size() != size_t(kStemK) * c * kR * kR) {
    throw std::invalid_argument("stem filters: [64][c][7][7] with c = 1 or 3");
  }
  const int kp = gpu100::ceil_div(c * kR * kTaps, k_step) * k_step;
  std::vector<float> out(size_t(kStemK) * kp, 0.f);
  for (int k = 0; k < kStemK; ++k) {
    for (int ci = 0; ci < c; ++ci) {
      for (int r = 0; r < kR; ++r) {
        for (int s = 0; s < kR; ++s) {
          out[size_t(k) * kp + (ci * kR + r) * kTaps + s] =
              w[((size_t(k) * c + ci) * kR + r) * kR + s];
        }
      }
    }
  }
  if constexpr (std::is_same_v<T, bf16>) {
    return gpu100::convert_from_float<bf16>(out);
  } else {
    return gpu100::round_to_tf32(out);
  }
}

}  // namespace

void check_stem_pool_args(const Trunk& t, int n, int h, int w) {
  if (!stem_pool_takes(t)) {
    throw std::invalid_argument(
        "the fused stem takes a 7x7/2 pad-3 convolution of 1 or 3 channels onto 64 and a 3x3/2 "
        "pad-1 max pool");
  }
  if (n < 1 || h < 1 || w < 1) {
    throw std::invalid_argument("the fused stem: an empty batch (N=" + std::to_string(n) + ", " +
                                std::to_string(h) + "x" + std::to_string(w) + ")");
  }
  // The kernel's int indices: the tile count, an image's input and output offsets (int64 beyond).
  const int P = t.pool_out(t.stem.out(h)), Q = t.pool_out(t.stem.out(w));
  const int64_t tiles = int64_t(n) * gpu100::ceil_div(P, kTilePH) * gpu100::ceil_div(Q, kTilePW);
  if (tiles > INT_MAX || int64_t(h) * w > INT_MAX / 4) {
    throw std::invalid_argument("the fused stem: N=" + std::to_string(n) + " at " +
                                std::to_string(h) + "x" + std::to_string(w) +
                                " is over the kernel's 32-bit limits");
  }
}

bool stem_pool_takes(const Trunk& t) {
  const ConvSpec& s = t.stem;
  return (s.c_in == 1 || s.c_in == 3) && s.c_out == kStemK && s.r == kR && s.stride == 2 &&
         s.pad == 3 && t.pool_k == 3 && t.pool_stride == 2 && t.pool_pad == 1;
}

std::vector<bf16> stem_filters_bf16(const std::vector<float>& w, int c) {
  return stem_filters<bf16>(w, c, StemConfig<bf16, 1>::kKStep);
}
std::vector<float> stem_filters_tf32(const std::vector<float>& w, int c) {
  return stem_filters<float>(w, c, StemConfig<float, 1>::kKStep);
}

namespace {
// Both precisions' launcher: the checks, then the kernel compiled for the trunk's channels.
template <class T>
void stem_pool(const Trunk& t, const float* x, const T* w, const float* bias, T* y, int n, int h,
               int wd, cudaStream_t stream, const char* what) {
  const StemArgs a = stem_args(t, x, bias, w, y, n, h, wd, what);
  gpu100::require_build(gpu100::ArchNeed::kSm80, what);
  if (t.stem.c_in == 3) {
    launch<T, 3>(a, w, y, stream);
  } else {
    launch<T, 1>(a, w, y, stream);
  }
}
}  // namespace

void stem_pool_bf16(const Trunk& t, const float* x, const bf16* w, const float* bias, bf16* y,
                    int n, int h, int wd, cudaStream_t stream) {
  stem_pool<bf16>(t, x, w, bias, y, n, h, wd, stream, "the fused bf16 stem");
}

void stem_pool_tf32(const Trunk& t, const float* x, const float* w, const float* bias, float* y,
                    int n, int h, int wd, cudaStream_t stream) {
  stem_pool<float>(t, x, w, bias, y, n, h, wd, stream, "the fused tf32 stem");
}

}  // namespace capstone::resnet
