// v2_cublas: the path a user would write with a library: two cuBLAS strided-batched SGEMMs (every
// head in one call) and one fused kernel for scale + mask + softmax.
// What changed from v1: one GEMM launch per step instead of one per head, no transpose (cuBLAS
// reads K as the transposed operand), and a softmax that reads each row twice instead of three
// times: one warp per row keeps a running max and a running sum (online softmax, Milakov and
// Gimelshein 2018) in one pass, then writes P in a second. Still O(S^2) bytes: the scores are
// written, read twice and written again, and read by the second GEMM. Heads are processed in
// chunks whose scores fit kScoreBudgetBytes, so v2 runs wherever one head's S x S fits.
// fp32 throughout (CUBLAS_DEFAULT_MATH: no TF32).
#include <cublas_v2.h>

#include <cmath>
#include <stdexcept>

#include "attention.hpp"
#include "common/cublas_check.hpp"
#include "common/cuda_check.hpp"
#include "common/math.hpp"
#include "cublas_handle.hpp"

namespace day05 {

namespace {

constexpr int kWarpsPerBlock = 8;
constexpr float kLog2e = 1.4426950408889634f;

// Merges the running (max, sum) of another lane into this one: sum is relative to max.
__device__ __forceinline__ void merge(float& m, float& l, float m2, float l2) {
  const float mn = fmaxf(m, m2);
  if (mn == -INFINITY) return;  // both empty
  l = l * exp2f(m - mn) + l2 * exp2f(m2 - mn);
  m = mn;
}

// One warp per row (row = local head * S + query); lane handles columns lane, lane + 32, ...
// (kVec: float4 columns 4 lane, 4 lane + 128, ..., when S % 4 == 0). Scores are taken to the
// log2 domain (scale * log2 e folded into one multiply) so the exponentials are exp2f.
template <bool kVec>
__global__ void __launch_bounds__(32 * kWarpsPerBlock)
    softmax_online_kernel(float* scores, int64_t rows, int s, float scale_log2, bool causal) {
  const int64_t row = int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  if (row >= rows) return;  // whole warps leave together
  const int lane = threadIdx.x % 32;
  const int i = static_cast<int>(row % s);
  const int valid = causal ? i + 1 : s;
  float* x = scores + row * s;

  // Pass 1: running max m and running sum l = sum exp2(x - m), rescaled when m grows.
  float m = -INFINITY, l = 0.f;
  auto add = [&](float y) {
    if (y > m) {
      l = l * exp2f(m - y) + 1.f;
      m = y;
    } else {
      l += exp2f(y - m);
    }
  };
  if constexpr (kVec) {
    for (int j = 4 * lane; j < valid; j += 128) {
      const float4 v4 = *reinterpret_cast<const float4*>(x + j);
      add(v4.x * scale_log2);
      if (j + 1 < valid) add(v4.y * scale_log2);
      if (j + 2 < valid) add(v4.z * scale_log2);
      if (j + 3 < valid) add(v4.w * scale_log2);
    }
  } else {
    for (int j = lane; j < valid; j += 32) add(x[j] * scale_log2);
  }
#pragma unroll
  for (int off = 16; off > 0; off /= 2) {
    const float m2 = __shfl_xor_sync(0xffffffffu, m, off);
    const float l2 = __shfl_xor_sync(0xffffffffu, l, off);
    merge(m, l, m2, l2);
  }
  const float inv = 1.f / l;

  // Pass 2: P = exp2(x - m) / l, zeros past the mask.
  if constexpr (kVec) {
    for (int j = 4 * lane; j < s; j += 128) {
      float4 v4 = *reinterpret_cast<float4*>(x + j);
      v4.x = j < valid ? exp2f(v4.x * scale_log2 - m) * inv : 0.f;
      v4.y = j + 1 < valid ? exp2f(v4.y * scale_log2 - m) * inv : 0.f;
      v4.z = j + 2 < valid ? exp2f(v4.z * scale_log2 - m) * inv : 0.f;
      v4.w = j + 3 < valid ? exp2f(v4.w * scale_log2 - m) * inv : 0.f;
      *reinterpret_cast<float4*>(x + j) = v4;
    }
  } else {
    for (int j = lane; j < s; j += 32) x[j] = j < valid ? exp2f(x[j] * scale_log2 - m) * inv : 0.f;
  }
}

}  // namespace

void attention_v2_cublas(const AttentionShape& s, const float* q, const float* k, const float* v,
                         float* o, void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  check_shape(s);
  if (const std::string why = v2_refusal(s); !why.empty()) throw std::invalid_argument(why);
  if (q == nullptr || k == nullptr || v == nullptr || o == nullptr || workspace == nullptr) {
    throw std::invalid_argument("v2_cublas: null pointer");
  }
  if (workspace_bytes < v2_workspace_bytes(s)) {
    throw std::invalid_argument("v2_cublas: workspace too small");
  }
  cublasHandle_t h = cublas_handle();
  CUBLAS_CHECK(cublasSetStream(h, stream));
  float* scores = static_cast<float*>(workspace);
  const long long head = static_cast<long long>(s.s) * s.d;
  const long long score_head = static_cast<long long>(s.s) * s.s;
  const int64_t chunk = v2_heads_per_chunk(s);
  const float one = 1.f, zero = 0.f;
  const float scale_log2 = softmax_scale(s.d) * kLog2e;
  const bool vec = s.s % 4 == 0;

  for (int64_t h0 = 0; h0 < s.heads(); h0 += chunk) {
    const int n = static_cast<int>(std::min<int64_t>(chunk, s.heads() - h0));
    // cuBLAS is column-major: a row-major S x D matrix is a column-major D x S one. The row-major
    // scores Q K^T (S x S) are the column-major (K Q^T), i.e. op(A) = K = (K^T)^T with A the
    // column-major D x S view of K, and B = the D x S view of Q.
    CUBLAS_CHECK(cublasSgemmStridedBatched(h, CUBLAS_OP_T, CUBLAS_OP_N, s.s, s.s, s.d, &one,
                                           k + h0 * head, s.d, head, q + h0 * head, s.d, head,
                                           &zero, scores, s.s, score_head, n));
    const int64_t rows = int64_t(n) * s.s;
    const unsigned blocks = static_cast<unsigned>(gpu100::ceil_div<int64_t>(rows, kWarpsPerBlock));
    if (vec) {
      softmax_online_kernel<true>
          <<<blocks, 32 * kWarpsPerBlock, 0, stream>>>(scores, rows, s.s, scale_log2, s.causal);
    } else {
      softmax_online_kernel<false>
          <<<blocks, 32 * kWarpsPerBlock, 0, stream>>>(scores, rows, s.s, scale_log2, s.causal);
    }
    CUDA_CHECK_LAST();
    // Row-major O = P V (S x D) is column-major O^T = V^T P^T: A = the D x S view of V, B = the
    // S x S column-major view of P (P^T), both untransposed.
    CUBLAS_CHECK(cublasSgemmStridedBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, s.d, s.s, s.s, &one,
                                           v + h0 * head, s.d, head, scores, s.s, score_head, &zero,
                                           o + h0 * head, s.d, head, n));
  }
}

}  // namespace day05
