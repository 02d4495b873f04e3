// Conv2d v14: Winograd F(4x4, 3x3) on CUDA cores, fp32. Changed from v7 (F(2x2, 3x3)): each tile
// is 4 x 4 outputs from a 6 x 6 input patch instead of 2 x 2 from 4 x 4. Per channel a tile costs
// 36 element-wise products for 16 outputs (2.25 a output) against v7's 16 for 4 (4 a output) and
// the direct sum's 9: 4x fewer multiply-adds than the direct convolution, 1.78x fewer than v7.
// The transforms (Lavin and Gray, "Fast Algorithms for Convolutional Neural Networks", 2016, with
// the interpolation points 0, 1, -1, 2, -2 and infinity):
//   B^T = [4  0 -5  0 1 0;  0 -4 -4  1 1 0;  0 4 -4 -1 1 0;
//          0 -2 -1  2 1 0;  0  2 -1 -2 1 0;  0 4  0 -5 0 1]
//   G   = [1/4 0 0; -1/6 -1/6 -1/6; -1/6 1/6 -1/6; 1/24 1/12 1/6; 1/24 -1/12 1/6; 0 0 1]
//   A^T = [1 1 1 1 1 0;  0 1 -1 2 -2 0;  0 1 1 4 4 0;  0 1 -1 8 -8 1]
//   Y (4 x 4) = A^T [sum over c of (G g G^T) . (B^T d B)] A.
// What it costs:
//  - rounding: the transforms multiply by up to 5 and 8 and divide by 24, so the error is about
//    20x v7's (measured on the CPU with fp32 sums: 2.7-6.6x the fp32 tolerance at C = 64..512,
//    v7 0.2-0.4x). The tests allow 16x v4's tolerance (v7: 4x); in fp32 that is still 60x tighter
//    than TF32's.
//  - registers: the sums of a block's 36 transform points. v7's block of 32 tiles x 64 filters
//    would hold 36 x 2048 sums, more than an SM's 64K registers; here a block takes 32 tiles x 32
//    filters (36,864 sums, 96 a thread over 12 warps). Each U value is then read by 32 tiles, each
//    V value by 32 filters: 0.25 bytes of L2 traffic a multiply-add (v7: 0.19).
//  - the transforms: a patch is 36 loads and about 190 additions (v7: 16 and 32), by 256 of the
//    384 threads. Done between two barriers, as v7 does, the other warps would wait them out;
//    here they run in four pieces between a chunk's last products (below).
// The structure is v7's otherwise: the filters transformed once by a small kernel (36 x C x K
// floats, read from L2), then one block per 32 output tiles x 32 filters that loops over C in
// chunks of 8 channels, then stages its sums in shared memory for the output transform. A
// thread's raw 6 x 6 patch comes by 4-byte cp.async into shared memory a chunk ahead (held in
// registers, as v7 holds its 4 x 4 patch, it spilled: 168 registers a thread are all 12 warps
// get). Warp w owns transform points 3w .. 3w + 2; each thread accumulates 8 tiles x 4 filters at
// each of them as an outer product of 16-byte shared-memory loads (day04's register tiling).
// Only 3x3 filters at stride 1 and dilation 1 (v14_refusal).
// Measured (H100, results/h100/day08_convolution*.json): 0.216 ms at the ResNet layer, 1.28x v7
// and 1.21x cuDNN fp32; at N = 32 faster than v7 at 104 x 136, 52 x 68 and 26 x 34, slower at
// 13 x 17 (its 4x4 tiles pad it to 16 x 20, and its 320 blocks fill the H100 2.4 times), which is
// why conv.hpp's fused form picks between them per shape (winograd_form).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "common/cuda_check.hpp"
#include "common/math.hpp"
#include "common/occupancy.hpp"
#include "conv_day.hpp"
#include "implicit_gemm.cuh"
#include "winograd_f4.cuh"

