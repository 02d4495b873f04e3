#pragma once
// What day08's two resident-filter halo kernels share: v12 (bf16) and v13 (fp32 as TF32). Both
// take 3x3 stride-1 layers of C, K <= 64, give each consumer warpgroup 8 x 8-pixel output tiles
// and bring each tile's 10 x 10 input halo by TMA; they differ in the element size, and so in how
// the filters, the halo stages and the staged outputs fit in shared memory (their own files).
#include <cuda.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "common/math.hpp"
#include "common/occupancy.hpp"
#include "conv.hpp"
#include "conv_day.hpp"
#include "implicit_gemm_nhwc.cuh"

namespace day08::halo_wgmma {

constexpr int kTH = 8, kTW = 8;  // a warpgroup's tile: 8 x 8 output pixels (wgmma's M = 64)

struct Params {
  int c, k, pad, p, q, tiles_p, tiles_q, tiles;
  // The fused NPQK form's fast epilogue (K % 8 == 0, 16-byte aligned y and residual): v12's
  // outputs through shared memory and the TMA, v13's residual loaded under the multiplies.
  bool staged;
};

// x's halo maps, one per convolution of the group.
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
  return {t2 / a.tiles_p, tp * kTH, tq * kTW};
}

// The launch's parameters: the shape, the tile counts (std::invalid_argument when they overflow a
// grid) and, for the fused NPQK form, whether the outputs go out staged: K % 8 == 0 and 16-byte
// aligned outputs and residuals.
template <class T, class Y>
Params make_params(const char* name, const ConvShape& s, const ConvGroup<T, Y>& grp, bool npqk) {
  Params a;
  a.c = s.c, a.k = s.k, a.pad = s.pad, a.p = s.p(), a.q = s.q();
  a.tiles_p = gpu100::ceil_div(a.p, kTH);
  a.tiles_q = gpu100::ceil_div(a.q, kTW);
  const int64_t tiles = int64_t(s.n) * a.tiles_p * a.tiles_q;
  if (tiles > int64_t(INT_MAX) / 2) {
    throw std::invalid_argument(std::string(name) + ": more output tiles than a grid holds");
  }
  a.tiles = int(tiles);
  a.staged = npqk && s.k % 8 == 0;
  for (int i = 0; i < grp.count; ++i) {
    a.staged = a.staged && gpu100::aligned16(grp.op[i].y) &&
               (grp.op[i].residual == nullptr || gpu100::aligned16(grp.op[i].residual));
  }
  return a;
}

// Persistent blocks per convolution of the group: as many as fit on the GPU at once, shared among
// the group's convolutions, and no more than the tiles.
inline int blocks(const Params& a, int resident, int group_count) {
  return int(std::min<int64_t>(a.tiles, std::max(1, resident / group_count)));
}

// "" when the layer is one the kernels keep in shared memory, else the one-line reason: 3x3
// filters at stride 1 and dilation 1, C a multiple of c_multiple (16-byte copies) and at most 64,
// K at most 64.
inline std::string refusal(const ConvShape& s, int c_multiple) {
  if (s.r != 3 || s.s != 3 || s.stride != 1 || s.dilation != 1) {
    return "takes 3x3 filters at stride 1 and dilation 1 only (its halo tile is 10 x 10 pixels)";
  }
  if (s.c % c_multiple != 0 || s.c > 64) {
    return "C = " + std::to_string(s.c) +
           ": keeps every filter in shared memory, for C <= 64 and a multiple of " +
           std::to_string(c_multiple) + " (16-byte copies)";
  }
  if (s.k > 64) {
    return "K = " + std::to_string(s.k) + ": keeps at most 64 filters in shared memory";
  }
  return "";
}

// The register epilogue both kernels run where the staged one does not: consumer thread (w4, gq,
// tq) of a warpgroup holds output row 2 w4 + h (h < 2), column gq of its tile, at filters
// 8 j + 2 tq + e (e < 2), in d[4 j + 2 h + e]. kNpqk: the fused form's NPQK pairs (bias,
// residual, ReLU: nhwc::store_pair; K is even, the launchers check); else the day's fp32 NKPQ
// with the bias.
template <int kBN, bool kNpqk, class Op>
__device__ __forceinline__ void store_registers(const float (&d)[kBN / 2], const Params& a,
                                                const TilePos& tp, int w4, int gq, int tq,
                                                const Op& op, bool relu) {
  const int pq = a.p * a.q;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int p = tp.p0 + 2 * w4 + h, q = tp.q0 + gq;
    if (p >= a.p || q >= a.q) continue;
    if constexpr (kNpqk) {
      const int64_t m = (int64_t(tp.n) * a.p + p) * a.q + q;
#pragma unroll
      for (int j = 0; j < kBN / 8; ++j) {
        const int k = 8 * j + 2 * tq;
        if (k >= a.k) continue;  // k + 1 < K too
        nhwc::store_pair(op, relu, m, k, a.k, d[4 * j + 2 * h], d[4 * j + 2 * h + 1]);
      }
    } else {
      static_assert(std::is_same_v<std::remove_cv_t<std::remove_pointer_t<decltype(op.y)>>, float>,
                    "the day's variants write fp32");
      float* yp = op.y + size_t(tp.n) * a.k * pq + size_t(p) * a.q + q;
#pragma unroll
      for (int j = 0; j < kBN / 8; ++j)
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

}  // namespace day08::halo_wgmma
