// day08 1D convolution (PMPP chapter 7): y[i] = sum_j x[i + j - r] * mask[j], zero padding.
//   c1_naive          one thread per output; the mask is read from global memory by every thread.
//   c2_constant_mask  the mask in __constant__ memory: one broadcast read per warp per tap.
//   c3_smem_halo      a 1024-output tile plus its 2r halo staged in shared memory (halo_tile.cuh),
//                     so each input is read from DRAM once per tile instead of once per tap.
// The three are side by side in this one file on purpose (a few lines apart each): the 1D warm-up
// to the 2D filters, whose variants have a file each.
#include <cstdint>

#include "common/cuda_check.hpp"
#include "common/math.hpp"
#include "conv_day.hpp"
#include "halo_tile.cuh"

namespace day08 {

namespace {

__constant__ float c_mask1d[kMaxMask1d];

// c1: thread i computes y[i]; consecutive threads read consecutive x (coalesced), and every
// thread reads the whole mask from global memory (served by L1, but one load per tap per thread).
__global__ void conv1d_naive_kernel(const float* __restrict__ x, const float* __restrict__ mask,
                                    int64_t n, int r, float* __restrict__ y) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float acc = 0.f;
  for (int j = 0; j <= 2 * r; ++j) {
    const int64_t src = i + j - r;
    if (src >= 0 && src < n) acc = fmaf(x[src], mask[j], acc);
  }
  y[i] = acc;
}

// c2: the same loop, the mask in constant memory. All lanes of a warp read the same mask[j], which
// the constant cache broadcasts in one transaction; the mask no longer competes for L1.
__global__ void conv1d_constant_kernel(const float* __restrict__ x, int64_t n, int r,
                                       float* __restrict__ y) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float acc = 0.f;
  for (int j = 0; j <= 2 * r; ++j) {
    const int64_t src = i + j - r;
    if (src >= 0 && src < n) acc = fmaf(x[src], c_mask1d[j], acc);
  }
  y[i] = acc;
}

constexpr int kTile1d = 1024, kThreads1d = 256;

// c3: a block computes kTile1d consecutive outputs. It first copies x[start - r, start + kTile1d
// + r) into shared memory (zeros outside [0, n)), so the inner loop has no bounds checks and reads
// only shared memory. Thread t computes outputs t, t + 256, t + 512, t + 768 of the tile:
// consecutive threads read consecutive shared words (no bank conflicts) and write coalesced.
__global__ void conv1d_smem_halo_kernel(const float* __restrict__ x, int64_t n, int r,
                                        float* __restrict__ y) {
  extern __shared__ float tile[];  // kTile1d + 2r floats
  const int64_t start = int64_t(blockIdx.x) * kTile1d;
  load_halo_tile(tile, kTile1d + 2 * r, x, 1, static_cast<int>(n), 0, static_cast<int>(start) - r,
                 1, kTile1d + 2 * r, threadIdx.x, blockDim.x);
  __syncthreads();  // the tile is complete before any thread reads its neighbours' elements
#pragma unroll
  for (int k = 0; k < kTile1d / kThreads1d; ++k) {
    const int o = threadIdx.x + k * kThreads1d;
    if (start + o >= n) break;
    float acc = 0.f;
    for (int j = 0; j <= 2 * r; ++j) acc = fmaf(tile[o + j], c_mask1d[j], acc);
    y[start + o] = acc;
  }
}

void upload_mask(const float* mask, int width, cudaStream_t stream) {
  CUDA_CHECK(cudaMemcpyToSymbolAsync(c_mask1d, mask, sizeof(float) * width, 0,
                                     cudaMemcpyDeviceToDevice, stream));
}

}  // namespace

void conv1d_v1_naive(const float* x, const float* mask, int64_t n, int mask_width, float* y,
                     cudaStream_t stream) {
  check_conv1d_args(n, mask_width);
  const int threads = 256;
  conv1d_naive_kernel<<<static_cast<unsigned>(gpu100::ceil_div<int64_t>(n, threads)), threads, 0,
                        stream>>>(x, mask, n, mask_width / 2, y);
  CUDA_CHECK_LAST();
}

void conv1d_v2_constant_mask(const float* x, const float* mask, int64_t n, int mask_width, float* y,
                             cudaStream_t stream) {
  check_conv1d_args(n, mask_width);
  upload_mask(mask, mask_width, stream);  // a device-to-device copy of <= 4 KB, in stream order
  const int threads = 256;
  conv1d_constant_kernel<<<static_cast<unsigned>(gpu100::ceil_div<int64_t>(n, threads)), threads, 0,
                           stream>>>(x, n, mask_width / 2, y);
  CUDA_CHECK_LAST();
}

void conv1d_v3_smem_halo(const float* x, const float* mask, int64_t n, int mask_width, float* y,
                         cudaStream_t stream) {
  check_conv1d_args(n, mask_width);
  upload_mask(mask, mask_width, stream);
  const int r = mask_width / 2;
  const size_t smem = sizeof(float) * (kTile1d + 2 * r);
  conv1d_smem_halo_kernel<<<static_cast<unsigned>(gpu100::ceil_div<int64_t>(n, kTile1d)),
                            kThreads1d, smem, stream>>>(x, n, r, y);
  CUDA_CHECK_LAST();
}

}  // namespace day08
