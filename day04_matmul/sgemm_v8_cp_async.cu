// SGEMM v8_cp_async: v8's idea (the next slab travels while this one is multiplied) without v8's
// price. v8 stages the next slab in registers, which costs 2 x (TM + TN) / 4 registers and, at the
// 128 x 128 tile, one of the two blocks per SM. Here cp.async copies global memory straight into a
// ring of kStages shared-memory stages: no register holds the slab on its way, the warps issue
// their copies and go on multiplying, and one barrier per slab remains (v7 has two, with the
// global-load latency exposed between them). cp.async cannot transpose, and the warp tile reads A
// k-major (As[k][m], tiles.cuh), so A is first transposed into a K x M scratch buffer by day04's
// padded-tile transpose (t4); its time is part of this variant's time (about 1% at 4096^3).
// The multiply itself is v7's WarpTile, unchanged: the results stay bit-identical to cuBLAS.
// Shapes whose rows are not 16-byte multiples keep the cp.async pipeline (they had gone to v7,
// with its register staging and exposed load latency): A^T's rows are padded to a multiple of 4
// floats (the transpose writes them with that pitch, the pad zeroed), so A is always read in
// 16-byte copies whatever M and K; a B whose rows are no multiple of 16 bytes (N % 4 != 0, or a
// misaligned pointer) is read in 4-byte cp.async copies, 4 per 16-byte chunk (8 per thread per
// slab at 128 x 128 x 8, against 512 FMAs), and C is then stored element by element.
#include <stdexcept>

#include "common/cuda_check.hpp"
#include "common/device_buffer.hpp"
#include "common/math.hpp"
#include "common/occupancy.hpp"
#include "gemm.hpp"
#include "mma.cuh"
#include "tiles.cuh"
#include "transpose.hpp"

namespace day04 {

namespace {

// Starts the copy of rows [r0, r0 + kRows) x columns [c0, c0 + kCols) of a row-major matrix of
// rows x cols floats into shared memory with row pitch kPitch, one 16-byte cp.async per 4 floats
// (cols % 4 == 0 and a 16-byte aligned matrix: a chunk is wholly inside or wholly outside);
// chunks outside the matrix are zero-filled.
// kVec = false: any cols and alignment; each chunk is four 4-byte copies, each zero-filled on its
// own past the matrix.
template <int kRows, int kCols, int kPitch, int kThreads, bool kVec = true>
__device__ __forceinline__ void copy_tile_async(float* dst, const float* __restrict__ src, int rows,
                                                int cols, int r0, int c0, int tid) {
  constexpr int kChunks = kRows * kCols / 4;
  static_assert(kChunks % kThreads == 0, "the tile must split evenly into 16-byte chunks");
#pragma unroll
  for (int i = 0; i < kChunks / kThreads; ++i) {
    const int f = tid + i * kThreads, r = f / (kCols / 4), c = (f % (kCols / 4)) * 4;
    if constexpr (kVec) {
      const bool ok = r0 + r < rows && c0 + c < cols;
      mma::cp_async_16(dst + r * kPitch + c, ok ? src + size_t(r0 + r) * cols + c0 + c : src, ok);
    } else {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const bool ok = r0 + r < rows && c0 + c + e < cols;
        mma::cp_async_4(dst + r * kPitch + c + e,
                        ok ? src + size_t(r0 + r) * cols + c0 + c + e : src, ok);
      }
    }
  }
}

// kMinBlocks: blocks per SM to plan registers for (2 caps a 256-thread block at 128 registers).
// ldat: A^T's row pitch (M rounded up to 4, the pad zeroed). kVecB: B's rows and C are 16-byte
// multiples and aligned (N % 4 == 0).
template <int BM, int BN, int BK, int WM, int WN, int kThreads, int kStages, int kMinBlocks,
          bool kVecB, bool kBatched = false>
__global__ void __launch_bounds__(kThreads, kMinBlocks)
    sgemm_v8_cp_async_kernel(int m, int n, int k, int ldat, float alpha,
                             const float* __restrict__ at, const float* __restrict__ b, float beta,
                             float* c, SgemmBatch batch) {
  if constexpr (kBatched) {  // blockIdx.z picks the batch's GEMM
    at += blockIdx.z * batch.stride_at;
    b += blockIdx.z * batch.stride_b;
    c += blockIdx.z * batch.stride_c;
  }
  static_assert((BM / WM) * (BN / WN) * 32 == kThreads, "one warp per warp tile");
  static_assert(kStages >= 2, "at least two stages");
  constexpr int kAStage = BK * (BM + tiles::kAPad), kBStage = BK * BN;
  extern __shared__ __align__(16) float smem[];  // kStages x [As (BK x BM+pad)][Bs (BK x BN)]
  auto a_stage = [&](int st) { return smem + st * (kAStage + kBStage); };
  auto b_stage = [&](int st) { return smem + st * (kAStage + kBStage) + kAStage; };
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
  const int wm0 = (warp / (BN / WN)) * WM, wn0 = (warp % (BN / WN)) * WN;
  const int num_slabs = gpu100::ceil_div(k, BK);

  // Slab t: rows t BK .. of A^T (K x M) and of B (K x N), the block's BM and BN columns.
  auto load_slab = [&](int st, int t) {
    copy_tile_async<BK, BM, BM + tiles::kAPad, kThreads>(a_stage(st), at, k, ldat, t * BK, row0,
                                                         tid);
    copy_tile_async<BK, BN, BN, kThreads, kVecB>(b_stage(st), b, k, n, t * BK, col0, tid);
  };
  // Prologue: slabs 0 .. kStages - 2, one commit group each (empty groups keep the count).
#pragma unroll
  for (int st = 0; st < kStages - 1; ++st) {
    if (st < num_slabs) load_slab(st, st);
    mma::cp_async_commit();
  }

  tiles::WarpTile<BM, BN, BK, WM, WN> tile;
  tile.zero();
  for (int t = 0; t < num_slabs; ++t) {
    mma::cp_async_wait<kStages - 2>();  // this thread's copies of slab t have landed...
    __syncthreads();  // ...everyone's; and every warp has finished with slab t - 1's stage
    const int next = t + kStages - 1;
    if (next < num_slabs) load_slab(next % kStages, next);  // into slab t - 1's stage
    mma::cp_async_commit();
    tile.mma(a_stage(t % kStages), b_stage(t % kStages), wm0, wn0, lane);
  }
  mma::cp_async_wait<0>();  // no copy may be in flight when the block exits
  tile.template store<kVecB>(c, m, n, alpha, beta, row0 + wm0, col0 + wn0, lane);
}

}  // namespace

