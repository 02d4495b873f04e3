// day06 reductions r1..r7: the steps of Mark Harris's "Optimizing Parallel Reduction in CUDA"
// (NVIDIA, 2007), one section per step, all at 256 threads per block. The seven steps sit side by
// side in this one file on purpose, as in Harris's slides: each differs from the last in a few
// lines, and reading them in order is the lesson.
//
// Every step is one kernel that writes one partial sum per block. reduce_passes() applies it to
// x, then to the partials, and so on until a pass has one block, which writes the result: no
// atomics, so the order of the adds depends only on n (and, for r6/r7, the SM count). int32 is
// exact in any order; fp32 is reproducible from run to run on one GPU, but a different n or GPU
// adds in a different tree and may differ in the last bits.
//
// Run: build/day06_scan/day06_scan --variant r1_interleaved_divergent,r7_vectorized
#include <cuda_runtime.h>

#include <algorithm>

#include "common/cuda_check.hpp"
#include "common/occupancy.hpp"
#include "scan.cuh"
#include "scan_device.cuh"

namespace day06 {

namespace detail {

int sm_count() {
  static gpu100::PerDevice<int> count_per_gpu;  // per GPU: asked on each it runs on
  const int count = count_per_gpu.get([] {
    int device = 0, sms = 0;
    CUDA_CHECK(cudaGetDevice(&device));
    CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    return sms;
  });
  return count;
}

}  // namespace detail

namespace {

constexpr int kThreads = 256;
constexpr int kGridStrideItems = 8;  // r6/r7: at least this many elements per thread
constexpr int kBlocksPerSm = 4;      // r6/r7: the grid is at most SMs x 4 blocks

// ---- r1: interleaved addressing, divergent branch ----
// Thread t loads element blockIdx.x * 256 + t into shared memory. At step s (1, 2, 4, ...) the
// threads whose index is a multiple of 2s add the element s to their right. Correct and simple,
// but `tid % (2s)` leaves most lanes of every warp idle and the modulo is slow.
template <typename T>
__global__ void r1_kernel(const T* __restrict__ x, T* __restrict__ partial, int64_t n) {
  __shared__ T s[kThreads];
  const unsigned tid = threadIdx.x;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + tid;
  s[tid] = i < n ? x[i] : T(0);
  __syncthreads();  // the block's elements are loaded
  for (unsigned stride = 1; stride < kThreads; stride *= 2) {
    if (tid % (2 * stride) == 0) s[tid] += s[tid + stride];
    __syncthreads();  // step done before the next reads its results
  }
  if (tid == 0) partial[blockIdx.x] = s[0];
}

// ---- r2: interleaved addressing, no divergence ----
// Changed from r1: thread t works on index 2 s t, so the active threads are the first
// 256 / (2s), packed in whole warps: no divergent warps until fewer than 32 threads are active.
// Cost: the strided index makes threads of a warp hit the same shared-memory banks (2-way, 4-way,
// ... bank conflicts).
template <typename T>
__global__ void r2_kernel(const T* __restrict__ x, T* __restrict__ partial, int64_t n) {
  __shared__ T s[kThreads];
  const unsigned tid = threadIdx.x;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + tid;
  s[tid] = i < n ? x[i] : T(0);
  __syncthreads();
  for (unsigned stride = 1; stride < kThreads; stride *= 2) {
    const unsigned index = 2 * stride * tid;
    if (index < kThreads) s[index] += s[index + stride];
    __syncthreads();
  }
  if (tid == 0) partial[blockIdx.x] = s[0];
}

// ---- r3: sequential addressing ----
// Changed from r2: at each step thread t < s adds element t + s (s = 128, 64, ..., 1). Consecutive
// threads read consecutive words, so there are no bank conflicts, and the active threads stay
// contiguous. Still half the threads idle from the first step: they only loaded.
template <typename T>
__global__ void r3_kernel(const T* __restrict__ x, T* __restrict__ partial, int64_t n) {
  __shared__ T s[kThreads];
  const unsigned tid = threadIdx.x;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + tid;
  s[tid] = i < n ? x[i] : T(0);
  __syncthreads();
  for (unsigned stride = kThreads / 2; stride > 0; stride >>= 1) {
    if (tid < stride) s[tid] += s[tid + stride];
    __syncthreads();
  }
  if (tid == 0) partial[blockIdx.x] = s[0];
}

// ---- r4: first add during load ----
// Changed from r3: a block covers 512 elements; thread t loads elements t and t + 256 and stores
// their sum, so half as many blocks do the same tree and every thread does useful work at once.
template <typename T>
__global__ void r4_kernel(const T* __restrict__ x, T* __restrict__ partial, int64_t n) {
  __shared__ T s[kThreads];
  const unsigned tid = threadIdx.x;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * (2 * kThreads) + tid;
  s[tid] = (i < n ? x[i] : T(0)) + (i + kThreads < n ? x[i + kThreads] : T(0));
  __syncthreads();
  for (unsigned stride = kThreads / 2; stride > 0; stride >>= 1) {
    if (tid < stride) s[tid] += s[tid + stride];
    __syncthreads();
  }
  if (tid == 0) partial[blockIdx.x] = s[0];
}

// ---- r5: warp-shuffle final stages ----
// Changed from r4: once 64 values are left, warp 0 finishes with __shfl_down_sync (registers, no
// shared memory, no __syncthreads): the last 6 steps lose their barriers and shared traffic.
// (Harris unrolled the last warp over volatile shared memory; shuffles replace that since Kepler.)
template <typename T>
__global__ void r5_kernel(const T* __restrict__ x, T* __restrict__ partial, int64_t n) {
  __shared__ T s[kThreads];
  const unsigned tid = threadIdx.x;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * (2 * kThreads) + tid;
  s[tid] = (i < n ? x[i] : T(0)) + (i + kThreads < n ? x[i + kThreads] : T(0));
  __syncthreads();
  for (unsigned stride = kThreads / 2; stride > 32; stride >>= 1) {
    if (tid < stride) s[tid] += s[tid + stride];
    __syncthreads();
  }
  if (tid < 32) {
    const T v = detail::warp_reduce(s[tid] + s[tid + 32]);
    if (tid == 0) partial[blockIdx.x] = v;
  }
}

// ---- r6: grid-stride, many elements per thread ----
// Changed from r5: the grid is only SMs x 4 blocks; thread g (global index) sums elements
// g, g + G, g + 2G, ... (G = grid threads) in a register, coalesced on every step, then the block
// reduces with shuffles (block_reduce: warp sums, then warp 0 over them). Far fewer blocks, one
// tree per block instead of one per 512 elements, and many independent loads per thread; the
// second pass has at most SMs x 4 partials: one block.
template <typename T>
__global__ void r6_kernel(const T* __restrict__ x, T* __restrict__ partial, int64_t n) {
  __shared__ T warp_sums[kThreads / 32];
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kThreads;
  T sum = T(0);
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; i < n; i += stride) {
    sum += x[i];
  }
  const T total = detail::block_reduce<T, kThreads>(sum, warp_sums);
  if (threadIdx.x == 0) partial[blockIdx.x] = total;
}

// ---- r7: vectorized loads ----
// Changed from r6: each step of the loop loads 16 bytes (float4 / int4) instead of 4, a quarter
// of the load instructions for the same bytes; the last n % 4 elements are a scalar tail. Falls
// back to r6's mapping (num_vec = 0) when x is not 16-byte aligned.
template <typename T>
__global__ void r7_kernel(const T* __restrict__ x, T* __restrict__ partial, int64_t n,
                          int64_t num_vec) {
  using V = typename detail::Vec4<T>::type;
  __shared__ T warp_sums[kThreads / 32];
  const int64_t g = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kThreads;
  const V* xv = reinterpret_cast<const V*>(x);
  T sum = T(0);
  for (int64_t i = g; i < num_vec; i += stride) {
    const V v = xv[i];
    sum += (v.x + v.y) + (v.z + v.w);
  }
  for (int64_t i = 4 * num_vec + g; i < n; i += stride) sum += x[i];
  const T total = detail::block_reduce<T, kThreads>(sum, warp_sums);
  if (threadIdx.x == 0) partial[blockIdx.x] = total;
}

// Pass after pass until one block is left. `blocks_for(m)` is the grid of a pass over m values;
// `launch(src, dst, m, blocks)` runs it. The partials ping-pong between two workspace arrays of
// ceil(n / 256) values, the most blocks any variant's first pass has.
template <typename T, typename BlocksFor, typename Launch>
void reduce_passes(const T* x, T* out, int64_t n, void* ws, size_t ws_bytes, cudaStream_t stream,
                   const char* who, BlocksFor blocks_for, Launch launch) {
  detail::check_n(n, kMaxN, who);
  if (n == 0) {  // the empty sum
    CUDA_CHECK(cudaMemsetAsync(out, 0, sizeof(T), stream));
    return;
  }
  const int64_t cap = gpu100::ceil_div<int64_t>(n, kThreads);
  detail::Carver carver(ws, ws_bytes, who);
  T* buffers[2] = {carver.take<T>(static_cast<size_t>(cap)),
                   carver.take<T>(static_cast<size_t>(cap))};
  const T* src = x;
  int64_t m = n;
  for (int k = 0;; k ^= 1) {
    const int64_t blocks = blocks_for(m);
    T* dst = blocks == 1 ? out : buffers[k];
    launch(src, dst, m, static_cast<unsigned>(blocks));
    CUDA_CHECK_LAST();
    if (blocks == 1) break;
    src = dst;
    m = blocks;
  }
}

int64_t grid_stride_blocks(int64_t m) {
  return std::min<int64_t>(gpu100::ceil_div<int64_t>(m, int64_t(kThreads) * kGridStrideItems),
                           int64_t(detail::sm_count()) * kBlocksPerSm);
}

}  // namespace

