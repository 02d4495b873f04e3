#pragma once
// day08's TMA-im2col implicit GEMM: the kernel and launcher of v10 (bf16) and v11 (fp32 read as
// TF32), which differ only in their element type. The lesson is in v10's file
// (conv2d_v10_tma_im2col_wgmma_bf16_nhwc.cu) and v11's; the tiling, the stages and the consumer
// warpgroups are implicit_gemm_wgmma.cuh's.
//
// The producer is one warp (a warpgroup in the ping-pong tiling, for setmaxnreg), one of whose
// threads issues, per slab (one filter tap (r, s) x kBK channels), an im2col copy of x (the tile's
// 128 output pixels, walked by the copy engine) and a 2D copy of the filters; the stage's `full`
// barrier waits for its one arrival and the two copies' bytes. Everything here runs in sm_90a code
// only; the launcher is called where the running GPU executes it (the variants' entry points
// check).
#include <cuda.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>

#include "common/cuda_check.hpp"
#include "common/math.hpp"
#include "common/occupancy.hpp"
#include "conv.hpp"
#include "conv_day.hpp"
#include "implicit_gemm_nhwc.cuh"
#include "implicit_gemm_wgmma.cuh"
#include "tma.hpp"
#include "wgmma.cuh"

namespace day08::tma_im2col {

// The shared tiling with a one-warp producer, in bf16 (v10) or fp32 (v11).
template <class T, int kBN, int kStages = 4, bool kPingPong = false, int kStagedBoxes = 0>
using TmaConfig =
    wgmma_conv::Config<T, kBN, kPingPong ? 128 : 32, kStages, kPingPong, kStagedBoxes>;

// The im2col maps of x and the 2D maps of the weights, one each per convolution of the group.
struct Maps {
  CUtensorMap x0, x1, w0, w1;
  CUtensorMap y0, y1, r0, r1;  // the staged output's y and residual ([M][K], kOutBoxRows-row boxes)
};

// kNpqk false: the day's variants, fp32 NKPQ out (+ bias); true: conv.hpp's fused layer forms, NPQK
// out (bf16 for v10, fp32 for v11) with bias, residual and ReLU. blockIdx.z picks the convolution
// of the group (and its maps); blockIdx.x the first of the output tiles the block loops over.
// kSplit: kNone, the work units are whole tiles, walked tap by tap; kWorkspace and kCluster, slab
// ranges of tiles (wgmma_conv::SplitK; kCluster launched in clusters, one unit per block).
template <class C, class Y, bool kNpqk, wgmma_conv::SplitPath kSplit>
__global__ void __launch_bounds__(C::kThreads, C::kMinBlocks)
    conv2d_tma_im2col_kernel(nhwc::Params g, const ConvGroup<typename C::T, Y> grp, int tiles_m,
                             int tiles_n, int c_blocks, const wgmma_conv::SplitK sk,
                             const __grid_constant__ Maps maps) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using namespace day04::wgmma;
  constexpr int kBM = C::kBM, kBN = C::kBN, kBK = C::kBK, kStages = C::kStages;
  extern __shared__ uint8_t smem_raw[];
  const wgmma_conv::Stages<C> sm(smem_raw);
  const int num_slabs = g.r * g.s * c_blocks;  // one tap x kBK channels each
  // full: the producer's one expect_tx arrival, with the two copies' bytes.
  wgmma_conv::init_stages(sm, 1);
  __syncthreads();  // the last block-wide barrier: from here the roles only meet on mbarriers

