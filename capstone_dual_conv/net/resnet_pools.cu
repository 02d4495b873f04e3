// The trunk's two pooling layers (resnet.hpp): max pool 3x3/2 after the stem and the global
// average pool before the FC. Both are memory-bound: each input element is read about once
// (the max pool's 3x3/2 windows overlap by one row and column, which L1 serves).
#include <cuda_bf16.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <stdexcept>
#include <type_traits>

#include "common/cuda_check.hpp"
#include "common/math.hpp"
#include "resnet.hpp"

namespace capstone::resnet {

namespace {

constexpr int kThreads = 256;

// The maximum of one k x k window of an NCHW plane xp (h x w), its corner at (hi0, wi0): padded
// positions never win. p < k (check_pool_args), so every window holds an input element.
__device__ __forceinline__ float window_max_nchw(const float* __restrict__ xp, int h, int w,
                                                 int hi0, int wi0, int k) {
  float m = -INFINITY;
  for (int a = 0; a < k; ++a) {
    const int hi = hi0 + a;
    if (hi < 0 || hi >= h) continue;
    for (int b = 0; b < k; ++b) {
      const int wi = wi0 + b;
      if (wi >= 0 && wi < w) m = fmaxf(m, __ldg(xp + int64_t(hi) * w + wi));
    }
  }
  return m;
}

// One thread per output y[n][c][p][q], q fastest (coalesced stores, neighbouring windows):
// blockIdx.x walks a plane's P*Q outputs, blockIdx.y (and its grid-stride loop) the n*c planes,
// so a thread finds its output with 32-bit arithmetic. (The first form took one flat 64-bit index
// per thread and divided it three times, long software sequences: measured on an H100, the N = 32
// pools after the fp32 stems went from 0.69 to 0.62 ms, still about 0.9 TB/s.)
__global__ void maxpool_nchw_kernel(const float* __restrict__ x, float* __restrict__ y, int h,
                                    int w, int P, int Q, int k, int s, int p, int64_t planes) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= P * Q) return;
  const int pp = i / Q, q = i - pp * Q;
  for (int64_t plane = blockIdx.y; plane < planes; plane += gridDim.y) {
    y[plane * P * Q + i] = window_max_nchw(x + plane * h * w, h, w, pp * s - p, q * s - p, k);
  }
}

// One thread per output y[n][p][q][c], c fastest: a warp reads 32 consecutive channels. The
// general path (any C, any alignment); maxpool_nhwc8_kernel below is the one the cuDNN baseline
// network runs (the own bf16 network fuses its pool into the stem, resnet_stem.hpp).
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

// C % 8 == 0 and 16-byte aligned tensors: one thread per 8 channels of one output pixel, so every
// load and store is 16 bytes (the scalar kernel above moves 2 bytes per access and spends more
// time on its 64-bit index divisions than on memory). blockIdx.y walks the output rows (n, p);
// within a row the threads take (q, channel group), channel groups fastest: a warp reads whole
// 128-byte runs of one input row.
__global__ void maxpool_nhwc8_kernel(const uint4* __restrict__ x, uint4* __restrict__ y, int cv,
                                     int h, int w, int P, int Q, int k, int s, int p, int rows) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= Q * cv) return;
  const int q = j / cv, cg = j - q * cv;
  for (int row = blockIdx.y; row < rows; row += gridDim.y) {
    const int n = row / P, pp = row - n * P;
    float2 m[4];
    for (auto& v : m) v = make_float2(-INFINITY, -INFINITY);
    for (int a = 0; a < k; ++a) {
      const int hi = pp * s - p + a;
      if (hi < 0 || hi >= h) continue;
      const uint4* xr = x + (int64_t(n) * h + hi) * w * cv + cg;
      for (int b = 0; b < k; ++b) {
        const int wi = q * s - p + b;
        if (wi < 0 || wi >= w) continue;
        const uint4 v = __ldg(xr + int64_t(wi) * cv);
        const auto* pair = reinterpret_cast<const __nv_bfloat162*>(&v);
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float2 f = __bfloat1622float2(pair[e]);
          m[e].x = fmaxf(m[e].x, f.x), m[e].y = fmaxf(m[e].y, f.y);
        }
      }
    }
    uint4 out;
    auto* pair = reinterpret_cast<__nv_bfloat162*>(&out);
#pragma unroll
    for (int e = 0; e < 4; ++e) pair[e] = __floats2bfloat162_rn(m[e].x, m[e].y);  // exact
    y[(int64_t(row) * Q + q) * cv + cg] = out;
  }
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

