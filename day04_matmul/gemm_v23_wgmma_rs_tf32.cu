// GEMM v23 (TF32), gemm_v23_wgmma_rs_tf32.cu: v21's TF32 form without the transpose of B.
// What changed, and why it is faster:
//  - wgmma reads TF32 operands from shared memory only K-major, and B (K x N, row-major) is
//    N-major, so v11-v21 in TF32 first transpose all of B into a scratch buffer: at 4096^3 about
//    35 of 386 us (Nsight Compute on an H200), while their GEMM kernel alone (338 us) was level
//    with cuBLAS's, which reads B as it is.
//  - Here the kernel computes D = C^T = B^T A^T. Its wgmma A operand, 64 columns of B x 8 k, may
//    come from registers, and registers can be loaded from an N-major tile in any order: each
//    consumer loads its fragments from B's tile in shared memory (16 four-byte loads a thread per
//    k-tile of 32, arranged so that no two lanes of a load share a bank: wgmma_gemm::mma_ktile_nt).
//    A (M x K, row-major) is K-major, which is what the wgmma B operand wants from shared memory:
//    the TMA loads it as v13's TF32 form loaded B^T, each CTA of the cluster one half, multicast.
//  - Same kernel otherwise (gemm_v13_kernel with E = Tf32Nt): 2-CTA clusters, persistent, bands of
//    8 pair rows. Its tile is 128 columns of B (rows of D) x 256 rows of A.
//  - Predicted: the transpose's 35 us gone from 386 at 4096^3, if the loads hide under the
//    products (the wgmma's own shared reads, 80 KB a k-tile for two warpgroups, plus 16 KB of
//    loads, against the 128 bytes a cycle shared memory gives over the ~1000 cycles a k-tile
//    takes on the tensor cores).
//  - The epilogue is v21's, transposed: the accumulators hold C^T, so each warpgroup writes its 64
//    columns x 256 rows of C into the staging tile column-wise (4-byte shared stores: a register
//    pair is two rows of C) and the TMA stores the boxes (StoreCTransposedStaged).
//  - Measured (an H200, results/h200/profiles.txt): at 4096^3 0.378 -> 0.342 ms against v21's TF32
//    form in the same build, level with cuBLAS TF32 (1.00x); the kernel 341.6 us with the tensor
//    pipe 90.7% busy, as v21's TF32 GEMM kernel alone (341.2 us, 91.0%). The first form wrote C
//    from the registers (4-byte global stores while the warpgroups could multiply): 0.362 ms, its
//    kernel 361 us at 86%; the staged stores took the 20 us back. The fragment loads hide: Nsight
//    Compute counts no shared-load bank conflicts.
// What it costs: the TMA's rules: K % 4 == 0, N % 4 == 0 (16-byte rows of A and B), A and B
// 16-byte aligned; other calls run v21's TF32 form. With beta != 0 or a C the TMA cannot store,
// the epilogue writes C from the registers (StoreCTransposed).
#include <cuda.h>
#include <cuda_runtime.h>

#include <string>

#include "common/arch.hpp"
#include "common/math.hpp"
#include "gemm.hpp"
#include "gemm_v13_kernel.cuh"
#include "tma.hpp"

namespace day04 {

namespace v23 {

// C = alpha D^T + beta C from D = C^T's tile at (row0, col0) of D (rows: columns of C).
struct StoreCTransposed {
  float* c;
  int m, n;  // C's shape
  float alpha, beta;
  __device__ __forceinline__ void operator()(const float (&d)[128], int row0, int col0,
                                             int wg) const {
    const int lane = threadIdx.x % 32, w = (threadIdx.x % 128) / 32, t = lane % 4;
#pragma unroll
    for (int h = 0; h < 2; ++h) {  // accumulator rows lane / 4 and lane / 4 + 8
      const int col = row0 + 64 * wg + wgmma_gemm::v23_column(w, lane / 4 + 8 * h);
      if (col >= n) continue;
#pragma unroll
      for (int j = 0; j < 32; ++j) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int row = col0 + 8 * j + 2 * t + e;
          if (row >= m) continue;
          float* out = c + size_t(row) * n + col;
          const float v = alpha * d[4 * j + 2 * h + e];
          *out = beta != 0.f ? v + beta * *out : v;
        }
      }
    }
  }
};