  if (threadIdx.x >= 128 * C::kConsumerWGs) {
    // ---- producer warp: one thread issues the A (im2col) and B (filters) copies of each slab ----
    if constexpr (C::kPingPong) {
      asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(C::kProducerRegs));
    }
    if (threadIdx.x != 128 * C::kConsumerWGs) return;
    const CUtensorMap* map_x = blockIdx.z == 0 ? &maps.x0 : &maps.x1;
    const CUtensorMap* map_w = blockIdx.z == 0 ? &maps.w0 : &maps.w1;
    constexpr bool kSplitK = kSplit != wgmma_conv::SplitPath::kNone;
    const int tiles = tiles_m * tiles_n, splits = kSplitK ? sk.splits : 1;
    int it = 0;  // slab `it` uses stage it % kStages, in phase it / kStages of its barriers
    // The copies of this block's next slab: tap (r, s), channel block cb of the tile at output
    // pixel m0 (image n0, window corner (h0, w0)) and filter k0.
    auto issue = [&](int r, int s, int cb, int k0, int n0, int h0, int w0) {
      const int st = it % kStages;
      // The stage last held slab it - kStages: wait until the 8 consumer warps are done.
      if (it >= kStages) mbar_wait(&sm.empty[st], (it / kStages - 1) & 1);
      mbar_expect_tx(&sm.full[st], C::kABytes + C::kBBytes);
      // A: 128 pixels x channels kBK cb .. kBK cb + kBK - 1 of tap (r, s).
      tma_load_im2col_4d(sm.a(st), map_x, kBK * cb, w0, h0, n0, uint16_t(s * g.dil),
                         uint16_t(r * g.dil), &sm.full[st]);
      // B: filters k0 .. k0 + kBN - 1 at the same (r, s, c): rows past K and columns past R*S*C
      // are zero-filled by the TMA (and counted in its bytes).
      tma_load_2d(sm.b(st), map_w, (r * g.s + s) * g.c + kBK * cb, k0, &sm.full[st]);
      ++it;
    };
    // The same work units as the consumers: a tile, or one slab range of it (split-K). kCluster:
    // one unit, so nothing is copied into the stages after its last slab (the consumers park
    // their sums there).
    // With C::kHalfTiles, whole tiles and then the last wave's halves (wgmma_conv::tile_walk): a
    // half tile's copies are its whole tile's.
    const wgmma_conv::TileWalk walk = C::kHalfTiles ? wgmma_conv::tile_walk(tiles, gridDim.x)
                                                    : wgmma_conv::TileWalk{tiles, tiles};
    for (int unit = blockIdx.x; unit < walk.units * splits; unit += gridDim.x) {
      int tile = unit / splits, half = -1;
      if constexpr (C::kHalfTiles) wgmma_conv::unit_tile(walk, unit, tile, half);
      (void)half;
      const int m_tile = tile / tiles_n;
      const int m0 = m_tile * kBM, k0 = (tile - m_tile * tiles_n) * kBN;
      // The first output pixel of the tile and its window's corner in x (in the padding, for the
      // image's first row or column): the copies start there, the engine walks the rest.
      const int n0 = m0 / g.PQ, pq = m0 - n0 * g.PQ, p0 = pq / g.Q, q0 = pq - p0 * g.Q;
      const int h0 = p0 * g.stride - g.pad, w0 = q0 * g.stride - g.pad;
      if constexpr (kSplitK) {
        const wgmma_conv::SlabRange slabs =
            wgmma_conv::split_slabs(num_slabs, splits, unit - tile * splits);
        for (int j = slabs.begin; j < slabs.end; ++j) {
          // Slab j of the tile: tap (r, s) and channel block cb, taps in (r, s) order.
          const int tap = j / c_blocks, cb = j - tap * c_blocks;
          const int r = tap / g.s;
          issue(r, tap - r * g.s, cb, k0, n0, h0, w0);
        }
      } else {
        for (int r = 0; r < g.r; ++r)
          for (int s = 0; s < g.s; ++s)
            for (int cb = 0; cb < c_blocks; ++cb) issue(r, s, cb, k0, n0, h0, w0);
      }
    }
    return;
  }

  // ---- consumer warpgroups (implicit_gemm_wgmma.cuh); A and B both came by TMA ----
  const ConvOperands<typename C::T, Y> op = blockIdx.z == 0 ? grp.op[0] : grp.op[1];
  if constexpr (C::kPingPong) {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(C::kConsumerRegs));
    wgmma_conv::consume_tiles_pingpong<C, Y, kNpqk>(g, op, grp.relu, tiles_m, tiles_n, num_slabs,
                                                    sm, blockIdx.z == 0 ? &maps.y0 : &maps.y1,
                                                    blockIdx.z == 0 ? &maps.r0 : &maps.r1);
  } else {
    wgmma_conv::consume_tiles<C, Y, false, kNpqk, kSplit>(g, op, grp.relu, tiles_m, tiles_n,
                                                          num_slabs, sm, sk);
  }
