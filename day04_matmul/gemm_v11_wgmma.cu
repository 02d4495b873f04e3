// GEMM v11: Hopper wgmma + TMA (kernel code only in sm_90a targets; elsewhere refused), BF16
// and TF32. What changed from v10, and why it is faster:
//  - the tile copies are done by the TMA engine: one thread describes a whole 2D box (a
//    CUtensorMap made on the host) and the hardware moves it into shared memory, in the 128-byte
//    swizzled layout the tensor cores read without bank conflicts, zero-filling outside the matrix,
//    and signals an mbarrier with the byte count when it lands. No thread spends instructions on
//    addresses or predicates;
//  - wgmma: a warpgroup (4 warps, 128 threads) issues one asynchronous m64n256k16 (BF16) or
//    m64n256k8 (TF32) multiply whose operands both come straight from shared memory (through
//    64-bit matrix descriptors): no ldmatrix, no fragment registers. v10's mma.sync needed a warp
//    instruction per 16 x 8 x 16.
// Tiles: 128 x 256 x (128 bytes of k) per block, two warpgroups of 64 x 256 (128 fp32 accumulators
// per thread), a 4-stage TMA pipeline (48 KB per stage). (A 128 x 128 tile with m64n128k16
// measured 483 TFLOP/s in BF16 at 4096^3 on the H100, 0.64x cuBLAS; the wider tile reads each A
// tile for twice the columns.)
// Operand layouts: A is K-major (row-major M x K) in both. In BF16, B is row-major K x N, i.e.
// N-major, which wgmma reads transposed (imm-trans-b = 1). TF32 has no transposed mode: both
// operands must be K-major, so the launcher first transposes B into an N x K scratch buffer with
// day04's padded-tile transpose (t4), and the time of that transpose is part of v11's time.
// TMA needs 16-byte row strides and addresses: BF16 needs K % 8 == 0 and N % 8 == 0, TF32
// K % 4 == 0; other shapes go to v10.
// (Layouts and descriptor fields: the PTX ISA, "Asynchronous warpgroup level matrix multiply";
// the canonical swizzled layouts are those CUTLASS documents for its GMMA descriptors.)
#include <cuda.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "common/arch.cuh"
#include "common/cuda_check.hpp"
#include "common/device_buffer.hpp"
#include "common/math.hpp"
#include "gemm.hpp"
#include "tma.hpp"
#include "transpose.hpp"
#include "wgmma.cuh"

#if !GPU100_SM90A_CODE
#pragma nv_diag_suppress 177  // this target compiles the kernel bodies out, leaving their constants
#endif

