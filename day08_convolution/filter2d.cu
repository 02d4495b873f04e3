// day08 2D single-channel filter (PMPP chapter 7), odd square masks of width R = 2r + 1 <= 7, zero
// padding. Each kernel is a template on R, so the tap loops unroll and the mask indices are
// constants (4 instantiations per variant: R = 1, 3, 5, 7).
//   f1_naive           one thread per output, mask from global memory.
//   f2_constant_mask   the mask in __constant__ memory (one broadcast per warp per tap).
//   f3_in_tile         PMPP's "IN_TILE" design: 32 x 32 blocks each load one input element of a
//                      tile with its halo; the inner (32 - 2r)^2 threads compute. Input is read
//                      about once per tile, but (1 - (32 - 2r)^2 / 32^2) of the threads idle.
//   f4_cached_halo     PMPP's L1-cached halo: a 32 x 32 block loads only its own tile, every
//                      thread computes, and the halo taps read global memory (mostly L1 hits).
//   f5_register_tiled  a thread computes 4 x 8 outputs; 128 x 64 tile + halo staged in shared
//                      memory with float4 loads, read back as float4, float4 stores; the mask in
//                      registers (no constant-memory upload before the launch). Fewer threads,
//                      fewer instructions per output, 16-byte memory transactions: the variant
//                      that is meant to run at the copy ceiling.
#include <cstdint>
#include <type_traits>

#include "common/cuda_check.hpp"
#include "common/math.hpp"
#include "conv_day.hpp"

namespace day08 {

namespace {

__constant__ float c_mask2d[kMaxFilter2d * kMaxFilter2d];

// f1: thread (x, y) computes y[y][x] from R * R global loads of x and R * R of the mask.
template <int R>
__global__ void filter_naive_kernel(const float* __restrict__ in, const float* __restrict__ mask,
                                    int h, int w, float* __restrict__ out) {
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
      if (ix >= 0 && ix < w) acc = fmaf(in[size_t(iy) * w + ix], mask[a * R + b], acc);
    }
  }
  out[size_t(row) * w + col] = acc;
}

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

// f5 tiling: 32 x 8 threads, each 4 columns x 8 rows: a 128 x 64 output tile per block. The
// shared tile holds rows [y0 - r, y0 + 64 + r) and columns [x0 - 4, x0 + 132): a 4-column halo on
// each side (enough for r <= 4, and it keeps every float4 16-byte aligned).
constexpr int kF5Tx = 32, kF5Ty = 8, kF5Cols = 4, kF5Rows = 8;
constexpr int kF5TileW = kF5Tx * kF5Cols, kF5TileH = kF5Ty * kF5Rows;  // 128 x 64
constexpr int kF5Halo = 4, kF5Pitch = kF5TileW + 2 * kF5Halo;          // 136 floats

// kVec: w % 4 == 0 (and 16-byte aligned pointers), so every aligned float4 of a row is wholly
// inside or wholly outside the image.
template <int R, bool kVec>
__global__ void __launch_bounds__(kF5Tx* kF5Ty)
    filter_register_tiled_kernel(const float* __restrict__ in, const float* __restrict__ mask,
                                 int h, int w, float* __restrict__ out) {
  constexpr int r = R / 2, kRows = kF5TileH + 2 * r;
  // The mask goes to registers once per thread (every lane loads the same address: one broadcast
  // per load), so the launch needs no constant-memory upload before it: one kernel, nothing else.
  float m[R * R];
#pragma unroll
  for (int i = 0; i < R * R; ++i) m[i] = __ldg(mask + i);
  static_assert(r <= kF5Halo, "the column halo must cover the mask radius");
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

  // Compute: thread (tx, ty) owns columns x0 + 4tx .. +3 and rows y0 + 8ty .. +7. It walks the
  // 8 + 2r input rows it needs once; each row is 3 float4 reads of shared memory (a warp reads
  // 512 contiguous bytes: no bank conflicts) and feeds every output row it touches.
  const int tx = threadIdx.x, ty = threadIdx.y;
  float acc[kF5Rows][kF5Cols];
#pragma unroll
  for (int o = 0; o < kF5Rows; ++o)
#pragma unroll
    for (int j = 0; j < kF5Cols; ++j) acc[o][j] = 0.f;
#pragma unroll
  for (int i = 0; i < kF5Rows + 2 * r; ++i) {
    float win[12];
    const float* src = &tile[ty * kF5Rows + i][tx * kF5Cols];
#pragma unroll
    for (int v = 0; v < 3; ++v) {
      const float4 q = *reinterpret_cast<const float4*>(src + 4 * v);
      win[4 * v] = q.x, win[4 * v + 1] = q.y, win[4 * v + 2] = q.z, win[4 * v + 3] = q.w;
    }
#pragma unroll
    for (int o = 0; o < kF5Rows; ++o) {
      const int a = i - o;  // the mask row that input row i meets for output row o
      if (a < 0 || a >= R) continue;
#pragma unroll
      for (int j = 0; j < kF5Cols; ++j)
#pragma unroll
        for (int b = 0; b < R; ++b)
          acc[o][j] = fmaf(win[kF5Halo + j + b - r], m[a * R + b], acc[o][j]);
    }
  }
#pragma unroll
  for (int o = 0; o < kF5Rows; ++o) {
    const int gy = y0 + ty * kF5Rows + o, gx = x0 + tx * kF5Cols;
    if (gy >= h) break;
    float* dst = out + size_t(gy) * w + gx;
    if (kVec && gx < w) {
      *reinterpret_cast<float4*>(dst) = make_float4(acc[o][0], acc[o][1], acc[o][2], acc[o][3]);
    } else {
#pragma unroll
      for (int j = 0; j < kF5Cols; ++j)
        if (gx + j < w) dst[j] = acc[o][j];
    }
  }
}

void upload_mask(const float* mask, int width, cudaStream_t stream) {
  CUDA_CHECK(cudaMemcpyToSymbolAsync(c_mask2d, mask, sizeof(float) * width * width, 0,
                                     cudaMemcpyDeviceToDevice, stream));
}

// Calls f(std::integral_constant<int, R>{}) for the runtime mask width (1, 3, 5 or 7; checked
// before), so each launcher names its kernel once.
template <typename F>
void dispatch_width(int mask_width, F&& f) {
  switch (mask_width) {
    case 1:
      f(std::integral_constant<int, 1>{});
      break;
    case 3:
      f(std::integral_constant<int, 3>{});
      break;
    case 5:
      f(std::integral_constant<int, 5>{});
      break;
    default:
      f(std::integral_constant<int, 7>{});
      break;
  }
}

}  // namespace

void filter2d_f1_naive(const float* x, const float* mask, int h, int w, int mask_width, float* y,
                       cudaStream_t stream) {
  check_filter2d_args(h, w, mask_width);
  const dim3 block(32, 8), grid(gpu100::ceil_div(w, 32), gpu100::ceil_div(h, 8));
  dispatch_width(mask_width, [&](auto rc) {
    constexpr int R = decltype(rc)::value;
    filter_naive_kernel<R><<<grid, block, 0, stream>>>(x, mask, h, w, y);
  });
  CUDA_CHECK_LAST();
}

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
