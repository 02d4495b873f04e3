// v3_flash_fp32: flash attention on CUDA cores (Dao et al. 2022, algorithm 1, with the query tile
// on the outside as in FlashAttention-2).
// What changed from v2: the S x S matrix never exists. A block owns 64 queries and streams the
// K and V tiles of its head through shared memory; each tile's scores live in registers, the
// softmax is updated online (running max m, running sum l, the O accumulator rescaled by
// exp2(m_old - m_new) when a tile raises the max), and O is divided by l once at the end. DRAM
// traffic drops from O(B H S^2) to about Q, K, V, O once per query tile from L2; the price is
// that the exponentials of a row are recomputed per tile rescale, and fp32 FMAs on CUDA cores cap
// it far below the tensor cores (v4). Causal: tiles wholly above the diagonal are never loaded.
// Extra device memory: the row log-sum-exp, 4 B H S bytes.
//
// Thread mapping (256 threads, tx = tid % 16, ty = tid / 16):
//  - scores: thread (ty, tx) computes rows 4 ty + i (i < 4) x keys tx + 16 j (j < BKV / 16) of the
//    tile, so a row's 16 threads are one half-warp (row max and sum by 4 shuffles);
//  - O: the same rows, head-dimension columns 4 tx + 64 c + e (c < D / 64, e < 4), float4 reads;
//  - P goes through shared memory (each thread needs all keys of its rows for P V).
// Shared rows are padded by 4 floats: a row stride of 4 (mod 32) banks makes the float4 reads of
// 16 different key rows hit 8 distinct bank quads per wavefront (conflict-free), and the 2 rows of
// a warp read by broadcast 16 banks apart.
#include <cmath>
#include <stdexcept>

#include "attention.hpp"
#include "common/cuda_check.hpp"
#include "common/math.hpp"
#include "common/occupancy.hpp"