namespace day04 {

namespace {

using namespace day04::wgmma;

constexpr int kBM = 128, kBN = 256, kStages = 4, kThreads = 256;
constexpr int kABytes = kBM * 128;              // 16 KB: 128 rows of 128 bytes of k
constexpr int kBBytes = kBN * 128;              // 32 KB: 128 bytes of k for 256 columns
constexpr int kStageBytes = kABytes + kBBytes;  // 48 KB
constexpr size_t kSmemBytes = size_t(kStages) * kStageBytes + 1024 /* alignment slack */ + 128;
// v12: 2 consumer warpgroups + 1 producer warpgroup (a whole one: setmaxnreg works on
// warpgroups), whose registers go to the consumers: (40 + 2 x 232) x 128 <= 64 K.
constexpr int kThreadsWS = 384, kProducerRegs = 40, kConsumerRegs = 232;

// What differs between the two element types.
struct Bf16 {
  using T = __nv_bfloat16;
  static constexpr int kBK = 64, kKStep = 16;  // k per stage (128 bytes), k per wgmma
};
struct Tf32 {
  using T = float;
  static constexpr int kBK = 32, kKStep = 8;
};

// The pieces v11 and v12 share. A stage holds A (128 rows x 128 bytes of k) and then B: in BF16
// four boxes of 64 k-rows x 64 columns (8 KB apart), in TF32 one box of 256 rows of the
// transposed B x 32 k.
// One thread issues the TMA boxes of k-tile t of the output tile at (row0, col0) into a stage.
template <typename E>
__device__ __forceinline__ void issue_ktile(uint8_t* stage, const CUtensorMap* map_a,
                                            const CUtensorMap* map_b, int row0, int col0, int t,
                                            uint64_t* full) {
  constexpr int kBK = E::kBK;
  mbar_expect_tx(full, kStageBytes);
  tma_load_2d(stage, map_a, t * kBK, row0, full);
  if constexpr (std::is_same_v<E, Bf16>) {
#pragma unroll
    for (int q = 0; q < kBN / 64; ++q) {
      tma_load_2d(stage + kABytes + q * 8192, map_b, col0 + 64 * q, t * kBK, full);
    }
  } else {
    tma_load_2d(stage + kABytes, map_b, t * kBK, col0, full);
  }
}

// Warpgroup wg's multiplies of one k-tile (issued, not waited for): d += A[wg's 64 rows] * B.
template <typename E>
__device__ __forceinline__ void mma_ktile(float (&d)[128], const uint8_t* stage, int wg) {
#pragma unroll
  for (int kk = 0; kk < E::kBK / E::kKStep; ++kk) {
    // A: this warpgroup's 64 rows (8 KB further for warpgroup 1); each k-step is 32 bytes
    // further inside every 128-byte row; SBO = 1024 B between groups of 8 rows.
    const uint64_t da = make_desc(stage + wg * 64 * 128 + kk * 32, 16, 1024);
    if constexpr (std::is_same_v<E, Bf16>) {
      // B, N-major: a k-step is 16 k-rows = 2048 B further; LBO = 8192 B to the next
      // 64-column box, SBO = 1024 B between groups of 8 k-rows.
      wgmma_m64n256k16_bf16(d, da, make_desc(stage + kABytes + kk * 2048, 8192, 1024));
    } else {
      // B, K-major like A: 256 rows of 128 bytes, a k-step is 32 bytes further in each row.
      wgmma_m64n256k8_tf32(d, da, make_desc(stage + kABytes + kk * 32, 16, 1024));
    }
  }
}

// Epilogue of warpgroup wg: C = alpha d + beta C on its 64 x 256 part of the tile. Register
// 4j + {0, 1}: row lane / 4, columns 8j + 2 (lane % 4) + {0, 1} of this warp's 16-row slice;
// registers 4j + {2, 3}: the same columns, 8 rows further down. When N is even and C 8-byte
// aligned, each column pair is one 8-byte access (col is even, so col < n means col + 1 < n too).
__device__ __forceinline__ void store_tile(const float (&d)[128], float* __restrict__ c, int m,
                                           int n, int row0, int col0, int wg, float alpha,
                                           float beta) {
  const int lane = threadIdx.x % 32, warp_in_wg = (threadIdx.x % 128) / 32;
  const int rbase = row0 + wg * 64 + warp_in_wg * 16 + lane / 4;
  const bool pairs = n % 2 == 0 && reinterpret_cast<uintptr_t>(c) % 8 == 0;
#pragma unroll
  for (int j = 0; j < kBN / 8; ++j) {
    const int col = col0 + 8 * j + 2 * (lane % 4);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = rbase + 8 * h;
      if (row >= m || col >= n) continue;
      float* out = c + size_t(row) * n + col;
      const float v0 = alpha * d[4 * j + 2 * h], v1 = alpha * d[4 * j + 2 * h + 1];
      if (pairs) {
        float2 r = make_float2(v0, v1);
        if (beta != 0.f) {
          const float2 old = *reinterpret_cast<const float2*>(out);
          r.x += beta * old.x;
          r.y += beta * old.y;
        }
        *reinterpret_cast<float2*>(out) = r;
      } else {
        out[0] = v0 + (beta != 0.f ? beta * out[0] : 0.f);
        if (col + 1 < n) out[1] = v1 + (beta != 0.f ? beta * out[1] : 0.f);
      }
    }
  }
}

}  // namespace

