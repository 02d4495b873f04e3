// day04 transpose kernels. Each reads M x N floats and writes N x M: 8 bytes per element, no
// arithmetic, so the copy bandwidth is the ceiling. The question is only how the accesses of a
// warp map onto 32-byte sectors. The four variants (t1-t4, 10-25 lines each) sit side by side in
// this one file on purpose: the lesson is the difference between their index expressions.
#include <stdexcept>
#include <string>

#include "common/cuda_check.hpp"
#include "common/math.hpp"
#include "transpose.hpp"

namespace day04 {

namespace {

void check_transpose(const float* in, const float* out, int m, int n) {
  if (m <= 0 || n <= 0) {
    throw std::invalid_argument("transpose: M and N must be positive, got " + std::to_string(m) +
                                " x " + std::to_string(n));
  }
  if (in == nullptr || out == nullptr) throw std::invalid_argument("transpose: null pointer");
}

constexpr int kTile = 32, kRowsPerPass = 8;  // 32 x 8 threads move a 32 x 32 tile in 4 passes

// Tiles along N go in grid.x (up to 2^31 - 1), tiles along M in grid.y (at most 65535).
dim3 tile_grid(int m, int n) {
  if (gpu100::ceil_div(m, kTile) > 65535) {
    throw std::invalid_argument("transpose: M must be at most 65535 x 32 = 2097120");
  }
  return dim3(gpu100::ceil_div(n, kTile), gpu100::ceil_div(m, kTile));
}

}  // namespace

// v1: one OUTPUT row per block. Block r writes out[r][0..M) (coalesced), reading in[0..M)[r]:
// consecutive threads read elements N floats apart, so each 4-byte read touches its own 32-byte
// sector. What saves it: blocks r and r + 1 run at the same time and read neighbouring floats of
// the same sectors, so most of those sectors come from L2, not DRAM.
__global__ void transpose_v1_kernel(const float* __restrict__ in, float* __restrict__ out, int m,
                                    int n) {
  const int r = blockIdx.x;  // output row = input column
  for (int c = threadIdx.x; c < m; c += blockDim.x) out[size_t(r) * m + c] = in[size_t(c) * n + r];
}

void transpose_v1_row_per_block(const float* in, float* out, int m, int n, cudaStream_t stream) {
  check_transpose(in, out, m, n);
  transpose_v1_kernel<<<n, 256, 0, stream>>>(in, out, m, n);
  CUDA_CHECK_LAST();
}

// v2: coalesced reads. A 2D grid of 32 x 8 thread blocks, threadIdx.x along the input's columns:
// a warp reads 128 contiguous bytes, and writes 32 floats M apart, one 32-byte sector each. On the
// H100 this is SLOWER than v1 (see the README): a partial-sector write is more expensive than a
// partial-sector read, since the L2 must merge it with the rest of the sector before DRAM sees it.
// Coalescing one side is not enough; v3 coalesces both.
__global__ void transpose_v2_kernel(const float* __restrict__ in, float* __restrict__ out, int m,
                                    int n) {
  const int col = blockIdx.x * kTile + threadIdx.x;
  for (int i = 0; i < kTile; i += kRowsPerPass) {
    const int row = blockIdx.y * kTile + threadIdx.y + i;
    if (row < m && col < n) out[size_t(col) * m + row] = in[size_t(row) * n + col];
  }
}

void transpose_v2_coalesced_reads(const float* in, float* out, int m, int n, cudaStream_t stream) {
  check_transpose(in, out, m, n);
  transpose_v2_kernel<<<tile_grid(m, n), dim3(kTile, kRowsPerPass), 0, stream>>>(in, out, m, n);
  CUDA_CHECK_LAST();
}

// v3: a shared-memory tile (PMPP, and Harris's "An efficient matrix transpose in CUDA"). The block
// reads a 32 x 32 tile with coalesced rows into shared memory, synchronises, and writes the
// transposed tile with coalesced rows too: every global access is now a full 128-byte line. The
// catch: reading a tile COLUMN from tile[32][32] puts all 32 lanes in the same bank (addresses
// 32 floats apart), a 32-way conflict that serialises the shared reads.
template <int kPad>
__global__ void transpose_tile_kernel(const float* __restrict__ in, float* __restrict__ out, int m,
                                      int n, int ld_out) {
  __shared__ float tile[kTile][kTile + kPad];
  const int bx = blockIdx.x * kTile, by = blockIdx.y * kTile;
  for (int i = 0; i < kTile; i += kRowsPerPass) {  // read rows by..by+31 of the input
    const int row = by + threadIdx.y + i, col = bx + threadIdx.x;
    if (row < m && col < n) tile[threadIdx.y + i][threadIdx.x] = in[size_t(row) * n + col];
  }
  __syncthreads();                                 // the whole tile is in shared memory
  for (int i = 0; i < kTile; i += kRowsPerPass) {  // write rows bx..bx+31 of the output
    const int row = bx + threadIdx.y + i, col = by + threadIdx.x;
    if (row < n && col < m) out[size_t(row) * ld_out + col] = tile[threadIdx.x][threadIdx.y + i];
  }
}

void transpose_v3_smem_tile(const float* in, float* out, int m, int n, cudaStream_t stream) {
  check_transpose(in, out, m, n);
  transpose_tile_kernel<0>
      <<<tile_grid(m, n), dim3(kTile, kRowsPerPass), 0, stream>>>(in, out, m, n, m);
  CUDA_CHECK_LAST();
}

// v4: the same tile padded to 33 columns. Element (r, c) now lives in bank (33 r + c) % 32 =
// (r + c) % 32, so the 32 lanes reading a column hit 32 different banks: conflict-free, for 4
// extra bytes per tile row.
void transpose_v4_padded_tile(const float* in, float* out, int m, int n, cudaStream_t stream) {
  transpose_v4_padded_tile_ld(in, out, m, n, m, stream);
}

void transpose_v4_padded_tile_ld(const float* in, float* out, int m, int n, int ld_out,
                                 cudaStream_t stream) {
  check_transpose(in, out, m, n);
  if (ld_out < m) throw std::invalid_argument("transpose: the output's leading dimension < M");
  transpose_tile_kernel<1>
      <<<tile_grid(m, n), dim3(kTile, kRowsPerPass), 0, stream>>>(in, out, m, n, ld_out);
  CUDA_CHECK_LAST();
}

}  // namespace day04