// The NHWC global average pool. T: bf16 (the bf16 network) or float (the TF32 network on Hopper).
// A block takes kPoolChannels consecutive channels of one image (blockIdx.x: the channel group,
// blockIdx.y: the image); its kPoolSlices warps split the h * w positions between them, lane l
// reading channel c0 + l of every kPoolSlices-th position (a warp reads 32 neighbouring channels of
// a position: one coalesced load). Four loads are in flight per lane before the first add, then
// the slices' partial sums meet in shared memory. One thread per (image, channel) walking all
// h * w positions, as this pool first did, left 512 threads for the whole pool at N = 1 and put a
// load latency behind every one of the 221 additions (13 x 17 at the last stage): 12 us per trunk
// on an H200, at N = 1 and at N = 32 alike.
constexpr int kPoolChannels = 32, kPoolSlices = 16;

template <class T>
__global__ void __launch_bounds__(kPoolChannels* kPoolSlices)
    avgpool_nhwc_kernel(const T* __restrict__ x, float* __restrict__ y, int64_t images, int c,
                        int hw) {
  __shared__ float part[kPoolSlices][kPoolChannels + 1];
  const int lane = threadIdx.x, slice = threadIdx.y;
  const int ci = blockIdx.x * kPoolChannels + lane;
  for (int64_t n = blockIdx.y; n < images; n += gridDim.y) {  // gridDim.y stops at 65535
    float sum = 0.f;
    if (ci < c) {
      const T* xp = x + n * hw * c + ci;
      int j = slice;
      for (; j + 3 * kPoolSlices < hw; j += 4 * kPoolSlices) {
        float v[4];
#pragma unroll
        for (int u = 0; u < 4; ++u) v[u] = float(xp[int64_t(j + u * kPoolSlices) * c]);
        sum += (v[0] + v[1]) + (v[2] + v[3]);
      }
      for (; j < hw; j += kPoolSlices) sum += float(xp[int64_t(j) * c]);
    }
    part[slice][lane] = sum;
    __syncthreads();
    if (slice == 0 && ci < c) {
      float total = 0.f;
#pragma unroll
      for (int s = 0; s < kPoolSlices; ++s) total += part[s][lane];
      y[n * c + ci] = total / float(hw);
    }
    __syncthreads();  // part is written again for the next image
  }
}

// One thread per output element y[n][h][w'][c'] (c' < c_pad, w' < w_pad): x[n][c'][h][w']
// rounded, or 0 for the padding channels and columns. The general path; to_nhwc_vec_bf16_kernel
// is the one the networks run.
__global__ void to_nhwc_bf16_kernel(const float* __restrict__ x, __nv_bfloat16* __restrict__ y,
                                    int c, int c_pad, int h, int w, int w_pad, int64_t total) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= total) return;
  const int64_t ci = i % c_pad, pix = i / c_pad, col = pix % w_pad, rows = pix / w_pad;
  const int64_t n = rows / h, row = rows % h;
  const bool ok = ci < c && col < w;
  y[i] = __float2bfloat16_rn(ok ? x[((n * c + ci) * h + row) * w + col] : 0.f);
}

// c_pad % kV == 0 (kV = 4 or 8 channels: 8 or 16 bytes) and y aligned to that: one thread per kV
// output channels of one pixel, one store. Consecutive threads take consecutive pixels, so each
// channel plane of x is read coalesced. blockIdx.y walks (image, channel group).
template <int kV>
__global__ void to_nhwc_vec_bf16_kernel(const float* __restrict__ x, __nv_bfloat16* __restrict__ y,
                                        int c, int groups, int h, int w, int w_pad, int planes) {
  using Vec = std::conditional_t<kV == 8, uint4, uint2>;
  const int j = blockIdx.x * blockDim.x + threadIdx.x;  // the output pixel, row * w_pad + col
  if (j >= h * w_pad) return;
  const int row = j / w_pad, col = j - row * w_pad;
  const int64_t hw = int64_t(h) * w;
  for (int plane = blockIdx.y; plane < planes; plane += gridDim.y) {
    const int n = plane / groups, g = plane - n * groups;
    Vec out;
    auto* pair = reinterpret_cast<__nv_bfloat162*>(&out);
#pragma unroll
    for (int e = 0; e < kV; e += 2) {
      float v[2];
#pragma unroll
      for (int u = 0; u < 2; ++u) {
        const int ci = kV * g + e + u;
        v[u] = ci < c && col < w ? __ldg(x + (int64_t(n) * c + ci) * hw + int64_t(row) * w + col)
                                 : 0.f;
      }
      pair[e / 2] = __floats2bfloat162_rn(v[0], v[1]);
    }
    reinterpret_cast<Vec*>(y)[(int64_t(n) * h * w_pad + j) * groups + g] = out;
  }
}

unsigned blocks_for(int64_t threads) {
  return static_cast<unsigned>(gpu100::ceil_div<int64_t>(threads, kThreads));
}

}  // namespace