namespace day08 {

namespace {

using wino4::g_1d;
using wino4::kPoints;
using wino4::Params;
using wino4::transform_patch;
using wino4::transform_piece;
constexpr int kTiles = 32;  // 4x4 output tiles per block, consecutive in (n, tile row, col)
constexpr int kBK = 32;     // filters per block
static_assert(kBK == wino4::kFilterPad, "U's rows are padded to one block's filters");
constexpr int kBC = 8;         // channels per chunk
constexpr int kThreads = 384;  // 12 warps; warp w owns points 3w .. 3w + 2
constexpr int kRow = 32;       // floats per (point, channel) row of V (tiles) and of U (filters)
constexpr int kVFloats = kPoints * kBC * kRow;  // one chunk of V: [point][c][tile]
constexpr int kUFloats = kPoints * kBC * kRow;  // one chunk of U: [point][c][filter]
// One chunk's raw input patches, [c][tile][37]: a patch is 36 floats, padded to 37 so that the 32
// threads of a warp reading element e of their tiles' patches hit 32 different banks.
constexpr int kPatchPitch = kPoints + 1;
constexpr int kRawFloats = kBC * kTiles * kPatchPitch;
// The sums staged as M[point][filter][tile], rows of 33 floats: a warp writes 8 filter groups x
// 4 tiles of one point at a time, banks 4 kg + tg + const, all 32 distinct.
constexpr int kMPitch = kTiles + 1;
constexpr int kMPoint = kBK * kMPitch;
constexpr int kMFloats = kPoints * kMPoint;
// V, U and the raw patches twice each (218 KB: one block per SM); M reuses them at the end.
constexpr size_t kSmemBytes =
    sizeof(float) * std::max(2 * (kVFloats + kUFloats + kRawFloats), kMFloats);
static_assert(kThreads == 32 * kPoints / 3, "a warp per 3 points");
static_assert(kTiles * kBC <= kThreads, "a transform thread per (tile, channel) of a chunk");
static_assert(kPoints * kBC * kBK / 4 % kThreads == 0, "U's 16-byte copies split evenly");

Params make_params(const ConvShape& s) {
  const Params g = wino4::make_params(s);
  if (gpu100::ceil_div<int64_t>(g.tiles, kTiles) > 0x7fffffff) {
    throw std::invalid_argument("v14_winograd_f4: too many output tiles for one grid");
  }
  return g;
}

// U[point][c][k] = (G g G^T) for the 3x3 filter g of (k, c); zero for k >= K. One thread per
// (c, k), k fastest.
__global__ void filter_kernel(const float* __restrict__ w, int C, int K, int kpad,
                              float* __restrict__ u) {
  const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= int64_t(C) * kpad) return;
  const int k = static_cast<int>(idx % kpad), c = static_cast<int>(idx / kpad);
  float g[9];
#pragma unroll
  for (int i = 0; i < 9; ++i) g[i] = k < K ? w[(int64_t(k) * C + c) * 9 + i] : 0.f;
  float t[3][6];  // G g: column j of the filter -> 6 rows
#pragma unroll
  for (int j = 0; j < 3; ++j) g_1d(g[j], g[3 + j], g[6 + j], t[j]);
#pragma unroll
  for (int i = 0; i < 6; ++i) {  // (G g) G^T, row i
    float r[6];
    g_1d(t[0][i], t[1][i], t[2][i], r);
#pragma unroll
    for (int j = 0; j < 6; ++j) u[(int64_t(6 * i + j) * C + c) * kpad + k] = r[j];
  }
}

void transform_filters_into(const ConvShape& s, const Params& g, const float* w, float* u,
                            cudaStream_t stream) {
  const int64_t threads = int64_t(s.c) * g.kpad;
  const auto blocks = static_cast<unsigned>(gpu100::ceil_div<int64_t>(threads, 256));
  filter_kernel<<<blocks, 256, 0, stream>>>(w, s.c, s.k, g.kpad, u);
  CUDA_CHECK_LAST();
}

// One thread's patch, tile t of the block and channel tc of every chunk: copied by 36 4-byte
// cp.async into the raw buffer (zero-filled outside the image, past C and past the last tile),
// so no register holds it while the copies fly. Set up once per block: where the 6 x 6 window
// starts in the first chunk's channel, and which of its rows and columns are inside the image.
struct PatchCopier {
  const float* base = nullptr;  // x at (image, channel tc, top row, left column) of the window
  const float* any = nullptr;   // x itself: the address a zero-filled copy names (never read)
  int c = 0;                    // the channel of the next chunk
  unsigned rows = 0, cols = 0;  // bit r / s: row r / column s of the window inside the image

