// The attention block's QKV stage, v3: RoPE and the layout in the GEMM's epilogue (kernel code only
// in sm_90a targets; refused elsewhere). What changed from v2, and why it is faster: v2's kernel
// read back the 192 MiB the projection had just written (default shape) and wrote them again; here
// the projection's accumulators are rotated and written to [B, H, S, D] where they are, in
// registers, so Q, K and V are written once and never read back. The main loop is day04's v13
// (TMA, wgmma, 2-CTA clusters with B multicast; day04_matmul/gemm_v13_kernel.cuh), linked, not
// copied: only its epilogue is this file's.
//
// Why the rotation needs no data exchange: a wgmma accumulator gives each thread the column pairs
// (8j + 2 (lane % 4), + 1) of its two rows, for j = 0 .. 31 across the tile's 256 columns. The
// interleaved pairing rotates exactly such a pair. The half-dim split pairs column c with c + D/2,
// which is register group j + D/16 of the same thread, because a tile's 256 columns start on a
// head boundary (D divides 256). So every pair is in one thread's registers, whichever pairing.
// The tile's rows are tokens (b, s) and its columns heads of Q, K or V: each register pair goes to
// q / k / v[((b H + head) S + s) D + d] as one 4-byte store (a quad of lanes writes 16 contiguous
// bytes of a head's row).
#include <cuda_bf16.h>

#include <stdexcept>
#include <string>

#include "block.hpp"
#include "common/arch.hpp"
#include "flash_util.cuh"
#include "gemm.hpp"
#include "gemm_v13_kernel.cuh"
#include "rope_device.cuh"

namespace day05 {

namespace {

using bf16 = __nv_bfloat16;
using day01::RopeStyle;

template <int kD, RopeStyle kStyle>
struct QkvRopeEpilogue {
  bf16* q;
  bf16* k;
  bf16* v;
  const float2* table;  // [positions >= S][kD / 2] (cos, sin)
  int m, seq, heads;    // B S, S, H

  __device__ __forceinline__ void operator()(const float (&d)[128], int row0, int col0,
                                             int wg) const {
    constexpr int kHeadsPerTile = 256 / kD, kGroups = kD / 8;  // register groups j per head
    const int lane = threadIdx.x % 32, warp_in_wg = (threadIdx.x % 128) / 32, t4 = lane % 4;
#pragma unroll
    for (int hr = 0; hr < 2; ++hr) {  // the thread's two rows: registers 4j + {0, 1}, 4j + {2, 3}
      const int row = row0 + wg * 64 + warp_in_wg * 16 + lane / 4 + 8 * hr;
      if (row >= m) continue;
      const int b = row / seq, s = row - b * seq;
      const float2* cs = table + size_t(s) * (kD / 2);
#pragma unroll
      for (int th = 0; th < kHeadsPerTile; ++th) {
        const int gh = col0 / kD + th;  // head over the 3 H of [Q | K | V]
        const int which = gh / heads, head = gh - which * heads;
        if (which > 2) continue;  // past N
        bf16* out = (which == 0   ? q
                     : which == 1 ? k
                                  : v) +
                    ((size_t(b) * heads + head) * seq + s) * kD + 2 * t4;
        const float* x = d + 4 * th * kGroups + 2 * hr;  // x[4 j + e]: column 8 j + 2 t4 + e
        if (which == 2) {
#pragma unroll
          for (int j = 0; j < kGroups; ++j) {
            *reinterpret_cast<uint32_t*>(out + 8 * j) = flash::pack_bf16(x[4 * j], x[4 * j + 1]);
          }
        } else if constexpr (kStyle == RopeStyle::kInterleaved) {
#pragma unroll
          for (int j = 0; j < kGroups; ++j) {  // pair i = (8 j + 2 t4) / 2
            const float2 c = __ldg(cs + 4 * j + t4);
            const float2 r = day01::detail::rotate(x[4 * j], x[4 * j + 1], c.x, c.y);
            *reinterpret_cast<uint32_t*>(out + 8 * j) = flash::pack_bf16(r.x, r.y);
          }
        } else {
          constexpr int kHalf = kGroups / 2;  // column c + D/2 is group j + kHalf
#pragma unroll
          for (int j = 0; j < kHalf; ++j) {  // pairs i = 8 j + 2 t4 + e, e = 0, 1
            const float2 c0 = __ldg(cs + 8 * j + 2 * t4), c1 = __ldg(cs + 8 * j + 2 * t4 + 1);
            const float2 r0 = day01::detail::rotate(x[4 * j], x[4 * (j + kHalf)], c0.x, c0.y);
            const float2 r1 =
                day01::detail::rotate(x[4 * j + 1], x[4 * (j + kHalf) + 1], c1.x, c1.y);
            *reinterpret_cast<uint32_t*>(out + 8 * j) = flash::pack_bf16(r0.x, r1.x);
            *reinterpret_cast<uint32_t*>(out + 8 * j + kD / 2) = flash::pack_bf16(r0.y, r1.y);
          }
        }
      }
    }
  }
};

// The plain epilogue of qkv_v13_gemm: each register pair to the projection's row-major [B S, 3 H D]
// bf16 rows as one 4-byte store, the same store pattern as QkvRopeEpilogue without the rotation
// and the scatter.
// kTileN: the columns of v13's output tile (its accumulator holds kTileN / 8 register groups).
template <int kTileN>
struct StoreRowsBf16 {
  bf16* c;
  int m, n;

