// GEMM v17 (FP8 e4m3), gemm_v17_wgmma_fp8_epilogue_overlap.cu: v16 with the next tile's first
// products issued before this tile's epilogue. What changed, and why it is faster:
//  - In v16 the producer has the next tile's data waiting when a tile's epilogue starts, but both
//    consumer warpgroups spend the epilogue scaling, converting and storing their 64 x 128 outputs
//    with nothing of theirs on the tensor cores: the tensor pipe idles for the whole epilogue,
//    once per tile.
//  - Here the consumer runs v15's two-accumulator loop over all of its k-tiles as one sequence,
//    tile after tile, and a tile's epilogue runs inside the promotion of its last k-tile. By then
//    the next k-tile, the next tile's first, has been issued into the other accumulator (the
//    epilogue reads only the promoted sum), so the tensor cores multiply while the stores go out.
// What it costs: the epilogue's code is inlined at each of the four places a k-tile is promoted
// (a larger kernel). Written as a loop over tiles with the next tile's first products issued
// before the epilogue, the same order made ptxas serialise every wgmma (C7514): it could not
// tell which group a wait retired when a group stayed in flight across iterations.
// The rest is v16's: persistent blocks, two wgmma accumulators, promotion every 128 of k.
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <cstdint>

#include "common/arch.cuh"
#include "common/arch.hpp"
#include "common/cuda_check.hpp"
#include "common/math.hpp"
#include "gemm.hpp"
#include "tma.hpp"
#include "wgmma.cuh"

#if !GPU100_SM90A_CODE
#pragma nv_diag_suppress 177  // this target compiles the kernel body out, leaving its constants
#endif

namespace day04 {

namespace {

using namespace day04::wgmma;

constexpr int kBM = 128, kBN = 128;
constexpr int kBK = 128;    // k per stage: 128 e4m3 = one 128-byte swizzled row
constexpr int kKStep = 32;  // k per wgmma (32 bytes inside the row)
constexpr int kStages = 6, kThreads = 384;
constexpr int kABytes = kBM * kBK;  // 16 KB
constexpr int kBBytes = kBN * kBK;  // 16 KB of B^T: 128 rows (n) of 128 bytes of k
constexpr int kStageBytes = kABytes + kBBytes;
constexpr size_t kSmemBytes = size_t(kStages) * kStageBytes + 1024 /* alignment slack */ + 128;
constexpr int kProducerRegs = 40, kConsumerRegs = 232;  // (40 + 2 x 232) x 128 <= 64 K

// One block per 128 x 128 output tile (blockIdx.x along N, blockIdx.y along M). Warpgroups 0 and
// 1 consume (rows 64 wg .. 64 wg + 63 of the tile), warpgroup 2 produces.
__global__ void __launch_bounds__(kThreads, 1)
    gemm_v17_kernel(int m, int n, int k, const float* __restrict__ scale_a,
                    const float* __restrict__ scale_b, __nv_bfloat16* __restrict__ c,
                    const __grid_constant__ CUtensorMap map_a,
                    const __grid_constant__ CUtensorMap map_bt) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ uint8_t smem_raw[];
  // The 128-byte swizzle repeats every 1024 bytes: stages start on a 1024-byte boundary.
  uint8_t* smem = smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023);
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + kStages * kStageBytes);
  uint64_t* empty = full + kStages;

  const int tid = threadIdx.x, wg = tid / 128, lane = tid % 32;
  const int tiles_n = gpu100::ceil_div(n, kBN);
  const int num_tiles = gpu100::ceil_div(m, kBM) * tiles_n;
  const int num_ktiles = gpu100::ceil_div(k, kBK);  // the last one zero-filled past K by TMA

  if (tid == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbar_init(&full[s], 1);   // the producer's expect_tx arrival
      mbar_init(&empty[s], 8);  // one arrival per consumer warp
    }
    mbar_fence_init();
  }
  __syncthreads();  // the only block-wide barrier: the producer warpgroup leaves below

  // The g-th k-tile this block handles (counted across its tiles) uses stage g % kStages, in
  // phase g / kStages of that stage's barriers.
  if (wg == 2) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kProducerRegs));
    if (tid == 256) {
      int g = 0;
      for (int tile = blockIdx.x; tile < num_tiles; tile += gridDim.x) {
        const int row0 = (tile / tiles_n) * kBM, col0 = (tile % tiles_n) * kBN;
        for (int t = 0; t < num_ktiles; ++t, ++g) {
          const int s = g % kStages;
          if (g >= kStages) mbar_wait(&empty[s], (g / kStages - 1) & 1);  // all 8 warps done
          uint8_t* stage = smem + s * kStageBytes;
          mbar_expect_tx(&full[s], kStageBytes);  // whole boxes count, zero-filled parts too
          tma_load_2d(stage, &map_a, t * kBK, row0, &full[s]);
          tma_load_2d(stage + kABytes, &map_bt, t * kBK, col0, &full[s]);
        }
      }
    }
    return;
  }
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kConsumerRegs));

  const float scale = *scale_a * *scale_b;  // read once, long before the epilogue needs it
  const int warp_in_wg = (tid % 128) / 32;
  const bool pairs = n % 2 == 0 && reinterpret_cast<uintptr_t>(c) % 4 == 0;
  float acc[64], d0[64], d1[64];  // the promoted fp32 sum; two wgmma accumulators
