// day08's Winograd F(2x2, 3x3) host side and filter transform (winograd.cuh), shared by v7 and v8.
#include <cstdint>
#include <stdexcept>
#include <string>

#include "common/cuda_check.hpp"
#include "winograd.cuh"

namespace day08::wino {

namespace {

// U[point][c][k] = (G g G^T) for the 3x3 filter g of (k, c); zero for k >= K. One thread per
// (c, k), k fastest. With kTf32 each value is rounded to TF32 (round to nearest), the operand
// format of v8's mma.sync.
template <bool kTf32>
__global__ void filter_kernel(const float* __restrict__ w, int C, int K, int kpad,
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
    for (int j = 0; j < 4; ++j) {
      const float v = kTf32 ? __uint_as_float(day04::mma::to_tf32(__float_as_uint(r[j]))) : r[j];
      u[(int64_t(4 * i + j) * C + c) * kpad + k] = v;
    }
  }
}

}  // namespace

Params make_params(const ConvShape& s) {
  Params g{};
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
  if (gpu100::ceil_div<int64_t>(g.tiles, kTiles) > 0x7fffffff) {
    throw std::invalid_argument("Winograd: too many output tiles for one grid");
  }
  return g;
}

void transform_filters_into(const ConvShape& s, const Params& g, const float* w, bool tf32,
                            float* u, cudaStream_t stream) {
  const int64_t threads = int64_t(s.c) * g.kpad;
  const auto blocks = static_cast<unsigned>(gpu100::ceil_div<int64_t>(threads, 256));
  if (tf32) {
    filter_kernel<true><<<blocks, 256, 0, stream>>>(w, s.c, s.k, g.kpad, u);
  } else {
    filter_kernel<false><<<blocks, 256, 0, stream>>>(w, s.c, s.k, g.kpad, u);
  }
  CUDA_CHECK_LAST();
}

const float* transform_filters(const ConvShape& s, const Params& g, const float* w, bool tf32,
                               cudaStream_t stream) {
  // The transformed filters live in day08's scratch buffer (like v3's im2col matrix).
  float* u =
      static_cast<float*>(conv_scratch(sizeof(float) * kPoints * size_t(s.c) * g.kpad, stream));
  transform_filters_into(s, g, w, tf32, u, stream);
  return u;
}

}  // namespace day08::wino

// conv.hpp's Winograd fused form: the filters transformed once, into the caller's buffer.
namespace day08 {

std::string winograd_refusal(const ConvShape& s, const char* form) {
  if (s.r != 3 || s.s != 3 || s.stride != 1 || s.dilation != 1) {
    return std::string("Winograd ") + form + " needs 3x3 filters, stride 1 and dilation 1, got " +
           std::to_string(s.r) + "x" + std::to_string(s.s) + " stride " + std::to_string(s.stride) +
           " dilation " + std::to_string(s.dilation);
  }
  return "";
}

size_t winograd_f2_floats(const ConvShape& s) {
  return size_t(wino::kPoints) * size_t(s.c) * size_t(gpu100::round_up(s.k, wino::kBK));
}

size_t winograd_filter_floats(const ConvShape& s) {
  check_conv_args(s);
  return winograd_f2_floats(s) + (winograd_has_f4(s) ? detail::v14_filter_floats(s) : 0);
}

void winograd_transform_filters(const ConvShape& s, const float* w, float* u, cudaStream_t stream) {
  check_conv_args(s);
  if (const std::string why = v7_refusal(s, false); !why.empty()) {
    throw std::invalid_argument("winograd_transform_filters: " + why);
  }
  if (w == nullptr || u == nullptr) {
    throw std::invalid_argument("winograd_transform_filters: a null w or u");
  }
  wino::transform_filters_into(s, wino::make_params(s), w, false, u, stream);
  if (winograd_has_f4(s)) detail::v14_transform_filters(s, w, u + winograd_f2_floats(s), stream);
}

}  // namespace day08
