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
// refused, run a second instantiation of the same kernel with its own tile (32 x 4 threads, one
// warp per output row) and an epilogue that shifts each channel's pixels onto 16-byte boundaries
// with lane shuffles ("The epilogue for fp32 output with Q % 4 != 0" below); a separate
// instantiation, so the aligned kernel's registers stay as they were. (Thread coarsening and
// constant/shared broadcast weights: PMPP chapters 7 and 16.)
#include <cuda_bf16.h>

#include <cstdint>
#include <stdexcept>

#include "common/cuda_check.hpp"
#include "common/math.hpp"
#include "halo_tile.cuh"
#include "kernels.cuh"
#include "realign.cuh"

namespace capstone::detail {

namespace {

// The tile of a block, a template on the epilogue (kShifted, below): the aligned kernel's 16 x 8
// threads (64 x 8 output pixels), the odd-width kernel's 32 x 4 (128 x 4: a warp is one output
// row, so the row's alignment in memory is the same for all its lanes), whose last 4 columns are
// also the next tile's first 4 (tiles start every 124 columns: see its epilogue).
template <bool kShifted>
struct Tile {
  static constexpr int kTx = kShifted ? 32 : 16, kTy = kShifted ? 4 : 8;
  static constexpr int kThreads = kTx * kTy;  // 128 threads, 4 warps
  static constexpr int kPx = 4;               // output pixels per thread, along q
  static constexpr int kTileQ = kTx * kPx;    // output columns computed
  static constexpr int kStepQ = kShifted ? kTileQ - kPx : kTileQ;  // columns between tiles
  static constexpr int kTileP = kTy;
  static constexpr int kRows = kTileP + 2;  // the window with its 1-pixel halo
  // A row of the window: smem column j holds input column q0 - 1 + j. Thread tx reads columns
  // 4 tx .. 4 tx + 5 as a float4 and a float2: a pitch that is a multiple of 4 keeps them
  // aligned; a quarter-warp's 8 float4 are 128 contiguous bytes (no bank conflict), the float2
  // are 2-way conflicted (tx and tx + 8), a minor cost next to the FMAs.
  static constexpr int kCols = kTileQ + 2, kPitch = (kCols + 3) / 4 * 4;  // 68 or 132
  static constexpr int kWindowFloats = 3 * kRows * kPitch;  // 2040 or 2376, multiples of 4
};
constexpr int kPx = 4;  // output pixels per thread, along q
constexpr int kKg = 8;  // output channels per pass
constexpr int kMaxC = 3;
constexpr int kSmemBytes = 48 * 1024;

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

// The epilogue for fp32 output with Q % 4 != 0. Every channel's rows then start anywhere inside a
// float4 of memory, so a thread's 4 pixels straddle two float4s and its 16-byte store is refused.
// Four 4-byte stores per channel would be four times the store instructions, and staging each
// pass through shared memory for coalesced 4-byte stores (an earlier version of this kernel)
// doubled the kernel's instructions with its per-element index arithmetic. Instead each lane
// stores the aligned float4 that starts inside its own 4 pixels: its last 4 - c values and the
// next lane's first c (one shuffle each, day08's realign.cuh), where c = (4 - s) % 4 and s is
// how far the tile's first pixel of the row lies past a 16-byte boundary. A warp is one output
// row, so s is the same for all its lanes and picking the values is a branch the warp takes
// together, not a select per value. The last lane's float4 starts inside the next tile, which
// stores it: the tiles overlap by 4 columns (1/32 more FMAs), so no float4 is shared by two blocks
// and none is written element by element except at the ends of the image's rows. (CUTLASS's
// epilogues also rearrange a tile's values across threads before storing it, through shared memory
// rather than shuffles.)

// One channel's float4 for a row kS floats past a 16-byte boundary, stored at column q + kC.
// An inner tile (neither the first nor the last of its row) needs no column checks: the float4
// of every lane but 31 is inside the row. In an edge tile (`edge`, the same for the whole block)
// the float4 that crosses the row's end goes out element by element, and lane 0 of the row's
// first tile stores the row's first kC pixels (`head`), whose float4 starts in the row above.
// `inside`: bit b set when column q + b is inside the row (b < 7); lane 31's is 0.
template <int kS>
__device__ __forceinline__ void store_realigned(const float (&v)[kPx], float* row, bool edge,
                                                unsigned inside, bool head, bool store) {
  constexpr int kC = (4 - kS) & 3;
  const float4 o = day08::realign_next<kS>(v);  // day08's realign.cuh
  float* dst = row + kC;                        // 16-byte aligned
  if (!edge) {
    if (store) __stcs(reinterpret_cast<float4*>(dst), o);
    return;
  }
  if (((inside >> kC) & 15u) == 15u) {
    __stcs(reinterpret_cast<float4*>(dst), o);
  } else {
    const float os[4] = {o.x, o.y, o.z, o.w};
#pragma unroll
    for (int j = 0; j < 4; ++j)
      if ((inside >> (kC + j)) & 1u) __stcs(dst + j, os[j]);
  }
  if (head) {
#pragma unroll
    for (int j = 0; j < kC; ++j)
      if ((inside >> j) & 1u) __stcs(row + j, v[j]);
  }
}

// The shifted epilogue of one pass: channel i's rows lie (s0 + i ds) % 4 floats past a 16-byte
// boundary, the same for the whole warp (one row), so each channel is a branch the warp takes
// together into one of four fixed sequences of shuffles and a store. (Branching once per pass on
// s0 instead, with the whole pass's sequence fixed, made 4 x 2 copies of the epilogue per stream;
// with every warp of a block on a different one, the SM's instruction cache could not hold them:
// 65% of the stalls were instruction fetches, in Nsight Compute on the H100.)
template <int ACT>
__device__ __forceinline__ void shifted_epilogue(const float (&acc)[kKg][kPx], const float* as,
                                                 int kpad, int k0, int kn, unsigned s0, unsigned ds,
                                                 float* row, int64_t plane, bool edge,
                                                 unsigned inside, bool head, bool store) {
  // Opaque copies (an empty volatile asm in the pass loop): without them the compiler hoists
  // every channel's alignment and its branches out of the pass loop as invariants, duplicating
  // the loop (and its FMAs) per case.
  unsigned e = edge, h = head, st = store;
  asm volatile("" : "+r"(s0), "+r"(ds), "+r"(e), "+r"(inside), "+r"(h), "+r"(st));
#pragma unroll
  for (int i = 0; i < kKg; ++i) {
    if (i >= kn) break;  // past K (the same for the whole block)
    float v[kPx];
    scale_activate<ACT>(acc[i], as[k0 + i], as[kpad + k0 + i], v);
    switch ((s0 + unsigned(i) * ds) & 3u) {
      case 0:
        store_realigned<0>(v, row, e != 0, inside, h != 0, st != 0);
        break;
      case 1:
        store_realigned<1>(v, row, e != 0, inside, h != 0, st != 0);
        break;
      case 2:
        store_realigned<2>(v, row, e != 0, inside, h != 0, st != 0);
        break;
      default:
        store_realigned<3>(v, row, e != 0, inside, h != 0, st != 0);
        break;
    }
    row += plane;
  }
}

// kShifted: the kernel for fp32 output with Q % 4 != 0, with its own tile (Tile above) and the
// shifted epilogue. A template parameter, so that each kernel gets its own registers: compiled
// into one kernel, the aligned case's registers grew past 72 and ptxas spilled in it too.
template <int C, int ST, bool kShifted>
__device__ __forceinline__ void store_bound_block(const DualArgs& a, int n, int kpad, bool vec,
                                                  float* xs, float* ws) {
  using T = Tile<kShifted>;
  constexpr int kTx = T::kTx, kThreads = T::kThreads, kRows = T::kRows, kPitch = T::kPitch;
  // A compile-time stream index: its pointers stay kernel-parameter operands (no registers, no
  // local copy of a dynamically indexed parameter).
  const StreamArgs& sa = a.s[ST];
  const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * kTx + tx;
  const int p0 = blockIdx.y * T::kTileP, q0 = blockIdx.x * T::kStepQ;
  const int p = p0 + ty, q = q0 + tx * kPx;

  // The window of all C channels (zeros in the padding and past the image), read once.
#pragma unroll
  for (int c = 0; c < C; ++c) {
    day08::load_halo_tile(xs + c * kRows * kPitch, kPitch, sa.x + (int64_t(n) * C + c) * a.h * a.w,
                          a.h, a.w, p0 - 1, q0 - 1, kRows, T::kCols, tid, kThreads);
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
  // The tail's threads leave here, after the only barrier; in the shifted kernel a warp (one row)
  // stays whole, for its shuffles, unless its row is past the image.
  if (p >= a.p || (!kShifted && q >= a.q)) return;

  const float* win = xs + ty * kPitch + tx * kPx;
  const int64_t plane = int64_t(a.p) * a.q;
  const int64_t o0 = int64_t(n) * a.k * plane + int64_t(p) * a.q + q;
  const int valid = min(kPx, a.q - q);
  // The shifted epilogue: element (n, k0, p, q0) of y lies s0 floats past a 16-byte boundary (y
  // itself is 16-byte aligned), the same at every pass (k0 steps by 8 planes); each further
  // channel ds = P Q % 4 floats further.
  const unsigned s0 =
      (unsigned(n) * unsigned(a.k) * unsigned(plane) + unsigned(p) * unsigned(a.q) + unsigned(q0)) &
      3u;
  const unsigned ds = unsigned(plane) & 3u;
  // Lane 31's float4 starts in the next tile (the overlap), so it stores none. Inner tiles: lane
  // 30's float4 ends by column q0 + 126.
  const bool store = tx < kTx - 1, edge = !(q0 > 0 && q0 + T::kTileQ + 2 < a.q);
  const unsigned inside = store ? (1u << min(max(a.q - q, 0), 7)) - 1u : 0u;
  const bool head = q0 == 0 && tx == 0;
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
      const int kn = min(kKg, a.k - k0);
      float* row = static_cast<float*>(sa.y) + o0 + int64_t(k0) * plane;
      if (a.act == 1) {
        shifted_epilogue<1>(acc, as, kpad, k0, kn, s0, ds, row, plane, edge, inside, head, store);
      } else if (a.act == 2) {
        shifted_epilogue<2>(acc, as, kpad, k0, kn, s0, ds, row, plane, edge, inside, head, store);
      } else {
        shifted_epilogue<0>(acc, as, kpad, k0, kn, s0, ds, row, plane, edge, inside, head, store);
      }
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
    store_channels(acc, sa, a, k0, o0, plane, valid, vec);
  }
}

// blockIdx.z = 2 * n + stream; the stream's C picks the instantiation (uniform per block). The
// depth blocks do a third of the FMAs of the RGB ones with the same stores: the scheduler
// balances them. 72 registers at most (7 blocks of 128 threads per SM): ptxas reports 0 spills
// there, while the 64-register cap of 8 blocks spilled ~100 bytes (nvcc 13.0); uncapped it takes
// 126 registers to hoist shared loads, which would halve the blocks in flight. The shifted kernel
// fits the same 72 registers with 0 spills.
template <bool kShifted>
__global__ void __launch_bounds__(Tile<kShifted>::kThreads, 7)
    dual_store_bound_kernel(DualArgs a, int kpad, bool vec) {
  extern __shared__ __align__(16) float smem[];
  const int n = blockIdx.z >> 1;
  float* xs = smem;
  float* ws = smem + Tile<kShifted>::kWindowFloats;
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

// The shifted kernel: fp32 output with Q % 4 != 0 into 16-byte aligned outputs (bf16 output, and
// outputs that are not, keep the general epilogue of the aligned kernel).
bool takes_shifted_epilogue(const DualArgs& a) {
  auto aligned = [](const void* y) { return reinterpret_cast<uintptr_t>(y) % 16 == 0; };
  return !a.bf16 && a.q % 4 != 0 && aligned(a.s[0].y) && aligned(a.s[1].y);
}

size_t store_bound_smem(const DualArgs& a) {
  const int kpad = gpu100::round_up(a.k, kKg);
  const size_t window =
      takes_shifted_epilogue(a) ? Tile<true>::kWindowFloats : Tile<false>::kWindowFloats;
  const size_t floats = window + size_t(kMaxC) * 9 * kpad + 2 * size_t(kpad);
  return floats * sizeof(float);
}

}  // namespace

bool dual_store_bound_supports(const DualArgs& a) {
  auto c_ok = [](int c) { return c == 1 || c == 3; };
  return a.r == 3 && a.sw == 3 && a.stride == 1 && a.pad == 1 && c_ok(a.s[0].c) && c_ok(a.s[1].c) &&
         store_bound_smem(a) <= size_t(kSmemBytes) && 2 * int64_t(a.n) <= 65535 &&
         gpu100::ceil_div(a.p, Tile<true>::kTileP) <= 65535;
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
  auto grid = [&](auto tile) {
    using T = decltype(tile);
    return dim3(gpu100::ceil_div(a.q, T::kStepQ), gpu100::ceil_div(a.p, T::kTileP), 2 * a.n);
  };
  if (takes_shifted_epilogue(a)) {
    dual_store_bound_kernel<true>
        <<<grid(Tile<true>{}), dim3(Tile<true>::kTx, Tile<true>::kTy), smem, stream>>>(a, kpad,
                                                                                       vec);
  } else {
    dual_store_bound_kernel<false>
        <<<grid(Tile<false>{}), dim3(Tile<false>::kTx, Tile<false>::kTy), smem, stream>>>(a, kpad,
                                                                                          vec);
  }
  CUDA_CHECK_LAST();
}

}  // namespace capstone::detail
