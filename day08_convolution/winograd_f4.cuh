#pragma once
// day08's Winograd F(4x4, 3x3) in fp32, the pieces v14 (one fused kernel) and v16 (transforms and
// batched GEMMs as separate kernels) share: the shape of the tiling, the 1D transforms (their
// matrices are in conv2d_v14_winograd_f4.cu's header comment), the input patch's transform and the
// output step. Both forms call them in the same order, so they round the same way.
#include <cuda_runtime.h>

#include <cstdint>

#include "common/math.hpp"
#include "conv.hpp"

namespace day08::wino4 {

constexpr int kPoints = 36;     // the 6 x 6 transform points
constexpr int kFilterPad = 32;  // U's rows: K rounded up to this (v14's filters per block)

struct Params {
  int n, c, h, w, k, pad, p, q;
  int th, tw;  // output tiles per column and per row: ceil(p / 4), ceil(q / 4)
  int kpad;    // k rounded up to kFilterPad (U is zero past k)
  int64_t tiles;
  bool vec;  // Q % 4 == 0 and y (and any residual) 16-byte aligned: a tile row is one float4
};

inline Params make_params(const ConvShape& s) {
  Params g{};
  g.n = s.n, g.c = s.c, g.h = s.h, g.w = s.w, g.k = s.k, g.pad = s.pad;
  g.p = s.p();
  g.q = s.q();
  g.th = gpu100::ceil_div(g.p, 4);
  g.tw = gpu100::ceil_div(g.q, 4);
  g.kpad = gpu100::round_up(s.k, kFilterPad);
  g.tiles = int64_t(g.n) * g.th * g.tw;
  return g;
}

// The three 1D transforms, applied along columns and then rows. G: 3 filter taps -> 6 points.
__device__ __forceinline__ void g_1d(float g0, float g1, float g2, float (&o)[6]) {
  const float sum = g0 + g2;
  o[0] = 0.25f * g0;
  o[1] = -(sum + g1) * (1.f / 6);
  o[2] = -(sum - g1) * (1.f / 6);
  const float a = g0 * (1.f / 24) + g2 * (1.f / 6), b = g1 * (1.f / 12);
  o[3] = a + b;
  o[4] = a - b;
  o[5] = g2;
}
// B^T: 6 input values -> 6 points (additions and small multiples).
__device__ __forceinline__ void bt_1d(const float (&i)[6], float (&o)[6]) {
  o[0] = fmaf(4.f, i[0], fmaf(-5.f, i[2], i[4]));
  o[1] = fmaf(-4.f, i[1] + i[2], i[3] + i[4]);
  o[2] = fmaf(4.f, i[1] - i[2], i[4] - i[3]);
  o[3] = fmaf(2.f, i[3] - i[1], i[4] - i[2]);
  o[4] = fmaf(-2.f, i[3] - i[1], i[4] - i[2]);
  o[5] = fmaf(4.f, i[1], fmaf(-5.f, i[3], i[5]));
}
// A^T: 6 points -> 4 outputs.
__device__ __forceinline__ void at_1d(const float (&m)[6], float (&o)[4]) {
  const float s12 = m[1] + m[2], d12 = m[1] - m[2], s34 = m[3] + m[4], d34 = m[3] - m[4];
  o[0] = m[0] + s12 + s34;
  o[1] = fmaf(2.f, d34, d12);
  o[2] = fmaf(4.f, s34, s12);
  o[3] = fmaf(8.f, d34, d12) + m[5];
}

// V = B^T d B for the raw patch d (36 floats in shared memory, row-major), point (r, s) written
// to v[(6 r + s) * stride], in four pieces that the products of a chunk are interleaved with:
// piece 0 is row 0 of V, 1 rows 1 and 2, 2 rows 3 and 4, 3 row 5. A piece combines the rows of d
// its rows of B^T name (rows 0, 2, 4; 1-4; 1-4; 1, 3, 5), 6 columns at a time, then applies B
// along the row: at most 24 values live beside the thread's 96 sums.
template <int kPiece>
__device__ __forceinline__ void transform_piece(const float* d, float* v, int stride) {
  auto row = [&](int i, int s) { return d[6 * i + s]; };
  auto put = [&](int r, const float(&e)[6]) {
    float o[6];
    bt_1d(e, o);
#pragma unroll
    for (int s = 0; s < 6; ++s) v[(6 * r + s) * stride] = o[s];
  };
  if constexpr (kPiece == 0 || kPiece == 3) {
    float e[6];  // B^T row 0: 4 d0 - 5 d2 + d4; row 5: 4 d1 - 5 d3 + d5
    constexpr int a = kPiece == 0 ? 0 : 1;
#pragma unroll
    for (int s = 0; s < 6; ++s)
      e[s] = fmaf(4.f, row(a, s), fmaf(-5.f, row(a + 2, s), row(a + 4, s)));
    put(kPiece == 0 ? 0 : 5, e);
  } else {
    float e0[6], e1[6];
#pragma unroll
    for (int s = 0; s < 6; ++s) {
      const float d1 = row(1, s), d2 = row(2, s), d3 = row(3, s), d4 = row(4, s);
      if constexpr (kPiece == 1) {  // rows 1, 2: (d3 + d4) - 4 (d1 + d2), (d4 - d3) + 4 (d1 - d2)
        e0[s] = fmaf(-4.f, d1 + d2, d3 + d4);
        e1[s] = fmaf(4.f, d1 - d2, d4 - d3);
      } else {  // rows 3, 4: (d4 - d2) +- 2 (d3 - d1)
        e0[s] = fmaf(2.f, d3 - d1, d4 - d2);
        e1[s] = fmaf(-2.f, d3 - d1, d4 - d2);
      }
    }
    put(kPiece == 1 ? 1 : 3, e0);
    put(kPiece == 1 ? 2 : 4, e1);
  }
}
__device__ __forceinline__ void transform_patch(const float* d, float* v, int stride) {
  transform_piece<0>(d, v, stride);
  transform_piece<1>(d, v, stride);
  transform_piece<2>(d, v, stride);
  transform_piece<3>(d, v, stride);
}

// The output step of one tile and filter: Y = A^T M A from the tile's 36 sums (point (r, s) at
// m[(6 r + s) * stride]), plus the bias (and in the fused form the residual, then the ReLU),
// written where it lies inside the image.
template <class Index>
__device__ __forceinline__ void store_tile(const float* m, Index stride, const Params& g,
                                           int64_t tile, int k, const ConvOperands<float>& op,
                                           bool relu) {
  float z[4][6];  // A^T M: column s of M -> 4 rows
#pragma unroll
  for (int s = 0; s < 6; ++s) {
    float col[6];
#pragma unroll
    for (int r = 0; r < 6; ++r) col[r] = m[(6 * r + s) * stride];
    float o[4];
    at_1d(col, o);
#pragma unroll
    for (int i = 0; i < 4; ++i) z[i][s] = o[i];
  }
  const float b = op.bias != nullptr ? op.bias[k] : 0.f;
  const int tx = static_cast<int>(tile % g.tw);
  const int64_t rest = tile / g.tw;
  const int oh = 4 * static_cast<int>(rest % g.th), ow = 4 * tx;
  const int n = static_cast<int>(rest / g.th);
  const int64_t plane = (int64_t(n) * g.k + k) * g.p;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    if (oh + i >= g.p) break;
    float y[4];
    at_1d(z[i], y);
    const int64_t o = (plane + oh + i) * g.q + ow;
    float res[4] = {0.f, 0.f, 0.f, 0.f};
    if (g.vec) {  // the whole row is inside (Q % 4 == 0): one 16-byte load and store
      if (op.residual != nullptr) {
        const float4 r4 = *reinterpret_cast<const float4*>(op.residual + o);
        res[0] = r4.x, res[1] = r4.y, res[2] = r4.z, res[3] = r4.w;
      }
      float v[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        v[j] = y[j] + b + res[j];
        if (relu) v[j] = fmaxf(v[j], 0.f);
      }
      *reinterpret_cast<float4*>(op.y + o) = make_float4(v[0], v[1], v[2], v[3]);
    } else {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        if (ow + j >= g.q) break;
        float v = y[j] + b + (op.residual != nullptr ? op.residual[o + j] : 0.f);
        op.y[o + j] = relu ? fmaxf(v, 0.f) : v;
      }
    }
  }
}

}  // namespace day08::wino4