namespace day05 {

namespace {

constexpr int kThreads = 256, kBQ = 64;
constexpr float kLog2e = 1.4426950408889634f, kLn2 = 0.6931471805599453f;

// kD: the head dimension rounded up to 64, 128 or 256 (columns d >= D are zero in Q, K and V, so
// they add nothing to the scores and are never written to O). kBKV: keys per tile.
template <int kD>
struct V3Tile {
  static constexpr int kBKV = kD == 256 ? 32 : 64;  // 256: keeps shared memory at 109 KB
  static constexpr int kLd = kD + 4, kLdp = kBKV + 4;
  static constexpr int kTN = kBKV / 16;  // score columns per thread
  static constexpr int kTC = kD / 64;    // float4 column groups of O per thread
  static constexpr size_t kSmemBytes = sizeof(float) * (kBQ * kLd + kBKV * kLd + kBQ * kLdp);
};

// Copies rows [row0, row0 + kRows) of a head's [S][D] matrix into smem [kRows][kLd], columns
// [0, kD); rows past S and columns past D are zero. vec: D % 4 == 0 and 16-byte aligned base.
template <int kRows, int kD, int kLd>
__device__ __forceinline__ void load_tile(float* dst, const float* __restrict__ src, int row0,
                                          int s, int d, bool vec) {
  if (vec) {
    constexpr int kChunks = kRows * (kD / 4);
    for (int c = threadIdx.x; c < kChunks; c += kThreads) {
      const int r = c / (kD / 4), col = (c % (kD / 4)) * 4;
      float4 x = make_float4(0.f, 0.f, 0.f, 0.f);
      if (row0 + r < s && col < d) {
        x = *reinterpret_cast<const float4*>(src + size_t(row0 + r) * d + col);
      }
      *reinterpret_cast<float4*>(dst + r * kLd + col) = x;
    }
  } else {
    for (int e = threadIdx.x; e < kRows * kD; e += kThreads) {
      const int r = e / kD, col = e % kD;
      dst[r * kLd + col] = (row0 + r < s && col < d) ? src[size_t(row0 + r) * d + col] : 0.f;
    }
  }
}

template <int kD>
__global__ void __launch_bounds__(kThreads)
    flash_v3_kernel(const float* __restrict__ q, const float* __restrict__ k,
                    const float* __restrict__ v, float* __restrict__ o, float* __restrict__ lse,
                    int s, int d, bool causal, float scale_log2, int num_q_blocks, bool vec) {
  using T = V3Tile<kD>;
  constexpr int kBKV = T::kBKV, kLd = T::kLd, kLdp = T::kLdp, kTN = T::kTN, kTC = T::kTC;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  float* sq = reinterpret_cast<float*>(smem_raw);  // [kBQ][kLd]
  float* skv = sq + kBQ * kLd;                     // [kBKV][kLd]: K, then V, of the tile
  float* sp = skv + kBKV * kLd;                    // [kBQ][kLdp]: P of the tile

  // Blocks of one head are consecutive (they share its K and V in L2); within a head the query
  // tiles go last to first, so under the causal mask the longest blocks start first.
  const int64_t bh = blockIdx.x / num_q_blocks;
  const int q0 = (num_q_blocks - 1 - static_cast<int>(blockIdx.x % num_q_blocks)) * kBQ;
  const size_t base = size_t(bh) * s * d;
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;

  load_tile<kBQ, kD, kLd>(sq, q + base, q0, s, d, vec);

  float acc[4][4 * kTC] = {};
  float m_run[4], l_run[4];  // l_run: this thread's partial sum of its 16-lane row group
#pragma unroll
  for (int i = 0; i < 4; ++i) m_run[i] = -INFINITY, l_run[i] = 0.f;

  const int kv_end = causal ? min(s, q0 + kBQ) : s;  // causal: keys past the last query skipped
  const int num_tiles = gpu100::ceil_div(kv_end, kBKV);
  for (int t = 0; t < num_tiles; ++t) {
    const int kv0 = t * kBKV;
    __syncthreads();  // the previous tile's P and V reads are done (and Q is stored, at t = 0)
    load_tile<kBKV, kD, kLd>(skv, k + base, kv0, s, d, vec);
    __syncthreads();  // K tile complete

    // Scores of this thread's 4 x kTN block, float4 steps along the head dimension.
    float sc[4][kTN] = {};
#pragma unroll 4
    for (int c = 0; c < kD; c += 4) {
      float4 qa[4], kb[kTN];
#pragma unroll
      for (int i = 0; i < 4; ++i)
        qa[i] = *reinterpret_cast<const float4*>(sq + (4 * ty + i) * kLd + c);
#pragma unroll
      for (int j = 0; j < kTN; ++j)
        kb[j] = *reinterpret_cast<const float4*>(skv + (tx + 16 * j) * kLd + c);
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < kTN; ++j) {
          sc[i][j] = fmaf(qa[i].x, kb[j].x, sc[i][j]);
          sc[i][j] = fmaf(qa[i].y, kb[j].y, sc[i][j]);
          sc[i][j] = fmaf(qa[i].z, kb[j].z, sc[i][j]);
          sc[i][j] = fmaf(qa[i].w, kb[j].w, sc[i][j]);
        }
    }

    // Online softmax, in the log2 domain (x = score * scale * log2 e, p = exp2(x - m)).
    const bool need_mask = kv0 + kBKV > s || (causal && kv0 + kBKV - 1 > q0);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int row = q0 + 4 * ty + i;
      float mx = -INFINITY;
#pragma unroll
      for (int j = 0; j < kTN; ++j) {
        float x = sc[i][j] * scale_log2;
        if (need_mask) {
          const int key = kv0 + tx + 16 * j;
          if (key >= s || (causal && key > row)) x = -INFINITY;
        }
        sc[i][j] = x;
        mx = fmaxf(mx, x);
      }
#pragma unroll
      for (int off = 8; off > 0; off /= 2) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
      const float m_new = fmaxf(m_run[i], mx);
      // A row whose keys so far are all masked keeps m = -inf; use 0 so no -inf - -inf appears.
      const float m_use = m_new == -INFINITY ? 0.f : m_new;
      const float alpha = exp2f(m_run[i] - m_use);  // 0 on the first tile (m_run = -inf)
      m_run[i] = m_new;
      float sum = 0.f;
#pragma unroll
      for (int j = 0; j < kTN; ++j) {
        const float p = exp2f(sc[i][j] - m_use);
        sum += p;
        sp[(4 * ty + i) * kLdp + tx + 16 * j] = p;
      }
      l_run[i] = l_run[i] * alpha + sum;
      // Always rescale (alpha = 1 when the max did not move): a branch would cost as much.
#pragma unroll
      for (int e = 0; e < 4 * kTC; ++e) acc[i][e] *= alpha;
    }
    __syncthreads();  // everyone is done reading K, and the P tile is complete
    load_tile<kBKV, kD, kLd>(skv, v + base, kv0, s, d, vec);
    __syncthreads();  // V tile complete