template <typename E>
__global__ void __launch_bounds__(kThreads, 1)
    gemm_v11_kernel(int m, int n, int k, float alpha, float beta, float* __restrict__ c,
                    const __grid_constant__ CUtensorMap map_a,
                    const __grid_constant__ CUtensorMap map_b) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int kBK = E::kBK;
  extern __shared__ uint8_t smem_raw[];
  // The 128-byte swizzle repeats every 1024 bytes: stage buffers must start on a 1024-byte
  // boundary.
  uint8_t* smem = smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023);
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + kStages * kStageBytes);

  const int tid = threadIdx.x, wg = tid / 128;
  const int row0 = blockIdx.y * kBM, col0 = blockIdx.x * kBN;
  const int num_tiles = gpu100::ceil_div(k, kBK);
  auto stage = [&](int s) { return smem + s * kStageBytes; };

  if (tid == 0) {
    for (int s = 0; s < kStages; ++s) mbar_init(&full[s], 1);
    mbar_fence_init();
  }
  __syncthreads();
  if (tid == 0) {
    for (int t = 0; t < kStages && t < num_tiles; ++t)
      issue_ktile<E>(stage(t), &map_a, &map_b, row0, col0, t, &full[t]);
  }

  float d[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) d[i] = 0.f;

  for (int t = 0; t < num_tiles; ++t) {
    const int s = t % kStages;
    mbar_wait(&full[s], (t / kStages) & 1);  // the TMA boxes of tile t have landed
    fence();
    mma_ktile<E>(d, stage(s), wg);
    commit();
    wait<1>();        // the multiplies of tile t - 1 have finished (tile t's may still run)...
    __syncthreads();  // ...in both warpgroups: stage (t - 1) % kStages is free
    if (tid == 0 && t >= 1 && t - 1 + kStages < num_tiles) {
      const int sp = (t - 1) % kStages;
      issue_ktile<E>(stage(sp), &map_a, &map_b, row0, col0, t - 1 + kStages, &full[sp]);
    }
  }
  wait<0>();
  store_tile(d, c, m, n, row0, col0, wg, alpha, beta);
#else
  // Built for an architecture without wgmma: the launcher never calls this.
  (void)m, (void)n, (void)k, (void)alpha, (void)beta, (void)c, (void)map_a, (void)map_b;
#endif
}

// GEMM v12 (BF16): v11 made warp-specialised and persistent. What changed, and why it is faster:
//  - the copies belong to a producer warpgroup: one thread of it issues every TMA box, and
//    setmaxnreg gives its registers to the two consumer warpgroups. Stages are handed over with
//    mbarriers both ways, `full` (the bytes landed) and `empty` (all 8 consumer warps are done
//    with the stage), so the consumers never meet at a __syncthreads (v11 has one per k-tile) and
//    a stage is refilled as soon as its last reader is done;
//  - the grid is one block per SM, each looping over output tiles (tile blockIdx.x, + gridDim.x,
//    ...). The producer runs ahead into the next tile's k-tiles while the consumers are still in
//    the previous tile's epilogue, so the pipeline is not drained and refilled at every tile (at
//    4096^3 a tile is 64 k-tiles, and v11 pays the fill, the drain and the stores of the epilogue
//    with no copy in flight).
// (The producer / consumer split and the persistent tile loop are those of CUTLASS's
// warp-specialised Hopper GEMMs and of FlashAttention-3; day05's v5 is built the same way.)
__global__ void __launch_bounds__(kThreadsWS, 1)
    gemm_v12_kernel(int m, int n, int k, float alpha, float beta, float* __restrict__ c,
                    const __grid_constant__ CUtensorMap map_a,
                    const __grid_constant__ CUtensorMap map_b) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int kBK = Bf16::kBK;
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023);
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + kStages * kStageBytes);
  uint64_t* empty = full + kStages;
  auto stage = [&](int s) { return smem + s * kStageBytes; };

  const int tid = threadIdx.x, wg = tid / 128, lane = tid % 32;
  const int tiles_n = gpu100::ceil_div(n, kBN);
  const int num_out_tiles = tiles_n * gpu100::ceil_div(m, kBM);
  const int num_ktiles = gpu100::ceil_div(k, kBK);

  if (tid == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbar_init(&full[s], 1);   // the producer's expect_tx arrival
      mbar_init(&empty[s], 8);  // one arrival per consumer warp
    }
    mbar_fence_init();
  }
  __syncthreads();  // the last block-wide barrier: the producer warpgroup leaves below

  // `it` counts the k-tiles this block has gone through over all its output tiles: k-tile `it`
  // uses stage it % kStages, in phase it / kStages of that stage's barriers.
  if (wg == 2) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kProducerRegs));
    if (tid == 256) {
      int it = 0;
      for (int tile = blockIdx.x; tile < num_out_tiles; tile += gridDim.x) {
        const int row0 = (tile / tiles_n) * kBM, col0 = (tile % tiles_n) * kBN;
        for (int t = 0; t < num_ktiles; ++t, ++it) {
          const int s = it % kStages;
          if (it >= kStages) mbar_wait(&empty[s], (it / kStages - 1) & 1);
          issue_ktile<Bf16>(stage(s), &map_a, &map_b, row0, col0, t, &full[s]);
        }
      }
    }
    return;
  }
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kConsumerRegs));

  auto release = [&](int s) {  // this warp is done reading stage s
    __syncwarp();
    if (lane == 0) mbar_arrive(&empty[s]);
  };
  int it = 0;
  for (int tile = blockIdx.x; tile < num_out_tiles; tile += gridDim.x) {
    const int row0 = (tile / tiles_n) * kBM, col0 = (tile % tiles_n) * kBN;
    float d[128];
#pragma unroll
    for (int i = 0; i < 128; ++i) d[i] = 0.f;
    for (int t = 0; t < num_ktiles; ++t, ++it) {
      const int s = it % kStages;
      mbar_wait(&full[s], (it / kStages) & 1);  // k-tile t has landed
      fence();
      mma_ktile<Bf16>(d, stage(s), wg);
      commit();
      wait<1>();  // k-tile t - 1's multiplies are done: its stage goes back to the producer
      if (t >= 1) release((it - 1) % kStages);
    }
    wait<0>();
    release((it - 1) % kStages);
    store_tile(d, c, m, n, row0, col0, wg, alpha, beta);
  }
