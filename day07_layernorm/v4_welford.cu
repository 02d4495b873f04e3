// v4_welford: v3's warp per row, with Welford's single-pass statistics.
//
// What changed from v3: each lane keeps (count, mean, M2) and updates them per element with
// Welford's recurrence, which only ever subtracts the running mean, so a row like 1e4 + noise
// keeps its variance (E[x^2] - E[x]^2 loses every significant digit there). The 32 lanes' triples
// are merged with Chan's formula in a shuffle tree. The statistics still need one read of x; the
// cost is a division per element (the running mean), which is free in a memory-bound kernel.
// y is written by a second read of x, as in v3.
#include "common/cuda_check.hpp"
#include "common/math.hpp"
#include "layernorm.cuh"
#include "norm_device.cuh"

namespace day07 {
namespace {

constexpr int kThreads = 128;
constexpr int kRowsPerBlock = kThreads / kWarp;

// Warp w of block b -> row 4b + w; lane l reads elements l, l + 32, ... (as v3).
__global__ void __launch_bounds__(kThreads)
    layernorm_v4_kernel(const float* __restrict__ x, const float* __restrict__ gamma,
                        const float* __restrict__ beta, float* __restrict__ y,
                        float* __restrict__ mean_out, float* __restrict__ rstd_out, int64_t rows,
                        int dim, float eps) {
  const int lane = threadIdx.x % kWarp;
  const int64_t row = int64_t(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarp;
  if (row >= rows) return;  // the whole warp leaves together; no barrier below
  const float* xr = x + row * dim;
  float* yr = y + row * dim;
  Welford w;
  for (int i = lane; i < dim; i += kWarp) welford_add(w, xr[i]);
  w = warp_welford(w);  // lanes with no element (D < 32) carry n = 0 and merge as identity
  const float mean = w.mean;
  const float rstd = rsqrtf(w.m2 / dim + eps);
  for (int i = lane; i < dim; i += kWarp) yr[i] = (xr[i] - mean) * rstd * gamma[i] + beta[i];
  if (lane == 0) {
    mean_out[row] = mean;
    rstd_out[row] = rstd;
  }
}

}  // namespace

void layernorm_v4_welford(const float* x, const float* gamma, const float* beta, float* y,
                          float* mean, float* rstd, int64_t rows, int64_t dim, float eps,
                          cudaStream_t stream) {
  validate_shape(rows, dim);
  const auto blocks = static_cast<unsigned>(gpu100::ceil_div<int64_t>(rows, kRowsPerBlock));
  layernorm_v4_kernel<<<blocks, kThreads, 0, stream>>>(x, gamma, beta, y, mean, rstd, rows,
                                                       static_cast<int>(dim), eps);
  CUDA_CHECK_LAST();
}

}  // namespace day07
