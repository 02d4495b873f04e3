// Conv2d v7: Winograd F(2x2, 3x3) on CUDA cores, fp32 (Lavin and Gray, "Fast Algorithms for
// Convolutional Neural Networks", 2016; PMPP's convolution chapter points at it). Changed from v4:
// fewer multiplies. A 2x2 block of outputs of one filter needs 4 x 9 = 36 multiply-adds per
// channel done directly; Winograd transforms the 4x4 input patch (V = B^T d B) and the 3x3 filter
// (U = G g G^T) so that the same 2x2 outputs come from 16 element-wise products, Y = A^T (U . V) A:
// 2.25x fewer FMAs. Summed over channels, each of the 16 transform points is a GEMM of
// (tiles x C) by (C x K), so the FMAs stay in the register-tiled outer-product form of day04's
// SGEMM. The price is additions in the transforms (about 3% of the FMAs here) and a larger
// rounding error (the tests allow 4x v4's tolerance).
// Fused: a small kernel transforms the filters (16 x C x K floats, in L2); then one block takes 32
// output tiles (consecutive in (n, tile row, tile col) order, so no tile row is split unevenly)
// by 64 filters, loops over C in chunks of 8 (the next chunk's patches are loaded into registers
// and its U copied by cp.async while this chunk's FMAs run), transforms the patches in registers,
// accumulates 16 x 32 x 64 products in registers (8 warps: 2 transform points each, 8 tiles x 8
// filters per thread), then stages the sums in shared memory for the output transform, the bias
// and the stores. Only 3x3 filters, stride 1 and dilation 1 (v7_refusal).
#include <cstdint>
#include <stdexcept>
#include <string>

#include "common/cuda_check.hpp"
#include "common/math.hpp"
#include "conv_day.hpp"
#include "implicit_gemm.cuh"

