#pragma once
// day08's Winograd F(2x2, 3x3) pieces, shared by v7 (fp32 FMAs) and v8 (TF32 tensor cores):
// the block's work split, the filter transform kernel, a tile's input patch and its transform,
// and the output transform from shared memory. Internal: only conv2d_v7/v8 include it.
// Lavin and Gray, "Fast Algorithms for Convolutional Neural Networks", 2016: with
// B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1], G = [1 0 0; .5 .5 .5; .5 -.5 .5; 0 0 1] and
// A^T = [1 1 1 0; 0 1 -1 -1], a 2x2 output block is Y = A^T [sum over c of (G g G^T) . (B^T d B)] A
// for the 4x4 input patch d and the 3x3 filter g.
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "common/cuda_check.hpp"

#include "common/math.hpp"
#include "common/occupancy.hpp"
#include "conv_day.hpp"
#include "implicit_gemm.cuh"
#include "mma.cuh"

namespace day08::wino {

constexpr int kTiles = 32;     // 2x2 output tiles per block, consecutive in (n, tile row, col)
constexpr int kBK = 64;        // filters per block
constexpr int kBC = 8;         // channels per chunk
constexpr int kThreads = 256;  // 8 warps; warp w owns transform points 2w and 2w + 1
constexpr int kPoints = 16;    // the 4 x 4 transform points
constexpr int kMPitch = kTiles + 1;  // the sums staged as M[point][filter][tile], padded
constexpr int kMFloats = kPoints * kBK * kMPitch;

struct Params {
  int n, c, h, w, k, pad, p, q;
  int th, tw;  // output tiles per column and per row: ceil(p / 2), ceil(q / 2)
  int kpad;    // k rounded up to kBK (U is zero past k)
  int64_t tiles;
};
Params make_params(const ConvShape& s);  // after v7_refusal(s) is empty

// U[point][c][k] for k < kpad (zero past K), 16 * C * kpad floats, into `u`; rounded to TF32
// when `tf32` (v8's mma operands).
void transform_filters_into(const ConvShape& s, const Params& g, const float* w, bool tf32,
                            float* u, cudaStream_t stream);
// The same into day08's scratch buffer (the day's variants, which transform at every call).
// Returns the buffer.
const float* transform_filters(const ConvShape& s, const Params& g, const float* w, bool tf32,
                               cudaStream_t stream);

// Where a tile's 4x4 input patch starts (image, top row, left column; may be negative: padding).
struct TileOrigin {
  bool ok = false;
  int img = 0, ih0 = 0, iw0 = 0;
};
__device__ __forceinline__ TileOrigin tile_origin(const Params& g, int64_t tile) {
  TileOrigin o;
  if (tile >= g.tiles) return o;
  o.ok = true;
  const int tx = static_cast<int>(tile % g.tw);
  const int64_t rest = tile / g.tw;
  o.img = static_cast<int>(rest / g.th);
  o.ih0 = 2 * static_cast<int>(rest % g.th) - g.pad;
  o.iw0 = 2 * tx - g.pad;
  return o;
}

// The 4x4 patch of channel c (zeros outside the image, past C, or for a tile past the end).
__device__ __forceinline__ void load_patch(const float* __restrict__ x, const Params& g,
                                           const TileOrigin& o, int c, float (&d)[16]) {
  const bool c_ok = o.ok && c < g.c;
  const float* xc = x + (int64_t(o.img) * g.c + (c_ok ? c : 0)) * g.h * g.w;
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    const int ih = o.ih0 + r;
    const bool row_ok = c_ok && ih >= 0 && ih < g.h;
#pragma unroll
    for (int s = 0; s < 4; ++s) {
      const int iw = o.iw0 + s;
      d[4 * r + s] = row_ok && iw >= 0 && iw < g.w ? __ldg(xc + int64_t(ih) * g.w + iw) : 0.f;
    }
  }
}

