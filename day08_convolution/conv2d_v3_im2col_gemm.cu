// Conv2d v3: im2col, then day04's GEMM (linked through day04::gemm, called by name).
// For each image the convolution is the matrix product Y_n[K][P*Q] = W[K][C*R*S] x
// col_n[C*R*S][P*Q] where column (p, q) of col_n holds the C*R*S input values the filter sees at
// output (p, q). W is the KCRS weight tensor as it is, and Y_n is image n's slice of the NKPQ
// output, so no layout change is needed on either side. Changed from v2: the inner loop is a tuned
// SGEMM (register tiles, 16-byte loads); the cost is the col matrix, R*S times the size of the
// input, written and read back through DRAM (the bytes that v4's implicit GEMM saves).
#include <algorithm>
#include <stdexcept>

#include "common/cuda_check.hpp"
#include "common/math.hpp"
#include "conv_day.hpp"
#include "gemm.hpp"

namespace day08 {

namespace {

constexpr const char* kGemm = "v7_warptile";         // day04's fastest fixed-configuration SGEMM
constexpr size_t kScratchFloats = size_t(64) << 20;  // 256 MB of col matrices per pass

// col[i][crs][pq] for images n0 .. n0 + count - 1: thread per element, consecutive threads along
// pq (coalesced writes; coalesced reads for stride 1). Zero where the window hangs over the
// padding.
__global__ void im2col_kernel(ConvShape s, int P, int Q, int n0, int count,
                              const float* __restrict__ x, float* __restrict__ col) {
  const int64_t pq_total = int64_t(P) * Q, crs_total = int64_t(s.c) * s.r * s.s;
  const int64_t total = count * crs_total * pq_total;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int pq = static_cast<int>(i % pq_total);
    const int64_t rest = i / pq_total;
    const int crs = static_cast<int>(rest % crs_total), n = n0 + static_cast<int>(rest / crs_total);
    const int c = crs / (s.r * s.s), rs = crs % (s.r * s.s), r = rs / s.s, t = rs % s.s;
    const int p = pq / Q, q = pq % Q;
    const int ih = p * s.stride - s.pad + r * s.dilation,
              iw = q * s.stride - s.pad + t * s.dilation;
    float v = 0.f;
    if (ih >= 0 && ih < s.h && iw >= 0 && iw < s.w) {
      v = x[((size_t(n) * s.c + c) * s.h + ih) * s.w + iw];
    }
    col[i] = v;
  }
}

// y[n][k][:] = bias[k]: the GEMM then accumulates onto it with beta = 1.
__global__ void fill_bias_kernel(int rows, int k, int pq, const float* __restrict__ bias,
                                 float* __restrict__ y) {
  const int64_t total = int64_t(rows) * pq;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    y[i] = bias[(i / pq) % k];
  }
}

unsigned grid_for(int64_t total, int threads) {
  return static_cast<unsigned>(
      std::min<int64_t>(gpu100::ceil_div<int64_t>(total, threads), 1 << 20));
}

}  // namespace

void conv2d_v3_im2col_gemm(const ConvShape& s, const float* x, const float* w, const float* bias,
                           float* y, cudaStream_t stream) {
  check_conv_args(s);
  const int P = s.p(), Q = s.q();
  const int64_t pq = int64_t(P) * Q, crs = int64_t(s.c) * s.r * s.s;
  const int64_t per_image = pq * crs;
  if (per_image > INT32_MAX) {
    throw std::invalid_argument("v3_im2col_gemm: one image's im2col matrix exceeds 2^31 floats");
  }
  const int batch = static_cast<int>(
      std::clamp<int64_t>(int64_t(kScratchFloats) / per_image, int64_t(1), int64_t(s.n)));
  float* col = static_cast<float*>(conv_scratch(sizeof(float) * size_t(batch) * per_image, stream));
  const int threads = 256;
  if (bias != nullptr) {
    fill_bias_kernel<<<grid_for(int64_t(s.n) * s.k * pq, threads), threads, 0, stream>>>(
        s.n * s.k, s.k, static_cast<int>(pq), bias, y);
    CUDA_CHECK_LAST();
  }
  const day04::GemmShape g{s.k, static_cast<int>(pq), static_cast<int>(crs)};
  for (int n0 = 0; n0 < s.n; n0 += batch) {
    const int count = std::min(batch, s.n - n0);
    im2col_kernel<<<grid_for(count * per_image, threads), threads, 0, stream>>>(s, P, Q, n0, count,
                                                                                x, col);
    CUDA_CHECK_LAST();
    for (int i = 0; i < count; ++i) {
      day04::gemm(kGemm, g, 1.f, w, col + size_t(i) * per_image, bias != nullptr ? 1.f : 0.f,
                  y + size_t(n0 + i) * s.k * pq, stream);
    }
  }
}

}  // namespace day08