  __device__ __forceinline__ void operator()(const float (&d)[128], int row0, int col0,
                                             int wg) const {
    const int lane = threadIdx.x % 32, warp_in_wg = (threadIdx.x % 128) / 32, t4 = lane % 4;
#pragma unroll
    for (int hr = 0; hr < 2; ++hr) {
      const int row = row0 + wg * 64 + warp_in_wg * 16 + lane / 4 + 8 * hr;
      if (row >= m) continue;
      bf16* out = c + size_t(row) * n + col0 + 2 * t4;
      // Register group j holds columns col0 + 8 j + 2 t4 + {0, 1}.
#pragma unroll
      for (int j = 0; j < kTileN / 8; ++j) {
        if (col0 + 8 * j + 2 * t4 < n) {
          *reinterpret_cast<uint32_t*>(out + 8 * j) =
              flash::pack_bf16(d[4 * j + 2 * hr], d[4 * j + 2 * hr + 1]);
        }
      }
    }
  }
};

template <int kD, RopeStyle kStyle>
void launch(BlockTensors& t, cudaStream_t stream) {
  const BlockShape& s = t.shape;
  const QkvRopeEpilogue<kD, kStyle> epilogue{
      t.q.data(), t.k.data(), t.v.data(), t.table->data(), int(s.tokens()), s.s, s.h};
  day04::wgmma_gemm::launch_v13(day04::GemmShape{int(s.tokens()), int(3 * s.hd()), s.d_model},
                                t.x.data(), t.w_qkv.data(), epilogue, stream);
}

}  // namespace

std::string qkv_rope_wgmma_refusal(const BlockShape& s) {
  if (s.d_model % 8 != 0) {
    return "qkv_rope_wgmma reads X by TMA, whose rows must be a multiple of 16 bytes: d_model % 8 "
           "== 0 (got d_model = " +
           std::to_string(s.d_model) + ")";
  }
  return "";
}

namespace {
// What both v13 rows check before a launch: the shape, v13's refusal, an sm_90a build.
void check_v13_row(const BlockShape& s, const char* name) {
  check_block_shape(s);
  if (const std::string why = qkv_rope_wgmma_refusal(s); !why.empty()) {
    throw std::invalid_argument(why);
  }
  gpu100::require_build(gpu100::ArchNeed::kSm90a, name);
}
}  // namespace

void qkv_rope_wgmma(BlockTensors& t, cudaStream_t stream) {
  const BlockShape& s = t.shape;
  check_v13_row(s, "qkv_rope_wgmma");
  const bool interleaved = s.style == RopeStyle::kInterleaved;
  if (s.d == 64) {
    interleaved ? launch<64, RopeStyle::kInterleaved>(t, stream)
                : launch<64, RopeStyle::kHalfSplit>(t, stream);
  } else {
    interleaved ? launch<128, RopeStyle::kInterleaved>(t, stream)
                : launch<128, RopeStyle::kHalfSplit>(t, stream);
  }
}

void qkv_v13_gemm(BlockTensors& t, cudaStream_t stream) {
  const BlockShape& s = t.shape;
  check_v13_row(s, "qkv_v13_gemm");
  const int n = int(3 * s.hd());
  day04::wgmma_gemm::launch_v13(
      day04::GemmShape{int(s.tokens()), n, s.d_model}, t.x.data(), t.w_qkv.data(),
      StoreRowsBf16<day04::wgmma_gemm::kBN>{t.scratch.data(), int(s.tokens()), n}, stream);
}

}  // namespace day05
