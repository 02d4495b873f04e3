// dual v5: the stem kernel written for the stores. v3 paid for generality (runtime R, S, stride,
// a taps loop, ~100 registers for 64 accumulators, 25% occupancy). Here R = S = 3, stride 1,
// pad 1 and the stream's C (3 or 1) are compile-time: every tap unrolls, no index math is left in
// the inner loop, and a thread keeps only 8 channels x 4 pixels (32 accumulators) plus one 6-wide
// input row, so it fits in 72 registers with 7 blocks (44% occupancy) per SM. The epilogue is
// written for the common case too: per pass of 8 channels, the scale and shift come from shared
// memory as 4 float4, the activation is a template chosen once per pass, and each channel is one
// FMA + activation per pixel and one 16-byte streaming store (the general per-element epilogue,
// with its runtime activation switch, global scale/shift loads and store-type branches, was
// roughly a third of the instructions by a hand count: 0.46 ms with it, 0.37 ms without, at
// N = 8 on the H100; DRAM 60% -> 75% busy). Tile shape (16 x 8, 32 x 4, 8 x 16 threads), channels
// per pass (4, 8, 16), blocks per SM (6, 7, 8) and stream-major block order all measured within 2%
// of this or slower. The cost: only the 3 x 3 / stride 1 / pad 1 layer with C in {1, 3} runs here;
// any other shape falls back to v3. Widths Q % 4 != 0 (fp32 output), where the 16-byte store is
// refused, run a second instantiation of the same kernel whose epilogue stages each pass through
// shared memory and stores 128 contiguous bytes per warp instruction ("The epilogue for fp32
// output with Q % 4 != 0" below); a separate instantiation, so the aligned kernel's registers stay
// as they were. (Thread coarsening and constant/shared broadcast weights: PMPP chapters 7 and 16.)
#include <cuda_bf16.h>

#include <cstdint>
#include <stdexcept>

#include "common/cuda_check.hpp"
#include "common/math.hpp"
#include "halo_tile.cuh"
#include "kernels.cuh"