  __device__ void init(const float* x, const Params& g, int64_t tile, int tc) {
    c = tc;
    any = x;
    if (tile >= g.tiles) return;  // rows = 0: zeros
    const int tx = static_cast<int>(tile % g.tw);
    const int64_t rest = tile / g.tw;
    const int img = static_cast<int>(rest / g.th);
    const int ih0 = 4 * static_cast<int>(rest % g.th) - g.pad, iw0 = 4 * tx - g.pad;
    for (int r = 0; r < 6; ++r) {
      if (ih0 + r >= 0 && ih0 + r < g.h) rows |= 1u << r;
      if (iw0 + r >= 0 && iw0 + r < g.w) cols |= 1u << r;
    }
    // The window's corner may be in the padding (negative offset); only in-image elements are read.
    base = x + (int64_t(img) * g.c + tc) * g.h * g.w + int64_t(ih0) * g.w + iw0;
  }
  // The 36 copies of this chunk's patch into dst (36 floats), then on to the next chunk.
  __device__ void copy(float* dst, const Params& g) {
    const bool c_ok = c < g.c;
#pragma unroll
    for (int r = 0; r < 6; ++r) {
#pragma unroll
      for (int s = 0; s < 6; ++s) {
        const bool ok = c_ok && ((rows >> r) & 1u) && ((cols >> s) & 1u);
        igemm::cp_async_4(dst + 6 * r + s, ok ? base + r * g.w + s : any, ok);
      }
    }
    c += kBC;
    base += int64_t(kBC) * g.h * g.w;
  }
};

// Tile tt of a V row sits at 8 (tt % 4) + tt / 4: a thread's 8 tiles tg + 4 i are contiguous.
__device__ __forceinline__ int v_pos(int tt) {
  return 8 * (tt & 3) + (tt >> 2);
}

// The per-point GEMMs of one chunk. Lane (tg, kg) of warp w (tg = lane % 4, kg = lane / 4)
// accumulates points 3 w + q (q < 3): tiles tg + 4 i (i < 8) by filters 4 kg + j (j < 4). Why 12
// warps of 96 sums and not 9 of 128: the register file is split among the SM's 4 schedulers, so
// with 9 warps one scheduler holds 3 of them, and its 16K registers give each thread at most 168
// (measured with ptxas: 9 warps of 128 sums spilled 588 bytes a thread).
struct Sums {
  float acc[3][8][4];

  __device__ void zero() {
#pragma unroll
    for (int q = 0; q < 3; ++q)
#pragma unroll
      for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[q][i][j] = 0.f;
  }
  // The products of channel c of a chunk.
  __device__ __forceinline__ void channel(const float* vb, const float* ub, int c) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int tg = lane & 3, kg = lane >> 2;
#pragma unroll
    for (int q = 0; q < 3; ++q) {
      const int row = (3 * warp + q) * kBC + c;
      const float4 v0 = *reinterpret_cast<const float4*>(vb + row * kRow + 8 * tg);
      const float4 v1 = *reinterpret_cast<const float4*>(vb + row * kRow + 8 * tg + 4);
      const float4 u0 = *reinterpret_cast<const float4*>(ub + row * kRow + 4 * kg);
      const float vv[8] = {v0.x, v0.y, v0.z, v0.w, v1.x, v1.y, v1.z, v1.w};
      const float uu[4] = {u0.x, u0.y, u0.z, u0.w};
#pragma unroll
      for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[q][i][j] = fmaf(vv[i], uu[j], acc[q][i][j]);
    }
  }
  __device__ void stage(float* ms) const {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int tg = lane & 3, kg = lane >> 2;
#pragma unroll
    for (int q = 0; q < 3; ++q)
#pragma unroll
      for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          ms[(3 * warp + q) * kMPoint + (4 * kg + j) * kMPitch + tg + 4 * i] = acc[q][i][j];
        }
  }
};

// Each thread transforms (tile, filter) pairs of the staged sums, Y = A^T M A, adds the bias (and
// in the fused form the residual, then the ReLU) and writes the outputs inside the image. A warp
// takes 32 consecutive tiles of one filter (conflict-free reads of M's rows).
__device__ __forceinline__ void store_outputs(const float* ms, const Params& g, int64_t tile0,
                                              int k0, const ConvOperands<float>& op, bool relu) {
  for (int idx = threadIdx.x; idx < kTiles * kBK; idx += kThreads) {
    const int t = idx % kTiles, f = idx / kTiles, k = k0 + f;
    const int64_t tile = tile0 + t;
    if (tile >= g.tiles || k >= g.k) continue;
    wino4::store_tile(ms + f * kMPitch + t, kMPoint, g, tile, k, op, relu);
  }
}

