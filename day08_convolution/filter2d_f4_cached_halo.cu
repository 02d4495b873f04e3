// day08 2D single-channel filter (PMPP chapter 7), odd square masks of width R = 2r + 1 <= 7, zero
// padding. Each kernel is a template on R, so the tap loops unroll and the mask indices are
// constants (4 instantiations per variant: R = 1, 3, 5, 7).
// f4_cached_halo: PMPP's L1-cached halo: a 32 x 32 block loads only its own tile, every
// thread computes, and the halo taps read global memory (mostly L1 hits).
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "common/cuda_check.hpp"
#include "common/math.hpp"
#include "conv_day.hpp"
#include "filter2d.cuh"
#include "filter2d_constant_mask.cuh"

namespace day08 {

using namespace filter2d_detail;

namespace {

constexpr int kCachedTile = 32;

// f4: block = output tile = kCachedTile^2 threads. Each thread loads its own input element into
// shared memory; after the barrier, taps that fall inside the tile read shared memory, and taps in
// the halo read global memory, where the neighbouring blocks' loads have usually left them in L1.
template <int R>
__global__ void filter_cached_halo_kernel(const float* __restrict__ in, int h, int w,
                                          float* __restrict__ out) {
  constexpr int r = R / 2;
  __shared__ float tile[kCachedTile][kCachedTile + 1];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int y0 = blockIdx.y * kCachedTile, x0 = blockIdx.x * kCachedTile;
  const int row = y0 + ty, col = x0 + tx;
  tile[ty][tx] = (row < h && col < w) ? in[size_t(row) * w + col] : 0.f;
  __syncthreads();  // the tile is complete before the taps read it
  if (row >= h || col >= w) return;
  float acc = 0.f;
#pragma unroll
  for (int a = 0; a < R; ++a) {
    const int ty2 = ty + a - r, iy = row + a - r;
#pragma unroll
    for (int b = 0; b < R; ++b) {
      const int tx2 = tx + b - r, ix = col + b - r;
      float v;
      if (ty2 >= 0 && ty2 < kCachedTile && tx2 >= 0 && tx2 < kCachedTile) {
        v = tile[ty2][tx2];  // inside the block's tile (0 there if outside the image)
      } else {
        v = (iy >= 0 && iy < h && ix >= 0 && ix < w) ? __ldg(in + size_t(iy) * w + ix) : 0.f;
      }
      acc = fmaf(v, c_mask2d[a * R + b], acc);
    }
  }
  out[size_t(row) * w + col] = acc;
}

}  // namespace

void filter2d_f4_cached_halo(const float* x, const float* mask, int h, int w, int mask_width,
                             float* y, cudaStream_t stream) {
  check_filter2d_args(h, w, mask_width);
  upload_mask(mask, mask_width, stream);
  const dim3 block(kCachedTile, kCachedTile),
      grid(gpu100::ceil_div(w, kCachedTile), gpu100::ceil_div(h, kCachedTile));
  dispatch_width(mask_width, [&](auto rc) {
    constexpr int R = decltype(rc)::value;
    filter_cached_halo_kernel<R><<<grid, block, 0, stream>>>(x, h, w, y);
  });
  CUDA_CHECK_LAST();
}

}  // namespace day08