#else
  // Built for an architecture without wgmma: the launcher never calls this.
  (void)g, (void)grp, (void)tiles_m, (void)tiles_n, (void)c_blocks, (void)sk, (void)maps;
#endif
}

// x in im2col boxes of `pixels` output pixels x `channels` channels of one tap.
template <class T>
CUtensorMap im2col_map(const ConvShape& s, const T* x, int pixels, int channels) {
  return day04::make_tma_map_im2col_nhwc(
      x, s.n, s.h, s.w, s.c, -s.pad, -s.pad, s.pad - (s.r - 1) * s.dilation,
      s.pad - (s.s - 1) * s.dilation, s.stride, s.stride, pixels, channels);
}

// A launch of C's kernel on `grid` in clusters of `size` blocks along x; `attr` holds the cluster
// dimension the configuration points at.
template <class C>
cudaLaunchConfig_t cluster_config(dim3 grid, int size, cudaStream_t stream,
                                  cudaLaunchAttribute& attr) {
  attr = cudaLaunchAttribute{};
  attr.id = cudaLaunchAttributeClusterDimension;
  attr.val.clusterDim.x = unsigned(size);
  attr.val.clusterDim.y = 1;
  attr.val.clusterDim.z = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = dim3(C::kThreads);
  config.dynamicSmemBytes = C::kSmemBytes;
  config.stream = stream;
  config.attrs = &attr;
  config.numAttrs = 1;
  return config;
}

// How many clusters of `size` blocks of kKernel fit on the GPU at once (its GPCs decide: a cluster
// lives in one), for size 2, 4 and 8; asked once per kernel and GPU. The caller has raised the
// kernel's dynamic shared memory (persistent_grid does).
template <class C, auto kKernel>
int max_active_clusters(int size) {
  using Counts = std::array<int, wgmma_conv::kMaxClusterSplits + 1>;
  static gpu100::PerDevice<Counts> per_gpu;
  const Counts clusters = per_gpu.get([] {
    std::array<int, wgmma_conv::kMaxClusterSplits + 1> n{};
    for (int sz = 2; sz <= wgmma_conv::kMaxClusterSplits; sz *= 2) {
      cudaLaunchAttribute attr;
      const cudaLaunchConfig_t config = cluster_config<C>(dim3(unsigned(sz)), sz, nullptr, attr);
      CUDA_CHECK(cudaOccupancyMaxActiveClusters(&n[size_t(sz)], kKernel, &config));
    }
    return n;
  });
  return clusters[size_t(size)];
}