// v21's staged epilogue, transposed: C = alpha D^T through shared memory and the TMA, for beta ==
// 0. Warpgroup wg holds 64 columns of C (D's rows) x 256 rows of C (D's columns); 4 passes of 64
// rows of C, each through two boxes of 64 rows x 32 columns (C's columns 32 h .. 32 h + 31 of the
// warpgroup's 64: accumulator rows lane / 4 + 8 h, see v23_column) in the 128-byte swizzle. The
// two values of a register pair lie in two rows of C, so the writes are 4 bytes each; the lanes of
// one write cover 4 rows x 8 chunks of a box, 2 lanes a bank (2 wavefronts).
struct StoreCTransposedStaged {
  static constexpr int kStagingBytes = 2 * 16384;  // 16 KB a consumer warpgroup
  CUtensorMap map_c;                               // fp32 C in 64-row x 32-column boxes
  float alpha;
  __device__ __forceinline__ void operator()(const float (&d)[128], int row0, int col0, int wg,
                                             uint8_t* staging) const {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    using namespace day04::wgmma;
    const int tid = threadIdx.x % 128, lane = tid % 32, w = tid / 32, t = lane % 4;
    constexpr int kBox = 64 * 128;  // bytes: 64 rows of 32 fp32
#pragma unroll
    for (int pass = 0; pass < 4; ++pass) {
      auto write = [&] {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          // Column of the box: v23_column less the box's 32 h, as (16-byte chunk, word in chunk).
          const int cb = wgmma_gemm::v23_column(w, lane / 4 + 8 * h) - 32 * h;
#pragma unroll
          for (int jj = 0; jj < 8; ++jj) {
#pragma unroll
            for (int e = 0; e < 2; ++e) {
              const int row = 8 * jj + 2 * t + e;  // of the pass's 64 rows of C
              *reinterpret_cast<float*>(staging + h * kBox + swizzle128(row, cb / 4) +
                                        4 * (cb % 4)) = alpha * d[4 * (8 * pass + jj) + 2 * h + e];
            }
          }
        }
      };
      auto copy = [&] {
        tma_store_2d(&map_c, staging, row0 + 64 * wg, col0 + 64 * pass);
        tma_store_2d(&map_c, staging + kBox, row0 + 64 * wg + 32, col0 + 64 * pass);
      };
      wgmma_gemm::staged_pass(wg, write, copy);
    }
#else
    (void)d, (void)row0, (void)col0, (void)wg, (void)staging;
#endif
  }
};

}  // namespace v23

void gemm_v23_wgmma_rs_tf32(GemmShape s, float alpha, const float* a, const float* b, float beta,
                            float* c, cudaStream_t stream) {
  check_gemm_args(s, a, b, c);
  gpu100::require_build(gpu100::ArchNeed::kSm90a, "v23_wgmma_rs_tf32");
  if (s.k % 4 != 0 || s.n % 4 != 0 || !gpu100::aligned16(a) || !gpu100::aligned16(b)) {
    gemm_v21_wgmma_staged_tf32(s, alpha, a, b, beta, c, stream);  // rows TMA cannot describe
    return;
  }
  using wgmma_gemm::Tf32Nt;
  // D = C^T is N x M: its rows are B's columns (the kernel's "A", 4 boxes of 32 columns x 32 k a
  // CTA) and its columns A's rows (the kernel's "B", 128 rows x 32 k from each CTA of a pair).
  const GemmShape d_shape{s.n, s.m, s.k};
  const CUtensorMap map_b = make_tma_map_2d(b, s.k, s.n, Tf32Nt::kBK, 32);
  const CUtensorMap map_a = make_tma_map_2d(a, s.m, s.k, 128, Tf32Nt::kBK);
  if (beta == 0.f && gpu100::aligned16(c)) {  // C written through shared memory by the TMA
    const v23::StoreCTransposedStaged epilogue{make_tma_map_2d(c, s.m, s.n, 64, 32), alpha};
    wgmma_gemm::launch_v13_maps<v23::StoreCTransposedStaged, false, Tf32Nt>(
        d_shape, map_b, map_a, epilogue, stream, wgmma_gemm::kStagedGroupPairRows);
  } else {  // C read (beta != 0) or not aligned for the TMA: from the registers
    wgmma_gemm::launch_v13_maps<v23::StoreCTransposed, false, Tf32Nt>(
        d_shape, map_b, map_a, v23::StoreCTransposed{c, s.m, s.n, alpha, beta}, stream,
        wgmma_gemm::kStagedGroupPairRows);
  }
}

std::string v23_row_note(GemmShape s) {
  if (s.k % 4 == 0 && s.n % 4 == 0) return "";
  return "K or N not a multiple of 4: TMA cannot describe the rows, so this shape ran "
         "v21_wgmma_staged_tf32 (B transposed and padded first)";
}

}  // namespace day04
