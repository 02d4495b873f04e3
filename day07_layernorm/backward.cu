// LayerNorm backward: dx per row, dgamma and dbeta across rows, without atomics.
//
// Kernel 1 (fused, register-resident): a group of G threads owns one row at a time and keeps x
// and dy of that row in registers (kBwdElems = 16 elements per thread, 16-byte vectors when D
// allows). Per row it needs two row sums, sum g and sum g * xhat (g = dy * gamma), then writes
// dx. The thread-to-column mapping is fixed (thread t always owns vectors t, t + G, ...), so the
// thread also adds dy * xhat and dy of its columns into registers across every row its block
// visits: the block's dgamma / dbeta partial sums cost no memory traffic per row. The grid is
// persistent (about as many blocks as fit on the GPU, at most kBwdMaxParts), each block walking
// rows with a grid stride, and at the end each block writes one partial row of dgamma and one of
// dbeta (the groups of a block are combined in shared memory, in a fixed order).
// Kernel 2 adds the partial rows column by column (32 columns x 32 partial slices per block, a
// fixed-order tree): no atomics, so the result is the same on every run.
// Compulsory traffic: read dy and x (and gamma, mean, rstd), write dx, write dgamma and dbeta;
// the partials add 2 x parts x D x 4 bytes twice (about 1% at 32768 x 4096).
// Rows longer than 512 * kBwdElems take a looped path: dx by a block per row (two reads of the
// row), dgamma / dbeta by a column kernel that reads x and dy again, then kernel 2.
// Credit: the partial-sums-then-reduce scheme is the one in llm.c's layernorm_backward kernels and
// Apex's cuComputePartGradGammaBeta / cuComputeGradGammaBeta; the code is this day's own.
#include <algorithm>
#include <stdexcept>
#include <string>

#include "common/cuda_check.hpp"
#include "common/math.hpp"
#include "common/occupancy.hpp"
#include "layernorm.cuh"
#include "norm_device.cuh"