// One block: 32 tiles x 32 filters of the convolution blockIdx.z of the group, whose `w` is its
// transformed filters U. Thread (tc, tt) < 256 owns the patch of tile tt, channel tc of each
// chunk of 8: it copies it in (PatchCopier) and transforms it itself, so its raw buffers need no
// barrier. U comes by cp.async, 6 16-byte copies a thread. Chunk ch, with every buffer doubled:
//   copy chunk ch + 2's patch into raw[ch % 2]          (transformed during chunk ch - 1)
//   products of channels 0-3 of chunk ch (V[ch % 2], U[ch % 2])
//   wait for chunk ch + 1's copies (this thread's)
//   products of channels 4-7, each followed by a piece of chunk ch + 1's transform into
//   V[(ch + 1) % 2]
//   barrier                                          (V and U of chunk ch + 1 complete for all;
//                                                     V[ch % 2] and U[ch % 2] read by all)
//   copy chunk ch + 2's U into U[ch % 2]
// So the transforms run under the products (the patches are transformed by 256 of the 384
// threads, and the other warps keep the FMA pipes busy meanwhile), with one barrier a chunk.
__global__ void __launch_bounds__(kThreads, 1)
    conv2d_v14_kernel(const Params g, const ConvGroup<float> grp) {
  extern __shared__ __align__(16) float smem[];
  float* vs = smem;                // [2][point][c][tile]
  float* us = vs + 2 * kVFloats;   // [2][point][c][filter]
  float* raw = us + 2 * kUFloats;  // [2][c][tile][kPatchPitch]
  const ConvOperands<float> op = blockIdx.z == 0 ? grp.op[0] : grp.op[1];
  const float* __restrict__ u = op.w;
  const int tid = threadIdx.x;
  const int64_t tile0 = int64_t(blockIdx.x) * kTiles;
  const int k0 = blockIdx.y * kBK;

  const bool transformer = tid < kTiles * kBC;
  const int tc = tid / kTiles, tt = tid % kTiles;
  PatchCopier patch;
  if (transformer) patch.init(op.x, g, tile0 + tt, tc);
  float* my_raw = raw + (tc * kTiles + tt) * kPatchPitch;  // + buf * kRawFloats
  float* my_v = vs + tc * kRow + v_pos(tt);                // + buf * kVFloats
  const int chunks = gpu100::ceil_div(g.c, kBC);
  // This thread's copies of chunk `ch` (nothing past the last), as one commit group each.
  auto copy_patch = [&](int ch) {
    if (transformer && ch < chunks) patch.copy(my_raw + (ch & 1) * kRawFloats, g);
    igemm::cp_async_commit();
  };
  auto copy_u = [&](int ch) {
    if (ch < chunks) {
#pragma unroll
      for (int i = 0; i < kPoints * kBC * kBK / 4 / kThreads; ++i) {
        const int f = tid + i * kThreads;
        const int col = f % (kBK / 4), row = f / (kBK / 4);  // row = point * kBC + c
        const int point = row / kBC, c = ch * kBC + row % kBC;
        const bool ok = c < g.c;
        const float* src = u + (int64_t(point) * g.c + (ok ? c : 0)) * g.kpad + k0 + 4 * col;
        igemm::cp_async_16(us + (ch & 1) * kUFloats + row * kRow + 4 * col, src, ok);
      }
    }
    igemm::cp_async_commit();
  };

  Sums sums;
  sums.zero();
  // Commit groups, in order: P0+U0, P1, U1, then per chunk ch: P(ch + 2) at its start, U(ch + 2)
  // after its barrier. Mid-chunk ch, the groups of chunk ch + 1 are complete once at most one
  // (P(ch + 2)) is pending.
  if (transformer) patch.copy(my_raw, g);
  copy_u(0);
  copy_patch(1);
  copy_u(1);
  igemm::cp_async_wait<2>();  // this thread's chunk 0
  if (transformer) transform_patch(my_raw, my_v, kBC * kRow);
  __syncthreads();  // V0 and U0, everyone's
  for (int ch = 0; ch < chunks; ++ch) {
    const int buf = ch & 1;
    const float* vb = vs + buf * kVFloats;
    const float* ub = us + buf * kUFloats;
    copy_patch(ch + 2);
#pragma unroll
    for (int c = 0; c < 4; ++c) sums.channel(vb, ub, c);
    igemm::cp_async_wait<1>();  // chunk ch + 1's patch and U, this thread's
    const bool next = transformer && ch + 1 < chunks;
    const float* d = my_raw + (buf ^ 1) * kRawFloats;
    float* v = my_v + (buf ^ 1) * kVFloats;
    sums.channel(vb, ub, 4);
    if (next) transform_piece<0>(d, v, kBC * kRow);
    sums.channel(vb, ub, 5);
    if (next) transform_piece<1>(d, v, kBC * kRow);
    sums.channel(vb, ub, 6);
    if (next) transform_piece<2>(d, v, kBC * kRow);
    sums.channel(vb, ub, 7);
    if (next) transform_piece<3>(d, v, kBC * kRow);
    __syncthreads();
    copy_u(ch + 2);
  }
  igemm::cp_async_wait<0>();  // (only empty groups remain) before M overwrites the buffers
  float* ms = smem;
  sums.stage(ms);
  __syncthreads();
  store_outputs(ms, g, tile0, k0, op, grp.relu);
}

