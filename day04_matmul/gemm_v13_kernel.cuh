#pragma once
// day04 GEMM v13's kernel (the why is in gemm_v13_wgmma_cluster.cu), templated on what it does with
// each finished tile, so that a later day can fuse its own epilogue into the same main loop by
// linking day04 (day05's attention block applies RoPE there and writes Q, K and V in the layout its
// attention kernel reads). An Epilogue is a small copyable struct, passed by value as a kernel
// argument, with
//   __device__ void operator()(const float (&d)[128], int row0, int col0, int wg) const;
// called by every thread of consumer warpgroup wg (0 or 1) with its part of the 128 x 256 tile
// whose top-left corner is (row0, col0): d holds rows row0 + 64 wg + 16 (warp % 4) + lane / 4
// (+ 8 for registers 4j + {2, 3}) at columns col0 + 8j + 2 (lane % 4) + {0, 1} (see store_tile in
// wgmma_gemm.cuh). The tile may reach past M and N: the epilogue skips those rows and columns.
// Kernel code exists only in sm_90a targets; the launcher is the caller's to guard (require_build)
// and to feed only shapes TMA can describe (tma_bf16_ok).
#include <cuda.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <type_traits>

#include "common/arch.cuh"
#include "common/cuda_check.hpp"
#include "common/math.hpp"
#include "common/occupancy.hpp"
#include "gemm.hpp"
#include "tma.hpp"
#include "wgmma_gemm.cuh"

#if !GPU100_SM90A_CODE  // this target compiles the kernel body out, leaving its constants unused
#pragma nv_diagnostic push
#pragma nv_diag_suppress 177
#endif

