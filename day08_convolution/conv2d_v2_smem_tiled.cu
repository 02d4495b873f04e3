// Conv2d v2: shared-memory tiling (PMPP chapter 7 applied to a layer, with halo_tile.cuh).
// A block computes a 16 x 16 tile of output pixels for 8 filters of one image. For each input
// channel it stages the input window of the tile (16 x 16 outputs plus the halo that the strided,
// dilated filter reaches) and the 8 filters' R x S weights of that channel in shared memory, then
// every thread accumulates its pixel for all 8 filters. Changed from v1: each input element is
// read from global memory once per block and channel instead of once per tap and filter, and each
// loaded value feeds 8 FMAs (8 filters) from registers. Cost: two barriers per channel, and the
// window is re-read by the blocks of the other filter groups (from L2).
#include <stdexcept>

#include "common/cuda_check.hpp"
#include "common/math.hpp"
#include "conv_day.hpp"
#include "halo_tile.cuh"

namespace day08 {

namespace {

constexpr int kTileP = 16, kTileQ = 16, kFiltersPerBlock = 8, kThreads = kTileP * kTileQ;

// Thread (tx, ty) owns output pixel (p0 + ty, q0 + tx) of filters k0 .. k0 + 7.
__global__ void __launch_bounds__(kThreads)
    conv2d_smem_tiled_kernel(ConvShape s, int P, int Q, int win_h, int win_w,
                             const float* __restrict__ x, const float* __restrict__ w,
                             const float* __restrict__ bias, float* __restrict__ y) {
  extern __shared__ float smem[];
  float* window = smem;               // win_h x win_w, pitch win_w
  float* wts = smem + win_h * win_w;  // [kFiltersPerBlock][R * S]
  const int groups = gpu100::ceil_div(s.k, kFiltersPerBlock);
  const int n = blockIdx.z / groups, k0 = (blockIdx.z % groups) * kFiltersPerBlock;
  const int p0 = blockIdx.y * kTileP, q0 = blockIdx.x * kTileQ;
  const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * kTileQ + tx;
  const int p = p0 + ty, q = q0 + tx;
  const int rs = s.r * s.s;

  float acc[kFiltersPerBlock];
#pragma unroll
  for (int j = 0; j < kFiltersPerBlock; ++j) acc[j] = 0.f;

  for (int c = 0; c < s.c; ++c) {
    const float* plane = x + (size_t(n) * s.c + c) * s.h * s.w;
    load_halo_tile(window, win_w, plane, s.h, s.w, p0 * s.stride - s.pad, q0 * s.stride - s.pad,
                   win_h, win_w, tid, kThreads);
    for (int i = tid; i < kFiltersPerBlock * rs; i += kThreads) {
      const int j = i / rs, k = k0 + j;
      wts[i] = k < s.k ? w[(size_t(k) * s.c + c) * rs + (i - j * rs)] : 0.f;
    }
    __syncthreads();  // window and weights of channel c are complete
    for (int r = 0; r < s.r; ++r) {
      const float* row = window + (ty * s.stride + r * s.dilation) * win_w + tx * s.stride;
      for (int t = 0; t < s.s; ++t) {
        const float v = row[t * s.dilation];
#pragma unroll
        for (int j = 0; j < kFiltersPerBlock; ++j)
          acc[j] = fmaf(v, wts[j * rs + r * s.s + t], acc[j]);
      }
    }
    __syncthreads();  // everyone is done with channel c before the next load overwrites it
  }
  if (p >= P || q >= Q) return;
#pragma unroll
  for (int j = 0; j < kFiltersPerBlock; ++j) {
    const int k = k0 + j;
    if (k >= s.k) break;
    y[((size_t(n) * s.k + k) * P + p) * Q + q] = acc[j] + (bias != nullptr ? bias[k] : 0.f);
  }
}

}  // namespace

void conv2d_v2_smem_tiled(const ConvShape& s, const float* x, const float* w, const float* bias,
                          float* y, cudaStream_t stream) {
  check_conv_args(s);
  const int P = s.p(), Q = s.q();
  const int win_h = (kTileP - 1) * s.stride + (s.r - 1) * s.dilation + 1;
  const int win_w = (kTileQ - 1) * s.stride + (s.s - 1) * s.dilation + 1;
  const size_t smem =
      sizeof(float) * (size_t(win_h) * win_w + size_t(kFiltersPerBlock) * s.r * s.s);
  constexpr size_t kMaxSmem = 227 * 1024;  // sm_90's opt-in limit per block
  if (smem > kMaxSmem) {
    throw std::invalid_argument("v2_smem_tiled: the input window (" + std::to_string(win_h) +
                                " x " + std::to_string(win_w) +
                                ") does not fit in shared memory; use best_fp32");
  }
  if (smem > 48 * 1024) {
    CUDA_CHECK(cudaFuncSetAttribute(conv2d_smem_tiled_kernel,
                                    cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(smem)));
  }
  const int groups = gpu100::ceil_div(s.k, kFiltersPerBlock);
  if (int64_t(s.n) * groups > 65535) {
    throw std::invalid_argument("v2_smem_tiled: n * ceil(k / 8) exceeds the grid's z limit");
  }
  const dim3 block(kTileQ, kTileP);
  const dim3 grid(gpu100::ceil_div(Q, kTileQ), gpu100::ceil_div(P, kTileP), s.n * groups);
  conv2d_smem_tiled_kernel<<<grid, block, smem, stream>>>(s, P, Q, win_h, win_w, x, w, bias, y);
  CUDA_CHECK_LAST();
}

}  // namespace day08
