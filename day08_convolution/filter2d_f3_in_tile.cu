// day08 2D single-channel filter (PMPP chapter 7), odd square masks of width R = 2r + 1 <= 7, zero
// padding. Each kernel is a template on R, so the tap loops unroll and the mask indices are
// constants (4 instantiations per variant: R = 1, 3, 5, 7).
// f3_in_tile: PMPP's "IN_TILE" design: 32 x 32 blocks each load one input element of a
// tile with its halo; the inner (32 - 2r)^2 threads compute. Input is read
// about once per tile, but (1 - (32 - 2r)^2 / 32^2) of the threads idle.
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

constexpr int kInTile = 32;

// f3: block = kInTile x kInTile threads = one input tile; its output tile is the inner
// (kInTile - 2r)^2. Thread (tx, ty) loads input (oy0 + ty - r, ox0 + tx - r), 0 outside the
// image; after the barrier, the threads whose position is inside the output tile compute.
template <int R>
__global__ void filter_in_tile_kernel(const float* __restrict__ in, int h, int w,
                                      float* __restrict__ out) {
  constexpr int r = R / 2, kOutTile = kInTile - 2 * r;
  __shared__ float tile[kInTile][kInTile + 1];  // +1: no bank conflicts between rows
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int iy = blockIdx.y * kOutTile + ty - r, ix = blockIdx.x * kOutTile + tx - r;
  tile[ty][tx] = (iy >= 0 && iy < h && ix >= 0 && ix < w) ? in[size_t(iy) * w + ix] : 0.f;
  __syncthreads();  // the whole input tile is in shared memory before anyone reads a neighbour
  const int oy = ty - r, ox = tx - r;
  if (oy < 0 || oy >= kOutTile || ox < 0 || ox >= kOutTile) return;  // a halo-only thread
  if (iy >= h || ix >= w) return;
  float acc = 0.f;
#pragma unroll
  for (int a = 0; a < R; ++a)
#pragma unroll
    for (int b = 0; b < R; ++b) acc = fmaf(tile[oy + a][ox + b], c_mask2d[a * R + b], acc);
  out[size_t(iy) * w + ix] = acc;
}

}  // namespace

void filter2d_f3_in_tile(const float* x, const float* mask, int h, int w, int mask_width, float* y,
                         cudaStream_t stream) {
  check_filter2d_args(h, w, mask_width);
  upload_mask(mask, mask_width, stream);
  const int out_tile = kInTile - 2 * (mask_width / 2);
  const dim3 block(kInTile, kInTile),
      grid(gpu100::ceil_div(w, out_tile), gpu100::ceil_div(h, out_tile));
  dispatch_width(mask_width, [&](auto rc) {
    constexpr int R = decltype(rc)::value;
    filter_in_tile_kernel<R><<<grid, block, 0, stream>>>(x, h, w, y);
  });
  CUDA_CHECK_LAST();
}

}  // namespace day08