namespace day04::wgmma_gemm {

// An Epilogue may also ask for shared memory of its own: with a member
//   static constexpr int kStagingBytes = ...;  (a multiple of 2048, half for each warpgroup)
// it is called as epilogue(d, row0, col0, wg, staging) with 1024-byte aligned staging space of
// kStagingBytes / 2 for warpgroup wg, after the pipeline's stages, and every consumer thread waits
// for its bulk copies (cp.async.bulk.wait_group 0) before the block exits.
template <class E, class = void>
struct StagingBytes : std::integral_constant<int, 0> {};
template <class E>
struct StagingBytes<E, std::void_t<decltype(E::kStagingBytes)>>
    : std::integral_constant<int, E::kStagingBytes> {};
// The block's shared memory: v13's pipeline, and the epilogue's staging behind its barriers.
template <class Epilogue>
constexpr size_t v13_smem_bytes() {
  return StagingBytes<Epilogue>::value == 0 ? kSmemBytes
                                            : kSmemBytes + 1024 + StagingBytes<Epilogue>::value;
}

// kSplitK (v22): each tile pair's k-tiles are cut into `splits` consecutive slices, and the work
// items are (pair, slice) with the slices of a pair next to each other; each item hands its partial
// sums to the epilogue, which must add them into C (zeroed first). Without it `splits` is unused.
// E: the element type, Bf16 (A M x K and B K x N, row-major) or Tf32 (A M x K and B^T N x K,
// row-major: wgmma reads TF32 only K-major). In TF32 a stage's B is B^T's 256 rows x 32 k, which
// the two CTAs load as one 128-row box each, multicast to both.
template <class Epilogue, bool kSplitK = false, class E = Bf16>
__global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(kThreadsWS, 1)
    gemm_v13_kernel(int m, int n, int k, int group, int splits,
                    const __grid_constant__ Epilogue epilogue,
                    const __grid_constant__ CUtensorMap map_a,
                    const __grid_constant__ CUtensorMap map_b) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int kBK = E::kBK;
  // The pipeline: E::kStages stages of A's 128 rows and B's E::kBN columns (4 x 48 KB; for the
  // medium tiles 6 x 32 KB, for the narrow ones 8 x 24 KB: the same shared memory, more k-tiles in
  // flight).
  constexpr int kStages = E::kStages, kStageBytes = kABytes + E::kBN * 128;
  static_assert(kStages * kStageBytes == wgmma_gemm::kStages * wgmma_gemm::kStageBytes);
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023);
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + kStages * kStageBytes);
  uint64_t* empty = full + kStages;
  auto stage = [&](int s) { return smem + s * kStageBytes; };
  constexpr bool kStaged = StagingBytes<Epilogue>::value > 0;
  uint8_t* const staging = smem + kStages * kStageBytes + 1024;  // past the barriers' 1024 bytes

  const int tid = threadIdx.x, wg = tid / 128, lane = tid % 32;
  const uint32_t rank = cluster_rank();
  const int tiles_n = gpu100::ceil_div(n, E::kBN);
  const int pairs_m = gpu100::ceil_div(gpu100::ceil_div(m, kBM), 2);
  const int num_pairs = tiles_n * pairs_m;  // one per cluster at a time
  constexpr bool kNt = std::is_same_v<E, Tf32Nt>;
  // Tf32Nt runs its k-tiles two at a time (its fragment registers alternate between two sets):
  // an odd count gets one more k-tile past K, which the TMA fills with zeros.
  const int num_ktiles = kNt ? 2 * gpu100::ceil_div(k, 2 * kBK) : gpu100::ceil_div(k, kBK);
  const int cluster = blockIdx.x / 2, num_clusters = gridDim.x / 2;
  const int num_splits = kSplitK ? splits : 1;
  const int num_items = num_pairs * num_splits;
  // Work item p: its pair of vertically adjacent tiles as (pair row, tile column), row-major
  // (group 0) or in bands of `group` pair rows (grouped_tile), and its k-tiles [first, last).
  struct Item {
    int2 pair;
    int first, last;
  };
  auto item = [&](int p) {
    const int q = kSplitK ? p / num_splits : p, slice = kSplitK ? p % num_splits : 0;
    const int2 pt =
        group > 0 ? grouped_tile(q, pairs_m, tiles_n, group) : make_int2(q / tiles_n, q % tiles_n);
    return kSplitK
               ? Item{pt, slice * num_ktiles / num_splits, (slice + 1) * num_ktiles / num_splits}
               : Item{pt, 0, num_ktiles};
  };

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
      for (int p = cluster; p < num_items; p += num_clusters) {
        const Item w = item(p);
        const int row0 = (w.pair.x * 2 + int(rank)) * kBM, col0 = w.pair.y * E::kBN;
        for (int t = w.first; t < w.last; ++t, ++it) {
          const int s = it % kStages;
          if (it >= kStages) mbar_wait_cluster(&empty[s], (it / kStages - 1) & 1);
          mbar_expect_tx(&full[s], kStageBytes);  // A here + all of B, from both CTAs
          if constexpr (kNt) {  // this CTA's 128 columns of B (N-major): 4 boxes of 32 x 32 k
#pragma unroll
            for (int q = 0; q < 4; ++q) {
              tma_load_2d(stage(s) + q * 4096, &map_a, row0 + 32 * q, t * kBK, &full[s]);
            }
          } else {
            tma_load_2d(stage(s), &map_a, t * kBK, row0, &full[s]);
          }
          if constexpr (std::is_same_v<E, Bf16Narrow>) {  // half of B's one box: 32 k-rows
            tma_load_2d_multicast(stage(s) + kABytes + int(rank) * 4096, &map_b, col0,
                                  t * kBK + 32 * int(rank), &full[s], 0x3);
          } else if constexpr (std::is_same_v<typename E::T, __nv_bfloat16>) {
            // Bf16: two of B's four 64-column boxes; Bf16Medium: one of its two.
            constexpr int kBoxes = E::kBN / 128;  // per CTA
#pragma unroll
            for (int q = kBoxes * int(rank); q < kBoxes * int(rank) + kBoxes; ++q) {
              tma_load_2d_multicast(stage(s) + kABytes + q * 8192, &map_b, col0 + 64 * q, t * kBK,
                                    &full[s], 0x3);
            }
          } else {  // half of B^T's 256 rows (16 KB), the layout of one 256-row box
            tma_load_2d_multicast(stage(s) + kABytes + int(rank) * 16384, &map_b, t * kBK,
                                  col0 + 128 * int(rank), &full[s], 0x3);
          }
        }
      }
      // Before this CTA may exit, the partner's consumers must have made their last arrivals on
      // its empty barriers: wait for the release of each of the last kStages loads (the earlier
      // ones were waited for above, before their stage was refilled). Every multicast copy into
      // this CTA has landed by then too: this CTA's own consumers waited for each full stage.
      for (int j = it > kStages ? it - kStages : 0; j < it; ++j) {
        mbar_wait_cluster(&empty[j % kStages], (j / kStages) & 1);
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
    for (int p = cluster; p < num_items; p += num_clusters) {
      const Item w = item(p);
      const int row0 = (w.pair.x * 2 + int(rank)) * kBM, col0 = w.pair.y * E::kBN;
      float d[E::kBN / 2];
#pragma unroll
      for (int i = 0; i < E::kBN / 2; ++i) d[i] = 0.f;
      const int count = w.last - w.first;  // this item's k-tiles, in the stages in turn
      if constexpr (kNt) {
        // B's fragments go to the wgmma in registers, which stay in use until its group retires:
        // k-tiles alternate between two sets, so that loading one overlaps the other's products.
        uint32_t fa[16], fb[16];
        auto step = [&](int t, uint32_t(&f)[16]) {
          const int s = it % kStages;
          mbar_wait(&full[s], (it / kStages) & 1);
          mma_ktile_nt(d, f, stage(s), wg);
          commit();
          wait<1>();
          if (t >= 1) release((it - 1) % kStages);
          ++it;
        };
        for (int t = 0; t < count; t += 2) {  // count is even (num_ktiles above)
          step(t, fa);
          step(t + 1, fb);
        }
      } else {
        for (int t = 0; t < count; ++t, ++it) {
          const int s = it % kStages;
          mbar_wait(&full[s], (it / kStages) & 1);
          fence();
          mma_ktile<E>(d, stage(s), wg);
          commit();
          wait<1>();
          if (t >= 1) release((it - 1) % kStages);
        }
      }
      wait<0>();
      release((it - 1) % kStages);
      // Rows past m (an odd tile count) are the epilogue's to skip.
      if constexpr (kStaged) {
        epilogue(d, row0, col0, wg, staging + wg * (StagingBytes<Epilogue>::value / 2));
      } else {
        epilogue(d, row0, col0, wg);
      }
    }
    if constexpr (kStaged) bulk_wait_all();  // the epilogue's last copies, before the block exits
  }
  // No cluster barrier at the exit: the producer's wait above is the one thing the partner needs
  // from this CTA, and a CTA whose epilogue is done leaves without waiting for its partner's.