// The launch, after the variant's checks (wgmma_conv::check_launch): the persistent grid, the four
// tensor maps (made on the host at each call), the kernel. `mode`: how a layer whose tiles fill at
// most half the GPU is split (SplitKMode, conv_day.hpp).
template <class C, class Y, bool kNpqk>
void launch(const char* name, const ConvShape& s, const ConvGroup<typename C::T, Y>& grp,
            cudaStream_t stream, SplitKMode mode) {
  using wgmma_conv::SplitPath;
  constexpr auto kPlainKernel = conv2d_tma_im2col_kernel<C, Y, kNpqk, SplitPath::kNone>;
  const nhwc::Params g = nhwc::make_params(s, C::kBK);
  wgmma_conv::PersistentGrid p =
      wgmma_conv::persistent_grid<C, kPlainKernel>(name, g.M, s.k, grp.count);
  // x in im2col boxes of 128 pixels x kBK channels; the weights as a K x R*S*C matrix in boxes of
  // kBN filters x kBK of GEMM_K (128 bytes: the 128-byte swizzle the descriptors expect). A group
  // of one passes its maps twice.
  Maps maps;
  maps.x0 = im2col_map(s, grp.op[0].x, C::kBM, C::kBK);
  maps.w0 = day04::make_tma_map_2d(grp.op[0].w, s.k, g.RSC, C::kBN, C::kBK);
  maps.x1 = grp.count > 1 ? im2col_map(s, grp.op[1].x, C::kBM, C::kBK) : maps.x0;
  maps.w1 =
      grp.count > 1 ? day04::make_tma_map_2d(grp.op[1].w, s.k, g.RSC, C::kBN, C::kBK) : maps.w0;
  if constexpr (C::kStagedOut) {
    // y and the residual as [M][K] matrices in boxes of C::kOutBoxRows rows x 128 bytes
    // (C::kBoxCols): with half tiles 64 rows (two per staging box for a whole tile, one for a
    // half tile), else the tile's 128.
    for (int i = 0; i < grp.count; ++i) {
      const auto& o = grp.op[i];
      CUtensorMap& y = i == 0 ? maps.y0 : maps.y1;
      CUtensorMap& r = i == 0 ? maps.r0 : maps.r1;
      y = day04::make_tma_map_2d(o.y, g.M, s.k, C::kOutBoxRows, C::kBoxCols);
      r = o.residual != nullptr
              ? day04::make_tma_map_2d(o.residual, g.M, s.k, C::kOutBoxRows, C::kBoxCols)
              : y;
    }
    if (grp.count == 1) maps.y1 = maps.y0, maps.r1 = maps.r0;
  }
  const int c_blocks = gpu100::ceil_div(s.c, C::kBK);
  const int num_slabs = s.r * s.s * c_blocks;
  const int tiles = p.tiles_m * p.tiles_n;
  // the tiles fill at most half the GPU
  const bool split = C::kSplittable && 2 * int64_t(tiles) <= p.resident;
  wgmma_conv::SplitK sk;
  // Cluster split-K (kBN <= 128: the 256-wide tiles are taken only where the tiles fill the GPU):
  // the largest cluster of 8, 4 or 2 blocks such that every range has at least 4 slabs (it fills
  // the 4-stage pipeline once; the workspace path asks for 8, but its reduction is serial, so
  // longer ranges paid for it) and all the tiles' clusters fit on the GPU at once (one wave). A
  // first guess, to be A/B'd (README).
  if (split && mode == SplitKMode::kCluster) {
    if constexpr (C::kBN <= 128 && C::kSplittable) {
      constexpr auto kClusterKernel = conv2d_tma_im2col_kernel<C, Y, kNpqk, SplitPath::kCluster>;
      const wgmma_conv::PersistentGrid pc =
          wgmma_conv::persistent_grid<C, kClusterKernel>(name, g.M, s.k, grp.count);
      for (int size = wgmma_conv::kMaxClusterSplits; size >= 2 && sk.splits == 1; size /= 2) {
        if (int64_t(tiles) * size <= pc.resident && num_slabs / size >= 4 &&
            int64_t(tiles) * grp.count <= max_active_clusters<C, kClusterKernel>(size)) {
          sk.splits = size;
        }
      }
      if (sk.splits > 1) {
        // tiles x splits blocks (x: cluster-major, rank fastest), one unit each, in clusters of
        // `splits` along x; cudaLaunchKernelEx, since the cluster size is chosen here, at run
        // time. No persistent loop: this path is taken only where every cluster fits on the GPU
        // at once, so a loop would never turn (and a block's second tile would have to wait for
        // its peers to finish reading the sums parked in its stages before refilling them).
        cudaLaunchAttribute attr;
        const cudaLaunchConfig_t config = cluster_config<C>(
            dim3(unsigned(tiles * sk.splits), 1, unsigned(grp.count)), sk.splits, stream, attr);
        CUDA_CHECK(cudaLaunchKernelEx(&config, kClusterKernel, g, grp, p.tiles_m, p.tiles_n,
                                      c_blocks, sk, maps));
        return;
      }
    }
  }
  // Split-K through a global workspace where the tiles fill at most half of the blocks that fit:
  // as many slab ranges as fill them, each of at least 8 slabs (a range must outlast the 4-stage
  // pipeline's fill), at most 16.
  if (split) sk.splits = std::max(1, std::min({p.resident / tiles, num_slabs / 8, 16}));
  if constexpr (!C::kSplittable) {
    kPlainKernel<<<p.grid, C::kThreads, C::kSmemBytes, stream>>>(g, grp, p.tiles_m, p.tiles_n,
                                                                 c_blocks, sk, maps);
  } else if (sk.splits > 1) {
    // The split kernel is its own instance, so the plain one keeps the code it had before split-K
    // existed (measured: carrying the split path cost the N = 32 layers 8-10%,
    // results/h100/profiles.txt).
    constexpr auto kSplitKernel = conv2d_tma_im2col_kernel<C, Y, kNpqk, SplitPath::kWorkspace>;
    p = wgmma_conv::persistent_grid<C, kSplitKernel>(name, g.M, s.k, grp.count);
    const size_t units = size_t(grp.count) * tiles * sk.splits;
    sk.partial =
        static_cast<float*>(conv_scratch(units * C::kBN / 2 * 256 * sizeof(float), stream));
    sk.counters = conv_counters(size_t(grp.count) * tiles, stream);
    p.grid.x = static_cast<unsigned>(std::min<int64_t>(int64_t(tiles) * sk.splits, p.resident));
    kSplitKernel<<<p.grid, C::kThreads, C::kSmemBytes, stream>>>(g, grp, p.tiles_m, p.tiles_n,
                                                                 c_blocks, sk, maps);
  } else {
    kPlainKernel<<<p.grid, C::kThreads, C::kSmemBytes, stream>>>(g, grp, p.tiles_m, p.tiles_n,
                                                                 c_blocks, sk, maps);
  }
  CUDA_CHECK_LAST();
}

