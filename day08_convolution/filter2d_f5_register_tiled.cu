// day08 2D single-channel filter (PMPP chapter 7), odd square masks of width R = 2r + 1 <= 7, zero
// padding. Each kernel is a template on R, so the tap loops unroll and the mask indices are
// constants (4 instantiations per variant: R = 1, 3, 5, 7).
// f5_register_tiled: a thread computes 4 x 4 outputs; 128 x 32 tile + halo staged in shared
// memory with float4 loads, read back as float4, float4 stores; the mask in
// registers (no constant-memory upload before the launch). Fewer threads,
// fewer instructions per output, 16-byte memory transactions: the variant
// that is meant to run at the copy ceiling. Widths that are no multiple of 4
// keep the 16-byte accesses by shifting each row into place (kShifted below).
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

// The aligned float4 of the image at element g (g % 4 == 0) into v: one 16-byte load, or element by
// element where it reaches past either end of the image (zeros there).
__device__ __forceinline__ void load4_clipped(const float* __restrict__ in, int64_t g,
                                              int64_t total, float (&v)[4]) {
  if (g >= 0 && g + 4 <= total) {
    const float4 q = __ldg(reinterpret_cast<const float4*>(in + g));
    v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
  } else {
#pragma unroll
    for (int j = 0; j < 4; ++j) v[j] = g + j >= 0 && g + j < total ? __ldg(in + g + j) : 0.f;
  }
}