#else
  (void)m, (void)n, (void)k, (void)group, (void)splits, (void)epilogue, (void)map_a, (void)map_b;
#endif
}

#if !GPU100_SM90A_CODE
#pragma nv_diagnostic pop
#endif

// The epilogue of day04's own v13: C = alpha A B + beta C in fp32.
struct StoreC {
  float* c;
  int m, n;
  float alpha, beta;
  __device__ __forceinline__ void operator()(const float (&d)[128], int row0, int col0,
                                             int wg) const {
    store_tile(d, c, m, n, row0, col0, wg, alpha, beta);
  }
};

// One pass of a staged epilogue, by the 128 threads of consumer warpgroup wg (sm_90a code only):
// wait until the previous copy (this tile's or the last tile's) has read the staging tile, let
// every thread write its part (write()), make the writes visible to the TMA (the async proxy), and
// let one thread hand the tile to the TMA (copy()) in a bulk group of its own.
template <class Write, class Copy>
__device__ __forceinline__ void staged_pass(int wg, Write&& write, Copy&& copy) {
  const int tid = threadIdx.x % 128;
  if (tid == 0) bulk_wait_read_all();
  asm volatile("bar.sync %0, 128;\n" ::"r"(1 + wg) : "memory");
  write();
  fence_proxy_async_smem();
  asm volatile("bar.sync %0, 128;\n" ::"r"(1 + wg) : "memory");
  if (tid == 0) {  // parts of the boxes past C's edges are not written
    copy();
    bulk_commit();
  }
}

