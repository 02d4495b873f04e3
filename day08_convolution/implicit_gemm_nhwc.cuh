#pragma once
// day08 implicit GEMM in NHWC (channels last): the shape parameters and the GEMM_K walk that the
// bf16 kernels v6 (mma.sync) and v9 (wgmma) share, and the NPQK epilogue of v6, v9, v10 and v11.
// (implicit_gemm.cuh is the NCHW form of v4, v5.)
//
// With x [n][h][w][c] and KRSC filters [k][r][s][c], GEMM_K is ordered g = (r * S + s) * C + c,
// c fastest. A thread copies 8 channels (16 bytes) of one (r, s) at a time: with C % 8 == 0 a
// chunk never straddles two (r, s). Its position along GEMM_K advances by one slab (BK) per
// stage, with carries and no divisions.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include <stdexcept>
#include <string>
#include <type_traits>

#include "common/math.hpp"
#include "conv.hpp"
#include "mma.cuh"

namespace day08::nhwc {

// The shape, computed on the host once per launch.
struct Params {
  int c, h, w, k, r, s, stride, pad, dil;
  int Q, PQ, M, RSC, HWC;
  int step_c, step_s, step_r;  // one slab (bk) of GEMM_K in (r, s, c): c += step_c, ...
};

inline Params make_params(const ConvShape& s, int bk) {
  Params g;
  g.c = s.c, g.h = s.h, g.w = s.w, g.k = s.k, g.r = s.r, g.s = s.s;
  g.stride = s.stride, g.pad = s.pad, g.dil = s.dilation;
  g.Q = s.q();
  g.PQ = s.p() * g.Q;
  g.M = s.n * g.PQ;
  g.RSC = s.r * s.s * s.c;
  g.HWC = s.h * s.w * s.c;
  g.step_c = bk % s.c;
  g.step_s = (bk / s.c) % s.s;
  g.step_r = (bk / s.c) / s.s;
  return g;
}

// A position g = (r * S + s) * C + c along GEMM_K, advanced one slab at a time with carries (no
// divisions after init). c < C and s < S hold before and after; r >= R means past the end.
struct RscPos {
  int r, s, c;
  __device__ void init(int gk, const Params& g) {
    const int rs = gk / g.c;
    c = gk - rs * g.c;
    r = rs / g.s;
    s = rs - r * g.s;
  }
  __device__ void advance(const Params& g) {
    c += g.step_c;
    s += g.step_s;
    r += g.step_r;
    if (c >= g.c) c -= g.c, ++s;  // step_s < S and one carry: s < 2S, one subtraction suffices
    if (s >= g.s) s -= g.s, ++r;
  }
};

// The NPQK epilogue of v6, v9, v10 and v11 for one register pair: output pixel m, adjacent
// channels k and k + 1 (K is even, so both exist when k < K): bias, residual and ReLU in fp32,
// then one store of the pair (and one residual load): 4 bytes of bf16x2 (a quad's 4 lanes cover 16
// contiguous bytes), or 8 bytes of float2 rounded to TF32 for fp32 outputs (v11's fused form; 32
// bytes a quad).
template <class Op>
__device__ __forceinline__ void store_pair(const Op& op, bool relu, int64_t m, int k, int num_k,
                                           float v0, float v1) {
  const size_t o = size_t(m) * num_k + k;
  if (op.bias != nullptr) v0 += op.bias[k], v1 += op.bias[k + 1];
  using Y = std::remove_cv_t<std::remove_pointer_t<decltype(op.y)>>;
  if constexpr (std::is_same_v<Y, float>) {
    if (op.residual != nullptr) {
      const float2 r = *reinterpret_cast<const float2*>(op.residual + o);
      v0 += r.x, v1 += r.y;
    }
    if (relu) v0 = fmaxf(v0, 0.f), v1 = fmaxf(v1, 0.f);
    // Stored rounded to TF32 (to nearest): the next layer's copies bring these bits unchanged and
    // its tensor cores would otherwise truncate them, a bias toward zero that compounds layer
    // after layer (conv.hpp).
    // (cvt leaves the low 13 bits unspecified: they are cleared.)
    v0 = __uint_as_float(day04::mma::to_tf32(__float_as_uint(v0)) & ~0x1FFFu);
    v1 = __uint_as_float(day04::mma::to_tf32(__float_as_uint(v1)) & ~0x1FFFu);
    *reinterpret_cast<float2*>(op.y + o) = make_float2(v0, v1);
  } else {
    if (op.residual != nullptr) {
      const float2 r =
          __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(op.residual + o));
      v0 += r.x, v1 += r.y;
    }
    if (relu) v0 = fmaxf(v0, 0.f), v1 = fmaxf(v1, 0.f);
    *reinterpret_cast<__nv_bfloat162*>(op.y + o) = __floats2bfloat162_rn(v0, v1);
  }
}

// The launchers' alignment rule: every x and w of the group 16-byte aligned (the 16-byte
// cp.async of A, v9's TMA of the filters); otherwise std::invalid_argument naming the variant.
template <class T, class Y>
void require_aligned16(const char* variant, const ConvGroup<T, Y>& grp, const char* what_needs_it) {
  for (int i = 0; i < grp.count; ++i) {
    if (!gpu100::aligned16(grp.op[i].x) || !gpu100::aligned16(grp.op[i].w)) {
      throw std::invalid_argument(std::string(variant) + ": x and w must be 16-byte aligned (" +
                                  what_needs_it + ")");
    }
  }
}

}  // namespace day08::nhwc