namespace {

template <int BM, int BN, int BK, int WM, int WN, int kThreads, int kStages, int kMinBlocks = 2>
void launch_v8_cp_async(GemmShape s, float alpha, const float* a, const float* b, float beta,
                        float* c, cudaStream_t stream) {
  check_gemm_args(s, a, b, c);
  const bool vec_b = s.n % 4 == 0 && gpu100::aligned16(b) && gpu100::aligned16(c);
  constexpr size_t kSmemBytes = sizeof(float) * kStages * (BK * (BM + tiles::kAPad) + BK * BN);
  auto kernel =
      vec_b ? sgemm_v8_cp_async_kernel<BM, BN, BK, WM, WN, kThreads, kStages, kMinBlocks, true>
            : sgemm_v8_cp_async_kernel<BM, BN, BK, WM, WN, kThreads, kStages, kMinBlocks, false>;
  static gpu100::PerDevice<bool> configured;  // per GPU: set on each it runs on
  configured.get([] {
    for (auto* kern :
         {sgemm_v8_cp_async_kernel<BM, BN, BK, WM, WN, kThreads, kStages, kMinBlocks, true>,
          sgemm_v8_cp_async_kernel<BM, BN, BK, WM, WN, kThreads, kStages, kMinBlocks, false>}) {
      CUDA_CHECK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(kSmemBytes)));
    }
    return true;
  });
  // A (M x K) -> A^T (K x ldat, ldat = M rounded up to 4) in a scratch buffer that lives as long
  // as the thread and only grows, so the timed runs allocate nothing. The pad columns are zeroed
  // (they are read with the rows' last 16-byte copies, into rows of C that are never stored).
  const int ldat = gpu100::round_up(s.m, 4);
  thread_local gpu100::DeviceBuffer<float> at;
  const size_t count = size_t(ldat) * s.k;
  if (at.size() < count) at = gpu100::DeviceBuffer<float>(count);
  transpose_v4_padded_tile_ld(a, at.data(), s.m, s.k, ldat, stream);
  if (ldat > s.m) {
    CUDA_CHECK(cudaMemset2DAsync(at.data() + s.m, size_t(ldat) * sizeof(float), 0,
                                 size_t(ldat - s.m) * sizeof(float), size_t(s.k), stream));
  }
  const dim3 grid(gpu100::ceil_div(s.n, BN), gpu100::ceil_div(s.m, BM));
  kernel<<<grid, kThreads, kSmemBytes, stream>>>(s.m, s.n, s.k, ldat, alpha, at.data(), b, beta, c,
                                                 SgemmBatch{});
  CUDA_CHECK_LAST();
}

}  // namespace

