// RMSNorm forward (Zhang and Sennrich 2019): y = x / sqrt(mean(x^2) + eps) * gamma.
//
// Matrix form (rows x D): v5's register-resident kernel with the mean left out (kRms), so it
// shares v5's strategy by D, its vector widths and its group sums; one rstd per row.
// Vector form (one row of n elements, n up to 2^31): one block cannot stream a long vector at
// full bandwidth, so the row is split over many blocks. Pass 1: each block sums x^2 over a
// grid-stride slice and writes one partial (group_sum over the block). Pass 2: every block adds
// the same partials in the same order (so all blocks get identical bits), takes rstd, and scales
// its slice. x is read twice: from DRAM in pass 1, and from L2 in pass 2 only when x fits in L2.
#include <algorithm>
#include <stdexcept>
#include <string>

#include "common/cuda_check.hpp"
#include "common/math.hpp"
#include "norm_registers.cuh"

namespace day07 {
namespace {

constexpr int kVecThreads = 256;
constexpr int kVecMaxBlocks = 1024;

// Block b, thread t -> vectors b * 256 + t, then + gridDim.x * 256, ... (grid-stride).
template <typename T, int V>
__global__ void __launch_bounds__(kVecThreads)
    rms_vector_partials_kernel(const T* __restrict__ x, int64_t nvec, float* __restrict__ partial) {
  using VecT = Vec<T, V>;
  __shared__ float scratch[kVecThreads / kWarp];
  const VecT* xv = reinterpret_cast<const VecT*>(x);
  float sq = 0.f;
  for (int64_t i = int64_t(blockIdx.x) * kVecThreads + threadIdx.x; i < nvec;
       i += int64_t(gridDim.x) * kVecThreads) {
    const VecT v = xv[i];
#pragma unroll
    for (int j = 0; j < V; ++j) {
      const float f = to_float(v.v[j]);
      sq += f * f;
    }
  }
  sq = group_sum<kVecThreads>(sq, scratch);  // barriers inside: every thread calls it
  if (threadIdx.x == 0) partial[blockIdx.x] = sq;
}

// Same mapping as pass 1. Every block first reduces all nparts partials (identical order).
template <typename T, int V>
__global__ void __launch_bounds__(kVecThreads)
    rms_vector_scale_kernel(const T* __restrict__ x, const T* __restrict__ gamma, T* __restrict__ y,
                            float* __restrict__ rstd_out, const float* __restrict__ partial,
                            int nparts, int64_t nvec, int64_t n, float eps) {
  using VecT = Vec<T, V>;
  __shared__ float scratch[kVecThreads / kWarp];
  float total = 0.f;
  for (int p = threadIdx.x; p < nparts; p += kVecThreads) total += partial[p];
  total = group_sum<kVecThreads>(total, scratch);
  const float rstd = rsqrtf(total / static_cast<float>(n) + eps);
  if (blockIdx.x == 0 && threadIdx.x == 0) *rstd_out = rstd;
  const VecT* xv = reinterpret_cast<const VecT*>(x);
  const VecT* gv = reinterpret_cast<const VecT*>(gamma);
  VecT* yv = reinterpret_cast<VecT*>(y);
  for (int64_t i = int64_t(blockIdx.x) * kVecThreads + threadIdx.x; i < nvec;
       i += int64_t(gridDim.x) * kVecThreads) {
    const VecT v = xv[i];
    const VecT g = gv[i];
    VecT out;
#pragma unroll
    for (int j = 0; j < V; ++j)
      out.v[j] = from_float<T>(to_float(v.v[j]) * rstd * to_float(g.v[j]));
    yv[i] = out;
  }
}

template <typename T, int V>
void launch_rms_vector(const T* x, const T* gamma, T* y, float* rstd, int64_t n, float eps,
                       float* partial, cudaStream_t stream) {
  const int64_t nvec = n / V;
  const auto blocks = static_cast<int>(
      std::min<int64_t>(kVecMaxBlocks, gpu100::ceil_div<int64_t>(nvec, kVecThreads)));
  rms_vector_partials_kernel<T, V><<<blocks, kVecThreads, 0, stream>>>(x, nvec, partial);
  CUDA_CHECK_LAST();
  rms_vector_scale_kernel<T, V>
      <<<blocks, kVecThreads, 0, stream>>>(x, gamma, y, rstd, partial, blocks, nvec, n, eps);
  CUDA_CHECK_LAST();
}

}  // namespace

template <typename T>
void rmsnorm_rows(const T* x, const T* gamma, T* y, float* rstd, int64_t rows, int64_t dim,
                  float eps, cudaStream_t stream) {
  detail::launch_norm_rows<T, true>(x, gamma, nullptr, y, nullptr, rstd, rows, dim, eps, stream);
}

size_t rmsnorm_vector_workspace_bytes() {
  return kVecMaxBlocks * sizeof(float);
}

template <typename T>
void rmsnorm_vector(const T* x, const T* gamma, T* y, float* rstd, int64_t n, float eps,
                    void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  if (n < 1 || n > kMaxElements) {
    throw std::invalid_argument("rmsnorm_vector: n = " + std::to_string(n) +
                                " must be in [1, 2^31]");
  }
  if (workspace_bytes < rmsnorm_vector_workspace_bytes() || workspace == nullptr) {
    throw std::invalid_argument(
        "rmsnorm_vector: the workspace is smaller than "
        "rmsnorm_vector_workspace_bytes()");
  }
  constexpr int kW = 16 / static_cast<int>(sizeof(T));
  auto* partial = static_cast<float*>(workspace);
  if (n % kW == 0 && aligned16(x) && aligned16(gamma) && aligned16(y)) {
    launch_rms_vector<T, kW>(x, gamma, y, rstd, n, eps, partial, stream);
  } else {
    launch_rms_vector<T, 1>(x, gamma, y, rstd, n, eps, partial, stream);
  }
}

template void rmsnorm_rows<float>(const float*, const float*, float*, float*, int64_t, int64_t,
                                  float, cudaStream_t);
template void rmsnorm_rows<bf16>(const bf16*, const bf16*, bf16*, float*, int64_t, int64_t, float,
                                 cudaStream_t);
template void rmsnorm_vector<float>(const float*, const float*, float*, float*, int64_t, float,
                                    void*, size_t, cudaStream_t);

}  // namespace day07