#else
  (void)m, (void)n, (void)k, (void)alpha, (void)beta, (void)c, (void)map_a, (void)map_b;
#endif
}

// GEMM v13 (BF16): v12 on clusters of 2 CTAs with TMA multicast. What changed, and why it is
// faster: the two CTAs of a cluster compute vertically adjacent tiles (rows row0 and row0 + 128,
// the same 256 columns), so they need the same B tile. Each CTA loads its own A box and half of
// the B boxes, and multicasts those to both CTAs: every B byte leaves L2 once for two tiles, so a
// pair of tiles reads 2 x 16 + 32 = 64 KB per k-tile instead of 96 KB. (Arithmetic: at 700
// TFLOP/s, v12's 128 x 256 tiles read 768 bytes per 65536 FLOPs from L2, about 8 TB/s.)
// The price is a cluster-wide hand-over: a stage of CTA r is written by both CTAs' producers, so
// a producer may refill stage s only when the consumers of both CTAs have released it: each
// consumer warp arrives on the `empty` barrier of both CTAs (16 arrivals per phase), the second
// one remotely (mapa + mbarrier.arrive.shared::cluster; the producer waits with cluster-scope
// acquire). The `full` barrier of each CTA expects the whole 48 KB, whichever CTA's copy brought
// it. No CTA may exit while its partner can still write into its shared memory or arrive on its
// barriers: a cluster barrier ends the kernel.
__global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(kThreadsWS, 1)
    gemm_v13_kernel(int m, int n, int k, float alpha, float beta, float* __restrict__ c,
                    const __grid_constant__ CUtensorMap map_a,
                    const __grid_constant__ CUtensorMap map_b) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int kBK = Bf16::kBK;
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023);
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + kStages * kStageBytes);
  uint64_t* empty = full + kStages;
  auto stage = [&](int s) { return smem + s * kStageBytes; };

  const int tid = threadIdx.x, wg = tid / 128, lane = tid % 32;
  const uint32_t rank = cluster_rank();
  const int tiles_n = gpu100::ceil_div(n, kBN);
  const int pairs_m = gpu100::ceil_div(gpu100::ceil_div(m, kBM), 2);
  const int num_pairs = tiles_n * pairs_m;  // one per cluster at a time
  const int num_ktiles = gpu100::ceil_div(k, kBK);
  const int cluster = blockIdx.x / 2, num_clusters = gridDim.x / 2;

  if (tid == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbar_init(&full[s], 1);
      mbar_init(&empty[s], 16);  // 8 consumer warps x 2 CTAs
    }
    mbar_fence_init();
  }
  cluster_sync();  // both CTAs' barriers exist before either copies or arrives

  if (wg == 2) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kProducerRegs));
    if (tid == 256) {
      int it = 0;
      for (int p = cluster; p < num_pairs; p += num_clusters) {
        const int row0 = ((p / tiles_n) * 2 + int(rank)) * kBM, col0 = (p % tiles_n) * kBN;
        for (int t = 0; t < num_ktiles; ++t, ++it) {
          const int s = it % kStages;
          if (it >= kStages) mbar_wait_cluster(&empty[s], (it / kStages - 1) & 1);
          mbar_expect_tx(&full[s], kStageBytes);  // A here + all of B, from both CTAs
          tma_load_2d(stage(s), &map_a, t * kBK, row0, &full[s]);
#pragma unroll
          for (int q = 2 * int(rank); q < 2 * int(rank) + 2; ++q) {
            tma_load_2d_multicast(stage(s) + kABytes + q * 8192, &map_b, col0 + 64 * q, t * kBK,
                                  &full[s], 0x3);
          }
        }
      }
    }
  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kConsumerRegs));
    auto release = [&](int s) {  // this warp is done with stage s, in both CTAs' books
      __syncwarp();
      if (lane == 0) {
        mbar_arrive_cluster(&empty[s], 0);
        mbar_arrive_cluster(&empty[s], 1);
      }
    };
    int it = 0;
    for (int p = cluster; p < num_pairs; p += num_clusters) {
      const int row0 = ((p / tiles_n) * 2 + int(rank)) * kBM, col0 = (p % tiles_n) * kBN;
      float d[128];
#pragma unroll
      for (int i = 0; i < 128; ++i) d[i] = 0.f;
      for (int t = 0; t < num_ktiles; ++t, ++it) {
        const int s = it % kStages;
        mbar_wait(&full[s], (it / kStages) & 1);
        fence();
        mma_ktile<Bf16>(d, stage(s), wg);
        commit();
        wait<1>();
        if (t >= 1) release((it - 1) % kStages);
      }
      wait<0>();
      release((it - 1) % kStages);
      store_tile(d, c, m, n, row0, col0, wg, alpha, beta);  // rows past m (odd tile count) skip
    }
  }
  __syncwarp();    // the producer warp's lanes reconverge after thread 256's loop
  cluster_sync();  // the partner may still arrive on our barriers until here