// kPath (filter2d_register_tile.cuh): kVec4, every aligned float4 of a row is wholly inside or
// wholly outside the image; kShifted, a row starts anywhere inside a float4 (w % 4 != 0), so each
// float4 of the tile is put together from the two aligned float4s of memory it straddles (below),
// the elements outside the image (another row's, or columns < 0 or >= w) as zeros, and the tiles
// overlap by 4 columns (compute_store_tile says why); kScalar, 4-byte loads one element at a time.
// Why kShifted: the 4-byte path issues four times the load and store instructions for the same
// bytes. Its kernel is compiled for 8 blocks per SM (32 registers, as kVec4 has): left to itself
// ptxas took 36 (3x3) to 40 (5x5) registers, 6 blocks per SM, and at 8193 x 8191 that alone cost
// 6 (3x3) to 9 (5x5) points of the copy ceiling on the H100 (the README's "awkward sizes").
template <int R, RowPath kPath>
__device__ __forceinline__ void filter_tile(const float* __restrict__ in,
                                            const float* __restrict__ mask, int h, int w,
                                            float* __restrict__ out) {
  constexpr int r = R / 2, kRows = kF5TileH + 2 * r;
  float m[R * R];
  load_mask_regs<R>(mask, m);
  __shared__ __align__(16) float tile[kRows][kF5Pitch];
  const int tid = threadIdx.y * kF5Tx + threadIdx.x;
  const int y0 = blockIdx.y * kF5TileH, x0 = blockIdx.x * tile_step_x(kPath);

  if constexpr (kPath == RowPath::kShifted) {
    // Tile float4 k of a row holds global elements e0 + 4k .. e0 + 4k + 3, which straddle two
    // aligned float4s of memory when e0 % 4 = s != 0: both are read (the second is the next
    // lane's first, an L1 hit) and the four values picked out in registers, so shared memory
    // still takes one 16-byte store per float4, as in kVec4.
    constexpr int kVecPerRow = kF5Pitch / 4;  // 34
    const int64_t total = int64_t(h) * w;
    for (int i = tid; i < kRows * kVecPerRow; i += kF5Tx * kF5Ty) {
      const int tr = i / kVecPerRow, tc = (i - tr * kVecPerRow) * 4;
      const int gy = y0 - r + tr, gx = x0 - kF5Halo + tc;
      float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
      if (gy >= 0 && gy < h) {
        const int64_t e = int64_t(gy) * w + gx;  // the element of tile column tc
        const int64_t g = e & ~int64_t(3);       // the aligned float4 it lies in
        const int sh = int(e - g);
        float lo[4] = {0.f, 0.f, 0.f, 0.f}, hi[4] = {0.f, 0.f, 0.f, 0.f};
        load4_clipped(in, g, total, lo);
        if (sh != 0) load4_clipped(in, g + 4, total, hi);
        float c[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          // element e + j is lo[sh + j] when sh + j < 4, else hi[sh + j - 4]
          const float a0 = lo[j];
          const float a1 = j + 1 < 4 ? lo[(j + 1) & 3] : hi[(j + 1) & 3];
          const float a2 = j + 2 < 4 ? lo[(j + 2) & 3] : hi[(j + 2) & 3];
          const float a3 = j + 3 < 4 ? lo[(j + 3) & 3] : hi[(j + 3) & 3];
          const float pick = sh == 0 ? a0 : sh == 1 ? a1 : sh == 2 ? a2 : a3;
          c[j] = gx + j >= 0 && gx + j < w ? pick : 0.f;  // zero outside the image's row
        }
        v = make_float4(c[0], c[1], c[2], c[3]);
      }
      *reinterpret_cast<float4*>(&tile[tr][tc]) = v;
    }
  } else {
    // The tile walked as float4s, row-major, 256 threads at a time (coalesced 16-byte loads).
    constexpr int kVecPerRow = kF5Pitch / 4;  // 34
    for (int i = tid; i < kRows * kVecPerRow; i += kF5Tx * kF5Ty) {
      const int tr = i / kVecPerRow, tc = (i - tr * kVecPerRow) * 4;
      const int gy = y0 - r + tr, gx = x0 - kF5Halo + tc;
      float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
      if (gy >= 0 && gy < h) {
        const float* src = in + size_t(gy) * w + gx;
        if constexpr (kPath == RowPath::kVec4) {
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
  }
  __syncthreads();  // the tile and its halo are complete before any thread computes
  compute_store_tile<R, kF5Rows, kPath>(&tile[0][0], m, h, w, y0, x0, out);
}

template <int R, RowPath kPath>
__global__ void __launch_bounds__(kF5Tx* kF5Ty)
    filter_register_tiled_kernel(const float* __restrict__ in, const float* __restrict__ mask,
                                 int h, int w, float* __restrict__ out) {
  filter_tile<R, kPath>(in, mask, h, w, out);
}

// The kShifted kernel, held to the registers of 8 blocks of 256 threads per SM (32) where an SM
// holds 2048 threads; 6 blocks where it holds 1536 (sm_86, sm_87, sm_89), 4 on sm_75 (1024): a
// larger count is refused by ptxas there.
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ == 800 || __CUDA_ARCH__ == 900 || __CUDA_ARCH__ == 1000
constexpr int kShiftedBlocks = 8;
#elif __CUDA_ARCH__ == 750
constexpr int kShiftedBlocks = 4;
#else
constexpr int kShiftedBlocks = 6;
#endif
template <int R>
__global__ void __launch_bounds__(kF5Tx* kF5Ty, kShiftedBlocks)
    filter_shifted_kernel(const float* __restrict__ in, const float* __restrict__ mask, int h,
                          int w, float* __restrict__ out) {
  filter_tile<R, RowPath::kShifted>(in, mask, h, w, out);
}

}  // namespace

void filter2d_f5_register_tiled(const float* x, const float* mask, int h, int w, int mask_width,
                                float* y, cudaStream_t stream) {
  check_filter2d_args(h, w, mask_width);
  const bool aligned =
      reinterpret_cast<uintptr_t>(x) % 16 == 0 && reinterpret_cast<uintptr_t>(y) % 16 == 0;
  const RowPath path = !aligned     ? RowPath::kScalar
                       : w % 4 == 0 ? RowPath::kVec4
                                    : RowPath::kShifted;
  const dim3 block(kF5Tx, kF5Ty),
      grid(gpu100::ceil_div(w, tile_step_x(path)), gpu100::ceil_div(h, kF5TileH));
  dispatch_width(mask_width, [&](auto rc) {
    constexpr int R = decltype(rc)::value;
    if (path == RowPath::kVec4) {
      filter_register_tiled_kernel<R, RowPath::kVec4><<<grid, block, 0, stream>>>(x, mask, h, w, y);
    } else if (path == RowPath::kShifted) {
      filter_shifted_kernel<R><<<grid, block, 0, stream>>>(x, mask, h, w, y);
    } else {
      filter_register_tiled_kernel<R, RowPath::kScalar>
          <<<grid, block, 0, stream>>>(x, mask, h, w, y);
    }
  });
  CUDA_CHECK_LAST();
}

}  // namespace day08