// Whether a launch of C's tiles would run without split-K: its tiles fill more than half of the
// blocks that fit on the GPU at once (the launcher's rule).
template <class C, class Y, bool kNpqk>
bool fills_half_the_gpu(const char* name, const ConvShape& s, int group_count) {
  const wgmma_conv::PersistentGrid p = wgmma_conv::persistent_grid<
      C, conv2d_tma_im2col_kernel<C, Y, kNpqk, wgmma_conv::SplitPath::kNone>>(
      name, nhwc::make_params(s, C::kBK).M, s.k, group_count);
  return 2 * int64_t(p.tiles_m) * p.tiles_n > p.resident;
}

// Whether C's tiles give every block of its persistent grid at least two: the ping-pong tiling's
// rule (its two consumer warpgroups take a block's tiles in turn).
template <class C, class Y, bool kNpqk>
bool two_tiles_per_block(const char* name, const ConvShape& s, int group_count) {
  const wgmma_conv::PersistentGrid p = wgmma_conv::persistent_grid<
      C, conv2d_tma_im2col_kernel<C, Y, kNpqk, wgmma_conv::SplitPath::kNone>>(
      name, nhwc::make_params(s, C::kBK).M, s.k, group_count);
  return int64_t(p.tiles_m) * p.tiles_n >= 2 * int64_t(p.resident);
}