#else
  (void)m, (void)n, (void)k, (void)alpha, (void)beta, (void)c, (void)map_a, (void)map_b;
#endif
}

namespace {

// The BF16 shapes and pointers TMA can describe (16-byte row strides and addresses); v11-v13
// send every other BF16 call to v10.
bool tma_bf16_ok(GemmShape s, const void* a, const void* b) {
  return s.k % 8 == 0 && s.n % 8 == 0 && gpu100::aligned16(a) && gpu100::aligned16(b);
}

template <typename E>
void launch_v11(GemmShape s, float alpha, const CUtensorMap& map_a, const CUtensorMap& map_b,
                float beta, float* c, cudaStream_t stream) {
  static bool attr_set = [] {
    CUDA_CHECK(cudaFuncSetAttribute(gemm_v11_kernel<E>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    int(kSmemBytes)));
    return true;
  }();
  (void)attr_set;
  const dim3 grid(gpu100::ceil_div(s.n, kBN), gpu100::ceil_div(s.m, kBM));
  gemm_v11_kernel<E>
      <<<grid, kThreads, kSmemBytes, stream>>>(s.m, s.n, s.k, alpha, beta, c, map_a, map_b);
  CUDA_CHECK_LAST();
}

}  // namespace

void gemm_v11_wgmma_bf16(GemmShape s, float alpha, const __nv_bfloat16* a, const __nv_bfloat16* b,
                         float beta, float* c, cudaStream_t stream) {
  check_gemm_args(s, a, b, c);
  gpu100::require_build(gpu100::ArchNeed::kSm90a, "v11_wgmma_bf16");
  if (!tma_bf16_ok(s, a, b)) {
    gemm_v10_mma_bf16(s, alpha, a, b, beta, c, stream);  // TMA cannot describe these strides
    return;
  }
  launch_v11<Bf16>(s, alpha, make_tma_map_2d(a, s.m, s.k, kBM, Bf16::kBK),
                   make_tma_map_2d(b, s.k, s.n, Bf16::kBK, 64), beta, c, stream);
}

