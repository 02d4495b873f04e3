#pragma once
// The register-resident row kernel behind v5 (fp32), v6 (bf16) and rmsnorm_rows (kRms), and its
// looped fallback for rows too long for registers. Included by v5_registers.cu, v6_bf16.cu and
// rmsnorm.cu, each of which instantiates only the types it exports.
//
// Why it is fast: x is read from DRAM exactly once (the row stays in registers between the
// statistics and the output), every access is a 16-byte vector when D allows it, the variance is
// the exact two-pass formula over registers (no Welford division, no cancellation), and y leaves
// by 16-byte stores. gamma and beta are read per row but stay in L1/L2 (2 D elements against the
// rows x D of x). No cache hints: x and y are touched once each, so an evict-first hint would
// only matter if something else competed for L2, and a y kept in L2 helps the next kernel read it.
// Credit: llm.c's layernorm_forward_kernel6 (x held in registers, x128 vector loads) and Apex /
// PyTorch's vectorized layer norm; the strategy by D is this day's own (see layernorm.cuh).
#include <cuda_runtime.h>

#include <cstdint>

#include "common/cuda_check.hpp"
#include "common/math.hpp"
#include "layernorm.cuh"
#include "norm_device.cuh"

namespace day07 {
namespace detail {

// G threads per row; a block is 128 threads (4 rows) when G == 32, else G threads (one row).
template <int G>
constexpr __host__ __device__ int rows_block_threads() {
  return G < 128 ? 128 : G;
}

// Thread -> data: group = threadIdx.x / G is the block's row, t = threadIdx.x % G the thread in
// the group; thread t holds the row's vectors t, t + G, t + 2G, ... (kRegElems / V of them), so
// each vector load of a warp covers 32 consecutive vectors (512 bytes at V = 16 / sizeof(T)).
template <typename T, int V, int G, bool kRms>
__global__ void __launch_bounds__(rows_block_threads<G>())
    norm_rows_registers_kernel(const T* __restrict__ x, const T* __restrict__ gamma,
                               const T* __restrict__ beta, T* __restrict__ y,
                               float* __restrict__ mean_out, float* __restrict__ rstd_out,
                               int64_t rows, int dim, float eps) {
  static_assert(G == 32 || G >= 128, "a block holds several rows only when a row is one warp");
  constexpr int kBlock = rows_block_threads<G>();
  constexpr int kGroups = kBlock / G;
  constexpr int kN = kRegElems / V;  // vectors per thread
  using VecT = Vec<T, V>;
  __shared__ float scratch[kBlock / kWarp];

  const int t = threadIdx.x % G;
  const int64_t row = int64_t(blockIdx.x) * kGroups + threadIdx.x / G;
  // Only a one-warp-per-row block (no barriers) can have rows past the end: that warp leaves.
  if (row >= rows) return;
  const int nvec = dim / V;
  const VecT* xr = reinterpret_cast<const VecT*>(x + row * dim);

  VecT r[kN];  // the thread's slice of the row, in its storage type (bf16 stays packed)
#pragma unroll
  for (int k = 0; k < kN; ++k) {
    if (t + k * G < nvec) r[k] = xr[t + k * G];  // all kN loads issued before any use
  }

  const float inv_dim = 1.f / static_cast<float>(dim);
  float mean = 0.f;
  if constexpr (!kRms) {
    float sum = 0.f;
#pragma unroll
    for (int k = 0; k < kN; ++k) {
      if (t + k * G < nvec) {
#pragma unroll
        for (int j = 0; j < V; ++j) sum += to_float(r[k].v[j]);
      }
    }
    mean = group_sum<G>(sum, scratch) * inv_dim;
  }
  // The variance from the registers: sum (x - mean)^2, exact two-pass (RMSNorm: mean = 0).
  float sq = 0.f;
#pragma unroll
  for (int k = 0; k < kN; ++k) {
    if (t + k * G < nvec) {
#pragma unroll
      for (int j = 0; j < V; ++j) {
        const float d = to_float(r[k].v[j]) - mean;
        sq += d * d;
      }
    }
  }
  const float rstd = rsqrtf(group_sum<G>(sq, scratch) * inv_dim + eps);

  const VecT* gr = reinterpret_cast<const VecT*>(gamma);
  const VecT* br = reinterpret_cast<const VecT*>(beta);
  VecT* yr = reinterpret_cast<VecT*>(y + row * dim);
#pragma unroll
  for (int k = 0; k < kN; ++k) {
    const int i = t + k * G;
    if (i < nvec) {
      const VecT g = gr[i];
      VecT b;
      if constexpr (!kRms) b = br[i];
      VecT out;
#pragma unroll
      for (int j = 0; j < V; ++j) {
        float v = (to_float(r[k].v[j]) - mean) * rstd * to_float(g.v[j]);
        if constexpr (!kRms) v += to_float(b.v[j]);
        out.v[j] = from_float<T>(v);
      }
      yr[i] = out;  // one 16-byte store per vector
    }
  }
  if (t == 0) {
    if constexpr (!kRms) mean_out[row] = mean;
    rstd_out[row] = rstd;
  }
}

// Rows longer than 512 * kRegElems: a block of 512 threads per row that reads the row three times
// (mean, variance, y; twice for RMSNorm). The first read comes from DRAM; the row (>= 64 KiB in
// fp32) is mostly still in L1/L2 for the others. Thread t handles vectors t, t + 512, ...
constexpr int kLoopedThreads = 512;

template <typename T, int V, bool kRms>
__global__ void __launch_bounds__(kLoopedThreads)
    norm_rows_looped_kernel(const T* __restrict__ x, const T* __restrict__ gamma,
                            const T* __restrict__ beta, T* __restrict__ y,
                            float* __restrict__ mean_out, float* __restrict__ rstd_out, int dim,
                            float eps) {
  using VecT = Vec<T, V>;
  __shared__ float scratch[kLoopedThreads / kWarp];
  const int64_t row = blockIdx.x;
  const int nvec = dim / V;
  const VecT* xr = reinterpret_cast<const VecT*>(x + row * dim);
  const float inv_dim = 1.f / static_cast<float>(dim);
  float mean = 0.f;
  if constexpr (!kRms) {
    float sum = 0.f;
    for (int i = threadIdx.x; i < nvec; i += kLoopedThreads) {
      const VecT v = xr[i];
#pragma unroll
      for (int j = 0; j < V; ++j) sum += to_float(v.v[j]);
    }
    mean = group_sum<kLoopedThreads>(sum, scratch) * inv_dim;  // barriers inside: all threads
  }
  float sq = 0.f;
  for (int i = threadIdx.x; i < nvec; i += kLoopedThreads) {
    const VecT v = xr[i];
#pragma unroll
    for (int j = 0; j < V; ++j) {
      const float d = to_float(v.v[j]) - mean;
      sq += d * d;
    }
  }
  const float rstd = rsqrtf(group_sum<kLoopedThreads>(sq, scratch) * inv_dim + eps);
  const VecT* gr = reinterpret_cast<const VecT*>(gamma);
  const VecT* br = reinterpret_cast<const VecT*>(beta);
  VecT* yr = reinterpret_cast<VecT*>(y + row * dim);
  for (int i = threadIdx.x; i < nvec; i += kLoopedThreads) {
    const VecT v = xr[i];
    const VecT g = gr[i];
    VecT b;
    if constexpr (!kRms) b = br[i];
    VecT out;
#pragma unroll
    for (int j = 0; j < V; ++j) {
      float o = (to_float(v.v[j]) - mean) * rstd * to_float(g.v[j]);
      if constexpr (!kRms) o += to_float(b.v[j]);
      out.v[j] = from_float<T>(o);
    }
    yr[i] = out;
  }
  if (threadIdx.x == 0) {
    if constexpr (!kRms) mean_out[row] = mean;
    rstd_out[row] = rstd;
  }
}

template <typename T, int V, bool kRms>
void launch_norm_rows_width(const T* x, const T* gamma, const T* beta, T* y, float* mean,
                            float* rstd, int64_t rows, int dim, float eps, cudaStream_t stream) {
  switch (register_group_size(dim)) {
    case 32: {
      constexpr int kRows = rows_block_threads<32>() / 32;
      const auto blocks = static_cast<unsigned>(gpu100::ceil_div<int64_t>(rows, kRows));
      norm_rows_registers_kernel<T, V, 32, kRms><<<blocks, rows_block_threads<32>(), 0, stream>>>(
          x, gamma, beta, y, mean, rstd, rows, dim, eps);
      break;
    }
    case 128:
      norm_rows_registers_kernel<T, V, 128, kRms><<<static_cast<unsigned>(rows), 128, 0, stream>>>(
          x, gamma, beta, y, mean, rstd, rows, dim, eps);
      break;
    case 512:
      norm_rows_registers_kernel<T, V, 512, kRms><<<static_cast<unsigned>(rows), 512, 0, stream>>>(
          x, gamma, beta, y, mean, rstd, rows, dim, eps);
      break;
    default:
      norm_rows_looped_kernel<T, V, kRms>
          <<<static_cast<unsigned>(rows), kLoopedThreads, 0, stream>>>(x, gamma, beta, y, mean,
                                                                       rstd, dim, eps);
      break;
  }
  CUDA_CHECK_LAST();
}

// The launcher: validates, picks the vector width (16 bytes when D and the pointers allow it,
// scalar otherwise) and the group size by D. beta and mean are unused (may be null) when kRms.
template <typename T, bool kRms>
void launch_norm_rows(const T* x, const T* gamma, const T* beta, T* y, float* mean, float* rstd,
                      int64_t rows, int64_t dim, float eps, cudaStream_t stream) {
  validate_shape(rows, dim);
  constexpr int kW = 16 / static_cast<int>(sizeof(T));
  const bool vec = dim % kW == 0 && aligned16(x) && aligned16(gamma) && aligned16(y) &&
                   (kRms || aligned16(beta));
  const int d = static_cast<int>(dim);
  if (vec) {
    launch_norm_rows_width<T, kW, kRms>(x, gamma, beta, y, mean, rstd, rows, d, eps, stream);
  } else {
    launch_norm_rows_width<T, 1, kRms>(x, gamma, beta, y, mean, rstd, rows, d, eps, stream);
  }
}

}  // namespace detail
}  // namespace day07
