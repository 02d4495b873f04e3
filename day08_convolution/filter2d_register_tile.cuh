#pragma once
// The register tiles f5 and f6 share (day08's 2D filters): the tiling, the mask held in registers,
// and the compute + store phase of one output tile whose input window is in shared memory.
#include <cuda_runtime.h>

#include <cstdint>

#include "realign.cuh"

namespace day08::filter2d_detail {

// f5 / f6 tiling: 32 x 8 threads, each 4 columns x RPT rows: a 128 x (8 RPT) output tile per
// block. The shared tile holds rows [y0 - r, y0 + 8 RPT + r) and columns [x0 - 4, x0 + 132): a
// 4-column halo on each side (enough for r <= 4, and it keeps every float4 16-byte aligned).
// Rows per thread, measured on the H100 at 8192^2 (RPT 4, 8, 16): f5 wants short tiles (4 rows,
// 32 registers, 8 blocks per SM: its blocks take turns loading and computing, so more of them
// keep more loads in flight); f6 wants tall ones (16 rows: less halo re-read per output, and a
// compute phase long enough to hide the next tile's copies).
inline constexpr int kF5Tx = 32, kF5Ty = 8, kF5Cols = 4, kF5Rows = 4, kF6Rows = 16;
inline constexpr int kF5TileW = kF5Tx * kF5Cols;                              // 128 columns
inline constexpr int kF5TileH = kF5Ty * kF5Rows, kF6TileH = kF5Ty * kF6Rows;  // 32 and 128 rows
inline constexpr int kF5Halo = 4, kF5Pitch = kF5TileW + 2 * kF5Halo;          // 136 floats

// Every f5 / f6 thread loads the R x R mask once: every lane reads the same address (one
// broadcast per load), and ptxas keeps the values in uniform registers (in the SASS of f5 at 8 rows
// per thread, every FFMA reads the mask as a UR operand), so the launch needs no constant-memory
// upload before it.
template <int R>
__device__ __forceinline__ void load_mask_regs(const float* __restrict__ mask, float (&m)[R * R]) {
#pragma unroll
  for (int i = 0; i < R * R; ++i) m[i] = __ldg(mask + i);
}

// How a tile reaches global memory and shared memory, chosen by the launcher:
//   kVec4:   w % 4 == 0 and 16-byte aligned pointers: every row starts on a float4, so each float4
//            of a row is wholly inside or outside the image (16-byte loads and stores);
//   kShifted: any w, 16-byte aligned pointers: a row starts anywhere inside a float4 of memory,
//            so rows are still read and written as aligned float4s, shifted into place (below);
//   kScalar: a pointer that is not 16-byte aligned: 4-byte accesses, one element at a time.
enum class RowPath { kVec4, kShifted, kScalar };

// The columns from one f5 tile to the next: kShifted's tiles overlap by 4 columns (below).
__host__ __device__ constexpr int tile_step_x(RowPath path) {
  return path == RowPath::kShifted ? kF5TileW - kF5Cols : kF5TileW;
}

// The compute + store phase shared by f5 and f6, for the output tile at (y0, x0) whose input
// window (rows [y0 - r, y0 + 8 RPT + r), columns [x0 - 4, x0 + 132), zero outside the image) is in
// shared memory at `tile` (row pitch kF5Pitch). Thread (tx, ty) owns columns x0 + 4tx .. +3 and
// rows y0 + RPT ty .. + RPT - 1. It walks the RPT + 2r input rows it needs once; each row is 3
// float4 reads of shared memory (a warp reads 512 contiguous bytes: no bank conflicts) and feeds
// every output row it touches. kPath: how the rows are stored (RowPath above).
//
// kShifted: the warp's 128 columns of a row start s = (gy w + x0) % 4 floats past a 16-byte
// boundary (the same for the whole warp). Lane L stores the aligned float4 that starts inside its
// own 4 columns, at column x0 + 4L + c with c = (4 - s) % 4: its own last 4 - c values and the
// next lane's first c (shuffles). Lane 31's float4 would reach past the tile, so it stores none:
// tiles start every 124 columns (tile_step_x), and lane 31's 4 columns are the next tile's first 4,
// which that tile stores. So every aligned float4 belongs to exactly one tile and goes out as one
// 16-byte store; only the float4s that cross a row's end (the image's, not a tile's) go out element
// by element, from the last tile of the row and lane 0 of the first. The cost: 4 of every 128
// columns computed twice (3%). (A first version stored whole tiles of 128 columns, with each tile's
// two ragged ends element by element: lanes 0 and 31 of every warp took that path, every row.)
template <int R, int RPT, RowPath kPath>
__device__ __forceinline__ void compute_store_tile(const float* tile, const float (&m)[R * R],
                                                   int h, int w, int y0, int x0,
                                                   float* __restrict__ out) {
  constexpr int r = R / 2;
  static_assert(r <= kF5Halo, "the column halo must cover the mask radius");
  const int tx = threadIdx.x, ty = threadIdx.y;
  float acc[RPT][kF5Cols];
#pragma unroll
  for (int o = 0; o < RPT; ++o)
#pragma unroll
    for (int j = 0; j < kF5Cols; ++j) acc[o][j] = 0.f;
#pragma unroll
  for (int i = 0; i < RPT + 2 * r; ++i) {
    float win[12];
    const float* src = tile + (ty * RPT + i) * kF5Pitch + tx * kF5Cols;
#pragma unroll
    for (int v = 0; v < 3; ++v) {
      const float4 q = *reinterpret_cast<const float4*>(src + 4 * v);
      win[4 * v] = q.x, win[4 * v + 1] = q.y, win[4 * v + 2] = q.z, win[4 * v + 3] = q.w;
    }
#pragma unroll
    for (int o = 0; o < RPT; ++o) {
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
  for (int o = 0; o < RPT; ++o) {
    const int gy = y0 + ty * RPT + o, gx = x0 + tx * kF5Cols;
    if (gy >= h) break;  // the same for the whole warp (one ty)
    float* dst = out + size_t(gy) * w + gx;
    if constexpr (kPath == RowPath::kShifted) {
      const float own[4] = {acc[o][0], acc[o][1], acc[o][2], acc[o][3]};
      const int s = int((int64_t(gy) * w + x0) & 3);
      float4 v;
      int c;
      realign_next(own, s, v, c);  // realign.cuh
      const int col = gx + c;      // the float4's first column, 16-byte aligned in memory
      float* row = out + size_t(gy) * w;
      if (tx < kF5Tx - 1 && col + 3 < w) {
        *reinterpret_cast<float4*>(row + col) = v;
      } else if (tx < kF5Tx - 1 && col < w) {  // the float4 crosses the row's end
        const float vs[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int j = 0; j < 4; ++j)
          if (col + j < w) row[col + j] = vs[j];
      }
      if (x0 == 0 && tx == 0) {  // the row's first c columns: their float4 starts in the row above
#pragma unroll
        for (int j = 0; j < 3; ++j)
          if (j < c && j < w) row[j] = own[j];
      }
    } else if (kPath == RowPath::kVec4 && gx < w) {
      *reinterpret_cast<float4*>(dst) = make_float4(acc[o][0], acc[o][1], acc[o][2], acc[o][3]);
    } else {
#pragma unroll
      for (int j = 0; j < kF5Cols; ++j)
        if (gx + j < w) dst[j] = acc[o][j];
    }
  }
}

}  // namespace day08::filter2d_detail
