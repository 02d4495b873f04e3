// Conv2d v1: direct convolution, one thread per output element y[n][k][p][q].
// The thread loops over c, r, s and reads each input and weight from global memory: C*R*S loads
// of x (mostly L1/L2 hits: neighbouring threads share their windows) and C*R*S of w per output,
// 2 loads per FMA. Threads are numbered along q, so a warp's x loads and y stores are coalesced
// (for stride 1) and its w loads are one broadcast address. The baseline every other variant is
// measured against.
#include "common/cuda_check.hpp"
#include "common/math.hpp"
#include "conv_day.hpp"

namespace day08 {

namespace {

__global__ void conv2d_direct_kernel(ConvShape s, int P, int Q, const float* __restrict__ x,
                                     const float* __restrict__ w, const float* __restrict__ bias,
                                     float* __restrict__ y) {
  const int total = s.n * s.k * P * Q;  // < 2^31: check_conv_args
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= total) return;
  const int q = i % Q, p = (i / Q) % P, k = (i / (P * Q)) % s.k, n = i / (P * Q * s.k);
  const int ih0 = p * s.stride - s.pad, iw0 = q * s.stride - s.pad;
  float acc = bias != nullptr ? bias[k] : 0.f;
  for (int c = 0; c < s.c; ++c) {
    const float* plane = x + (size_t(n) * s.c + c) * s.h * s.w;
    const float* filt = w + (size_t(k) * s.c + c) * s.r * s.s;
    for (int r = 0; r < s.r; ++r) {
      const int ih = ih0 + r * s.dilation;
      if (ih < 0 || ih >= s.h) continue;
      for (int t = 0; t < s.s; ++t) {
        const int iw = iw0 + t * s.dilation;
        if (iw >= 0 && iw < s.w) acc = fmaf(plane[ih * s.w + iw], filt[r * s.s + t], acc);
      }
    }
  }
  y[i] = acc;
}

}  // namespace

void conv2d_v1_direct(const ConvShape& s, const float* x, const float* w, const float* bias,
                      float* y, cudaStream_t stream) {
  check_conv_args(s);
  const int P = s.p(), Q = s.q();
  const int total = s.n * s.k * P * Q;
  const int threads = 256;
  conv2d_direct_kernel<<<gpu100::ceil_div(total, threads), threads, 0, stream>>>(s, P, Q, x, w,
                                                                                 bias, y);
  CUDA_CHECK_LAST();
}

}  // namespace day08