// V = B^T d B (additions only); v[4 r + s] is point (r, s).
__device__ __forceinline__ void transform_patch(const float (&d)[16], float (&v)[16]) {
  float t[16];
#pragma unroll
  for (int s = 0; s < 4; ++s) {
    t[s] = d[s] - d[8 + s];
    t[4 + s] = d[4 + s] + d[8 + s];
    t[8 + s] = d[8 + s] - d[4 + s];
    t[12 + s] = d[4 + s] - d[12 + s];
  }
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    v[4 * r] = t[4 * r] - t[4 * r + 2];
    v[4 * r + 1] = t[4 * r + 1] + t[4 * r + 2];
    v[4 * r + 2] = t[4 * r + 2] - t[4 * r + 1];
    v[4 * r + 3] = t[4 * r + 1] - t[4 * r + 3];
  }
}

// After the block's sums are staged in ms[point][filter][tile] (pitch kMPitch): each thread
// transforms 8 (tile, filter) pairs, Y = A^T M A, adds the bias (and the residual, then the ReLU,
// in the fused layer form) and writes the 2x2 outputs that fall inside the image.
__device__ __forceinline__ void store_outputs(const float* ms, const Params& g, int64_t tile0,
                                              int k0, const ConvOperands<float>& op, bool relu) {
#pragma unroll 2
  for (int r = 0; r < kTiles * kBK / kThreads; ++r) {
    const int idx = threadIdx.x + r * kThreads;
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
    const float b = op.bias != nullptr ? op.bias[k] : 0.f;
    const int tx = static_cast<int>(tile % g.tw);
    const int64_t rest = tile / g.tw;
    const int oh = 2 * static_cast<int>(rest % g.th), ow = 2 * tx;
    const int n = static_cast<int>(rest / g.th);
    const int64_t o = ((int64_t(n) * g.k + k) * g.p + oh) * g.q + ow;
    auto put = [&](int64_t at, float v) {
      v += b;
      if (op.residual != nullptr) v += op.residual[o + at];
      op.y[o + at] = relu ? fmaxf(v, 0.f) : v;
    };
    const bool right = ow + 1 < g.q, below = oh + 1 < g.p;
    put(0, z0[0] + z0[1] + z0[2]);
    if (right) put(1, z0[1] - z0[2] - z0[3]);
    if (below) {
      put(g.q, z1[0] + z1[1] + z1[2]);
      if (right) put(g.q + 1, z1[1] - z1[2] - z1[3]);
    }
  }
}

// The fused kernel, written once; `Engine` is what v7 and v8 differ in: how a chunk's 16 point
// products are accumulated (fp32 FMAs or TF32 mma.sync), and with it the shared-memory layouts of
// V and U and how the sums are staged. Engine provides kVPitch / kUPitch (floats per
// (point, channel) row of V and U), kTf32 (round V to TF32 when storing it), v_pos(tile) (the
// tile's position in a V row), zero(), chunk(vb, ub) and stage(ms).
// One block: 32 tiles x 64 filters. Per chunk of 8 channels, thread (tc, tt) loads and
// transforms channel tc of tile tt; the next chunk's patches are loaded into registers and its U
// copied by cp.async while this chunk's products run. At the end the sums are staged in shared
// memory for store_outputs. The group form (conv.hpp's ConvGroup): blockIdx.z picks the
// convolution, whose `w` is its transformed filters U.
template <class Engine>
constexpr __host__ __device__ int v_floats() {
  return kPoints * kBC * Engine::kVPitch;
}
template <class Engine>
constexpr __host__ __device__ int u_floats() {
  return kPoints * kBC * Engine::kUPitch;
}
template <class Engine>
constexpr size_t smem_bytes() {
  return sizeof(float) * (2 * (v_floats<Engine>() + u_floats<Engine>()) > kMFloats
                              ? 2 * (v_floats<Engine>() + u_floats<Engine>())
                              : kMFloats);
}

