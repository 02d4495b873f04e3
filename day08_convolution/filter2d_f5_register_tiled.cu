// day08 2D single-channel filter (PMPP chapter 7), odd square masks of width R = 2r + 1 <= 7, zero
// padding. Each kernel is a template on R, so the tap loops unroll and the mask indices are
// constants (4 instantiations per variant: R = 1, 3, 5, 7).
// f5_register_tiled: a thread computes 4 x 4 outputs; 128 x 32 tile + halo staged in shared
// memory with float4 loads, read back as float4, float4 stores; the mask in
// registers (no constant-memory upload before the launch). Fewer threads,
// fewer instructions per output, 16-byte memory transactions: the variant
// that is meant to run at the copy ceiling.
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "common/cuda_check.hpp"
#include "common/math.hpp"
#include "conv_day.hpp"
#include "filter2d.cuh"
#include "filter2d_register_tile.cuh"

namespace day08 {

using namespace filter2d_detail;

namespace {

// kVec: w % 4 == 0 (and 16-byte aligned pointers), so every aligned float4 of a row is wholly
// inside or wholly outside the image.
template <int R, bool kVec>
__global__ void __launch_bounds__(kF5Tx* kF5Ty)
    filter_register_tiled_kernel(const float* __restrict__ in, const float* __restrict__ mask,
                                 int h, int w, float* __restrict__ out) {
  constexpr int r = R / 2, kRows = kF5TileH + 2 * r;
  float m[R * R];
  load_mask_regs<R>(mask, m);
  __shared__ __align__(16) float tile[kRows][kF5Pitch];
  const int tid = threadIdx.y * kF5Tx + threadIdx.x;
  const int y0 = blockIdx.y * kF5TileH, x0 = blockIdx.x * kF5TileW;

  // Load: the tile walked as float4s, row-major, 256 threads at a time (coalesced 16-byte loads).
  constexpr int kVecPerRow = kF5Pitch / 4;  // 34
  for (int i = tid; i < kRows * kVecPerRow; i += kF5Tx * kF5Ty) {
    const int tr = i / kVecPerRow, tc = (i - tr * kVecPerRow) * 4;
    const int gy = y0 - r + tr, gx = x0 - kF5Halo + tc;
    float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
    if (gy >= 0 && gy < h) {
      const float* src = in + size_t(gy) * w + gx;
      if constexpr (kVec) {
        if (gx >= 0 && gx < w) v = __ldg(reinterpret_cast<const float4*>(src));
      } else {
        if (gx >= 0 && gx < w) v.x = __ldg(src);
        if (gx + 1 >= 0 && gx + 1 < w) v.y = __ldg(src + 1);
        if (gx + 2 >= 0 && gx + 2 < w) v.z = __ldg(src + 2);
        if (gx + 3 >= 0 && gx + 3 < w) v.w = __ldg(src + 3);
      }
    }
    *reinterpret_cast<float4*>(&tile[tr][tc]) = v;
  }
  __syncthreads();  // the tile and its halo are complete before any thread computes
  compute_store_tile<R, kF5Rows, kVec>(&tile[0][0], m, h, w, y0, x0, out);
}

}  // namespace

void filter2d_f5_register_tiled(const float* x, const float* mask, int h, int w, int mask_width,
                                float* y, cudaStream_t stream) {
  check_filter2d_args(h, w, mask_width);
  const bool vec = w % 4 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0 &&
                   reinterpret_cast<uintptr_t>(y) % 16 == 0;
  const dim3 block(kF5Tx, kF5Ty),
      grid(gpu100::ceil_div(w, kF5TileW), gpu100::ceil_div(h, kF5TileH));
  dispatch_width(mask_width, [&](auto rc) {
    constexpr int R = decltype(rc)::value;
    if (vec) {
      filter_register_tiled_kernel<R, true><<<grid, block, 0, stream>>>(x, mask, h, w, y);
    } else {
      filter_register_tiled_kernel<R, false><<<grid, block, 0, stream>>>(x, mask, h, w, y);
    }
  });
  CUDA_CHECK_LAST();
}

}  // namespace day08