void gemm_v12_wgmma_ws_bf16(GemmShape s, float alpha, const __nv_bfloat16* a,
                            const __nv_bfloat16* b, float beta, float* c, cudaStream_t stream) {
  check_gemm_args(s, a, b, c);
  gpu100::require_build(gpu100::ArchNeed::kSm90a, "v12_wgmma_ws_bf16");
  if (!tma_bf16_ok(s, a, b)) {
    gemm_v10_mma_bf16(s, alpha, a, b, beta, c, stream);  // TMA cannot describe these strides
    return;
  }
  static const int num_sms = [] {
    int device = 0, sms = 0;
    CUDA_CHECK(cudaGetDevice(&device));
    CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    CUDA_CHECK(cudaFuncSetAttribute(gemm_v12_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    int(kSmemBytes)));
    return sms;
  }();
  const int64_t tiles = int64_t(gpu100::ceil_div(s.m, kBM)) * gpu100::ceil_div(s.n, kBN);
  const int grid = static_cast<int>(std::min<int64_t>(tiles, num_sms));  // one block per SM
  gemm_v12_kernel<<<grid, kThreadsWS, kSmemBytes, stream>>>(
      s.m, s.n, s.k, alpha, beta, c, make_tma_map_2d(a, s.m, s.k, kBM, Bf16::kBK),
      make_tma_map_2d(b, s.k, s.n, Bf16::kBK, 64));
  CUDA_CHECK_LAST();
}

void gemm_v13_wgmma_cluster_bf16(GemmShape s, float alpha, const __nv_bfloat16* a,
                                 const __nv_bfloat16* b, float beta, float* c,
                                 cudaStream_t stream) {
  check_gemm_args(s, a, b, c);
  gpu100::require_build(gpu100::ArchNeed::kSm90a, "v13_wgmma_cluster_bf16");
  if (!tma_bf16_ok(s, a, b)) {
    gemm_v10_mma_bf16(s, alpha, a, b, beta, c, stream);  // TMA cannot describe these strides
    return;
  }
  // How many 2-CTA clusters of this kernel fit on the GPU at once (the GPCs' SM counts decide).
  static const int max_clusters = [] {
    CUDA_CHECK(cudaFuncSetAttribute(gemm_v13_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    int(kSmemBytes)));
    cudaLaunchConfig_t config{};
    config.gridDim = dim3(2);
    config.blockDim = dim3(kThreadsWS);
    config.dynamicSmemBytes = kSmemBytes;
    cudaLaunchAttribute attr{};
    attr.id = cudaLaunchAttributeClusterDimension;
    attr.val.clusterDim.x = 2;
    attr.val.clusterDim.y = 1;
    attr.val.clusterDim.z = 1;
    config.attrs = &attr;
    config.numAttrs = 1;
    int clusters = 0;
    CUDA_CHECK(cudaOccupancyMaxActiveClusters(&clusters, gemm_v13_kernel, &config));
    if (clusters < 1) throw std::runtime_error("v13: no 2-CTA cluster fits on this GPU");
    return clusters;
  }();
  const int64_t pairs =
      int64_t(gpu100::ceil_div(gpu100::ceil_div(s.m, kBM), 2)) * gpu100::ceil_div(s.n, kBN);
  const int clusters = static_cast<int>(std::min<int64_t>(pairs, max_clusters));
  gemm_v13_kernel<<<2 * clusters, kThreadsWS, kSmemBytes, stream>>>(
      s.m, s.n, s.k, alpha, beta, c, make_tma_map_2d(a, s.m, s.k, kBM, Bf16::kBK),
      make_tma_map_2d(b, s.k, s.n, Bf16::kBK, 64));
  CUDA_CHECK_LAST();
}

void gemm_v11_wgmma_tf32(GemmShape s, float alpha, const float* a, const float* b, float beta,
                         float* c, cudaStream_t stream) {
  check_gemm_args(s, a, b, c);
  gpu100::require_build(gpu100::ArchNeed::kSm90a, "v11_wgmma_tf32");
  if (s.k % 4 != 0 || !gpu100::aligned16(a)) {
    gemm_v10_mma_tf32(s, alpha, a, b, beta, c, stream);  // TMA cannot describe these strides
    return;
  }
  // B (K x N) -> B^T (N x K) in a scratch buffer that lives as long as the thread and only grows,
  // so that the timed runs allocate nothing.
  thread_local gpu100::DeviceBuffer<float> bt;
  const size_t count = size_t(s.k) * s.n;
  if (bt.size() < count) bt = gpu100::DeviceBuffer<float>(count);
  transpose_v4_padded_tile(b, bt.data(), s.k, s.n, stream);
  launch_v11<Tf32>(s, alpha, make_tma_map_2d(a, s.m, s.k, kBM, Tf32::kBK),
                   make_tma_map_2d(static_cast<const float*>(bt.data()), s.n, s.k, kBN, Tf32::kBK),
                   beta, c, stream);
}

}  // namespace day04
