// Conv2d v16: Winograd F(4x4, 3x3) in three kernels, its products as batched GEMMs on day04's
// SGEMM (the "non-fused" form). Changed from v14: v14 does everything in one block of 32 tiles x
// 32 filters. Its 36 point GEMMs are 32 x 32 per block, so each U value it brings in serves 32
// tiles and each V value 32 filters, and its 36,864 sums fill the register file (3 warps per
// scheduler). At C = K = 256 and 512 that leaves it behind v7 and cuDNN. v16 splits the work:
//   1. input transform: one thread per (channel, tile) reads its 6 x 6 patch once and writes
//      V[point][c][tile] = B^T d B for the whole batch (36 rows, tiles contiguous);
//   2. the products: for each of the 36 points, M_p = U_p^T V_p, a (K x C) by (C x tiles) GEMM, run
//      as one launch of day04's SGEMM v8 kernel over the batch of 36 (sgemm_v8_batched_at):
//      128 x 128 tiles with 8 x 16 sums a thread, each value loaded serving 128 products;
//   3. output transform: one thread per (filter, tile) reads the tile's 36 sums M[point][k][tile]
//      and writes Y = A^T M A with the bias, the residual and the ReLU (winograd_f4.cuh, as v14).
// The filters are v14's U (its transform kernel). The price: V and M travel through memory, 36 x
// (C + K) floats a tile written and read once each, 2.25x the input's and the output's size at
// C = K. The transforms and the sums' order are v14's, so v16 computes v14's outputs bit for bit.
// Prediction (H100, N = 32): at 13 x 17, C = K = 512, 12.1 GFLOP of products at about 40
// TFLOP/s (day04's SGEMM reaches 47 at 4096^3) take 0.30 ms, and V and M (189 MB written and
// read) about 0.07 ms: about 0.39 ms, against v14's 0.75, v7's 0.59 and cuDNN's 0.43. At 26 x 34,
// C = K = 256: 9.5 GFLOP, 0.24 ms, plus 297 MB, 0.11 ms: about 0.35 ms (v14 0.51, cuDNN 0.42).
// Measured (H100, results/h100/day08_convolution_l*_n32.json): 0.362, 0.361 and 0.374 ms at l2,
// l3 and l4, 1.12x, 1.03x and 1.05x cuDNN fp32 (its own non-fused Winograd there); at C = 64 the
// transforms' traffic outweighs the products: 0.698 ms at 104 x 136 against v14's 0.480.
// Only 3x3 filters at stride 1 and dilation 1, and V and M under 2^31 floats each (v16_refusal).
#include <cuda_runtime.h>

#include <cstdint>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "common/cuda_check.hpp"
#include "common/math.hpp"
#include "conv_day.hpp"
#include "gemm.hpp"
#include "winograd_f4.cuh"