namespace day07 {
namespace {

// A block is 256 threads (256 / G rows at a time) for G <= 256, else G threads (one row).
template <int G>
constexpr __host__ __device__ int bwd_block_threads() {
  return G < 256 ? 256 : G;
}

// Thread -> data: group = threadIdx.x / G, t = threadIdx.x % G. Row set s (s = blockIdx.x, then
// + gridDim.x, ...) is rows s * kGroups ... s * kGroups + kGroups - 1, one per group; thread t
// holds vectors t, t + G, ... of its group's row, and the partial sums of those columns.
// partial: [2][nparts][dim] floats (dgamma partials, then dbeta partials), nparts = gridDim.x.
// Dynamic shared memory: 2 * dim floats when a block has several groups (kGroups > 1).
template <typename T, int V, int G>
__global__ void __launch_bounds__(bwd_block_threads<G>(), 512 / bwd_block_threads<G>())
    ln_backward_registers_kernel(const T* __restrict__ dy, const T* __restrict__ x,
                                 const T* __restrict__ gamma, const float* __restrict__ mean,
                                 const float* __restrict__ rstd, T* __restrict__ dx,
                                 float* __restrict__ partial, int64_t rows, int dim) {
  constexpr int kBlock = bwd_block_threads<G>();
  constexpr int kGroups = kBlock / G;
  constexpr int kN = kBwdElems / V;  // vectors per thread
  using VecT = Vec<T, V>;
  __shared__ float scratch[2 * (kBlock / kWarp)];
  extern __shared__ float combine[];

  const int group = threadIdx.x / G;
  const int t = threadIdx.x % G;
  const int nvec = dim / V;
  const float inv_dim = 1.f / static_cast<float>(dim);

  // gamma of the thread's columns, loaded once; the dgamma / dbeta accumulators.
  float gam[kBwdElems], dgam[kBwdElems], dbet[kBwdElems];
  const VecT* gr = reinterpret_cast<const VecT*>(gamma);
#pragma unroll
  for (int k = 0; k < kN; ++k) {
    VecT g;
    if (t + k * G < nvec) g = gr[t + k * G];
#pragma unroll
    for (int j = 0; j < V; ++j) {
      gam[k * V + j] = t + k * G < nvec ? to_float(g.v[j]) : 0.f;
      dgam[k * V + j] = 0.f;
      dbet[k * V + j] = 0.f;
    }
  }

  // Every thread of the block runs the same number of iterations (the barriers in group_sum2 and
  // below need it); a group whose row is past the end computes nothing but still takes part.
  const int64_t row_sets = gpu100::ceil_div<int64_t>(rows, kGroups);
  for (int64_t set = blockIdx.x; set < row_sets; set += gridDim.x) {
    const int64_t row = set * kGroups + group;
    const bool valid = row < rows;
    VecT xv[kN], dyv[kN];
    if (valid) {
      const VecT* xr = reinterpret_cast<const VecT*>(x + row * dim);
      const VecT* dyr = reinterpret_cast<const VecT*>(dy + row * dim);
#pragma unroll
      for (int k = 0; k < kN; ++k) {
        if (t + k * G < nvec) {
          xv[k] = xr[t + k * G];  // 2 kN independent 16-byte loads in flight
          dyv[k] = dyr[t + k * G];
        }
      }
    }
    const float m = valid ? mean[row] : 0.f;
    const float rs = valid ? rstd[row] : 0.f;
    float sum_g = 0.f, sum_gx = 0.f;
    if (valid) {
#pragma unroll
      for (int k = 0; k < kN; ++k) {
        if (t + k * G < nvec) {
#pragma unroll
          for (int j = 0; j < V; ++j) {
            const float xh = (to_float(xv[k].v[j]) - m) * rs;
            const float d = to_float(dyv[k].v[j]);
            const float g = d * gam[k * V + j];
            sum_g += g;
            sum_gx += g * xh;
            dgam[k * V + j] += d * xh;
            dbet[k * V + j] += d;
          }
        }
      }
    }
    group_sum2<G>(sum_g, sum_gx, scratch);  // barriers inside when G > 32: every thread calls
    if (valid) {
      const float mean_g = sum_g * inv_dim, mean_gx = sum_gx * inv_dim;
      VecT* dxr = reinterpret_cast<VecT*>(dx + row * dim);
#pragma unroll
      for (int k = 0; k < kN; ++k) {
        if (t + k * G < nvec) {
          VecT out;
#pragma unroll
          for (int j = 0; j < V; ++j) {
            const float xh = (to_float(xv[k].v[j]) - m) * rs;
            const float g = to_float(dyv[k].v[j]) * gam[k * V + j];
            out.v[j] = from_float<T>(rs * (g - mean_g - xh * mean_gx));
          }
          dxr[t + k * G] = out;
        }
      }
    }
  }

  // This block's partial row of dgamma and of dbeta.
  float* pg = partial + int64_t(blockIdx.x) * dim;
  float* pb = partial + (int64_t(gridDim.x) + blockIdx.x) * dim;
  if constexpr (kGroups == 1) {
#pragma unroll
    for (int k = 0; k < kN; ++k) {
      if (t + k * G < nvec) {
#pragma unroll
        for (int j = 0; j < V; ++j) {
          pg[(t + k * G) * V + j] = dgam[k * V + j];
          pb[(t + k * G) * V + j] = dbet[k * V + j];
        }
      }
    }
  } else {
    // Several groups share columns: add them in shared memory, group 0 first, then group 1, ...
    for (int c = threadIdx.x; c < 2 * dim; c += kBlock) combine[c] = 0.f;
    __syncthreads();  // zeroed before any group adds
    for (int turn = 0; turn < kGroups; ++turn) {
      if (group == turn) {
#pragma unroll
        for (int k = 0; k < kN; ++k) {
          if (t + k * G < nvec) {
#pragma unroll
            for (int j = 0; j < V; ++j) {
              combine[(t + k * G) * V + j] += dgam[k * V + j];
              combine[dim + (t + k * G) * V + j] += dbet[k * V + j];
            }
          }
        }
      }
      __syncthreads();  // this group's adds land before the next group's
    }
    for (int c = threadIdx.x; c < dim; c += kBlock) {
      pg[c] = combine[c];
      pb[c] = combine[dim + c];
    }
  }
}

// Kernel 2: dgamma (blockIdx.y == 0) or dbeta (1) = the sum of the nparts partial rows.
// Block (32, 32): threadIdx.x is the column within a 32-column tile (coalesced 128-byte reads),
// threadIdx.y a slice of the partial rows (p = y, y + 32, ...); the 32 slices meet in shared
// memory and row 0 of the block adds them in order.
constexpr int kReduceCols = 32;
constexpr int kReduceSlices = 32;

__global__ void __launch_bounds__(kReduceCols* kReduceSlices)
    ln_backward_param_reduce_kernel(const float* __restrict__ partial, int nparts, int dim,
                                    float* __restrict__ dgamma, float* __restrict__ dbeta) {
  __shared__ float tile[kReduceSlices][kReduceCols + 1];
  const float* src = partial + int64_t(blockIdx.y) * nparts * dim;
  const int col = blockIdx.x * kReduceCols + threadIdx.x;
  float sum = 0.f;
  if (col < dim) {
    for (int p = threadIdx.y; p < nparts; p += kReduceSlices) sum += src[int64_t(p) * dim + col];
  }
  tile[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();  // all slices written
  if (threadIdx.y == 0 && col < dim) {
    float total = 0.f;
#pragma unroll 8
    for (int s = 0; s < kReduceSlices; ++s) total += tile[s][threadIdx.x];
    (blockIdx.y == 0 ? dgamma : dbeta)[col] = total;
  }
}

// Looped path, dx: a block of 512 threads per row; pass 1 takes the two sums, pass 2 writes dx
// (the row's second read is mostly an L1/L2 hit). Thread t handles vectors t, t + 512, ...
constexpr int kLoopedThreads = 512;

template <typename T, int V>
__global__ void __launch_bounds__(kLoopedThreads)
    ln_backward_dx_looped_kernel(const T* __restrict__ dy, const T* __restrict__ x,
                                 const T* __restrict__ gamma, const float* __restrict__ mean,
                                 const float* __restrict__ rstd, T* __restrict__ dx, int dim) {
  using VecT = Vec<T, V>;
  __shared__ float scratch[2 * (kLoopedThreads / kWarp)];
  const int64_t row = blockIdx.x;
  const int nvec = dim / V;
  const VecT* xr = reinterpret_cast<const VecT*>(x + row * dim);
  const VecT* dyr = reinterpret_cast<const VecT*>(dy + row * dim);
  const VecT* gr = reinterpret_cast<const VecT*>(gamma);
  const float m = mean[row], rs = rstd[row];
  float sum_g = 0.f, sum_gx = 0.f;
  for (int i = threadIdx.x; i < nvec; i += kLoopedThreads) {
    const VecT xv = xr[i], dv = dyr[i], gv = gr[i];
#pragma unroll
    for (int j = 0; j < V; ++j) {
      const float g = to_float(dv.v[j]) * to_float(gv.v[j]);
      sum_g += g;
      sum_gx += g * (to_float(xv.v[j]) - m) * rs;
    }
  }
  group_sum2<kLoopedThreads>(sum_g, sum_gx, scratch);  // barriers inside: every thread calls
  const float inv_dim = 1.f / static_cast<float>(dim);
  const float mean_g = sum_g * inv_dim, mean_gx = sum_gx * inv_dim;
  VecT* dxr = reinterpret_cast<VecT*>(dx + row * dim);
  for (int i = threadIdx.x; i < nvec; i += kLoopedThreads) {
    const VecT xv = xr[i], dv = dyr[i], gv = gr[i];
    VecT out;
#pragma unroll
    for (int j = 0; j < V; ++j) {
      const float xh = (to_float(xv.v[j]) - m) * rs;
      const float g = to_float(dv.v[j]) * to_float(gv.v[j]);
      out.v[j] = from_float<T>(rs * (g - mean_g - xh * mean_gx));
    }
    dxr[i] = out;
  }
}

// Looped path, dgamma / dbeta partials: block (32, 8), grid (ceil(D / 32), nparts). Thread
// (tx, ty) of block (bx, p) owns column bx * 32 + tx and rows p * chunk + ty, + 8, ... of part p;
// the 8 row slices meet in shared memory and are added in order into partial[p][column].
constexpr int kColsThreadsY = 8;

template <typename T>
__global__ void __launch_bounds__(kReduceCols* kColsThreadsY)
    ln_backward_params_columns_kernel(const T* __restrict__ dy, const T* __restrict__ x,
                                      const float* __restrict__ mean,
                                      const float* __restrict__ rstd, float* __restrict__ partial,
                                      int64_t rows, int dim, int64_t chunk) {
  __shared__ float tile_g[kColsThreadsY][kReduceCols], tile_b[kColsThreadsY][kReduceCols];
  const int col = blockIdx.x * kReduceCols + threadIdx.x;
  const int64_t begin = int64_t(blockIdx.y) * chunk;
  const int64_t end = begin + chunk < rows ? begin + chunk : rows;
  float acc_g = 0.f, acc_b = 0.f;
  if (col < dim) {
    for (int64_t r = begin + threadIdx.y; r < end; r += kColsThreadsY) {
      const float d = to_float(dy[r * dim + col]);
      acc_g += d * (to_float(x[r * dim + col]) - mean[r]) * rstd[r];
      acc_b += d;
    }
  }
  tile_g[threadIdx.y][threadIdx.x] = acc_g;
  tile_b[threadIdx.y][threadIdx.x] = acc_b;
  __syncthreads();  // all row slices written
  if (threadIdx.y == 0 && col < dim) {
    float g = 0.f, b = 0.f;
#pragma unroll
    for (int s = 0; s < kColsThreadsY; ++s) {
      g += tile_g[s][threadIdx.x];
      b += tile_b[s][threadIdx.x];
    }
    partial[int64_t(blockIdx.y) * dim + col] = g;
    partial[(int64_t(gridDim.y) + blockIdx.y) * dim + col] = b;
  }
}

// Launches kernel 1 with a persistent grid; returns the number of partial rows it writes.
template <typename T, int V, int G>
int launch_backward_registers(const T* dy, const T* x, const T* gamma, const float* mean,
                              const float* rstd, T* dx, float* partial, int64_t rows, int dim,
                              cudaStream_t stream) {
  constexpr int kBlock = bwd_block_threads<G>();
  constexpr int kGroups = kBlock / G;
  const size_t smem = kGroups > 1 ? 2 * size_t(dim) * sizeof(float) : 0;
  // Blocks resident on the whole GPU, computed once per instantiation and GPU.
  static gpu100::PerDevice<int> resident_per_gpu;  // per GPU: asked on each it runs on
  const int resident = resident_per_gpu.get([] {
    int device = 0, sms = 0, per_sm = 0;
    CUDA_CHECK(cudaGetDevice(&device));
    CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    const size_t max_smem = kGroups > 1 ? 2 * size_t(G) * kBwdElems * sizeof(float) : 0;
    CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
        &per_sm, ln_backward_registers_kernel<T, V, G>, kBlock, max_smem));
    return std::max(1, sms * per_sm);
  });
  const int64_t row_sets = gpu100::ceil_div<int64_t>(rows, kGroups);
  const int blocks =
      static_cast<int>(std::min<int64_t>({row_sets, static_cast<int64_t>(resident), kBwdMaxParts}));
  ln_backward_registers_kernel<T, V, G>
      <<<blocks, kBlock, smem, stream>>>(dy, x, gamma, mean, rstd, dx, partial, rows, dim);
  CUDA_CHECK_LAST();
  return blocks;
}

template <typename T, int V>
void launch_backward_width(const T* dy, const T* x, const T* gamma, const float* mean,
                           const float* rstd, T* dx, float* dgamma, float* dbeta, float* partial,
                           int64_t rows, int dim, cudaStream_t stream) {
  int nparts = 0;
  switch (backward_group_size(dim)) {
    case 32:
      nparts = launch_backward_registers<T, V, 32>(dy, x, gamma, mean, rstd, dx, partial, rows, dim,
                                                   stream);
      break;
    case 64:
      nparts = launch_backward_registers<T, V, 64>(dy, x, gamma, mean, rstd, dx, partial, rows, dim,
                                                   stream);
      break;
    case 256:
      nparts = launch_backward_registers<T, V, 256>(dy, x, gamma, mean, rstd, dx, partial, rows,
                                                    dim, stream);
      break;
    case 512:
      nparts = launch_backward_registers<T, V, 512>(dy, x, gamma, mean, rstd, dx, partial, rows,
                                                    dim, stream);
      break;
    default: {
      ln_backward_dx_looped_kernel<T, V>
          <<<static_cast<unsigned>(rows), kLoopedThreads, 0, stream>>>(dy, x, gamma, mean, rstd, dx,
                                                                       dim);
      CUDA_CHECK_LAST();
      // Parts of at least 32 rows, at most kBwdMaxParts of them.
      nparts =
          static_cast<int>(std::min<int64_t>(kBwdMaxParts, gpu100::ceil_div<int64_t>(rows, 32)));
      const int64_t chunk = gpu100::ceil_div<int64_t>(rows, nparts);
      const dim3 grid(static_cast<unsigned>(gpu100::ceil_div(dim, kReduceCols)),
                      static_cast<unsigned>(nparts));
      ln_backward_params_columns_kernel<T><<<grid, dim3(kReduceCols, kColsThreadsY), 0, stream>>>(
          dy, x, mean, rstd, partial, rows, dim, chunk);
      CUDA_CHECK_LAST();
      break;
    }
  }
  const dim3 grid(static_cast<unsigned>(gpu100::ceil_div(dim, kReduceCols)), 2);
  ln_backward_param_reduce_kernel<<<grid, dim3(kReduceCols, kReduceSlices), 0, stream>>>(
      partial, nparts, dim, dgamma, dbeta);
  CUDA_CHECK_LAST();
}

}  // namespace