void maxpool_nchw(const float* x, float* y, int n, int c, int h, int w, int k, int s, int p,
                  cudaStream_t stream) {
  check_pool_args(n, c, h, w, k, s, p);
  const int P = (h + 2 * p - k) / s + 1, Q = (w + 2 * p - k) / s + 1;
  const int64_t planes = int64_t(n) * c;
  const dim3 grid(blocks_for(int64_t(P) * Q), unsigned(std::min<int64_t>(planes, 65535)));
  maxpool_nchw_kernel<<<grid, kThreads, 0, stream>>>(x, y, h, w, P, Q, k, s, p, planes);
  CUDA_CHECK_LAST();
}

void maxpool_nhwc_bf16(const __nv_bfloat16* x, __nv_bfloat16* y, int n, int c, int h, int w, int k,
                       int s, int p, cudaStream_t stream) {
  check_pool_args(n, c, h, w, k, s, p);
  const int P = (h + 2 * p - k) / s + 1, Q = (w + 2 * p - k) / s + 1;
  if (c % 8 == 0 && gpu100::aligned16(x) && gpu100::aligned16(y) && int64_t(Q) * c < INT_MAX &&
      int64_t(n) * P < INT_MAX) {
    const int cv = c / 8, rows = n * P;
    const dim3 grid(blocks_for(int64_t(Q) * cv), unsigned(std::min(rows, 65535)));
    maxpool_nhwc8_kernel<<<grid, kThreads, 0, stream>>>(reinterpret_cast<const uint4*>(x),
                                                        reinterpret_cast<uint4*>(y), cv, h, w, P, Q,
                                                        k, s, p, rows);
  } else {
    const int64_t total = int64_t(n) * c * P * Q;
    maxpool_nhwc_kernel<<<blocks_for(total), kThreads, 0, stream>>>(x, y, c, h, w, P, Q, k, s, p,
                                                                    total);
  }
  CUDA_CHECK_LAST();
}

void global_avgpool_nchw(const float* x, float* y, int n, int c, int h, int w,
                         cudaStream_t stream) {
  check_pool_args(n, c, h, w, 1, 1, 0);
  const int64_t planes = int64_t(n) * c;
  avgpool_nchw_kernel<<<blocks_for(planes * 32), kThreads, 0, stream>>>(x, y, h * w, planes);
  CUDA_CHECK_LAST();
}

namespace {
// Both NHWC global pools: a block per (image, 32 channels).
template <class T>
void global_avgpool_nhwc_any(const T* x, float* y, int n, int c, int h, int w,
                             cudaStream_t stream) {
  check_pool_args(n, c, h, w, 1, 1, 0);
  const dim3 grid(unsigned(gpu100::ceil_div(c, kPoolChannels)), unsigned(std::min(n, 65535)));
  avgpool_nhwc_kernel<<<grid, dim3(kPoolChannels, kPoolSlices), 0, stream>>>(x, y, n, c, h * w);
  CUDA_CHECK_LAST();
}
}  // namespace

void global_avgpool_nhwc_bf16(const __nv_bfloat16* x, float* y, int n, int c, int h, int w,
                              cudaStream_t stream) {
  global_avgpool_nhwc_any(x, y, n, c, h, w, stream);
}

void global_avgpool_nhwc(const float* x, float* y, int n, int c, int h, int w,
                         cudaStream_t stream) {
  global_avgpool_nhwc_any(x, y, n, c, h, w, stream);
}

void to_nhwc_bf16(const float* x, __nv_bfloat16* y, int n, int c, int h, int w, int c_pad,
                  int w_pad, cudaStream_t stream) {
  if (n < 1 || c < 1 || h < 1 || w < 1 || c_pad < c || w_pad < w) {
    throw std::invalid_argument("to_nhwc_bf16: sizes must be positive, c_pad >= c and w_pad >= w");
  }
  const int64_t pixels = int64_t(h) * w_pad;
  const int kv = c_pad % 8 == 0 ? 8 : c_pad % 4 == 0 ? 4 : 0;
  const bool aligned = reinterpret_cast<uintptr_t>(y) % (2 * std::max(kv, 1)) == 0;
  if (kv > 0 && aligned && pixels < INT_MAX && int64_t(n) * (c_pad / kv) < INT_MAX) {
    const int groups = c_pad / kv, planes = n * groups;
    const dim3 grid(blocks_for(pixels), unsigned(std::min(planes, 65535)));
    if (kv == 8) {
      to_nhwc_vec_bf16_kernel<8>
          <<<grid, kThreads, 0, stream>>>(x, y, c, groups, h, w, w_pad, planes);
    } else {
      to_nhwc_vec_bf16_kernel<4>
          <<<grid, kThreads, 0, stream>>>(x, y, c, groups, h, w, w_pad, planes);
    }
  } else {
    const int64_t total = int64_t(n) * c_pad * pixels;
    to_nhwc_bf16_kernel<<<blocks_for(total), kThreads, 0, stream>>>(x, y, c, c_pad, h, w, w_pad,
                                                                    total);
  }
  CUDA_CHECK_LAST();
}

}  // namespace capstone::resnet
