// SGEMM v8: double buffering. In v7 every warp waits at the barrier while the next slab travels
// from global memory, and nothing computes meanwhile. Now shared memory holds two slabs: while the
// warps multiply slab t from one buffer, each thread has already issued the global loads of slab
// t + 1 into registers, and stores them into the other buffer afterwards. The global latency
// (~600 cycles) hides behind BK x TM x TN FMAs per thread, and one barrier per slab suffices.
// The cost: twice the shared memory and 2 x (TM + TN) / 4 more registers for the prefetch.
// Several tile shapes are instantiated for the autotuner (sgemm_autotune.cpp).
#include <cstdio>

#include "common/cuda_check.hpp"
#include "common/math.hpp"
#include "common/occupancy.hpp"
#include "gemm.hpp"
#include "tiles.cuh"

namespace day04 {

// kMinBlocks: blocks per SM to plan registers for (__launch_bounds__' second argument): 2 caps a
// 256-thread block at 128 registers per thread, so two blocks (16 warps) share an SM.
template <int BM, int BN, int BK, int WM, int WN, int kThreads, int kMinBlocks, bool kVec>
__global__ void __launch_bounds__(kThreads, kMinBlocks)
    sgemm_v8_kernel(int m, int n, int k, float alpha, const float* __restrict__ a,
                    const float* __restrict__ b, float beta, float* c) {
  static_assert((BM / WM) * (BN / WN) * 32 == kThreads, "one warp per warp tile");
  constexpr int kAStage = BK * (BM + tiles::kAPad), kBStage = BK * BN;
  extern __shared__ __align__(16) float smem[];  // [A stage 0][A stage 1][B stage 0][B stage 1]
  float* as = smem;
  float* bs = smem + 2 * kAStage;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
  const int wm0 = (warp / (BN / WN)) * WM, wn0 = (warp % (BN / WN)) * WN;

  tiles::ATileLoader<BM, BK, kThreads, kVec> load_a;
  tiles::BTileLoader<BK, BN, kThreads, kVec> load_b;
  tiles::WarpTile<BM, BN, BK, WM, WN> tile;
  tile.zero();

  const int num_slabs = gpu100::ceil_div(k, BK);
  load_a.load(a, m, k, row0, 0, tid);
  load_b.load(b, k, n, 0, col0, tid);
  load_a.store(as, tid);
  load_b.store(bs, tid);
  __syncthreads();
  for (int t = 0; t < num_slabs; ++t) {
    const int cur = t % 2;
    const bool more = t + 1 < num_slabs;
    if (more) {  // issue slab t + 1's global loads now; they land while we compute
      load_a.load(a, m, k, row0, (t + 1) * BK, tid);
      load_b.load(b, k, n, (t + 1) * BK, col0, tid);
    }
    tile.mma(as + cur * kAStage, bs + cur * kBStage, wm0, wn0, lane);
    if (more) {
      // Safe without a barrier before it: buffer cur ^ 1 was last read in iteration t - 1, and
      // every warp passed the barrier at the end of that iteration.
      load_a.store(as + (cur ^ 1) * kAStage, tid);
      load_b.store(bs + (cur ^ 1) * kBStage, tid);
    }
    __syncthreads();  // slab t + 1 is complete, and slab t is no longer read
  }
  tile.template store<kVec>(c, m, n, alpha, beta, row0 + wm0, col0 + wn0, lane);
}

namespace {

// Launches one tile configuration of v8, choosing the 16-byte or the scalar path.
template <int BM, int BN, int BK, int WM, int WN, int kThreads, int kMinBlocks = 1>
void launch_v8(GemmShape s, float alpha, const float* a, const float* b, float beta, float* c,
               cudaStream_t stream) {
  check_gemm_args(s, a, b, c);
  constexpr size_t kSmem = sizeof(float) * 2 * (BK * (BM + tiles::kAPad) + BK * BN);
  static gpu100::PerDevice<bool> attr_set;  // the shared-memory limit, raised on every GPU
  attr_set.get([] {
    CUDA_CHECK(cudaFuncSetAttribute(sgemm_v8_kernel<BM, BN, BK, WM, WN, kThreads, kMinBlocks, true>,
                                    cudaFuncAttributeMaxDynamicSharedMemorySize, int(kSmem)));
    CUDA_CHECK(
        cudaFuncSetAttribute(sgemm_v8_kernel<BM, BN, BK, WM, WN, kThreads, kMinBlocks, false>,
                             cudaFuncAttributeMaxDynamicSharedMemorySize, int(kSmem)));
    return true;
  });
  const dim3 grid(gpu100::ceil_div(s.n, BN), gpu100::ceil_div(s.m, BM));
  if (vector_path_ok(s, a, b, c)) {
    sgemm_v8_kernel<BM, BN, BK, WM, WN, kThreads, kMinBlocks, true>
        <<<grid, kThreads, kSmem, stream>>>(s.m, s.n, s.k, alpha, a, b, beta, c);
  } else {
    sgemm_v8_kernel<BM, BN, BK, WM, WN, kThreads, kMinBlocks, false>
        <<<grid, kThreads, kSmem, stream>>>(s.m, s.n, s.k, alpha, a, b, beta, c);
  }
  CUDA_CHECK_LAST();
}

}  // namespace

void sgemm_v8_double_buffered(GemmShape s, float alpha, const float* a, const float* b, float beta,
                              float* c, cudaStream_t stream) {
  launch_v8<128, 128, 8, 64, 32, 256, 2>(s, alpha, a, b, beta, c, stream);
}

// The configurations the autotuner tries: block tile BM x BN x BK, warp tile WM x WN, threads.
// Larger tiles reuse each loaded element more; smaller ones make more blocks (better for small or
// skinny matrices) and need fewer registers. (128 x 128 x 16 capped at 2 blocks per SM is not
// here: it needs 149 registers, and at 128 ptxas spills to local memory.)
const std::vector<TileConfig>& sgemm_v8_configs() {
  static const std::vector<TileConfig> kConfigs = [] {
    std::vector<TileConfig> v = {
        {"128x128x16 w64x32 256t 1/SM", launch_v8<128, 128, 16, 64, 32, 256, 1>},
        {"128x128x8 w64x32 256t 2/SM", launch_v8<128, 128, 8, 64, 32, 256, 2>},
        {"128x256x8 w64x64 256t", launch_v8<128, 256, 8, 64, 64, 256>},
        {"128x64x16 w64x32 128t", launch_v8<128, 64, 16, 64, 32, 128>},
        {"64x64x16 w32x32 128t", launch_v8<64, 64, 16, 32, 32, 128>},
        // 4 warps of 64 x 64: an 8 x 16 thread tile, 6 shared loads per 128 FMAs.
        {"128x128x8 w64x64 128t", launch_v8<128, 128, 8, 64, 64, 128>},
        {"128x128x16 w64x64 128t", launch_v8<128, 128, 16, 64, 64, 128>},
        {"256x128x8 w64x64 256t", launch_v8<256, 128, 8, 64, 64, 256>},
        {"128x256x16 w64x64 256t", launch_v8<128, 256, 16, 64, 64, 256>},
    };
    // and v8's second form, cp.async into a ring of stages (sgemm_v8_cp_async.cu)
    for (const auto& c : sgemm_v8_cp_async_configs()) v.push_back(c);
    return v;
  }();
  return kConfigs;
}

}  // namespace day04
