// SGEMM v3: shared-memory tiling (PMPP chapter 5). The block's 32 x 32 threads first copy a
// 32 x 32 tile of A and one of B into shared memory (one element each, coalesced), synchronise,
// and then every thread reads its 32 products' operands from shared memory. Each global element
// is now read once per block instead of 32 times: arithmetic intensity rises from 1/4 to 8
// FLOP/byte of global traffic. The cost: two barriers per tile, and 2 shared loads per FMA.
#include "common/cuda_check.hpp"
#include "common/math.hpp"
#include "gemm.hpp"

namespace day04 {

namespace {
constexpr int kTile = 32;
}

__global__ void sgemm_v3_kernel(int m, int n, int k, float alpha, const float* a, const float* b,
                                float beta, float* c) {
  __shared__ float as[kTile][kTile];
  __shared__ float bs[kTile][kTile];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int col = blockIdx.x * kTile + tx;
  const int row = blockIdx.y * kTile + ty;
  float sum = 0.f;
  for (int k0 = 0; k0 < k; k0 += kTile) {
    // Thread (ty, tx) loads A[row][k0 + tx] and B[k0 + ty][col]; zeros outside the matrices.
    as[ty][tx] = (row < m && k0 + tx < k) ? a[size_t(row) * k + k0 + tx] : 0.f;
    bs[ty][tx] = (k0 + ty < k && col < n) ? b[size_t(k0 + ty) * n + col] : 0.f;
    __syncthreads();  // the tiles are complete
#pragma unroll
    for (int i = 0; i < kTile; ++i) sum += as[ty][i] * bs[i][tx];
    __syncthreads();  // everyone is done reading before the next tile overwrites them
  }
  if (row < m && col < n) {
    float* out = c + size_t(row) * n + col;
    *out = alpha * sum + (beta != 0.f ? beta * *out : 0.f);
  }
}

void sgemm_v3_smem_tiled(GemmShape s, float alpha, const float* a, const float* b, float beta,
                         float* c, cudaStream_t stream) {
  check_gemm_args(s, a, b, c);
  const dim3 block(kTile, kTile);
  const dim3 grid(gpu100::ceil_div(s.n, kTile), gpu100::ceil_div(s.m, kTile));
  sgemm_v3_kernel<<<grid, block, 0, stream>>>(s.m, s.n, s.k, alpha, a, b, beta, c);
  CUDA_CHECK_LAST();
}

}  // namespace day04
