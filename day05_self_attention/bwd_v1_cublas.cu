// bwd_v1_cublas: the backward pass the way the chain rule reads, on cuBLAS: the first rung of the
// backward ladder (attention_backward.hpp has the math). For a chunk of heads at a time:
//   1. S = Q K^T                  strided-batched GEMM, fp32 out (recomputed, not stored by the
//                                 forward)
//   2. P = exp(c S - lse)         one kernel; 0 past the causal diagonal
//   3. dV = P^T dO                GEMM, straight into dV
//   4. dP = dO V^T                GEMM, fp32 out, over S's buffer
//   5. dS = P o (dP - D)          one kernel, dS over P's buffer (D_i = dO_i . O_i, one small
//                                 kernel for every row before the chunks)
//   6. dQ = c dS K, dK = c dS^T Q two GEMMs, straight into dQ and dK
// Recomputing P from the forward's row log-sum-exp instead of keeping it is FlashAttention's idea
// (Dao et al. 2022, kept by FlashAttention-2); D_i = dO_i . O_i is the softmax Jacobian's row term.
// Storage: P and dS are kept in the tensors' type, bf16 in the bf16 form, because cuBLAS's
// tensor-core GEMMs take both operands in one type (dO, Q and K are bf16), because it halves the
// S^2 bytes those passes move, and because the flash backwards round P and dS to bf16 for their
// mma as well (the tolerance allows for it). S and dP stay fp32: a score rounded to bf16 before the
// exponential would be off by |s| 2^-9, 2% of P at |s| = 10.
// Cost: every step is a pass over S^2 numbers in DRAM. Per score, bf16 form: S written (4 bytes),
// read and P written (4 + 2), P read by dV (2), dP written (4), dP and P read and dS written
// (4 + 2 + 2), dS read by dQ and by dK (2 + 2): 28 bytes (fp32 form: 40), against O(S D) bytes for
// a flash backward. The GEMMs compute the causal mask's zero half like the rest. Heads are taken
// in chunks whose S^2 buffers fit kScoreBudgetBytes (refused only when one head's do not).
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <type_traits>

#include "attention_backward.hpp"
#include "common/cublas_check.hpp"
#include "common/cuda_check.hpp"
#include "common/math.hpp"
#include "cublas_handle.hpp"