// The configuration the autotuner picked on the H100 at 4096^3: 128 x 128 x 8 tiles, 4 warps of
// 64 x 64 (8 x 16 outputs per thread: 6 shared loads per 128 FMAs), 4 stages of 8.3 KB, 187
// registers, 2 blocks of 128 threads per SM. Its tuning runs (one timing each, ms; v7 3.41,
// cuBLAS 2.66): this one 2.899-2.900; 128 x 128 x 16 with v7's 64 x 32 warps, 4 stages
// 2.932-2.933, 3 stages 2.942-2.945; x 32, 2 stages 2.976-2.977; 256 x 128 x 8 with 64 x 64 warps
// (one block of 256 threads per SM) 2.970, x 16 3.041-3.042; 128 x 128 x 16 with 64 x 64 warps
// 3.096; 128 x 64 x 16 3.287-3.288.
void sgemm_v8_cp_async(GemmShape s, float alpha, const float* a, const float* b, float beta,
                       float* c, cudaStream_t stream) {
  launch_v8_cp_async<128, 128, 8, 64, 64, 128, 4>(s, alpha, a, b, beta, c, stream);
}

void sgemm_v8_batched_at(GemmShape s, int ldat, const float* at, const float* b, float* c,
                         const SgemmBatch& batch, cudaStream_t stream) {
  constexpr int BM = 128, BN = 128, BK = 8, WM = 64, WN = 64, kThreads = 128, kStages = 4;
  constexpr size_t kSmemBytes = sizeof(float) * kStages * (BK * (BM + tiles::kAPad) + BK * BN);
  constexpr auto kernel =
      sgemm_v8_cp_async_kernel<BM, BN, BK, WM, WN, kThreads, kStages, 2, true, true>;
  check_gemm_args(s, at, b, c);
  if (batch.count < 1 || batch.count > 65535 || gpu100::ceil_div(s.m, BM) > 65535 || ldat < s.m ||
      ldat % 4 != 0 || s.n % 4 != 0 || !gpu100::aligned16(at) || !gpu100::aligned16(b) ||
      !gpu100::aligned16(c) || batch.stride_at % 4 != 0 || batch.stride_b % 4 != 0 ||
      batch.stride_c % 4 != 0) {
    throw std::invalid_argument(
        "sgemm_v8_batched_at: needs 1..65535 GEMMs, M up to 65535 x 128, ldat >= M, ldat and N "
        "multiples of 4, and 16-byte aligned matrices");
  }
  static gpu100::PerDevice<bool> opted_in;  // > 48 KB of shared memory, on every GPU it runs on
  opted_in.get([] {
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(kSmemBytes)));
    return true;
  });
  const dim3 grid(gpu100::ceil_div(s.n, BN), gpu100::ceil_div(s.m, BM),
                  static_cast<unsigned>(batch.count));
  kernel<<<grid, kThreads, kSmemBytes, stream>>>(s.m, s.n, s.k, ldat, 1.f, at, b, 0.f, c, batch);
  CUDA_CHECK_LAST();
}

// The cp.async configurations the autotuner adds to v8's (sgemm_v8_configs).
const std::vector<TileConfig>& sgemm_v8_cp_async_configs() {
  static const std::vector<TileConfig> kConfigs = {
      {"cp.async 128x128x16 w64x32 256t 4 stages",
       launch_v8_cp_async<128, 128, 16, 64, 32, 256, 4>},
      {"cp.async 128x128x16 w64x32 256t 3 stages",
       launch_v8_cp_async<128, 128, 16, 64, 32, 256, 3>},
      {"cp.async 128x128x32 w64x32 256t 2 stages",
       launch_v8_cp_async<128, 128, 32, 64, 32, 256, 2>},
      {"cp.async 128x64x16 w64x32 128t 4 stages", launch_v8_cp_async<128, 64, 16, 64, 32, 128, 4>},
      // 8 x 16 outputs per thread (warps of 64 x 64): 6 shared loads per 128 FMAs instead of 4
      // per 64, at the price of registers (one block of 256 threads per SM)
      {"cp.async 256x128x8 w64x64 256t 4 stages 1/SM",
       launch_v8_cp_async<256, 128, 8, 64, 64, 256, 4, 1>},
      {"cp.async 256x128x16 w64x64 256t 3 stages 1/SM",
       launch_v8_cp_async<256, 128, 16, 64, 64, 256, 3, 1>},
      {"cp.async 128x128x8 w64x64 128t 4 stages", launch_v8_cp_async<128, 128, 8, 64, 64, 128, 4>},
      {"cp.async 128x128x16 w64x64 128t 3 stages",
       launch_v8_cp_async<128, 128, 16, 64, 64, 128, 3>},
  };
  return kConfigs;
}

}  // namespace day04
