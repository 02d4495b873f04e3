// The stem, its bias and ReLU, and the max pool after it in one kernel (resnet_stem.hpp).
//
// What the fusion removes. Unfused, the bf16 network converts the fp32 input to padded NHWC bf16
// (one pass), convolves it (day08's implicit GEMM, whose gather computes addresses for 3 or 1
// channels per pixel), writes the 208 x 272 x 64 stem output, and reads it back in the pool: at
// N = 32 the stem output alone is 232 MB per trunk, 4x the pooled tensor. Here a block computes
// the stem outputs that a tile of pool windows covers, keeps them in shared memory, and writes
// only the maxima: the traffic is the fp32 input read once (plus halos, mostly from L2) and the
// pooled output written once.
//
// A block, per tile of kPH x kPW pool outputs:
//  1. It reads the input window the tile needs, (4 kPH + 7) x (4 kPW + 8) per channel, from fp32
//     NCHW: a warp per window row, a lane per column, so a row's address is computed once, and the
//     loads of several rows are in flight before their stores. (The window is unaligned and 1 or 3
//     channels deep, which 16-byte copies cannot take.) It rounds the values to the MMA's type and
//     parks them in shared memory, zeros outside the image (the convolution's padding).
//  2. Implicit GEMM on mma.sync: M = the (2 kPH + 1) x (2 kPW + 1) stem outputs under the tile's
//     windows (neighbouring tiles share one row and column of them, computed twice), N = 64
//     channels, K = c x 7 x 8 taps (each filter row widened by a zero tap, so a bf16 pair of taps
//     is one aligned 32-bit load). A warp takes two 16-row m-tiles and all 64 channels. Its A
//     fragments come straight from the input window: element (m, k) of the im2col matrix is at
//     base(m) + off(k), base(m) = 2 (oh W + ow) for stem output (oh, ow) of the tile and
//     off(k) = (ci H + r) W + s. off is a compile-time constant per k step plus the lane's column,
//     so the unrolled K loop has no address arithmetic. B fragments: ldmatrix from the filters,
//     which stay in shared memory for all of the block's tiles.
//  Then per pass over kNT of the 64 channels (one pass in bf16; two of 32 in tf32, as a stem
//  output's 64 fp32 channels would not leave room for two blocks per SM):
//  3. Epilogue: bias, ReLU, rounding, into a shared-memory tile of stem outputs (128-byte rows,
//     16-byte chunks XOR-swizzled by the row so that both the fragment stores and the pool's
//     16-byte reads are free of bank conflicts). Stem outputs outside the image are written as 0:
//     after the ReLU every window's maximum is >= 0, so a 0 never changes it (the pool's padding;
//     every window holds at least one real output).
//  4. Pool: a thread takes 16 bytes of channels of one pool output, the maximum of the 9 stem
//     outputs under its window, and stores them; 8 neighbouring threads write 128 contiguous bytes.
// The blocks are persistent (as many as fit, each looping over tiles), so the filters and the bias
// are read once per block.
//
// Gathering a first layer's A fragments from a staged input window is the idea behind CUTLASS's
// "few channels" and "fixed channels" convolution iterators; this code is written from that idea.
#include <cuda_bf16.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "common/arch.hpp"
#include "common/cuda_check.hpp"
#include "common/half.hpp"
#include "common/math.hpp"
#include "common/occupancy.hpp"
#include "mma.cuh"
#include "resnet_stem.hpp"

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
  // 7 x 8 pool outputs per tile: their windows cover 15 x 17 = 255 stem outputs, 16 m-tiles of
  // 16 rows with one row to spare (1.14x the 224 the tile keeps).
  static constexpr int kPH = 7, kPW = 8;
  static constexpr int kCH = 2 * kPH + 1, kCW = 2 * kPW + 1;
  static constexpr int kM = kCH * kCW;
  static constexpr int kMTiles = (kM + 15) / 16;
  static constexpr int kWarps = kMTiles / 2;  // two m-tiles each
  static constexpr int kThreads = 32 * kWarps;
  // Blocks per SM the registers must allow (two: 128 registers a thread). The K loop, fully
  // unrolled, would otherwise hoist every load.
  static constexpr int kMinBlocks = 2;
  // The input window: stem output (oh, ow) of the tile reads rows 2 oh .. 2 oh + 6 and columns
  // 2 ow .. 2 ow + 7 of it.
  static constexpr int kTH = 2 * (kCH - 1) + kR, kTW = 2 * (kCW - 1) + kTaps;
  static constexpr int kKStep = kBf16 ? 16 : 8;  // m16n8k16 (bf16), m16n8k8 (tf32)
  // The GEMM covers all 64 channels (8 n-tiles per A fragment); the epilogue and the pool take
  // kNT of them per pass: all in bf16, 32 twice in tf32 (a stem output's 64 fp32 channels would
  // not leave room for two blocks per SM).
  static constexpr int kNTiles = kStemK / 8;
  static constexpr int kNT = kBf16 ? 64 : 32;
  static constexpr int kPasses = kStemK / kNT;
  static constexpr int kRows = kC * kR;  // filter rows (ci, r)
  static constexpr int kKP = (kRows * kTaps + kKStep - 1) / kKStep * kKStep;
  static constexpr int kKSteps = kKP / kKStep;
  static constexpr int kWLd = kKP + 16 / int(sizeof(T));  // an odd number of 16-byte units:
                                                          // ldmatrix's 8 rows hit 8 bank groups
  static constexpr int kInElems = kC * kTH * kTW;
  static constexpr size_t kInBytes = size_t(kInElems) * sizeof(T);
  static constexpr size_t kWBytes = size_t(kStemK) * kWLd * sizeof(T);
  static constexpr size_t kOutBytes = size_t(kM) * kNT * sizeof(T);
  static constexpr size_t kBiasBytes = kStemK * sizeof(float);
  static constexpr size_t kSmemBytes = kInBytes + kWBytes + kOutBytes + kBiasBytes;
  // The input window's rows (channel, row) per warp, loaded in batches of kBatchRows.
  static constexpr int kWarpRows = (kC * kTH + kWarps - 1) / kWarps;
  static constexpr int kBatchRows = kWarpRows > 7 ? (kWarpRows + 1) / 2 : kWarpRows;
  static_assert(kMTiles % 2 == 0, "two m-tiles per warp");
  static_assert(kSmemBytes <= 99 * 1024, "fits the 99 KiB of a block on sm_86 and sm_89");
  static_assert(kNT * sizeof(T) == 128, "a stem output's channels are one 128-byte row");
  static_assert(kInBytes % 16 == 0 && kWBytes % 16 == 0 && kOutBytes % 16 == 0,
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
  return __uint_as_float(mma::to_tf32(__float_as_uint(v)) & ~0x1FFFu);
}