// v21's epilogue (the why is in gemm_v21_wgmma_staged_bf16.cu): C = alpha A B through shared
// memory and the TMA, for beta == 0, in 4 passes of 64 columns a warpgroup. kAdd (v22's split-K):
// each pass is added into C in L2 by the TMA (cp.reduce.async.bulk .add, fp32) instead of stored,
// so that the k-slices of one tile sum up in a C that was zeroed first.
template <bool kAdd, int kTileN = kBN>
struct StoreCStaged {
  static constexpr int kStagingBytes = 2 * 16384;  // 16 KB a consumer warpgroup
  CUtensorMap map_c;                               // fp32 C in 64-row x 32-column boxes
  float alpha;
  __device__ __forceinline__ void operator()(const float (&d)[kTileN / 2], int row0, int col0,
                                             int wg, uint8_t* staging) const {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    using namespace day04::wgmma;
    const int tid = threadIdx.x % 128, lane = tid % 32, warp = tid / 32;
    constexpr int kBox = 64 * 128;  // bytes: 64 rows of 32 fp32
#pragma unroll
    for (int pass = 0; pass < kTileN / 64; ++pass) {
      // Register 4j + 2h + {0, 1}: row 16 warp + lane / 4 + 8 h, columns 8 j + 2 (lane % 4) + {0,
      // 1}; this pass's j are 8 pass .. 8 pass + 7. Column c of the pass is in box c / 32, 16-byte
      // chunk (c % 32) / 4 of its row, at byte 4 (c % 4) inside it.
      auto write = [&] {
#pragma unroll
        for (int jj = 0; jj < 8; ++jj) {
          const int j = 8 * pass + jj, col = 8 * jj + 2 * (lane % 4);
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int row = 16 * warp + lane / 4 + 8 * h;
            uint8_t* const addr =
                staging + (col / 32) * kBox + swizzle128(row, (col % 32) / 4) + 4 * (col % 4);
            *reinterpret_cast<float2*>(addr) =
                make_float2(alpha * d[4 * j + 2 * h], alpha * d[4 * j + 2 * h + 1]);
          }
        }
      };
      auto copy = [&] {
        if constexpr (kAdd) {
          tma_reduce_add_2d(&map_c, staging, col0 + 64 * pass, row0 + 64 * wg);
          tma_reduce_add_2d(&map_c, staging + kBox, col0 + 64 * pass + 32, row0 + 64 * wg);
        } else {
          tma_store_2d(&map_c, staging, col0 + 64 * pass, row0 + 64 * wg);
          tma_store_2d(&map_c, staging + kBox, col0 + 64 * pass + 32, row0 + 64 * wg);
        }
      };
      staged_pass(wg, write, copy);
    }
#else
    (void)d, (void)row0, (void)col0, (void)wg, (void)staging;
#endif
  }
};

// Whether v21's staged epilogue (and v22's adding form) can take a call: beta == 0 (C is never
// read), A and B as the TMA can describe them (tma_bf16_ok), and C 16-byte aligned for its stores.
inline bool staged_bf16_ok(GemmShape s, const void* a, const void* b, float beta, const float* c) {
  return beta == 0.f && tma_bf16_ok(s, a, b) && gpu100::aligned16(c);
}

// v21's and v22's tile order: bands of 8 pair rows (2048 rows of C); measured against v17's 4 in
// gemm_v21_wgmma_staged_bf16.cu.
inline constexpr int kStagedGroupPairRows = 8;

