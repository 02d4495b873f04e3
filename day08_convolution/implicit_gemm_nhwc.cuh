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

// Two adjacent channels of an NPQK tensor as fp32: a float2, or a bf16x2 widened.
__device__ __forceinline__ float2 load_pair(const float* p) {
  return *reinterpret_cast<const float2*>(p);
}
__device__ __forceinline__ float2 load_pair(const __nv_bfloat16* p) {
  return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(p));
}

// The NPQK epilogue of v6, v9, v10 and v11 for one register pair: output pixel m, adjacent
// channels k and k + 1 (K is even, so both exist when k < K): bias, residual and ReLU in fp32,
// then one store of the pair (and one residual load, unless the caller passes the pair in res): 4
// bytes of bf16x2 (a quad's 4 lanes cover 16 contiguous bytes), or 8 bytes of float2 rounded to
// TF32 for fp32 outputs (v11's fused form; 32 bytes a quad). v9 and v10 store bf16 with
// gather_octet and store8 below where K % 8 == 0.
template <class Op>
__device__ __forceinline__ void store_pair(const Op& op, bool relu, int64_t m, int k, int num_k,
                                           float v0, float v1, const float2* res = nullptr) {
  const size_t o = size_t(m) * num_k + k;
  if (op.bias != nullptr) v0 += op.bias[k], v1 += op.bias[k + 1];
  using Y = std::remove_cv_t<std::remove_pointer_t<decltype(op.y)>>;
  if (res != nullptr) {
    v0 += res->x, v1 += res->y;
  } else if (op.residual != nullptr) {
    const float2 r = load_pair(op.residual + o);
    v0 += r.x, v1 += r.y;
  }
  if (relu) v0 = fmaxf(v0, 0.f), v1 = fmaxf(v1, 0.f);
  if constexpr (std::is_same_v<Y, float>) {
    // Stored rounded to TF32 (to nearest): the next layer's copies bring these bits unchanged and
    // its tensor cores would otherwise truncate them, a bias toward zero that compounds layer
    // after layer (conv.hpp).
    *reinterpret_cast<float2*>(op.y + o) =
        make_float2(day04::mma::round_tf32(v0), day04::mma::round_tf32(v1));
  } else {
    *reinterpret_cast<__nv_bfloat162*>(op.y + o) = __floats2bfloat162_rn(v0, v1);
  }
}

// The bf16 NPQK epilogue 16 bytes a lane, for K % 8 == 0 and 16-byte aligned y and residual. The
// 4 lanes of a quad (tq = 0..3) hold one output pixel's register pairs of 4 consecutive 8-filter
// groups: p[t] is filters 8 t + 2 tq, + 1 of group t. A 4 x 4 exchange of those pairs across the
// quad gives lane tq all 8 filters of group tq (from lane u the pair 2 u, 2 u + 1), which it
// finishes (bias, residual, ReLU in fp32) and stores as one 16-byte piece: the quad writes 64
// contiguous bytes of the pixel's row, and reads its residual so, instead of 4 x 16 bytes
// scattered over 4 groups (gather_octet, then store8; implicit_gemm_wgmma.cuh's store_sums).
// Measured against store_pair in the network's bf16 forward at N = 32 (H100, one session,
// results/h100/profiles.txt): 2.88 to 2.57 ms, every v10 layer 11-25% faster (l2 0.653 to 0.580
// ms): 4-byte pieces of 32-byte sectors made L2 move each output and residual sector twice.
// 8 consecutive bf16 outputs from fp32 sums (bias already added) at element o of y: the
// residual's 16 bytes added (res: already loaded by the caller, or nullptr to load them here),
// ReLU, then one 16-byte store. o is a multiple of 8 and y and the residual 16-byte aligned.
template <class Op>
__device__ __forceinline__ void store8(const Op& op, bool relu, size_t o, float (&v)[8],
                                       const uint4* res = nullptr) {
  if (res != nullptr || op.residual != nullptr) {
    const uint4 rv = res != nullptr ? *res : *reinterpret_cast<const uint4*>(op.residual + o);
    const uint32_t rw[4] = {rv.x, rv.y, rv.z, rv.w};
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float2 f = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&rw[e]));
      v[2 * e] += f.x, v[2 * e + 1] += f.y;
    }
  }
  uint32_t ow[4];
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    float v0 = v[2 * e], v1 = v[2 * e + 1];
    if (relu) v0 = fmaxf(v0, 0.f), v1 = fmaxf(v1, 0.f);
    const __nv_bfloat162 b2 = __floats2bfloat162_rn(v0, v1);
    ow[e] = *reinterpret_cast<const uint32_t*>(&b2);
  }
  *reinterpret_cast<uint4*>(op.y + o) = make_uint4(ow[0], ow[1], ow[2], ow[3]);
}

__device__ __forceinline__ float2 pick4(const float2 (&p)[4], int i) {
  float2 v = p[0];
  v = i == 1 ? p[1] : v;
  v = i == 2 ? p[2] : v;
  return i == 3 ? p[3] : v;
}
// The quad's exchange: lane tq receives, in v, the 8 filters of its group tq (v[2 u], v[2 u + 1]
// from lane u). Every lane of the warp calls it (shuffles); the caller finishes and stores v
// (bias, then store8).
__device__ __forceinline__ void gather_octet(const float2 (&p)[4], int tq, float (&v)[8]) {
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    // Send lane tq ^ r the pair of its group; receive from it the pair of mine, its filters
    // 2 (tq ^ r) and 2 (tq ^ r) + 1 of the group.
    const float2 send = pick4(p, tq ^ r);
    float2 got = send;
    if (r > 0) {
      got.x = __shfl_xor_sync(0xffffffffu, send.x, r);
      got.y = __shfl_xor_sync(0xffffffffu, send.y, r);
    }
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      if (u == (tq ^ r)) v[2 * u] = got.x, v[2 * u + 1] = got.y;
    }
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