// Two channels of one stem output into the swizzled tile: bf16 pairs are 4 bytes, fp32 pairs 8.
template <class T>
__device__ __forceinline__ void store_pair(T* row, int m, int col, float v0, float v1) {
  constexpr int kPerChunk = 16 / int(sizeof(T));
  char* chunk = reinterpret_cast<char*>(row) + ((col / kPerChunk) ^ (m & 7)) * 16;
  if constexpr (std::is_same_v<T, bf16>) {
    *reinterpret_cast<__nv_bfloat162*>(chunk + (col % kPerChunk) * 2) =
        __floats2bfloat162_rn(v0, v1);
  } else {
    *reinterpret_cast<float2*>(chunk + (col % kPerChunk) * 4) =
        make_float2(from_float<float>(v0), from_float<float>(v1));
  }
}

// The elementwise maximum of two 16-byte chunks of channels.
template <class T>
__device__ __forceinline__ uint4 max16(uint4 a, uint4 b) {
  if constexpr (std::is_same_v<T, bf16>) {
    uint32_t* pa = &a.x;
    const uint32_t* pb = &b.x;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      __nv_bfloat162 m = __hmax2(*reinterpret_cast<const __nv_bfloat162*>(pa + i),
                                 *reinterpret_cast<const __nv_bfloat162*>(pb + i));
      pa[i] = *reinterpret_cast<uint32_t*>(&m);
    }
    return a;
  } else {
    return make_uint4(__float_as_uint(fmaxf(__uint_as_float(a.x), __uint_as_float(b.x))),
                      __float_as_uint(fmaxf(__uint_as_float(a.y), __uint_as_float(b.y))),
                      __float_as_uint(fmaxf(__uint_as_float(a.z), __uint_as_float(b.z))),
                      __float_as_uint(fmaxf(__uint_as_float(a.w), __uint_as_float(b.w))));
  }
}

struct StemArgs {
  const float* x;  // fp32 NCHW
  const float* bias;
  int h, w;    // input
  int oh, ow;  // stem output
  int P, Q;    // pool output
  int tiles_p, tiles_q, tiles;
};

