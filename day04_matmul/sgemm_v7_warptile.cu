// SGEMM v7: warp tiling. v6 gave each thread an 8 x 8 block of C chosen by thread index alone.
// Now the 128 x 128 block tile is split first into 8 warp tiles of 64 x 32, and each warp's 32
// lanes form an 8 x 4 grid whose 4 x 4 sub-tiles interleave across the warp tile (tiles.cuh).
// Lanes that read the same A float4 (or B float4) broadcast it, and the 8 lanes of each
// shared-memory phase hit distinct banks: v6's 2-way bank conflicts are gone. BK grows to 16 to
// halve the barriers per FMA. The pieces (loaders, warp tile) live in tiles.cuh for reuse.
// (Warp tiling as in CUTLASS and siboehm's SGEMM_CUDA kernel 10.)
#include "common/cuda_check.hpp"
#include "common/math.hpp"
#include "gemm.hpp"
#include "tiles.cuh"

namespace day04 {

template <int BM, int BN, int BK, int WM, int WN, int kThreads, bool kVec>
__global__ void __launch_bounds__(kThreads)
    sgemm_v7_kernel(int m, int n, int k, float alpha, const float* __restrict__ a,
                    const float* __restrict__ b, float beta, float* c) {
  static_assert((BM / WM) * (BN / WN) * 32 == kThreads, "one warp per warp tile");
  __shared__ __align__(16) float as[BK * (BM + tiles::kAPad)];
  __shared__ __align__(16) float bs[BK * BN];
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
  const int wm0 = (warp / (BN / WN)) * WM, wn0 = (warp % (BN / WN)) * WN;

  tiles::ATileLoader<BM, BK, kThreads, kVec> load_a;
  tiles::BTileLoader<BK, BN, kThreads, kVec> load_b;
  tiles::WarpTile<BM, BN, BK, WM, WN> tile;
  tile.zero();
  for (int k0 = 0; k0 < k; k0 += BK) {
    load_a.load(a, m, k, row0, k0, tid);
    load_b.load(b, k, n, k0, col0, tid);
    load_a.store(as, tid);
    load_b.store(bs, tid);
    __syncthreads();  // tiles complete
    tile.mma(as, bs, wm0, wn0, lane);
    __syncthreads();  // all warps done reading before the next slab overwrites the tiles
  }
  tile.template store<kVec>(c, m, n, alpha, beta, row0 + wm0, col0 + wn0, lane);
}

void sgemm_v7_warptile(GemmShape s, float alpha, const float* a, const float* b, float beta,
                       float* c, cudaStream_t stream) {
  check_gemm_args(s, a, b, c);
  constexpr int BM = 128, BN = 128, BK = 16, WM = 64, WN = 32, kThreads = 256;
  const dim3 grid(gpu100::ceil_div(s.n, BN), gpu100::ceil_div(s.m, BM));
  if (vector_path_ok(s, a, b, c)) {
    sgemm_v7_kernel<BM, BN, BK, WM, WN, kThreads, true>
        <<<grid, kThreads, 0, stream>>>(s.m, s.n, s.k, alpha, a, b, beta, c);
  } else {
    sgemm_v7_kernel<BM, BN, BK, WM, WN, kThreads, false>
        <<<grid, kThreads, 0, stream>>>(s.m, s.n, s.k, alpha, a, b, beta, c);
  }
  CUDA_CHECK_LAST();
}

}  // namespace day04