size_t reduce_workspace_bytes(int64_t n) {
  const size_t cap =
      static_cast<size_t>(gpu100::ceil_div<int64_t>(std::max<int64_t>(n, 1), kThreads));
  return 2 * detail::Carver::need<int32_t>(cap);  // 4-byte elements (fp32 and int32)
}

// The launchers: the grid of each pass, and the kernel.
#define DAY06_REDUCE_LAUNCHER(NAME, KERNEL, PER_BLOCK)                                       \
  template <typename T>                                                                      \
  void NAME(const T* x, T* out, int64_t n, void* ws, size_t ws_bytes, cudaStream_t stream) { \
    reduce_passes(                                                                           \
        x, out, n, ws, ws_bytes, stream, #NAME,                                              \
        [](int64_t m) { return gpu100::ceil_div<int64_t>(m, PER_BLOCK); },                   \
        [&](const T* src, T* dst, int64_t m, unsigned blocks) {                              \
          KERNEL<T><<<blocks, kThreads, 0, stream>>>(src, dst, m);                           \
        });                                                                                  \
  }                                                                                          \
  template void NAME<float>(const float*, float*, int64_t, void*, size_t, cudaStream_t);     \
  template void NAME<int32_t>(const int32_t*, int32_t*, int64_t, void*, size_t, cudaStream_t);