namespace day08 {

namespace {

using wino4::kPoints;
using wino4::Params;

// One convolution's scratch: V [point][c][tpad], then M [point][kpad][tpad].
struct Layout {
  int64_t tpad;      // the tiles rounded up to 4: every row of V and M starts on 16 bytes
  int64_t v_floats;  // kPoints * C * tpad
  int64_t m_floats;  // kPoints * kpad * tpad
  __host__ __device__ int64_t floats() const { return v_floats + m_floats; }
};

Layout layout_of(const Params& g) {
  Layout l{};
  l.tpad = gpu100::round_up<int64_t>(g.tiles, 4);
  l.v_floats = kPoints * int64_t(g.c) * l.tpad;
  l.m_floats = kPoints * int64_t(g.kpad) * l.tpad;
  return l;
}

constexpr int kThreads = 256;

// V[point][c][t] = B^T d B for the 6 x 6 patch d of tile t in channel c (zeros outside the image
// and past the last tile). One thread per (c, t), t fastest: a warp reads 32 neighbouring windows
// (their rows overlap in L1) and writes 32 consecutive floats of each of the 36 rows.
__global__ void __launch_bounds__(kThreads)
    input_transform_kernel(const Params g, const Layout l, const ConvGroup<float> grp,
                           float* scratch) {
  const float* __restrict__ x = blockIdx.y == 0 ? grp.op[0].x : grp.op[1].x;
  const int64_t idx = int64_t(blockIdx.x) * kThreads + threadIdx.x;
  if (idx >= int64_t(g.c) * l.tpad) return;
  const int c = static_cast<int>(idx / l.tpad);
  const int64_t t = idx - c * l.tpad;
  float d[kPoints];
  if (t < g.tiles) {
    const int tx = static_cast<int>(t % g.tw);
    const int64_t rest = t / g.tw;
    const int img = static_cast<int>(rest / g.th);
    const int ih0 = 4 * static_cast<int>(rest % g.th) - g.pad, iw0 = 4 * tx - g.pad;
    const float* plane = x + (int64_t(img) * g.c + c) * g.h * g.w;
#pragma unroll
    for (int r = 0; r < 6; ++r) {
      const int ih = ih0 + r;
#pragma unroll
      for (int s = 0; s < 6; ++s) {
        const int iw = iw0 + s;
        const bool in = unsigned(ih) < unsigned(g.h) && unsigned(iw) < unsigned(g.w);
        d[6 * r + s] = in ? plane[int64_t(ih) * g.w + iw] : 0.f;
      }
    }
  } else {
#pragma unroll
    for (int i = 0; i < kPoints; ++i) d[i] = 0.f;
  }
  float* v = scratch + blockIdx.y * l.floats() + int64_t(c) * l.tpad + t;
  wino4::transform_patch(d, v, static_cast<int>(int64_t(g.c) * l.tpad));
}

// y = A^T M A (+ bias, residual, ReLU) for filter k and tile t: one thread each, t fastest (a
// warp reads 32 consecutive floats of each of the tile's 36 rows of M).
__global__ void __launch_bounds__(kThreads)
    output_transform_kernel(const Params g, const Layout l, const ConvGroup<float> grp,
                            const float* scratch) {
  const ConvOperands<float> op = blockIdx.y == 0 ? grp.op[0] : grp.op[1];
  const int64_t idx = int64_t(blockIdx.x) * kThreads + threadIdx.x;
  if (idx >= int64_t(g.k) * g.tiles) return;
  const int k = static_cast<int>(idx / g.tiles);
  const int64_t t = idx - k * g.tiles;
  const float* m = scratch + blockIdx.y * l.floats() + l.v_floats + int64_t(k) * l.tpad + t;
  wino4::store_tile(m, static_cast<int>(int64_t(g.kpad) * l.tpad), g, t, k, op, grp.relu);
}

// The shape rule: v14's, and V and M each under 2^31 floats (their offsets are 32-bit).
std::string refusal(const ConvShape& s) {
  if (std::string why = winograd_refusal(s, "F(4x4, 3x3)"); !why.empty()) return why;
  const Params g = wino4::make_params(s);
  const Layout l = layout_of(g);
  if (l.v_floats >= (int64_t(1) << 31) || l.m_floats >= (int64_t(1) << 31)) {
    return fmt::format(
        "its transformed input and sums would take {} and {} floats, over 2^31 (split the batch)",
        l.v_floats, l.m_floats);
  }
  return "";
}

// The three steps on a group whose `w` are v14's U, V and M in `scratch` (the group's count
// times layout_of(g).floats() floats).
void launch_group(const ConvShape& s, const ConvGroup<float>& grp, float* scratch,
                  cudaStream_t stream) {
  Params g = wino4::make_params(s);
  g.vec = g.q % 4 == 0;
  for (int i = 0; i < grp.count; ++i) {
    g.vec = g.vec && gpu100::aligned16(grp.op[i].y) &&
            (grp.op[i].residual == nullptr || gpu100::aligned16(grp.op[i].residual));
  }
  const Layout l = layout_of(g);
  const auto blocks = [](int64_t threads) {
    return static_cast<unsigned>(gpu100::ceil_div<int64_t>(threads, kThreads));
  };
  const dim3 in_grid(blocks(int64_t(g.c) * l.tpad), grp.count);
  input_transform_kernel<<<in_grid, kThreads, 0, stream>>>(g, l, grp, scratch);
  CUDA_CHECK_LAST();
  // Point p: M_p (K x tpad) = U_p^T (K x C) x V_p (C x tpad); U_p is stored C x kpad, that is
  // A^T as the SGEMM kernel reads it.
  for (int i = 0; i < grp.count; ++i) {
    float* v = scratch + i * l.floats();
    day04::SgemmBatch batch;
    batch.count = kPoints;
    batch.stride_at = int64_t(g.c) * g.kpad;
    batch.stride_b = int64_t(g.c) * l.tpad;
    batch.stride_c = int64_t(g.kpad) * l.tpad;
    day04::sgemm_v8_batched_at({g.k, static_cast<int>(l.tpad), g.c}, g.kpad, grp.op[i].w, v,
                               v + l.v_floats, batch, stream);
  }
  const dim3 out_grid(blocks(int64_t(g.k) * g.tiles), grp.count);
  output_transform_kernel<<<out_grid, kThreads, 0, stream>>>(g, l, grp, scratch);
  CUDA_CHECK_LAST();
}

void check_shape(const ConvShape& s) {
  if (const std::string why = refusal(s); !why.empty()) {
    throw std::invalid_argument("conv2d_v16_winograd_f4_gemm: " + why);
  }
}

}  // namespace

std::string v16_refusal(const ConvShape& s, bool /*bias*/) {
  return refusal(s);
}

namespace detail {
void conv2d_v16_group(const ConvShape& s, const ConvGroup<float>& grp, cudaStream_t stream) {
  check_shape(s);
  const size_t floats = size_t(layout_of(wino4::make_params(s)).floats()) * grp.count;
  launch_group(s, grp, static_cast<float*>(conv_scratch(sizeof(float) * floats, stream)), stream);
}
}  // namespace detail

void conv2d_v16_winograd_f4_gemm(const ConvShape& s, const float* x, const float* w,
                                 const float* bias, float* y, cudaStream_t stream) {
  check_conv_args(s);
  check_shape(s);
  // One scratch buffer of day08's, made at every call: the transformed filters U (v14's
  // transform), then V and M.
  const size_t u_floats = gpu100::round_up<size_t>(detail::v14_filter_floats(s), 64);
  const size_t vm_floats = size_t(layout_of(wino4::make_params(s)).floats());
  float* u = static_cast<float*>(conv_scratch(sizeof(float) * (u_floats + vm_floats), stream));
  detail::v14_transform_filters(s, w, u, stream);
  ConvGroup<float> grp;
  grp.op[0] = {x, u, bias, nullptr, y};
  launch_group(s, grp, u + u_floats, stream);
}

}  // namespace day08