size_t layernorm_backward_workspace_bytes(int64_t rows, int64_t dim) {
  validate_shape(rows, dim);
  return 2 * static_cast<size_t>(std::min(rows, kBwdMaxParts)) * static_cast<size_t>(dim) *
         sizeof(float);
}

template <typename T>
void layernorm_backward(const T* dy, const T* x, const T* gamma, const float* mean,
                        const float* rstd, T* dx, float* dgamma, float* dbeta, int64_t rows,
                        int64_t dim, void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  const size_t need = layernorm_backward_workspace_bytes(rows, dim);  // validates the shape
  if (workspace == nullptr || workspace_bytes < need) {
    throw std::invalid_argument("layernorm_backward: the workspace has " +
                                std::to_string(workspace_bytes) + " bytes, it needs " +
                                std::to_string(need));
  }
  constexpr int kW = 16 / static_cast<int>(sizeof(T));
  const bool vec =
      dim % kW == 0 && aligned16(dy) && aligned16(x) && aligned16(gamma) && aligned16(dx);
  auto* partial = static_cast<float*>(workspace);
  const int d = static_cast<int>(dim);
  if (vec) {
    launch_backward_width<T, kW>(dy, x, gamma, mean, rstd, dx, dgamma, dbeta, partial, rows, d,
                                 stream);
  } else {
    launch_backward_width<T, 1>(dy, x, gamma, mean, rstd, dx, dgamma, dbeta, partial, rows, d,
                                stream);
  }
}

template void layernorm_backward<float>(const float*, const float*, const float*, const float*,
                                        const float*, float*, float*, float*, int64_t, int64_t,
                                        void*, size_t, cudaStream_t);
template void layernorm_backward<bf16>(const bf16*, const bf16*, const bf16*, const float*,
                                       const float*, bf16*, float*, float*, int64_t, int64_t, void*,
                                       size_t, cudaStream_t);

}  // namespace day07