void launch_group(const ConvShape& s, const ConvGroup<float>& grp, cudaStream_t stream) {
  Params g = make_params(s);
  g.vec = g.q % 4 == 0;
  for (int i = 0; i < grp.count; ++i) {
    g.vec = g.vec && gpu100::aligned16(grp.op[i].y) &&
            (grp.op[i].residual == nullptr || gpu100::aligned16(grp.op[i].residual));
  }
  static gpu100::PerDevice<bool> opted_in;  // on every GPU the kernel runs on
  opted_in.get([] {
    CUDA_CHECK(cudaFuncSetAttribute(conv2d_v14_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(kSmemBytes)));
    return true;
  });
  const dim3 grid(static_cast<unsigned>(gpu100::ceil_div<int64_t>(g.tiles, kTiles)),
                  static_cast<unsigned>(g.kpad / kBK), static_cast<unsigned>(grp.count));
  conv2d_v14_kernel<<<grid, kThreads, kSmemBytes, stream>>>(g, grp);
  CUDA_CHECK_LAST();
}

}  // namespace

std::string v14_refusal(const ConvShape& s, bool /*bias*/) {
  return winograd_refusal(s, "F(4x4, 3x3)");
}

void conv2d_v14_winograd_f4(const ConvShape& s, const float* x, const float* w, const float* bias,
                            float* y, cudaStream_t stream) {
  check_conv_args(s);
  if (const std::string why = v14_refusal(s, bias != nullptr); !why.empty()) {
    throw std::invalid_argument("conv2d_v14_winograd_f4: " + why);
  }
  // The transformed filters live in day08's scratch buffer, made at every call (as v7's).
  const Params g = make_params(s);
  float* u = static_cast<float*>(
      conv_scratch(sizeof(float) * kPoints * size_t(s.c) * size_t(g.kpad), stream));
  transform_filters_into(s, g, w, u, stream);
  ConvGroup<float> grp;
  grp.op[0] = {x, u, bias, nullptr, y};
  launch_group(s, grp, stream);
}

namespace detail {
size_t v14_filter_floats(const ConvShape& s) {
  return size_t(kPoints) * size_t(s.c) * size_t(gpu100::round_up(s.k, kBK));
}
int64_t v14_blocks(const ConvShape& s) {
  const Params g = make_params(s);
  return gpu100::ceil_div<int64_t>(g.tiles, kTiles) * (g.kpad / kBK);
}
void v14_transform_filters(const ConvShape& s, const float* w, float* u, cudaStream_t stream) {
  transform_filters_into(s, make_params(s), w, u, stream);
}
void conv2d_v14_group(const ConvShape& s, const ConvGroup<float>& grp, cudaStream_t stream) {
  if (const std::string why = v14_refusal(s, false); !why.empty()) {
    throw std::invalid_argument("conv2d_fused_winograd: " + why);
  }
  launch_group(s, grp, stream);
}
}  // namespace detail

}  // namespace day08
