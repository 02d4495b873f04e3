// v1_thread_per_row: one thread owns one row and walks it three times.
//
// The textbook starting point (PMPP's "one thread per output" mapping): pass 1 sums the row for
// the mean, pass 2 sums (x - mean)^2 for the variance (the stable two-pass formula), pass 3
// writes y. Neighbouring threads read addresses D * 4 bytes apart, so every warp load touches 32
// different cache lines, and there are only `rows` threads in the whole grid: for 32768 rows that
// is about 8 warps per SM, far too few loads in flight. It is correct and slow on purpose.
#include "common/cuda_check.hpp"
#include "common/math.hpp"
#include "layernorm.cuh"
#include "norm_device.cuh"

namespace day07 {
namespace {

constexpr int kThreads = 128;

// Thread -> row: row = blockIdx.x * 128 + threadIdx.x; the thread loops over the row's D elements.
__global__ void layernorm_v1_kernel(const float* __restrict__ x, const float* __restrict__ gamma,
                                    const float* __restrict__ beta, float* __restrict__ y,
                                    float* __restrict__ mean_out, float* __restrict__ rstd_out,
                                    int64_t rows, int dim, float eps) {
  const int64_t row = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (row >= rows) return;
  const float* xr = x + row * dim;
  float* yr = y + row * dim;
  float sum = 0.f;
  for (int i = 0; i < dim; ++i) sum += xr[i];
  const float mean = sum / dim;
  float sq = 0.f;
  for (int i = 0; i < dim; ++i) {
    const float d = xr[i] - mean;
    sq += d * d;
  }
  const float rstd = rsqrtf(sq / dim + eps);
  for (int i = 0; i < dim; ++i) yr[i] = (xr[i] - mean) * rstd * gamma[i] + beta[i];
  mean_out[row] = mean;
  rstd_out[row] = rstd;
}

}  // namespace

void layernorm_v1_thread_per_row(const float* x, const float* gamma, const float* beta, float* y,
                                 float* mean, float* rstd, int64_t rows, int64_t dim, float eps,
                                 cudaStream_t stream) {
  validate_shape(rows, dim);
  const auto blocks = static_cast<unsigned>(gpu100::ceil_div<int64_t>(rows, kThreads));
  layernorm_v1_kernel<<<blocks, kThreads, 0, stream>>>(x, gamma, beta, y, mean, rstd, rows,
                                                       static_cast<int>(dim), eps);
  CUDA_CHECK_LAST();
}

}  // namespace day07