namespace day08 {

namespace {

constexpr int kTiles = 32;     // 2x2 output tiles per block
constexpr int kBK = 64;        // filters per block
constexpr int kBC = 8;         // channels per chunk
constexpr int kThreads = 256;  // 8 warps; warp w owns transform points 2w and 2w + 1
constexpr int kPoints = 16;    // the 4 x 4 transform points
constexpr int kVFloats = kPoints * kBC * kTiles;  // one V buffer [point][c][tile], 16 KiB
constexpr int kUFloats = kPoints * kBC * kBK;     // one U buffer [point][c][filter], 32 KiB
constexpr int kMPitch = kTiles + 1;               // M staging [point][filter][tile], padded
constexpr int kMFloats = kPoints * kBK * kMPitch;
constexpr size_t kSmemBytes =
    sizeof(float) * (2 * (kVFloats + kUFloats) > kMFloats ? 2 * (kVFloats + kUFloats) : kMFloats);

struct WinoParams {
  int n, c, h, w, k, pad, p, q;
  int th, tw;  // output tiles per column and per row: ceil(p / 2), ceil(q / 2)
  int kpad;    // k rounded up to kBK (U is zero past k)
  int64_t tiles;
};

// U[point][c][k] = (G g G^T) for the 3x3 filter g of (k, c), G = [1 0 0; .5 .5 .5; .5 -.5 .5;
// 0 0 1]; zero for k >= K. One thread per (c, k), k fastest.
__global__ void winograd_filter_kernel(const float* __restrict__ w, int C, int K, int kpad,
                                       float* __restrict__ u) {
  const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= int64_t(C) * kpad) return;
  const int k = static_cast<int>(idx % kpad), c = static_cast<int>(idx / kpad);
  float g[3][3];
#pragma unroll
  for (int i = 0; i < 3; ++i)
#pragma unroll
    for (int j = 0; j < 3; ++j) g[i][j] = k < K ? w[(int64_t(k) * C + c) * 9 + 3 * i + j] : 0.f;
  float t[4][3];  // G g
#pragma unroll
  for (int j = 0; j < 3; ++j) {
    t[0][j] = g[0][j];
    t[1][j] = 0.5f * (g[0][j] + g[1][j] + g[2][j]);
    t[2][j] = 0.5f * (g[0][j] - g[1][j] + g[2][j]);
    t[3][j] = g[2][j];
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {  // (G g) G^T, row i
    const float r[4] = {t[i][0], 0.5f * (t[i][0] + t[i][1] + t[i][2]),
                        0.5f * (t[i][0] - t[i][1] + t[i][2]), t[i][2]};
#pragma unroll
    for (int j = 0; j < 4; ++j) u[(int64_t(4 * i + j) * C + c) * kpad + k] = r[j];
  }
}

__global__ void __launch_bounds__(kThreads, 1)
    winograd_kernel(WinoParams g, const float* __restrict__ x, const float* __restrict__ u,
                    const float* __restrict__ bias, float* __restrict__ y) {
  extern __shared__ __align__(16) float smem[];
  float* vs = smem;                 // [2][point][c][tile position]
  float* us = smem + 2 * kVFloats;  // [2][point][c][filter]
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int64_t tile0 = int64_t(blockIdx.x) * kTiles;
  const int k0 = blockIdx.y * kBK;

  // Transform role: channel tc of the chunk, tile tt of the block. The FMA role below has lane
  // group tg = lane % 4 work on tiles tg, tg + 4, ..., tg + 28, so V stores tile tt at position
  // 8 (tt % 4) + tt / 4, where those 8 tiles are contiguous (two 16-byte loads).
  const int tc = tid >> 5, tt = tid & 31;
  const int64_t my_tile = tile0 + tt;
  const bool tile_ok = my_tile < g.tiles;
  int img = 0, ih0 = 0, iw0 = 0;
  if (tile_ok) {
    const int tx = static_cast<int>(my_tile % g.tw);
    const int64_t rest = my_tile / g.tw;
    img = static_cast<int>(rest / g.th);
    ih0 = 2 * static_cast<int>(rest % g.th) - g.pad;
    iw0 = 2 * tx - g.pad;
  }
  const int vpos = 8 * (tt & 3) + (tt >> 2);

  float d[16];  // this thread's 4x4 input patch of the next chunk
  auto load_patch = [&](int c0) {
    const int c = c0 + tc;
    const bool c_ok = tile_ok && c < g.c;
    const float* xc = x + (int64_t(img) * g.c + (c_ok ? c : 0)) * g.h * g.w;
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const int ih = ih0 + r;
      const bool row_ok = c_ok && ih >= 0 && ih < g.h;
#pragma unroll
      for (int s = 0; s < 4; ++s) {
        const int iw = iw0 + s;
        d[4 * r + s] = row_ok && iw >= 0 && iw < g.w ? __ldg(xc + int64_t(ih) * g.w + iw) : 0.f;
      }
    }
  };
  // V = B^T d B, B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1]: additions only.
  auto store_v = [&](int buf) {
    float t[16];
#pragma unroll
    for (int s = 0; s < 4; ++s) {
      t[s] = d[s] - d[8 + s];
      t[4 + s] = d[4 + s] + d[8 + s];
      t[8 + s] = d[8 + s] - d[4 + s];
      t[12 + s] = d[4 + s] - d[12 + s];
    }
    float* v = vs + buf * kVFloats + tc * kTiles + vpos;
    constexpr int kStride = kBC * kTiles;  // from one point to the next
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      v[(4 * r) * kStride] = t[4 * r] - t[4 * r + 2];
      v[(4 * r + 1) * kStride] = t[4 * r + 1] + t[4 * r + 2];
      v[(4 * r + 2) * kStride] = t[4 * r + 2] - t[4 * r + 1];
      v[(4 * r + 3) * kStride] = t[4 * r + 1] - t[4 * r + 3];
    }
  };
  // U of the chunk: 16 points x 8 channels x 64 filters = 2048 16-byte copies, 8 per thread
  // (zero-filled past C; U is zero past K up to kpad).
  auto load_u = [&](int buf, int c0) {
#pragma unroll
    for (int i = 0; i < kUFloats / 4 / kThreads; ++i) {
      const int f = tid + i * kThreads;
      const int col = f % (kBK / 4), row = f / (kBK / 4);  // row = point * kBC + c
      const int point = row / kBC, c = c0 + row % kBC;
      const bool ok = c < g.c;
      const float* src = u + (int64_t(point) * g.c + (ok ? c : 0)) * g.kpad + k0 + 4 * col;
      igemm::cp_async_16(us + buf * kUFloats + row * kBK + 4 * col, src, ok);
    }
  };

