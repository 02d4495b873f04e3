// The trunk's two pooling layers (resnet.hpp): max pool 3x3/2 after the stem and the global
// average pool before the FC. Both are memory-bound: each input element is read about once
// (the max pool's 3x3/2 windows overlap by one row and column, which L1 serves).
#include <cuda_bf16.h>

#include <cstdint>

#include "common/cuda_check.hpp"
#include "common/math.hpp"
#include "resnet.hpp"

namespace capstone::resnet {

namespace {

constexpr int kThreads = 256;

// One thread per output y[n][c][p][q], q fastest (coalesced stores, neighbouring windows).
__global__ void maxpool_nchw_kernel(const float* __restrict__ x, float* __restrict__ y, int c,
                                    int h, int w, int P, int Q, int k, int s, int p,
                                    int64_t total) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= total) return;
  const int q = int(i % Q), pp = int((i / Q) % P);
  const int64_t plane = i / (int64_t(P) * Q);  // n * c + channel
  const float* xp = x + plane * h * w;
  float m = -INFINITY;  // p < k: every window holds at least one input element
  for (int a = 0; a < k; ++a) {
    const int hi = pp * s - p + a;
    if (hi < 0 || hi >= h) continue;
    for (int b = 0; b < k; ++b) {
      const int wi = q * s - p + b;
      if (wi >= 0 && wi < w) m = fmaxf(m, __ldg(xp + int64_t(hi) * w + wi));
    }
  }
  y[i] = m;
}

// One thread per output y[n][p][q][c], c fastest: a warp reads 32 consecutive channels.
__global__ void maxpool_nhwc_kernel(const __nv_bfloat16* __restrict__ x,
                                    __nv_bfloat16* __restrict__ y, int c, int h, int w, int P,
                                    int Q, int k, int s, int p, int64_t total) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= total) return;
  const int ci = int(i % c), q = int((i / c) % Q), pp = int((i / (int64_t(c) * Q)) % P);
  const int64_t n = i / (int64_t(c) * Q * P);
  float m = -INFINITY;
  for (int a = 0; a < k; ++a) {
    const int hi = pp * s - p + a;
    if (hi < 0 || hi >= h) continue;
    for (int b = 0; b < k; ++b) {
      const int wi = q * s - p + b;
      if (wi < 0 || wi >= w) continue;
      m = fmaxf(m, __bfloat162float(x[((n * h + hi) * w + wi) * c + ci]));
    }
  }
  y[i] = __float2bfloat16_rn(m);  // exact: m is one of the inputs
}

// One warp per plane (n, c): the lanes stride over its h * w values, then a shuffle tree.
__global__ void avgpool_nchw_kernel(const float* __restrict__ x, float* __restrict__ y, int hw,
                                    int64_t planes) {
  const int64_t plane = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (plane >= planes) return;  // a whole warp leaves together
  const float* xp = x + plane * hw;
  float sum = 0.f;
  for (int i = lane; i < hw; i += 32) sum += __ldg(xp + i);
  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_down_sync(0xffffffffu, sum, offset);
  if (lane == 0) y[plane] = sum / float(hw);
}

// One thread per (n, c): consecutive threads read consecutive channels of each position.
__global__ void avgpool_nhwc_kernel(const __nv_bfloat16* __restrict__ x, float* __restrict__ y,
                                    int c, int hw, int64_t total) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= total) return;
  const int64_t n = i / c, ci = i % c;
  float sum = 0.f;
  for (int j = 0; j < hw; ++j) sum += __bfloat162float(x[(n * hw + j) * c + ci]);
  y[i] = sum / float(hw);
}

// One thread per output element y[n][h][w][c'] (c' < c_pad): x[n][c'][h][w] rounded, or 0 for
// the padding channels.
__global__ void to_nhwc_bf16_kernel(const float* __restrict__ x, __nv_bfloat16* __restrict__ y,
                                    int c, int c_pad, int64_t hw, int64_t total) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= total) return;
  const int64_t ci = i % c_pad, pix = i / c_pad, n = pix / hw, j = pix % hw;
  y[i] = __float2bfloat16_rn(ci < c ? x[(n * c + ci) * hw + j] : 0.f);
}

unsigned blocks_for(int64_t threads) {
  return static_cast<unsigned>(gpu100::ceil_div<int64_t>(threads, kThreads));
}

}  // namespace

void maxpool_nchw(const float* x, float* y, int n, int c, int h, int w, int k, int s, int p,
                  cudaStream_t stream) {
  check_pool_args(n, c, h, w, k, s, p);
  const int P = (h + 2 * p - k) / s + 1, Q = (w + 2 * p - k) / s + 1;
  const int64_t total = int64_t(n) * c * P * Q;
  maxpool_nchw_kernel<<<blocks_for(total), kThreads, 0, stream>>>(x, y, c, h, w, P, Q, k, s, p,
                                                                  total);
  CUDA_CHECK_LAST();
}

void maxpool_nhwc_bf16(const __nv_bfloat16* x, __nv_bfloat16* y, int n, int c, int h, int w, int k,
                       int s, int p, cudaStream_t stream) {
  check_pool_args(n, c, h, w, k, s, p);
  const int P = (h + 2 * p - k) / s + 1, Q = (w + 2 * p - k) / s + 1;
  const int64_t total = int64_t(n) * c * P * Q;
  maxpool_nhwc_kernel<<<blocks_for(total), kThreads, 0, stream>>>(x, y, c, h, w, P, Q, k, s, p,
                                                                  total);
  CUDA_CHECK_LAST();
}

void global_avgpool_nchw(const float* x, float* y, int n, int c, int h, int w,
                         cudaStream_t stream) {
  check_pool_args(n, c, h, w, 1, 1, 0);
  const int64_t planes = int64_t(n) * c;
  avgpool_nchw_kernel<<<blocks_for(planes * 32), kThreads, 0, stream>>>(x, y, h * w, planes);
  CUDA_CHECK_LAST();
}

void global_avgpool_nhwc_bf16(const __nv_bfloat16* x, float* y, int n, int c, int h, int w,
                              cudaStream_t stream) {
  check_pool_args(n, c, h, w, 1, 1, 0);
  const int64_t total = int64_t(n) * c;
  avgpool_nhwc_kernel<<<blocks_for(total), kThreads, 0, stream>>>(x, y, c, h * w, total);
  CUDA_CHECK_LAST();
}

void to_nhwc_bf16(const float* x, __nv_bfloat16* y, int n, int c, int h, int w, int c_pad,
                  cudaStream_t stream) {
  if (n < 1 || c < 1 || h < 1 || w < 1 || c_pad < c) {
    throw std::invalid_argument("to_nhwc_bf16: sizes must be positive and c_pad >= c");
  }
  const int64_t total = int64_t(n) * c_pad * h * w;
  to_nhwc_bf16_kernel<<<blocks_for(total), kThreads, 0, stream>>>(x, y, c, c_pad, int64_t(h) * w,
                                                                  total);
  CUDA_CHECK_LAST();
}

}  // namespace capstone::resnet