template <class T, int kC>
__global__ void __launch_bounds__(StemConfig<T, kC>::kThreads, StemConfig<T, kC>::kMinBlocks)
    stem_pool_kernel(StemArgs a, const T* __restrict__ wt, T* __restrict__ y) {
  // Compiled for every target; in code for GPUs older than sm_80 the mma.sync and cvt.tf32
  // wrappers trap (day04's mma.cuh), and the host refuses the launch first (require_build).
  using C = StemConfig<T, kC>;
  constexpr int kNT = C::kNT;
  extern __shared__ __align__(16) unsigned char smem[];
  T* in_s = reinterpret_cast<T*>(smem);
  T* w_s = reinterpret_cast<T*>(smem + C::kInBytes);
  T* out_s = reinterpret_cast<T*>(smem + C::kInBytes + C::kWBytes);
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
  // ldmatrix.x4 row addresses: matrices (n-tile 2jp, k lo), (2jp, k hi), (2jp + 1, lo),
  // (2jp + 1, hi) give b[0], b[1] of n-tile 2jp and of 2jp + 1.
  const int mat = lane / 8;
  const T* w_lane = w_s + (8 * (mat >> 1) + (lane & 7)) * C::kWLd + (mat & 1) * (C::kKStep / 2);
  const uint32_t in_addr = mma::smem_addr(in_s);
  // This warp's rows: m-tiles 2 warp and 2 warp + 1; per m-tile the lane's rows g and g + 8.
  int base[2][2];
#pragma unroll
  for (int mi = 0; mi < 2; ++mi) {
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      const int m = 32 * warp + 16 * mi + lane / 4 + 8 * hf;
      const int r = m / C::kCW, c = m % C::kCW;
      base[mi][hf] = (m < C::kM ? 2 * (r * C::kTW + c) : 0) + (C::kBf16 ? 2 : 1) * (lane % 4);
    }
  }

  for (int tile = blockIdx.x; tile < a.tiles; tile += gridDim.x) {
    const int tq = tile % a.tiles_q, tp = (tile / a.tiles_q) % a.tiles_p;
    const int img = tile / (a.tiles_q * a.tiles_p);
    const int p0 = tp * C::kPH, q0 = tq * C::kPW;  // the tile's first pool output
    const int oh0 = 2 * p0 - 1, ow0 = 2 * q0 - 1;  // its first stem output
    const int ih0 = 2 * oh0 - 3, iw0 = 2 * ow0 - 3;
    // The copy, epilogue and pool indices depend on the thread only. An opaque copy of its index
    // keeps the compiler from computing them once for all tiles and holding them in (spilled)
    // registers through the GEMM.
    int me = tid;
    asm volatile("" : "+r"(me));
    const int me_warp = me / 32, me_lane = me % 32;

    __syncthreads();  // the previous tile's GEMM is done with in_s
    // 1. The input window: warp w takes rows w, w + kWarps, .. of the kC x kTH rows, its lanes
    //    columns lane and lane + 32; a batch of rows' loads is issued before its stores.
    {
      const float* xi = a.x + int64_t(img) * kC * a.h * a.w;
#pragma unroll
      for (int j0 = 0; j0 < C::kWarpRows; j0 += C::kBatchRows) {
        float v[C::kBatchRows][2];
#pragma unroll
        for (int j = 0; j < C::kBatchRows; ++j) {
          const int rr = me_warp + (j0 + j) * C::kWarps;
          const int ci = rr / C::kTH, ih = ih0 + rr % C::kTH;
          const bool row_in = rr < kC * C::kTH && ih >= 0 && ih < a.h;
          const float* xr = xi + (int64_t(ci) * a.h + (row_in ? ih : 0)) * a.w;
#pragma unroll
          for (int k = 0; k < 2; ++k) {
            const int col = me_lane + 32 * k, iw = iw0 + col;
            v[j][k] = row_in && col < C::kTW && iw >= 0 && iw < a.w ? __ldg(xr + iw) : 0.f;
          }
        }
#pragma unroll
        for (int j = 0; j < C::kBatchRows; ++j) {
          const int rr = me_warp + (j0 + j) * C::kWarps;
#pragma unroll
          for (int k = 0; k < 2; ++k) {
            const int col = me_lane + 32 * k;
            if (rr < kC * C::kTH && col < C::kTW) in_s[rr * C::kTW + col] = from_float<T>(v[j][k]);
          }
        }
      }
    }
    __syncthreads();

    // 2. The GEMM: acc[m-tile][n-tile] over the kKSteps k steps, all 64 channels.
    float acc[2][C::kNTiles][4];
#pragma unroll
    for (auto& am : acc) {
#pragma unroll
      for (auto& an : am) an[0] = an[1] = an[2] = an[3] = 0.f;
    }
#pragma unroll
    for (int ks = 0; ks < C::kKSteps; ++ks) {
      uint32_t b[C::kNTiles / 2][4];
#pragma unroll
      for (int jp = 0; jp < C::kNTiles / 2; ++jp) {
        mma::ldmatrix_x4(b[jp], w_lane + jp * 16 * C::kWLd + ks * C::kKStep);
      }
#pragma unroll
      for (int mi = 0; mi < 2; ++mi) {
        constexpr int kE = sizeof(T);
        const uint32_t af[4] = {lds32(in_addr + (base[mi][0] + C::off(ks, 0)) * kE),
                                lds32(in_addr + (base[mi][1] + C::off(ks, 0)) * kE),
                                lds32(in_addr + (base[mi][0] + C::off(ks, 1)) * kE),
                                lds32(in_addr + (base[mi][1] + C::off(ks, 1)) * kE)};
#pragma unroll
        for (int j = 0; j < C::kNTiles; ++j) {
          const uint32_t bf[2] = {b[j / 2][2 * (j % 2)], b[j / 2][2 * (j % 2) + 1]};
          if constexpr (C::kBf16) {
            mma::mma_bf16_16816(acc[mi][j], af, bf);
          } else {
            mma::mma_tf32_1688(acc[mi][j], af, bf);
          }
        }
      }
    }

#pragma unroll
    for (int pass = 0; pass < C::kPasses; ++pass) {
      const int n0 = pass * kNT;  // the pass's first channel
      __syncthreads();            // the previous pass's (or tile's) pool has read out_s

      // 3. Bias, ReLU, rounding; 0 outside the stem's output.
      int m[2][2];
      bool inside[2][2];
#pragma unroll
      for (int mi = 0; mi < 2; ++mi) {
#pragma unroll
        for (int hf = 0; hf < 2; ++hf) {
          m[mi][hf] = 32 * me_warp + 16 * mi + me_lane / 4 + 8 * hf;
          const int oh = oh0 + m[mi][hf] / C::kCW, ow = ow0 + m[mi][hf] % C::kCW;
          inside[mi][hf] = oh >= 0 && oh < a.oh && ow >= 0 && ow < a.ow;
        }
      }
#pragma unroll
      for (int jl = 0; jl < kNT / 8; ++jl) {
        const int col = 8 * jl + 2 * (me_lane % 4), j = n0 / 8 + jl;
        const float2 bias = *reinterpret_cast<const float2*>(bias_s + n0 + col);
#pragma unroll
        for (int mi = 0; mi < 2; ++mi) {
#pragma unroll
          for (int hf = 0; hf < 2; ++hf) {
            if (m[mi][hf] >= C::kM) continue;
            const bool in = inside[mi][hf];
            const float v0 = in ? fmaxf(acc[mi][j][2 * hf] + bias.x, 0.f) : 0.f;
            const float v1 = in ? fmaxf(acc[mi][j][2 * hf + 1] + bias.y, 0.f) : 0.f;
            store_pair(out_s + m[mi][hf] * kNT, m[mi][hf], col, v0, v1);
          }
        }
      }
      __syncthreads();

      // 4. The pool: 16 bytes of channels of one pool output per thread and step.
      constexpr int kChunks = kNT * int(sizeof(T)) / 16;  // 8
      for (int i = me; i < C::kPH * C::kPW * kChunks; i += C::kThreads) {
        const int chunk = i % kChunks, pix = i / kChunks;
        const int pp = pix / C::kPW, pq = pix % C::kPW;
        const int p = p0 + pp, q = q0 + pq;
        if (p >= a.P || q >= a.Q) continue;
        uint4 mx = make_uint4(0, 0, 0, 0);  // +0 in both types; every real output is >= 0
#pragma unroll
        for (int dr = 0; dr < 3; ++dr) {
#pragma unroll
          for (int dc = 0; dc < 3; ++dc) {
            const int mm = (2 * pp + dr) * C::kCW + 2 * pq + dc;
            mx = max16<T>(mx, *reinterpret_cast<const uint4*>(
                                  reinterpret_cast<const char*>(out_s + mm * kNT) +
                                  ((chunk ^ (mm & 7)) * 16)));
          }
        }
        *reinterpret_cast<uint4*>(y + ((int64_t(img) * a.P + p) * a.Q + q) * kStemK + n0 +
                                  chunk * (16 / int(sizeof(T)))) = mx;
      }
    }
  }
}

template <class T, int kC>
void launch(const StemArgs& args, const T* w, T* y, cudaStream_t stream) {
  using C = StemConfig<T, kC>;
  constexpr auto kKernel = stem_pool_kernel<T, kC>;
  static const int resident = gpu100::resident_blocks(kKernel, C::kThreads, C::kSmemBytes);
  const int blocks = std::min(args.tiles, resident);
  kKernel<<<unsigned(blocks), C::kThreads, C::kSmemBytes, stream>>>(args, w, y);
  CUDA_CHECK_LAST();
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
