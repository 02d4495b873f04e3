// v1_naive: attention as three separate steps, the way the formula reads.
//   1. S = Q K^T for every head with day04's GEMM (one call per head; K^T made by day04's padded
//      transpose first, since day04's GEMM takes row-major A and B only);
//   2. a softmax kernel over every row of S: one block per row, three passes over the row in
//      global memory (max, sum of exponentials, normalise), with the 1/sqrt(D) scale and the
//      causal mask applied on the fly;
//   3. O = P V for every head with day04's GEMM.
// The cost: all B H S^2 scores are written, read three times and written again as P, then read by
// the second GEMM: at B=8 H=16 S=2048 that is 2 GiB per pass, against 4 x 32 MiB for Q, K, V, O.
// The whole score matrix must fit: v1 refuses shapes whose scores pass kScoreBudgetBytes.
#include <cmath>
#include <stdexcept>

#include "attention.hpp"
#include "common/cuda_check.hpp"
#include "common/math.hpp"
#include "gemm.hpp"
#include "transpose.hpp"

namespace day05 {

namespace {

constexpr int kThreads = 256;

// Max (or sum) of one float per thread over the block; every thread gets the result.
// `red` holds kThreads / 32 floats. Two barriers: after the warp results are stored, and after
// they are read (so the next call can overwrite `red`).
template <bool kMax>
__device__ float block_reduce(float x, float* red) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
#pragma unroll
  for (int off = 16; off > 0; off /= 2) {
    const float y = __shfl_xor_sync(0xffffffffu, x, off);
    x = kMax ? fmaxf(x, y) : x + y;
  }
  if (lane == 0) red[warp] = x;
  __syncthreads();
  float r = red[0];
#pragma unroll
  for (int w = 1; w < kThreads / 32; ++w) r = kMax ? fmaxf(r, red[w]) : r + red[w];
  __syncthreads();
  return r;
}

// One block per score row (row = head * S + query). Thread t handles columns t, t + 256, ...
// (coalesced). Masked columns (j > i when causal) are written as 0, so the P V GEMM can read
// whole rows.
__global__ void __launch_bounds__(kThreads)
    softmax_rows_kernel(float* scores, int s, float scale, bool causal) {
  __shared__ float red[kThreads / 32];
  const int64_t row = blockIdx.x;
  const int i = static_cast<int>(row % s);
  float* x = scores + row * s;
  const int valid = causal ? i + 1 : s;

  float mx = -INFINITY;
  for (int j = threadIdx.x; j < valid; j += kThreads) mx = fmaxf(mx, x[j] * scale);
  mx = block_reduce<true>(mx, red);  // pass 1: the row max (finite: key 0 is always valid)

  float sum = 0.f;
  for (int j = threadIdx.x; j < valid; j += kThreads) sum += expf(x[j] * scale - mx);
  sum = block_reduce<false>(sum, red);  // pass 2: the sum of exponentials

  const float inv = 1.f / sum;
  for (int j = threadIdx.x; j < s; j += kThreads) {  // pass 3: normalise, zero the masked part
    x[j] = j < valid ? expf(x[j] * scale - mx) * inv : 0.f;
  }
}

constexpr const char* kGemm = "v8_autotuned";

}  // namespace

void attention_v1_naive(const AttentionShape& s, const float* q, const float* k, const float* v,
                        float* o, void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  check_shape(s);
  if (const std::string why = v1_refusal(s); !why.empty()) throw std::invalid_argument(why);
  if (q == nullptr || k == nullptr || v == nullptr || o == nullptr || workspace == nullptr) {
    throw std::invalid_argument("v1_naive: null pointer");
  }
  if (workspace_bytes < v1_workspace_bytes(s)) {
    throw std::invalid_argument("v1_naive: workspace too small");
  }
  const size_t head = size_t(s.s) * s.d, score_head = size_t(s.s) * s.s;
  float* kt = static_cast<float*>(workspace);  // [B H][D][S]
  float* scores = reinterpret_cast<float*>(
      static_cast<char*>(workspace) +
      gpu100::round_up<size_t>(size_t(s.elements()) * sizeof(float), 256));  // [B H][S][S]

  // 1. K^T and S = Q K^T, head by head (day04's GEMM has no batch dimension).
  for (int64_t bh = 0; bh < s.heads(); ++bh) {
    day04::transpose_v4_padded_tile(k + bh * head, kt + bh * head, s.s, s.d, stream);
  }
  for (int64_t bh = 0; bh < s.heads(); ++bh) {
    day04::gemm(kGemm, {s.s, s.s, s.d}, 1.f, q + bh * head, kt + bh * head, 0.f,
                scores + bh * score_head, stream);
  }
  // 2. P = softmax(scale * S + mask), in place.
  softmax_rows_kernel<<<static_cast<unsigned>(s.rows()), kThreads, 0, stream>>>(
      scores, s.s, softmax_scale(s.d), s.causal);
  CUDA_CHECK_LAST();
  // 3. O = P V.
  for (int64_t bh = 0; bh < s.heads(); ++bh) {
    day04::gemm(kGemm, {s.s, s.d, s.s}, 1.f, scores + bh * score_head, v + bh * head, 0.f,
                o + bh * head, stream);
  }
}

}  // namespace day05