// The tiling, by K and by how many tiles there are:
//  - 64 filters (m64n64, two blocks per SM) up to K = 64.
//  - 256 (m64n256) where K is a multiple of 256 and those tiles fill the GPU without split-K. The
//    256-wide tile reads its A rows once for twice the filters: per k-step a warpgroup reads 2 KB
//    of A and 8 KB of B from shared memory for 64 x 256 x 16 multiply-adds, against 2 + 4 KB for
//    half as many (measured at N = 32 on the network's 256- and 512-filter layers: 8-9% faster in
//    bf16, 12-16% in TF32, results/h100/day08_convolution_l3_n32.json and _l4_n32.json). Where the
//    tiles are few (a small batch) the 128-wide ones give split-K twice the work units.
//  - ping-pong 128-wide tiles (consume_tiles_pingpong, implicit_gemm_wgmma.cuh) where a tile has
//    at least 8 slabs and every block gets two tiles or more: each consumer warpgroup owns a whole
//    128 x 128 tile (128 sums a thread, from the producer warpgroup's registers by setmaxnreg), the
//    two take turns at the tensor cores, and one's epilogue (bias, residual, ReLU, stores) runs
//    under the other's main loop, in 6 stages of 32 KB (197 KB, one block per SM). Measured on an
//    H100 at N = 32, A/B in one run (results/h100/profiles.txt): the network's l2 (its six 3x3/1
//    convolutions) 0.512 -> 0.459 ms in bf16, 0.950 -> 0.851 in TF32, where it replaced the 3-stage
//    tiling below; its 3x3/2 (C = 64, 9 slabs) 0.105 -> 0.098 and 0.187 -> 0.173; the day's form at
//    l2 0.0790 -> 0.0766 ms (bf16) and 0.136 -> 0.1255 (TF32). Not taken: the 1x1 shortcuts (1 to 4
//    slabs: a main loop too short to hide an epilogue; 0.134 -> 0.154 ms in bf16) and in place of
//    the 256-wide tiles (the network's l4 0.333 -> 0.357 ms in bf16, 0.611 -> 0.663 in TF32).
//    In the fused form with outputs of the operands' type (bf16, or fp32 for TF32), whole 16-byte
//    rows and aligned y and residual, the staged epilogue (store_staged): the residual in and the
//    outputs out by the TMA through one 16 KB box of shared memory per warpgroup, a pass of 64 bf16
//    or 32 fp32 columns at a time, so that 6 stages still fit. Measured on an H100 with two boxes
//    and 4 stages (three builds in one run, results/h100/profiles.txt): the network's l2 0.459 ->
//    0.411 ms in bf16, its 3x3/2 0.117 -> 0.100. Then on an H200 (two rounds, results/h200/
//    profiles.txt): TF32 staged, l2 0.762 -> 0.722 ms; one box and 6 stages in place of two boxes
//    and 4: bf16 l2 0.383 -> 0.359 ms, TF32 0.722 -> 0.679. In bf16 the staged tiles come before
//    the 256-wide ones where both would run (the network's l3): l3 0.396 -> 0.350 ms on an H200,
//    the graphed network at N = 32 5% faster, its two streams level. TF32 keeps the 256-wide tiles
//    there: the staged ones made its l3 5% faster but the two-stream network 2% slower.
//  - in the fused layer form where C >= 128 and the tiles fill the GPU but give a block fewer than
//    two, 128-wide tiles in 3 stages instead of 4: 101 KB of shared memory instead of 133, so two
//    blocks share an SM and one block's epilogue runs under the other's main loop. Its registers
//    are capped at 96 a thread, which the unsplit kernel fits with an 8-byte spill in bf16 and none
//    in TF32 (the split-K kernels of this tiling would spill far more, and the fill rule keeps them
//    from running). Measured on an H100 before the ping-pong tiles existed, at the network's l2:
//    0.585 to 0.545 ms in bf16, 1.12 to 1.06 ms in TF32. Kept at 4 stages: C = 64 (4-24% slower in
//    3) and the day's fp32 NKPQ form (0.0864 ms on l2 in 3 stages against 0.0772 in 4).
//  - else 128-wide tiles in 4 stages (m64n128, one block per SM), split where the tiles are few.
template <class T, class Y, bool kNpqk>
void launch_for_k(const char* name, const ConvShape& s, const ConvGroup<T, Y>& grp,
                  cudaStream_t stream, SplitKMode mode) {
  using Wide = TmaConfig<T, 256>;
  using PingPong = TmaConfig<T, 128, 6, true>;
  using Staged = TmaConfig<T, 128, 6, true, 1>;
  if (s.k <= 64) {
    launch<TmaConfig<T, 64>, Y, kNpqk>(name, s, grp, stream, mode);
    return;
  }
  const int num_slabs = s.r * s.s * gpu100::ceil_div(s.c, PingPong::kBK);
  const bool pingpong =
      num_slabs >= 8 && two_tiles_per_block<PingPong, Y, kNpqk>(name, s, grp.count);
  // The staged epilogue: NPQK out in the operands' type (bf16, or fp32 for TF32) with whole
  // 16-byte rows and aligned y and residual.
  bool staged = false;
  if constexpr (kNpqk && std::is_same_v<T, Y>) {
    staged = pingpong && s.k % (16 / int(sizeof(Y))) == 0;
    for (int i = 0; i < grp.count; ++i) {
      staged = staged && gpu100::aligned16(grp.op[i].y) &&
               (grp.op[i].residual == nullptr || gpu100::aligned16(grp.op[i].residual));
    }
  }
  // bf16 takes the staged tiles before the 256-wide ones where both run (the network's l3).
  const bool staged_first = staged && std::is_same_v<T, __nv_bfloat16>;
  if (s.k % 256 == 0 && !staged_first && fills_half_the_gpu<Wide, Y, kNpqk>(name, s, grp.count)) {
    launch<Wide, Y, kNpqk>(name, s, grp, stream, mode);
    return;
  }
  if constexpr (kNpqk && std::is_same_v<T, Y>) {
    if (staged) {
      launch<Staged, Y, kNpqk>(name, s, grp, stream, mode);
      return;
    }
  }
  if (pingpong) {
    launch<PingPong, Y, kNpqk>(name, s, grp, stream, mode);
    return;
  }
  if constexpr (kNpqk) {
    using TwoPerSm = TmaConfig<T, 128, 3>;
    if (s.c >= 128 && fills_half_the_gpu<TwoPerSm, Y, kNpqk>(name, s, grp.count)) {
      launch<TwoPerSm, Y, kNpqk>(name, s, grp, stream, mode);
      return;
    }
  }
  launch<TmaConfig<T, 128>, Y, kNpqk>(name, s, grp, stream, mode);
}

// The shape rules both variants share ("" when the shape is taken): whole 16-byte units per row of
// x (c_multiple channels), a stride of at most 8 and window corners in [-128, 127].
inline std::string refusal(const ConvShape& s, int c_multiple) {
  if (s.c % c_multiple != 0) {
    return "C = " + std::to_string(s.c) + " is not a multiple of " + std::to_string(c_multiple) +
           " (the TMA reads rows of whole 16-byte units; pad C with zeros)";
  }
  if (s.stride > 8) return "stride " + std::to_string(s.stride) + " is over the TMA's 8";
  const int reach = (std::max(s.r, s.s) - 1) * s.dilation;
  if (s.pad > 128 || reach - s.pad > 128) {
    return "the window's corners (padding " + std::to_string(s.pad) + ", reach " +
           std::to_string(reach) + ") are outside the im2col copy's [-128, 127]";
  }
  return "";
}

}  // namespace day08::tma_im2col