// How many 2-CTA clusters of gemm_v13_kernel<Epilogue, kSplitK, E> fit on the GPU at once (the
// GPCs' SM counts decide); sets the kernel's shared-memory attribute on its first use on each GPU.
template <class Epilogue, bool kSplitK = false, class E = Bf16>
int v13_max_clusters() {
  static gpu100::PerDevice<int> clusters_per_gpu;  // per GPU: asked on each it runs on
  const int clusters = clusters_per_gpu.get([] {
    CUDA_CHECK(cudaFuncSetAttribute(gemm_v13_kernel<Epilogue, kSplitK, E>,
                                    cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    int(v13_smem_bytes<Epilogue>())));
    cudaLaunchConfig_t config{};
    config.gridDim = dim3(2);
    config.blockDim = dim3(kThreadsWS);
    config.dynamicSmemBytes = v13_smem_bytes<Epilogue>();
    cudaLaunchAttribute attr{};
    attr.id = cudaLaunchAttributeClusterDimension;
    attr.val.clusterDim.x = 2;
    attr.val.clusterDim.y = 1;
    attr.val.clusterDim.z = 1;
    config.attrs = &attr;
    config.numAttrs = 1;
    int n = 0;
    CUDA_CHECK(cudaOccupancyMaxActiveClusters(&n, gemm_v13_kernel<Epilogue, kSplitK, E>, &config));
    if (n < 1) throw std::runtime_error("v13: no 2-CTA cluster fits on this GPU");
    return n;
  });
  return clusters;
}

// The tile pairs of a shape (2 x 128 rows by E::kBN columns of C).
template <class E = Bf16>
int64_t v13_pairs(GemmShape s) {
  return int64_t(gpu100::ceil_div(gpu100::ceil_div(s.m, kBM), 2)) * gpu100::ceil_div(s.n, E::kBN);
}

// A B through v13's main loop on the tensor maps of A (boxes of kBM rows x E::kBK) and of B (BF16:
// 64 k-rows x 64 columns; TF32: B^T in 128 rows x E::kBK), each tile handed to `epilogue`. The
// caller has checked the arguments and the build (sm_90a). group: the order of the tile pairs, 0
// for row-major (v13), else bands of that many pair rows (v17). kSplitK: each pair's k-tiles in
// `splits` slices (1 <= splits <= the k-tile count), each slice's sums added into C by the
// epilogue.
template <class Epilogue, bool kSplitK = false, class E = Bf16>
void launch_v13_maps(GemmShape s, const CUtensorMap& map_a, const CUtensorMap& map_b,
                     const Epilogue& epilogue, cudaStream_t stream, int group = 0, int splits = 1) {
  const int64_t items = v13_pairs<E>(s) * (kSplitK ? splits : 1);
  const int clusters =
      static_cast<int>(std::min<int64_t>(items, v13_max_clusters<Epilogue, kSplitK, E>()));
  gemm_v13_kernel<Epilogue, kSplitK, E>
      <<<2 * clusters, kThreadsWS, v13_smem_bytes<Epilogue>(), stream>>>(
          s.m, s.n, s.k, group, splits, epilogue, map_a, map_b);
  CUDA_CHECK_LAST();
}

// The BF16 form (A and B row-major bf16, M x K times K x N), for shapes and pointers that pass
// tma_bf16_ok(s, a, b).
template <class Epilogue, bool kSplitK = false>
void launch_v13(GemmShape s, const __nv_bfloat16* a, const __nv_bfloat16* b,
                const Epilogue& epilogue, cudaStream_t stream, int group = 0, int splits = 1) {
  launch_v13_maps<Epilogue, kSplitK>(s, make_tma_map_2d(a, s.m, s.k, kBM, Bf16::kBK),
                                     make_tma_map_2d(b, s.k, s.n, Bf16::kBK, 64), epilogue, stream,
                                     group, splits);
}

// The TF32 form: A (M x K) and B^T (N x K), fp32, row-major, rows of K % 4 == 0 floats and
// 16-byte aligned (tf32_k_major makes them).
template <class Epilogue>
void launch_v13_tf32(GemmShape s, const float* a, const float* b_t, const Epilogue& epilogue,
                     cudaStream_t stream, int group = 0) {
  launch_v13_maps<Epilogue, false, Tf32>(s, make_tma_map_2d(a, s.m, s.k, kBM, Tf32::kBK),
                                         make_tma_map_2d(b_t, s.n, s.k, 128, Tf32::kBK), epilogue,
                                         stream, group);
}

}  // namespace day04::wgmma_gemm