#pragma unroll
  for (int i = 0; i < 64; ++i) acc[i] = 0.f;
  int tile = blockIdx.x, kt = 0;  // the tile being summed, and its k-tiles promoted so far

  // The tile's epilogue (v14's): register 4j + {0, 1} holds row lane / 4 of this warp's 16 rows,
  // columns 8j + 2 (lane % 4) + {0, 1}; registers 4j + {2, 3} the same columns 8 rows further
  // down. A column pair is one 4-byte bf16x2 store when N is even.
  auto epilogue = [&] {
    const int row0 = (tile / tiles_n) * kBM, col0 = (tile % tiles_n) * kBN;
    const int rbase = row0 + wg * 64 + warp_in_wg * 16 + lane / 4;
#pragma unroll
    for (int j = 0; j < kBN / 8; ++j) {
      const int col = col0 + 8 * j + 2 * (lane % 4);
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = rbase + 8 * h;
        if (row >= m || col >= n) continue;
        __nv_bfloat16* out = c + size_t(row) * n + col;
        const float v0 = scale * acc[4 * j + 2 * h], v1 = scale * acc[4 * j + 2 * h + 1];
        if (pairs) {
          *reinterpret_cast<__nv_bfloat162*>(out) = __floats2bfloat162_rn(v0, v1);
        } else {
          out[0] = __float2bfloat16_rn(v0);
          if (col + 1 < n) out[1] = __float2bfloat16_rn(v1);
        }
      }
    }
  };
  // Issue the g-th k-tile of this block (counted across its tiles) into d: 4 wgmma, v14's
  // products (this warpgroup's 64 rows of A, all 128 rows of B^T, both K-major; kk == 0 starts d
  // from zero).
  auto issue = [&](float(&d)[64], int g) {
    const int s = g % kStages;
    mbar_wait(&full[s], (g / kStages) & 1);  // the k-tile has landed
    const uint8_t* stage = smem + s * kStageBytes;
    fence();  // d was read by the adds below: order those reads before the wgmma writes it
#pragma unroll
    for (int kk = 0; kk < kBK / kKStep; ++kk) {
      wgmma_m64n128k32_e4m3_ss(d, make_desc(stage + wg * 64 * 128 + kk * kKStep, 16, 1024),
                               make_desc(stage + kABytes + kk * kKStep, 16, 1024), kk > 0);
    }
    commit();
  };
  // The g-th k-tile's products (in d) are complete: release its stage, promote d into acc. After
  // a tile's last k-tile, its epilogue runs here, while the next k-tile (the next tile's first,
  // issued before this call) is on the tensor cores.
  auto retire = [&](const float(&d)[64], int g) {
    __syncwarp();
    if (lane == 0) mbar_arrive(&empty[g % kStages]);  // the producer may refill it
#pragma unroll
    for (int i = 0; i < 64; ++i) acc[i] += d[i];
    if (++kt == num_ktiles) {
      epilogue();
#pragma unroll
      for (int i = 0; i < 64; ++i) acc[i] = 0.f;
      kt = 0;
      tile += gridDim.x;
    }
  };

  // v15's loop over all of the block's k-tiles as one sequence (the grid has no block without a
  // tile): they alternate between d0 (even g) and d1 (odd g), and wait<1> leaves only the newest
  // group running, so the older one is complete when it is promoted. A tile boundary changes
  // nothing in this order, so the next tile's first k-tile is issued before the last one's
  // epilogue.
  const int num_g =
      ((num_tiles - int(blockIdx.x) + int(gridDim.x) - 1) / int(gridDim.x)) * num_ktiles;
  issue(d0, 0);
  int g = 1;
  for (; g + 1 < num_g; g += 2) {
    issue(d1, g);
    wait<1>();
    retire(d0, g - 1);
    issue(d0, g + 1);
    wait<1>();
    retire(d1, g);
  }
  if (g < num_g) {  // an even count: one k-tile left for d1
    issue(d1, g);
    wait<1>();
    retire(d0, g - 1);
    wait<0>();
    retire(d1, g);
  } else {  // an odd count: the last k-tile is in d0
    wait<0>();
    retire(d0, g - 1);
  }
#else
  (void)m, (void)n, (void)k, (void)scale_a, (void)scale_b, (void)c, (void)map_a, (void)map_bt;
#endif
}

}  // namespace

void gemm_v17_wgmma_fp8_epilogue_overlap(GemmShape s, const __nv_fp8_e4m3* a,
                                         const __nv_fp8_e4m3* b_t, const float* scale_a,
                                         const float* scale_b, __nv_bfloat16* c,
                                         cudaStream_t stream) {
  check_gemm_fp8_args(s, a, b_t, scale_a, scale_b, c);  // before any CUDA call
  gpu100::require_build(gpu100::ArchNeed::kSm90a, "v17_wgmma_fp8_epilogue_overlap");
  static const int num_sms = [] {
    CUDA_CHECK(cudaFuncSetAttribute(gemm_v17_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    int(kSmemBytes)));
    int device = 0, sms = 0;
    CUDA_CHECK(cudaGetDevice(&device));
    CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    return sms;
  }();
  const int64_t tiles = int64_t(gpu100::ceil_div(s.m, kBM)) * gpu100::ceil_div(s.n, kBN);
  const unsigned blocks = unsigned(std::min<int64_t>(tiles, num_sms));  // one block per SM
  gemm_v17_kernel<<<blocks, kThreads, kSmemBytes, stream>>>(
      s.m, s.n, s.k, scale_a, scale_b, c, make_tma_map_2d(a, s.m, s.k, kBM, kBK),
      make_tma_map_2d(b_t, s.n, s.k, kBN, kBK));
  CUDA_CHECK_LAST();
}

}  // namespace day04