  // FMA role: lane (tg, kg) accumulates tiles tg + 4i (i < 8) by filters 4 kg + j and
  // 32 + 4 kg + j (j < 4), at points 2 warp and 2 warp + 1.
  const int tg = lane & 3, kg = lane >> 2;
  float acc[2][8][8];
#pragma unroll
  for (int q = 0; q < 2; ++q)
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
      for (int j = 0; j < 8; ++j) acc[q][i][j] = 0.f;

  const int chunks = gpu100::ceil_div(g.c, kBC);
  load_u(0, 0);
  igemm::cp_async_commit();
  load_patch(0);
  store_v(0);
  igemm::cp_async_wait<0>();
  __syncthreads();
  for (int ch = 0; ch < chunks; ++ch) {
    const int buf = ch & 1;
    const bool more = ch + 1 < chunks;
    if (more) {  // the next chunk's loads, in flight during this chunk's FMAs
      load_u(buf ^ 1, (ch + 1) * kBC);
      igemm::cp_async_commit();
      load_patch((ch + 1) * kBC);
    }
    const float* vb = vs + buf * kVFloats;
    const float* ub = us + buf * kUFloats;
#pragma unroll
    for (int c = 0; c < kBC; ++c) {
#pragma unroll
      for (int q = 0; q < 2; ++q) {
        const int point = 2 * warp + q;
        const float* vrow = vb + (point * kBC + c) * kTiles + 8 * tg;
        const float* urow = ub + (point * kBC + c) * kBK + 4 * kg;
        const float4 v0 = *reinterpret_cast<const float4*>(vrow);
        const float4 v1 = *reinterpret_cast<const float4*>(vrow + 4);
        const float4 u0 = *reinterpret_cast<const float4*>(urow);
        const float4 u1 = *reinterpret_cast<const float4*>(urow + 32);
        const float vv[8] = {v0.x, v0.y, v0.z, v0.w, v1.x, v1.y, v1.z, v1.w};
        const float uu[8] = {u0.x, u0.y, u0.z, u0.w, u1.x, u1.y, u1.z, u1.w};
#pragma unroll
        for (int i = 0; i < 8; ++i)
#pragma unroll
          for (int j = 0; j < 8; ++j) acc[q][i][j] = fmaf(vv[i], uu[j], acc[q][i][j]);
      }
    }
    if (more) {
      store_v(buf ^ 1);  // that buffer's last reader finished before the previous barrier
      igemm::cp_async_wait<0>();
    }
    __syncthreads();
  }

  // Stage the sums as M[point][filter][tile] (the pitch of 33 keeps the stores conflict-free),
  // then each thread transforms 8 (tile, filter) pairs: Y = A^T M A, A^T = [1 1 1 0; 0 1 -1 -1].
  float* ms = smem;  // the loop's last barrier ended every read of vs and us
#pragma unroll
  for (int q = 0; q < 2; ++q)
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const int f = j < 4 ? 4 * kg + j : 32 + 4 * kg + (j - 4);
        ms[((2 * warp + q) * kBK + f) * kMPitch + tg + 4 * i] = acc[q][i][j];
      }
  __syncthreads();