    // O += P V: 4 keys per step, P as float4 along the keys, V as float4 along the columns.
    const int keys = min(kBKV, s - kv0);  // keys past S have P = 0 and V = 0: skip them
#pragma unroll 2
    for (int j = 0; j < keys; j += 4) {
      float4 pa[4];
#pragma unroll
      for (int i = 0; i < 4; ++i)
        pa[i] = *reinterpret_cast<const float4*>(sp + (4 * ty + i) * kLdp + j);
#pragma unroll
      for (int jj = 0; jj < 4; ++jj) {
#pragma unroll
        for (int c = 0; c < kTC; ++c) {
          const float4 vb =
              *reinterpret_cast<const float4*>(skv + (j + jj) * kLd + 4 * tx + 64 * c);
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            const float p = jj == 0 ? pa[i].x : jj == 1 ? pa[i].y : jj == 2 ? pa[i].z : pa[i].w;
            acc[i][4 * c + 0] = fmaf(p, vb.x, acc[i][4 * c + 0]);
            acc[i][4 * c + 1] = fmaf(p, vb.y, acc[i][4 * c + 1]);
            acc[i][4 * c + 2] = fmaf(p, vb.z, acc[i][4 * c + 2]);
            acc[i][4 * c + 3] = fmaf(p, vb.w, acc[i][4 * c + 3]);
          }
        }
      }
    }
  }

  // O = acc / l, and the row log-sum-exp (natural log) for a backward pass.
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    float l = l_run[i];
#pragma unroll
    for (int off = 8; off > 0; off /= 2) l += __shfl_xor_sync(0xffffffffu, l, off);
    const int row = q0 + 4 * ty + i;
    if (row >= s) continue;
    const float inv = 1.f / l;
    float* out = o + base + size_t(row) * d;
#pragma unroll
    for (int c = 0; c < kTC; ++c) {
      const int col = 4 * tx + 64 * c;
      if (vec && col < d) {
        *reinterpret_cast<float4*>(out + col) =
            make_float4(acc[i][4 * c] * inv, acc[i][4 * c + 1] * inv, acc[i][4 * c + 2] * inv,
                        acc[i][4 * c + 3] * inv);
      } else {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          if (col + e < d) out[col + e] = acc[i][4 * c + e] * inv;
        }
      }
    }
    if (tx == 0 && lse != nullptr) lse[size_t(bh) * s + row] = (m_run[i] + log2f(l)) * kLn2;
  }
}

template <int kD>
void launch_v3(const AttentionShape& s, const float* q, const float* k, const float* v, float* o,
               float* lse, cudaStream_t stream) {
  constexpr size_t smem = V3Tile<kD>::kSmemBytes;
  static gpu100::PerDevice<bool> attr_set;  // the attribute is per GPU: set on each
  attr_set.get([] {
    CUDA_CHECK(cudaFuncSetAttribute(flash_v3_kernel<kD>,
                                    cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    return true;
  });
  const int num_q_blocks = gpu100::ceil_div(s.s, kBQ);
  const bool vec = s.d % 4 == 0 && reinterpret_cast<uintptr_t>(q) % 16 == 0 &&
                   reinterpret_cast<uintptr_t>(k) % 16 == 0 &&
                   reinterpret_cast<uintptr_t>(v) % 16 == 0 &&
                   reinterpret_cast<uintptr_t>(o) % 16 == 0;
  const int64_t blocks = s.heads() * num_q_blocks;
  if (blocks > int64_t(0x7fffffff)) throw std::invalid_argument("v3_flash_fp32: grid too large");
  flash_v3_kernel<kD><<<static_cast<unsigned>(blocks), kThreads, smem, stream>>>(
      q, k, v, o, lse, s.s, s.d, s.causal, softmax_scale(s.d) * kLog2e, num_q_blocks, vec);
  CUDA_CHECK_LAST();
}

}  // namespace

void attention_v3_flash_fp32(const AttentionShape& s, const float* q, const float* k,
                             const float* v, float* o, void* workspace, size_t workspace_bytes,
                             cudaStream_t stream) {
  check_shape(s);
  if (q == nullptr || k == nullptr || v == nullptr || o == nullptr) {
    throw std::invalid_argument("v3_flash_fp32: null pointer");
  }
  if (workspace == nullptr || workspace_bytes < flash_workspace_bytes(s)) {
    throw std::invalid_argument("v3_flash_fp32: the workspace must hold the B H S log-sum-exp");
  }
  float* lse = static_cast<float*>(workspace);
  if (s.d <= 64) {
    launch_v3<64>(s, q, k, v, o, lse, stream);
  } else if (s.d <= 128) {
    launch_v3<128>(s, q, k, v, o, lse, stream);
  } else {
    launch_v3<256>(s, q, k, v, o, lse, stream);
  }
}

}  // namespace day05
