// day08 2D single-channel filter (PMPP chapter 7), odd square masks of width R = 2r + 1 <= 7, zero
// padding. Each kernel is a template on R, so the tap loops unroll and the mask indices are
// constants (4 instantiations per variant: R = 1, 3, 5, 7).
// f2_constant_mask: the mask in __constant__ memory (one broadcast per warp per tap).
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

// f2: as f1, the mask from constant memory.
template <int R>
__global__ void filter_constant_kernel(const float* __restrict__ in, int h, int w,
                                       float* __restrict__ out) {
  constexpr int r = R / 2;
  const int col = blockIdx.x * blockDim.x + threadIdx.x,
            row = blockIdx.y * blockDim.y + threadIdx.y;
  if (row >= h || col >= w) return;
  float acc = 0.f;
#pragma unroll
  for (int a = 0; a < R; ++a) {
    const int iy = row + a - r;
    if (iy < 0 || iy >= h) continue;
#pragma unroll
    for (int b = 0; b < R; ++b) {
      const int ix = col + b - r;
      if (ix >= 0 && ix < w) acc = fmaf(in[size_t(iy) * w + ix], c_mask2d[a * R + b], acc);
    }
  }
  out[size_t(row) * w + col] = acc;
}

}  // namespace

void filter2d_f2_constant_mask(const float* x, const float* mask, int h, int w, int mask_width,
                               float* y, cudaStream_t stream) {
  check_filter2d_args(h, w, mask_width);
  upload_mask(mask, mask_width, stream);
  const dim3 block(32, 8), grid(gpu100::ceil_div(w, 32), gpu100::ceil_div(h, 8));
  dispatch_width(mask_width, [&](auto rc) {
    constexpr int R = decltype(rc)::value;
    filter_constant_kernel<R><<<grid, block, 0, stream>>>(x, h, w, y);
  });
  CUDA_CHECK_LAST();
}

}  // namespace day08