#pragma unroll 2
  for (int r = 0; r < kTiles * kBK / kThreads; ++r) {
    const int idx = tid + r * kThreads;
    const int t = idx % kTiles, f = idx / kTiles, k = k0 + f;
    const int64_t tile = tile0 + t;
    if (tile >= g.tiles || k >= g.k) continue;
    float m[16];
#pragma unroll
    for (int pt = 0; pt < 16; ++pt) m[pt] = ms[(pt * kBK + f) * kMPitch + t];
    float z0[4], z1[4];
#pragma unroll
    for (int s = 0; s < 4; ++s) {
      z0[s] = m[s] + m[4 + s] + m[8 + s];
      z1[s] = m[4 + s] - m[8 + s] - m[12 + s];
    }
    const float b = bias != nullptr ? bias[k] : 0.f;
    const int tx = static_cast<int>(tile % g.tw);
    const int64_t rest = tile / g.tw;
    const int oh = 2 * static_cast<int>(rest % g.th), ow = 2 * tx;
    const int n = static_cast<int>(rest / g.th);
    float* out = y + ((int64_t(n) * g.k + k) * g.p + oh) * g.q + ow;
    const bool right = ow + 1 < g.q, below = oh + 1 < g.p;
    out[0] = z0[0] + z0[1] + z0[2] + b;
    if (right) out[1] = z0[1] - z0[2] - z0[3] + b;
    if (below) {
      out[g.q] = z1[0] + z1[1] + z1[2] + b;
      if (right) out[g.q + 1] = z1[1] - z1[2] - z1[3] + b;
    }
  }
}

}  // namespace

std::string v7_refusal(const ConvShape& s, bool /*bias*/) {
  if (s.r != 3 || s.s != 3 || s.stride != 1 || s.dilation != 1) {
    return "Winograd F(2x2, 3x3) needs 3x3 filters, stride 1 and dilation 1, got " +
           std::to_string(s.r) + "x" + std::to_string(s.s) + " stride " + std::to_string(s.stride) +
           " dilation " + std::to_string(s.dilation);
  }
  return "";
}

void conv2d_v7_winograd(const ConvShape& s, const float* x, const float* w, const float* bias,
                        float* y, cudaStream_t stream) {
  check_conv_args(s);
  if (const std::string why = v7_refusal(s, bias != nullptr); !why.empty()) {
    throw std::invalid_argument("conv2d_v7_winograd: " + why);
  }
  WinoParams g{};
  g.n = s.n;
  g.c = s.c;
  g.h = s.h;
  g.w = s.w;
  g.k = s.k;
  g.pad = s.pad;
  g.p = s.p();
  g.q = s.q();
  g.th = gpu100::ceil_div(g.p, 2);
  g.tw = gpu100::ceil_div(g.q, 2);
  g.kpad = gpu100::round_up(s.k, kBK);
  g.tiles = int64_t(g.n) * g.th * g.tw;
  const int64_t grid_x = gpu100::ceil_div<int64_t>(g.tiles, kTiles);
  if (grid_x > 0x7fffffff) throw std::invalid_argument("conv2d_v7_winograd: too many tiles");
  // The transformed filters live in day08's scratch buffer (like v3's im2col matrix).
  float* u = static_cast<float*>(conv_scratch(sizeof(float) * kPoints * size_t(s.c) * g.kpad));
  const int64_t filter_threads = int64_t(s.c) * g.kpad;
  winograd_filter_kernel<<<static_cast<unsigned>(gpu100::ceil_div<int64_t>(filter_threads, 256)),
                           256, 0, stream>>>(w, s.c, s.k, g.kpad, u);
  CUDA_CHECK_LAST();
  // 132 KiB of dynamic shared memory (the M staging) is above the default 48 KiB: asked once.
  static const bool opted_in = [] {
    CUDA_CHECK(cudaFuncSetAttribute(winograd_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(kSmemBytes)));
    return true;
  }();
  (void)opted_in;
  const dim3 grid(static_cast<unsigned>(grid_x), static_cast<unsigned>(g.kpad / kBK));
  winograd_kernel<<<grid, kThreads, kSmemBytes, stream>>>(g, x, u, bias, y);
  CUDA_CHECK_LAST();
}

}  // namespace day08