DAY06_REDUCE_LAUNCHER(reduce_r1_interleaved_divergent, r1_kernel, kThreads)
DAY06_REDUCE_LAUNCHER(reduce_r2_interleaved_strided, r2_kernel, kThreads)
DAY06_REDUCE_LAUNCHER(reduce_r3_sequential, r3_kernel, kThreads)
DAY06_REDUCE_LAUNCHER(reduce_r4_add_during_load, r4_kernel, 2 * kThreads)
DAY06_REDUCE_LAUNCHER(reduce_r5_warp_shuffle, r5_kernel, 2 * kThreads)
#undef DAY06_REDUCE_LAUNCHER

template <typename T>
void reduce_r6_grid_stride(const T* x, T* out, int64_t n, void* ws, size_t ws_bytes,
                           cudaStream_t stream) {
  reduce_passes(x, out, n, ws, ws_bytes, stream, "reduce_r6_grid_stride", grid_stride_blocks,
                [&](const T* src, T* dst, int64_t m, unsigned blocks) {
                  r6_kernel<T><<<blocks, kThreads, 0, stream>>>(src, dst, m);
                });
}

template <typename T>
void reduce_r7_vectorized(const T* x, T* out, int64_t n, void* ws, size_t ws_bytes,
                          cudaStream_t stream) {
  reduce_passes(x, out, n, ws, ws_bytes, stream, "reduce_r7_vectorized", grid_stride_blocks,
                [&](const T* src, T* dst, int64_t m, unsigned blocks) {
                  const int64_t num_vec = detail::aligned16(src) ? m / 4 : 0;
                  r7_kernel<T><<<blocks, kThreads, 0, stream>>>(src, dst, m, num_vec);
                });
}

template void reduce_r6_grid_stride<float>(const float*, float*, int64_t, void*, size_t,
                                           cudaStream_t);
template void reduce_r6_grid_stride<int32_t>(const int32_t*, int32_t*, int64_t, void*, size_t,
                                             cudaStream_t);
template void reduce_r7_vectorized<float>(const float*, float*, int64_t, void*, size_t,
                                          cudaStream_t);
template void reduce_r7_vectorized<int32_t>(const int32_t*, int32_t*, int64_t, void*, size_t,
                                            cudaStream_t);

}  // namespace day06