namespace capstone::detail {

namespace {

constexpr int kTx = 16, kTy = 8, kThreads = kTx * kTy;  // 128 threads, 4 warps
constexpr int kPx = 4;                                  // output pixels per thread, along q
constexpr int kKg = 8;                                  // output channels per pass
constexpr int kTileQ = kTx * kPx, kTileP = kTy;         // 64 x 8 output pixels per block
constexpr int kRows = kTileP + 2;                       // the window with its 1-pixel halo
// A row of the window: smem column j holds input column q0 - 1 + j. Thread tx reads columns
// 4 tx .. 4 tx + 5 as a float4 and a float2 (up to column 65 of the 66 loaded): a pitch that is
// a multiple of 4 keeps them aligned; a quarter-warp's 8 float4 are 128 contiguous bytes (no
// bank conflict), the float2 are 2-way conflicted (tx and tx + 8), a minor cost next to the FMAs.
constexpr int kPitch = 68, kCols = kTileQ + 2;
constexpr int kMaxC = 3;
constexpr int kSmemBytes = 48 * 1024;
constexpr int kWindowFloats = kMaxC * kRows * kPitch;  // 2040 floats, a multiple of 4

// One channel's 4 pixels: the scale and shift, then the activation (a template parameter).
template <int ACT>
__device__ __forceinline__ void scale_activate(const float (&acc)[kPx], float al, float be,
                                               float (&v)[kPx]) {
#pragma unroll
  for (int j = 0; j < kPx; ++j) {
    v[j] = fmaf(acc[j], al, be);
    if (ACT == 1) v[j] = fmaxf(v[j], 0.f);
    if (ACT == 2) v[j] = v[j] / (1.f + __expf(-v[j]));
  }
}

// The common case of the epilogue: 8 whole channels, fp32 output, Q % 4 == 0 (so a thread's 4
// pixels are all inside); the activation a template parameter (the caller branches once per pass,
// warp-uniformly), scale and shift from shared memory, one 16-byte streaming store per channel.
template <int ACT>
__device__ __forceinline__ void fast_epilogue(const float (&acc)[kKg][kPx], const float (&al)[kKg],
                                              const float (&be)[kKg], float* yp, int64_t plane) {
#pragma unroll
  for (int i = 0; i < kKg; ++i) {
    float v[kPx];
    scale_activate<ACT>(acc[i], al[i], be[i], v);
    __stcs(reinterpret_cast<float4*>(yp), make_float4(v[0], v[1], v[2], v[3]));
    yp += plane;
  }
}

// The epilogue for fp32 output with Q % 4 != 0, where every channel's rows start anywhere inside
// a float4 of memory, so a thread's 4 pixels straddle two float4s and its 16-byte store is
// refused. Storing its 4 pixels as 4-byte stores (the general epilogue) is slow for a reason
// beyond the instruction count: a warp's store instruction then writes 4 bytes of every 16 over
// 512 bytes, four times the memory transactions of 128 contiguous bytes. So the pass's 8 channels
// x 8 rows x 64 pixels go through shared memory: each thread writes its 4 values as one float4
// (rows of 64 floats: a warp writes 512 contiguous bytes, no bank conflict), then the block stores
// the rows with the lanes of a warp on consecutive pixels: each store instruction writes 128
// contiguous bytes (wherever they start), from consecutive shared-memory words. The cost: 16 KB
// more shared memory per block (still 7 blocks per SM) and two barriers per pass. (A first try
// kept 16-byte global stores by shifting each row into place in shared memory: its 4-way
// conflicted scalar shared-memory accesses left it at half the aligned kernel's speed. Staging an
// output tile through shared memory for coalesced stores is what CUTLASS's epilogues do.)
constexpr int kStageFloats = kKg * kTileP * kTileQ;  // 4096 floats, 16 KB

// Thread (tx, ty) writes its channel-group values into the staging rows (channel k0 + i, row
// p0 + ty): row i kTileP + ty, columns 4 tx .. 4 tx + 3.
template <int ACT>
__device__ __forceinline__ void stage_pass(const float (&acc)[kKg][kPx], const float* as, int kpad,
                                           int k0, float* st, int tx, int ty) {
#pragma unroll
  for (int i = 0; i < kKg; ++i) {
    float v[kPx];
    scale_activate<ACT>(acc[i], as[k0 + i], as[kpad + k0 + i], v);
    *reinterpret_cast<float4*>(st + (i * kTileP + ty) * kTileQ + kPx * tx) =
        make_float4(v[0], v[1], v[2], v[3]);
  }
}

// The block stores the 64 staged rows, two at a time: thread t takes pixel t % 64 of row
// 2 it + t / 64. g0: the global element of channel k0's pixel (p0, q0).
__device__ __forceinline__ void store_staged(const float* st, float* y, const DualArgs& a, int k0,
                                             int p0, int q0, int64_t g0, int tid) {
  const int64_t plane = int64_t(a.p) * a.q;
  const int col = tid % kTileQ, half = tid / kTileQ;
  if (q0 + col >= a.q) return;  // past the image's last column: nothing to store
#pragma unroll 4  // fully unrolled, the 32 addresses took registers the kernel has not got
  for (int it = 0; it < kKg * kTileP / 2; ++it) {
    const int row = 2 * it + half, i = row / kTileP, r = row % kTileP;
    if (k0 + i < a.k && p0 + r < a.p) {
      __stcs(y + g0 + i * plane + int64_t(r) * a.q + col, st[row * kTileQ + col]);
    }
  }
}

// kShifted: the kernel for fp32 output with Q % 4 != 0, through the staged epilogue. A template
// parameter, so that each kernel gets its own registers: compiled into one kernel, the aligned
// case's registers grew past 72 and ptxas spilled in it too.
template <int C, int ST, bool kShifted>
__device__ __forceinline__ void store_bound_block(const DualArgs& a, int n, int kpad, bool vec,
                                                  float* xs, float* ws) {
  // A compile-time stream index: its pointers stay kernel-parameter operands (no registers, no
  // local copy of a dynamically indexed parameter).
  const StreamArgs& sa = a.s[ST];
  const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * kTx + tx;
  const int p0 = blockIdx.y * kTileP, q0 = blockIdx.x * kTileQ;
  const int p = p0 + ty, q = q0 + tx * kPx;

  // The window of all C channels (zeros in the padding and past the image), read once.
#pragma unroll
  for (int c = 0; c < C; ++c) {
    day08::load_halo_tile(xs + c * kRows * kPitch, kPitch, sa.x + (int64_t(n) * C + c) * a.h * a.w,
                          a.h, a.w, p0 - 1, q0 - 1, kRows, kCols, tid, kThreads);
  }
  // All K weights, transposed to [c][tap][kpad] (zeros past K): one channel group of one tap
  // is two consecutive float4, read at the same address by every thread (a broadcast).
  for (int i = tid; i < C * 9 * kpad; i += kThreads) {
    const int k = i % kpad, ct = i / kpad;  // ct = c * 9 + tap
    const int c = ct / 9, tap = ct - c * 9;
    ws[i] = k < a.k ? __ldg(sa.w + (int64_t(k) * C + c) * 9 + tap) : 0.f;
  }
  // The epilogue's per-channel scale and shift, after the weights (zeros past K).
  float* as = ws + C * 9 * kpad;
  for (int k = tid; k < kpad; k += kThreads) {
    as[k] = k < a.k ? __ldg(sa.alpha + k) : 0.f;
    as[kpad + k] = k < a.k ? __ldg(sa.beta + k) : 0.f;
  }
  __syncthreads();  // window and weights complete
  // The tail's threads leave here, after the only barrier; with the staged epilogue, which has
  // barriers of its own, they stay (computing on the zero-filled window) and store nothing.
  if (!kShifted && (p >= a.p || q >= a.q)) return;

  const float* win = xs + ty * kPitch + tx * kPx;
  const int64_t plane = int64_t(a.p) * a.q;
  const int64_t o0 = int64_t(n) * a.k * plane + int64_t(p) * a.q + q;
  const int valid = min(kPx, a.q - q);
#pragma unroll 1
  for (int k0 = 0; k0 < kpad; k0 += kKg) {
    float acc[kKg][kPx];
#pragma unroll
    for (int i = 0; i < kKg; ++i)
#pragma unroll
      for (int j = 0; j < kPx; ++j) acc[i][j] = 0.f;
#pragma unroll
    for (int c = 0; c < C; ++c) {
#pragma unroll
      for (int r = 0; r < 3; ++r) {
        // One input row of the 3 x 6 window, from shared memory into registers, reused by the
        // 3 taps x 8 channels x 4 pixels of that row (96 FMAs).
        const float* row = win + (c * kRows + r) * kPitch;
        const float4 lo = *reinterpret_cast<const float4*>(row);
        const float2 hi = *reinterpret_cast<const float2*>(row + 4);
        const float x[6] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y};
#pragma unroll
        for (int s = 0; s < 3; ++s) {
          const float4* w4 = reinterpret_cast<const float4*>(ws + (c * 9 + r * 3 + s) * kpad + k0);
#pragma unroll
          for (int i4 = 0; i4 < kKg / 4; ++i4) {
            const float4 w = w4[i4];
            const float wv[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
            for (int u = 0; u < 4; ++u)
#pragma unroll
              for (int j = 0; j < kPx; ++j)
                acc[4 * i4 + u][j] = fmaf(x[j + s], wv[u], acc[4 * i4 + u][j]);
          }
        }
      }
    }
    if constexpr (kShifted) {
      // Every channel group, a last partial one too (its staged values past K are not stored).
      float* st = ws + kMaxC * 9 * kpad + 2 * kpad;
      if (a.act == 1) {
        stage_pass<1>(acc, as, kpad, k0, st, tx, ty);
      } else if (a.act == 2) {
        stage_pass<2>(acc, as, kpad, k0, st, tx, ty);
      } else {
        stage_pass<0>(acc, as, kpad, k0, st, tx, ty);
      }
      __syncthreads();  // the pass staged
      store_staged(st, static_cast<float*>(sa.y), a, k0, p0, q0,
                   (int64_t(n) * a.k + k0) * plane + int64_t(p0) * a.q + q0, tid);
      __syncthreads();  // the staging rows read before the next pass writes them
      continue;
    }
    // The common case (8 whole channels, fp32, Q % 4 == 0) in its own straight-line epilogue;
    // bf16 output, odd Q and a last partial channel group take the general one below.
    const bool full = k0 + kKg <= a.k;
    if (full && vec && !a.bf16) {
      float al[kKg], be[kKg];
#pragma unroll
      for (int i4 = 0; i4 < kKg / 4; ++i4) {
        const float4 x4 = *reinterpret_cast<const float4*>(as + k0 + 4 * i4);
        const float4 y4 = *reinterpret_cast<const float4*>(as + kpad + k0 + 4 * i4);
        al[4 * i4] = x4.x, al[4 * i4 + 1] = x4.y, al[4 * i4 + 2] = x4.z, al[4 * i4 + 3] = x4.w;
        be[4 * i4] = y4.x, be[4 * i4 + 1] = y4.y, be[4 * i4 + 2] = y4.z, be[4 * i4 + 3] = y4.w;
      }
      float* yp = static_cast<float*>(sa.y) + o0 + int64_t(k0) * plane;
      if (a.act == 1) {
        fast_epilogue<1>(acc, al, be, yp, plane);
      } else if (a.act == 2) {
        fast_epilogue<2>(acc, al, be, yp, plane);
      } else {
        fast_epilogue<0>(acc, al, be, yp, plane);
      }
      continue;
    }
    // The epilogue in registers, then one 16-byte (8-byte bf16) streaming store per channel.
#pragma unroll
    for (int i = 0; i < kKg; ++i) {
      const int k = k0 + i;
      if (k >= a.k) break;
      const float al = __ldg(sa.alpha + k), be = __ldg(sa.beta + k);
      float v[kPx];
#pragma unroll
      for (int j = 0; j < kPx; ++j) v[j] = activate(fmaf(acc[i][j], al, be), a.act);
      store_row4(sa.y, o0 + int64_t(k) * plane, v, valid, vec, a.bf16);
    }
  }
}

// blockIdx.z = 2 * n + stream; the stream's C picks the instantiation (uniform per block). The
// depth blocks do a third of the FMAs of the RGB ones with the same stores: the scheduler
// balances them. 72 registers at most (7 blocks of 128 threads per SM): ptxas reports 0 spills
// there, while the 64-register cap of 8 blocks spilled ~100 bytes (nvcc 13.0); uncapped it takes
// 126 registers to hoist shared loads, which would halve the blocks in flight. The staged kernel
// (kShifted) fits the same 7 blocks: 32 KB of shared memory each with its staging rows.
template <bool kShifted>
__global__ void __launch_bounds__(kThreads, 7)
    dual_store_bound_kernel(DualArgs a, int kpad, bool vec) {
  extern __shared__ __align__(16) float smem[];
  const int n = blockIdx.z >> 1;
  float* xs = smem;
  float* ws = smem + kWindowFloats;
  if ((blockIdx.z & 1) == 0) {
    if (a.s[0].c == 3) {
      store_bound_block<3, 0, kShifted>(a, n, kpad, vec, xs, ws);
    } else {
      store_bound_block<1, 0, kShifted>(a, n, kpad, vec, xs, ws);
    }
  } else if (a.s[1].c == 3) {
    store_bound_block<3, 1, kShifted>(a, n, kpad, vec, xs, ws);
  } else {
    store_bound_block<1, 1, kShifted>(a, n, kpad, vec, xs, ws);
  }
}

// The staged epilogue: fp32 output with Q % 4 != 0 (bf16 output keeps the general epilogue).
bool takes_staged_epilogue(const DualArgs& a) {
  return !a.bf16 && a.q % 4 != 0;
}

size_t store_bound_smem(const DualArgs& a) {
  const int kpad = gpu100::round_up(a.k, kKg);
  const size_t floats = size_t(kWindowFloats) + size_t(kMaxC) * 9 * kpad + 2 * size_t(kpad) +
                        (takes_staged_epilogue(a) ? size_t(kStageFloats) : 0);
  return floats * sizeof(float);
}

}  // namespace

bool dual_store_bound_supports(const DualArgs& a) {
  auto c_ok = [](int c) { return c == 1 || c == 3; };
  return a.r == 3 && a.sw == 3 && a.stride == 1 && a.pad == 1 && c_ok(a.s[0].c) && c_ok(a.s[1].c) &&
         store_bound_smem(a) <= size_t(kSmemBytes) && 2 * int64_t(a.n) <= 65535 &&
         gpu100::ceil_div(a.p, kTileP) <= 65535;
}

void launch_dual_store_bound(const DualArgs& a, cudaStream_t stream) {
  if (!dual_store_bound_supports(a)) {
    // Any other layer (filter, stride, padding, C): v3's general kernel computes it.
    launch_dual_regblock(a, stream);
    return;
  }
  const int kpad = gpu100::round_up(a.k, kKg);
  const size_t smem = store_bound_smem(a);
  const bool vec = a.q % 4 == 0;
  const dim3 grid(gpu100::ceil_div(a.q, kTileQ), gpu100::ceil_div(a.p, kTileP), 2 * a.n);
  const dim3 block(kTx, kTy);
  if (takes_staged_epilogue(a)) {
    dual_store_bound_kernel<true><<<grid, block, smem, stream>>>(a, kpad, vec);
  } else {
    dual_store_bound_kernel<false><<<grid, block, smem, stream>>>(a, kpad, vec);
  }
  CUDA_CHECK_LAST();
}

}  // namespace capstone::detail