template <class Engine>
__global__ void __launch_bounds__(kThreads, 1) fused_kernel(Params g, const ConvGroup<float> grp) {
  constexpr int kV = v_floats<Engine>(), kU = u_floats<Engine>();
  extern __shared__ __align__(16) float smem[];
  float* vs = smem;           // [2][point][c][kVPitch]
  float* us = smem + 2 * kV;  // [2][point][c][kUPitch]
  const ConvOperands<float> op = blockIdx.z == 0 ? grp.op[0] : grp.op[1];
  const float* __restrict__ x = op.x;
  const float* __restrict__ u = op.w;
  const int tid = threadIdx.x;
  const int64_t tile0 = int64_t(blockIdx.x) * kTiles;
  const int k0 = blockIdx.y * kBK;

  const int tc = tid / kTiles, tt = tid % kTiles;  // the transform role
  const TileOrigin origin = tile_origin(g, tile0 + tt);
  float d[16];  // the 4x4 patch of the next chunk
  auto store_v = [&](int buf) {
    float v[16];
    transform_patch(d, v);
    float* dst = vs + buf * kV + tc * Engine::kVPitch + Engine::v_pos(tt);
#pragma unroll
    for (int pt = 0; pt < kPoints; ++pt) {
      dst[pt * kBC * Engine::kVPitch] =
          Engine::kTf32 ? __uint_as_float(day04::mma::to_tf32(__float_as_uint(v[pt]))) : v[pt];
    }
  };
  // U of the chunk: 16 points x 8 channels x 64 filters = 2048 16-byte copies, 8 per thread
  // (zero-filled past C; U is zero past K up to kpad).
  auto load_u = [&](int buf, int c0) {
#pragma unroll
    for (int i = 0; i < kPoints * kBC * kBK / 4 / kThreads; ++i) {
      const int f = tid + i * kThreads;
      const int col = f % (kBK / 4), row = f / (kBK / 4);  // row = point * kBC + c
      const int point = row / kBC, c = c0 + row % kBC;
      const bool ok = c < g.c;
      const float* src = u + (int64_t(point) * g.c + (ok ? c : 0)) * g.kpad + k0 + 4 * col;
      igemm::cp_async_16(us + buf * kU + row * Engine::kUPitch + 4 * col, src, ok);
    }
  };

  Engine engine;
  engine.zero();
  const int chunks = gpu100::ceil_div(g.c, kBC);
  load_u(0, 0);
  igemm::cp_async_commit();
  load_patch(x, g, origin, tc, d);
  store_v(0);
  igemm::cp_async_wait<0>();
  __syncthreads();
  for (int ch = 0; ch < chunks; ++ch) {
    const int buf = ch & 1;
    const bool more = ch + 1 < chunks;
    if (more) {  // the next chunk's loads, in flight during this chunk's products
      load_u(buf ^ 1, (ch + 1) * kBC);
      igemm::cp_async_commit();
      load_patch(x, g, origin, (ch + 1) * kBC + tc, d);
    }
    engine.chunk(vs + buf * kV, us + buf * kU);
    if (more) {
      store_v(buf ^ 1);  // that buffer's last reader finished before the previous barrier
      igemm::cp_async_wait<0>();
    }
    __syncthreads();
  }
  float* ms = smem;  // the loop's last barrier ended every read of vs and us
  engine.stage(ms);
  __syncthreads();
  store_outputs(ms, g, tile0, k0, op, grp.relu);
}

// Host: the fused kernel (its shared memory opted in once per engine and GPU) on a group whose `w`
// are the transformed filters U.
template <class Engine>
void launch_group(const ConvShape& s, const ConvGroup<float>& grp, cudaStream_t stream) {
  const Params g = make_params(s);
  static gpu100::PerDevice<bool> opted_in;  // on every GPU the kernel runs on
  opted_in.get([] {
    CUDA_CHECK(cudaFuncSetAttribute(fused_kernel<Engine>,
                                    cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(smem_bytes<Engine>())));
    return true;
  });
  const dim3 grid(static_cast<unsigned>(gpu100::ceil_div<int64_t>(g.tiles, kTiles)),
                  static_cast<unsigned>(g.kpad / kBK), static_cast<unsigned>(grp.count));
  fused_kernel<Engine><<<grid, kThreads, smem_bytes<Engine>(), stream>>>(g, grp);
  CUDA_CHECK_LAST();
}

// The day's variants: the filter transform into the scratch buffer, then a group of one.
template <class Engine>
void launch(const ConvShape& s, const float* x, const float* w, const float* bias, float* y,
            cudaStream_t stream) {
  ConvGroup<float> grp;
  grp.op[0] = {x, transform_filters(s, make_params(s), w, Engine::kTf32, stream), bias, nullptr, y};
  launch_group<Engine>(s, grp, stream);
}

}  // namespace day08::wino