namespace day05 {

namespace {

using bf16 = __nv_bfloat16;

constexpr int kWarpsPerBlock = 8;
constexpr float kLog2e = 1.4426950408889634f;
constexpr size_t kAlign = 256;  // each buffer of the workspace starts on this boundary

// ---- element access: fp32 in registers whatever the storage -----------------------------------

__device__ __forceinline__ float to_f32(float x) {
  return x;
}
__device__ __forceinline__ float to_f32(bf16 x) {
  return __bfloat162float(x);
}
template <class T>
__device__ __forceinline__ T from_f32(float x) {
  if constexpr (std::is_same_v<T, float>) {
    return x;
  } else {
    return __float2bfloat16_rn(x);
  }
}

// Four consecutive elements (16 bytes of fp32, 8 of bf16; the caller guarantees the alignment).
struct Four {
  float x[4];
};
__device__ __forceinline__ Four load4(const float* p) {
  const float4 v = *reinterpret_cast<const float4*>(p);
  return {{v.x, v.y, v.z, v.w}};
}
__device__ __forceinline__ Four load4(const bf16* p) {
  const uint2 u = *reinterpret_cast<const uint2*>(p);
  __nv_bfloat162 lo, hi;
  memcpy(&lo, &u.x, 4);
  memcpy(&hi, &u.y, 4);
  return {{__low2float(lo), __high2float(lo), __low2float(hi), __high2float(hi)}};
}
__device__ __forceinline__ void store4(float* p, const Four& f) {
  *reinterpret_cast<float4*>(p) = make_float4(f.x[0], f.x[1], f.x[2], f.x[3]);
}
__device__ __forceinline__ void store4(bf16* p, const Four& f) {
  const __nv_bfloat162 lo = __floats2bfloat162_rn(f.x[0], f.x[1]);
  const __nv_bfloat162 hi = __floats2bfloat162_rn(f.x[2], f.x[3]);
  uint2 u;
  memcpy(&u.x, &lo, 4);
  memcpy(&u.y, &hi, 4);
  *reinterpret_cast<uint2*>(p) = u;
}

// ---- kernels: one warp per row, rows taken grid-stride (a chunk may hold more rows than one grid)

// D_i = dO_i . O_i for every row of every head. Lane e adds columns e, e + 32, ...; the warp's
// sum by shuffles.
template <class T>
__global__ void __launch_bounds__(32 * kWarpsPerBlock)
    row_dot_kernel(const T* __restrict__ dout, const T* __restrict__ o, float* __restrict__ delta,
                   int64_t rows, int d) {
  const int lane = threadIdx.x % 32;
  for (int64_t row = int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32; row < rows;
       row += int64_t(gridDim.x) * kWarpsPerBlock) {  // the same row for the whole warp
    const T* a = dout + row * d;
    const T* b = o + row * d;
    float acc = 0.f;
    for (int e = lane; e < d; e += 32) acc += to_f32(a[e]) * to_f32(b[e]);
#pragma unroll
    for (int off = 16; off > 0; off /= 2) acc += __shfl_xor_sync(0xffffffffu, acc, off);
    if (lane == 0) delta[row] = acc;
  }
}

// P = exp(c s - lse_i) over the chunk's rows (row = local head * S + query i), in the log2 domain:
// exp2(s (c log2 e) - lse_i log2 e). Columns past the causal diagonal get 0 without reading s.
// kVec: lane handles columns 4 lane, 4 lane + 128, ... (S % 4 == 0, so every row is 16-byte
// aligned in fp32 and 8-byte aligned in bf16); otherwise lane, lane + 32, ...
template <class T, bool kVec>
__global__ void __launch_bounds__(32 * kWarpsPerBlock)
    probs_kernel(const float* __restrict__ scores, T* __restrict__ p, const float* __restrict__ lse,
                 int64_t rows, int s, float scale_log2, bool causal) {
  const int lane = threadIdx.x % 32;
  for (int64_t row = int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32; row < rows;
       row += int64_t(gridDim.x) * kWarpsPerBlock) {
    const int i = static_cast<int>(row % s);
    const int valid = causal ? i + 1 : s;
    const float m = lse[row] * kLog2e;
    const float* x = scores + row * s;
    T* y = p + row * s;
    if constexpr (kVec) {
      for (int j = 4 * lane; j < s; j += 128) {
        Four f = {{0.f, 0.f, 0.f, 0.f}};
        if (j < valid) {
          f = load4(x + j);
#pragma unroll
          for (int c = 0; c < 4; ++c) {
            f.x[c] = j + c < valid ? exp2f(fmaf(f.x[c], scale_log2, -m)) : 0.f;
          }
        }
        store4(y + j, f);
      }
    } else {
      for (int j = lane; j < s; j += 32) {
        y[j] = from_f32<T>(j < valid ? exp2f(fmaf(x[j], scale_log2, -m)) : 0.f);
      }
    }
  }
}

// dS = P o (dP - D_i), written over P. Past the causal diagonal P is 0 and so is dS: those columns
// are neither read nor written (a group of four that straddles the diagonal multiplies the finite
// dP by P = 0).
template <class T, bool kVec>
__global__ void __launch_bounds__(32 * kWarpsPerBlock)
    dscores_kernel(const float* __restrict__ dp, T* __restrict__ p_ds,
                   const float* __restrict__ delta, int64_t rows, int s, bool causal) {
  const int lane = threadIdx.x % 32;
  for (int64_t row = int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32; row < rows;
       row += int64_t(gridDim.x) * kWarpsPerBlock) {
    const int i = static_cast<int>(row % s);
    const int valid = causal ? i + 1 : s;
    const float d = delta[row];
    const float* x = dp + row * s;
    T* y = p_ds + row * s;
    if constexpr (kVec) {
      for (int j = 4 * lane; j < valid; j += 128) {
        const Four g = load4(x + j);
        Four f = load4(y + j);
#pragma unroll
        for (int c = 0; c < 4; ++c) f.x[c] *= g.x[c] - d;
        store4(y + j, f);
      }
    } else {
      for (int j = lane; j < valid; j += 32) y[j] = from_f32<T>(to_f32(y[j]) * (x[j] - d));
    }
  }
}

unsigned grid_for(int64_t rows) {
  return static_cast<unsigned>(
      std::min<int64_t>(gpu100::ceil_div<int64_t>(rows, kWarpsPerBlock), int64_t(1) << 20));
}

// ---- GEMMs ---------------------------------------------------------------------------------

template <class T>
constexpr cudaDataType_t kDataType = std::is_same_v<T, float> ? CUDA_R_32F : CUDA_R_16BF;

// Column-major C[m x n] = alpha op(A) op(B) for `batch` matrices at the given strides, fp32
// accumulation (CUBLAS_COMPUTE_32F: fp32 FMAs for fp32 inputs, no TF32; the tensor cores for
// bf16), C in fp32 or in the inputs' type.
template <class TIn, class TOut>
void gemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
          float alpha, const TIn* a, int lda, long long sa, const TIn* b, int ldb, long long sb,
          TOut* c, int ldc, long long sc, int batch) {
  const float beta = 0.f;
  CUBLAS_CHECK(cublasGemmStridedBatchedEx(h, ta, tb, m, n, k, &alpha, a, kDataType<TIn>, lda, sa, b,
                                          kDataType<TIn>, ldb, sb, &beta, c, kDataType<TOut>, ldc,
                                          sc, batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

// ---- workspace: [D_i: B H S fp32][S, then dP: chunk x S x S fp32][P, then dS: chunk x S x S T]

size_t score_elems(const AttentionShape& s) {
  return size_t(s.s) * size_t(s.s);
}
size_t delta_bytes(const AttentionShape& s) {
  return gpu100::round_up(size_t(s.rows()) * sizeof(float), kAlign);
}
size_t per_head_bytes(const AttentionShape& s, size_t element_bytes) {
  return score_elems(s) * (sizeof(float) + element_bytes);
}
size_t workspace_for(const AttentionShape& s, size_t element_bytes) {
  const size_t chunk = size_t(bwd_v1_heads_per_chunk(s, element_bytes));
  return delta_bytes(s) + gpu100::round_up(chunk * score_elems(s) * sizeof(float), kAlign) +
         chunk * score_elems(s) * element_bytes;
}
std::string refusal_for(const char* name, const char* type, const AttentionShape& s,
                        size_t element_bytes) {
  const double bytes = double(per_head_bytes(s, element_bytes));
  if (bytes <= double(kScoreBudgetBytes)) return "";
  const double gib = double(size_t(1) << 30);
  return fmt::format(
      "{} refuses {}: one head's S x S fp32 scores and {} P take {:.2f} GiB, over its budget of "
      "{:.2f} GiB (a flash backward needs no S x S matrix)",
      name, shape_label(s), type, bytes / gib, double(kScoreBudgetBytes) / gib);
}

template <class T>
void bwd_v1(const char* name, const AttentionShape& s, const BackwardTensors<T>& t, void* workspace,
            size_t workspace_bytes, cudaStream_t stream) {
  check_shape(s);
  const size_t eb = sizeof(T);
  if (const std::string why = refusal_for(name, std::is_same_v<T, float> ? "fp32" : "bf16", s, eb);
      !why.empty()) {
    throw std::invalid_argument(why);
  }
  if (t.any_null() || workspace == nullptr) {
    throw std::invalid_argument(fmt::format("{}: null tensors or workspace", name));
  }
  if (workspace_bytes < workspace_for(s, eb)) {
    throw std::invalid_argument(fmt::format("{}: a workspace of {} bytes, {} needed", name,
                                            workspace_bytes, workspace_for(s, eb)));
  }
  if constexpr (std::is_same_v<T, bf16>) {
    gpu100::require_build(gpu100::ArchNeed::kSm80, name);  // cuBLAS's bf16 GEMMs
  }
  const int64_t chunk = bwd_v1_heads_per_chunk(s, eb);
  auto* ws = static_cast<char*>(workspace);
  float* delta = reinterpret_cast<float*>(ws);
  float* scores = reinterpret_cast<float*>(ws + delta_bytes(s));  // S, then dP
  T* probs = reinterpret_cast<T*>(
      ws + delta_bytes(s) +
      gpu100::round_up(size_t(chunk) * score_elems(s) * sizeof(float), kAlign));  // P, then dS

  const int64_t all_rows = s.rows();
  row_dot_kernel<T>
      <<<grid_for(all_rows), 32 * kWarpsPerBlock, 0, stream>>>(t.dout, t.o, delta, all_rows, s.d);
  CUDA_CHECK_LAST();

  cublasHandle_t h = cublas_handle();
  CUBLAS_CHECK(cublasSetStream(h, stream));
  const int n = s.s, d = s.d;
  const long long head = static_cast<long long>(n) * d;
  const long long sq = static_cast<long long>(score_elems(s));
  const float c = softmax_scale(d);
  const bool vec = n % 4 == 0;
  const cublasOperation_t op_n = CUBLAS_OP_N, op_t = CUBLAS_OP_T;
  for (int64_t h0 = 0; h0 < s.heads(); h0 += chunk) {
    const int nh = static_cast<int>(std::min<int64_t>(chunk, s.heads() - h0));
    const size_t off = size_t(h0) * size_t(head);
    const T *q = t.q + off, *k = t.k + off, *v = t.v + off, *dout = t.dout + off;
    const int64_t rows = int64_t(nh) * n;
    const unsigned grid = grid_for(rows);
    // cuBLAS is column-major: a row-major S x D matrix X is the column-major D x S matrix X^T
    // (leading dimension D), and a row-major S x S matrix M is the column-major M^T (ld S).
    // 1. Row-major S = Q K^T is column-major S^T = K Q^T: op(A) = (K^T)^T, B = Q^T.
    gemm<T, float>(h, op_t, op_n, n, n, d, 1.f, k, d, head, q, d, head, scores, n, sq, nh);
    // 2. P from S and the forward's log-sum-exp.
    if (vec) {
      probs_kernel<T, true><<<grid, 32 * kWarpsPerBlock, 0, stream>>>(
          scores, probs, t.lse + h0 * n, rows, n, c * kLog2e, s.causal);
    } else {
      probs_kernel<T, false><<<grid, 32 * kWarpsPerBlock, 0, stream>>>(
          scores, probs, t.lse + h0 * n, rows, n, c * kLog2e, s.causal);
    }
    CUDA_CHECK_LAST();
    // 3. dV = P^T dO, column-major dV^T = dO^T P: A = dO^T, op(B) = (P^T)^T.
    gemm<T, T>(h, op_n, op_t, d, n, n, 1.f, dout, d, head, probs, n, sq, t.dv + off, d, head, nh);
    // 4. dP = dO V^T, column-major dP^T = V dO^T (the form of step 1), over S.
    gemm<T, float>(h, op_t, op_n, n, n, d, 1.f, v, d, head, dout, d, head, scores, n, sq, nh);
    // 5. dS = P o (dP - D), over P.
    if (vec) {
      dscores_kernel<T, true><<<grid, 32 * kWarpsPerBlock, 0, stream>>>(
          scores, probs, delta + h0 * n, rows, n, s.causal);
    } else {
      dscores_kernel<T, false><<<grid, 32 * kWarpsPerBlock, 0, stream>>>(
          scores, probs, delta + h0 * n, rows, n, s.causal);
    }
    CUDA_CHECK_LAST();
    // 6. dQ = c dS K, column-major dQ^T = c K^T dS^T: A = K^T, B = dS^T (the buffer as it is).
    gemm<T, T>(h, op_n, op_n, d, n, n, c, k, d, head, probs, n, sq, t.dq + off, d, head, nh);
    //    dK = c dS^T Q, column-major dK^T = c Q^T dS: A = Q^T, op(B) = (dS^T)^T.
    gemm<T, T>(h, op_n, op_t, d, n, n, c, q, d, head, probs, n, sq, t.dk + off, d, head, nh);
  }
}

}  // namespace

int64_t bwd_v1_heads_per_chunk(const AttentionShape& s, size_t element_bytes) {
  const int64_t fit = int64_t(kScoreBudgetBytes / per_head_bytes(s, element_bytes));
  return std::max<int64_t>(1, std::min<int64_t>({s.heads(), fit, int64_t(INT_MAX)}));
}

size_t bwd_v1_workspace_bytes(const AttentionShape& s) {
  return workspace_for(s, sizeof(bf16));
}
size_t bwd_v1_fp32_workspace_bytes(const AttentionShape& s) {
  return workspace_for(s, sizeof(float));
}
std::string bwd_v1_refusal(const AttentionShape& s) {
  return refusal_for("bwd_v1_cublas", "bf16", s, sizeof(bf16));
}
std::string bwd_v1_fp32_refusal(const AttentionShape& s) {
  return refusal_for("bwd_v1_cublas_fp32", "fp32", s, sizeof(float));
}

void attention_bwd_v1_cublas(const AttentionShape& s, const BackwardTensors<bf16>& t,
                             void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  bwd_v1("bwd_v1_cublas", s, t, workspace, workspace_bytes, stream);
}

void attention_bwd_v1_cublas_fp32(const AttentionShape& s, const BackwardTensors<float>& t,
                                  void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  bwd_v1("bwd_v1_cublas_fp32", s, t, workspace, workspace_bytes, stream);
}

}  // namespace day05
