// v2_block_tree: one block of 256 threads per row, a shared-memory tree for the statistics.
//
// What changed from v1: the 256 threads of a block stride through one row together, so a warp's
// load covers 128 contiguous bytes (coalesced), and the grid has rows x 256 threads instead of
// rows. To read x only once for the statistics, each thread accumulates sum x and sum x^2 in the
// same loop and the variance is taken as E[x^2] - E[x]^2: the naive formula, which cancels
// catastrophically when |mean| >> std (the large-mean test shows it; v4 fixes it). Costs: 8
// barriers for the tree, and x is read twice (statistics, then y; the second read mostly hits L1
// or L2). The reduction is Harris's sequential-addressing tree (day 6, r3).
#include "common/cuda_check.hpp"
#include "layernorm.cuh"
#include "norm_device.cuh"

namespace day07 {
namespace {

constexpr int kThreads = 256;

// Block -> row blockIdx.x; thread t reads elements t, t + 256, t + 512, ... of the row.
__global__ void __launch_bounds__(kThreads)
    layernorm_v2_kernel(const float* __restrict__ x, const float* __restrict__ gamma,
                        const float* __restrict__ beta, float* __restrict__ y,
                        float* __restrict__ mean_out, float* __restrict__ rstd_out, int dim,
                        float eps) {
  __shared__ float s_sum[kThreads], s_sq[kThreads];
  const int64_t row = blockIdx.x;
  const int tid = threadIdx.x;
  const float* xr = x + row * dim;
  float* yr = y + row * dim;
  float sum = 0.f, sq = 0.f;
  for (int i = tid; i < dim; i += kThreads) {
    const float v = xr[i];
    sum += v;
    sq += v * v;
  }
  s_sum[tid] = sum;
  s_sq[tid] = sq;
  __syncthreads();  // every thread's partials are in shared memory
  for (int stride = kThreads / 2; stride > 0; stride >>= 1) {
    if (tid < stride) {
      s_sum[tid] += s_sum[tid + stride];
      s_sq[tid] += s_sq[tid + stride];
    }
    __syncthreads();  // this level is complete before the next one reads it
  }
  const float mean = s_sum[0] / dim;
  // E[x^2] - E[x]^2, clamped at 0. mean * mean is rounded on its own (__fmul_rn: no FMA
  // contraction), so a constant row (D = 1) gives exactly 0, not x^2's rounding residue.
  const float var = fmaxf(__fsub_rn(s_sq[0] / dim, __fmul_rn(mean, mean)), 0.f);
  const float rstd = rsqrtf(var + eps);
  for (int i = tid; i < dim; i += kThreads) yr[i] = (xr[i] - mean) * rstd * gamma[i] + beta[i];
  if (tid == 0) {
    mean_out[row] = mean;
    rstd_out[row] = rstd;
  }
}

}  // namespace

void layernorm_v2_block_tree(const float* x, const float* gamma, const float* beta, float* y,
                             float* mean, float* rstd, int64_t rows, int64_t dim, float eps,
                             cudaStream_t stream) {
  validate_shape(rows, dim);
  layernorm_v2_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(
      x, gamma, beta, y, mean, rstd, static_cast<int>(dim), eps);
  CUDA_CHECK_LAST();
}

}  // namespace day07
