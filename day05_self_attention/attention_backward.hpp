#pragma once
// day05_self_attention: the backward pass of scaled dot-product attention, its FLOP convention and
// its CPU reference in double.
//
// For one head, with c = 1 / sqrt(D), the forward is
//   S = c Q K^T (+ mask),   P = softmax(S) row by row,   O = P V.
// Given dO (the gradient of the loss with respect to O), the gradients are
//   dV = P^T dO                              [S_k x D]
//   dP = dO V^T                              [S_q x S_k]
//   D_i = sum_j P_ij dP_ij = dO_i . O_i      one number per query row
//   dS = P o (dP - D)                        (o: element-wise; D broadcast along the row)
//   dQ = c dS K,   dK = c dS^T Q.
// The softmax's Jacobian is diag(p) - p p^T, so dS_i = p_i o (dP_i - p_i . dP_i), and
// p_i . dP_i = sum_j p_ij (dO_i . V_j) = dO_i . O_i: the row term D_i needs only O and dO, never
// the whole row of P. A flash backward recomputes P tile by tile from Q, K and the forward's
// row log-sum-exp (P_ij = exp(S_ij - lse_i)), so it stores nothing of size S x S either.
// Masked keys (j > i when causal) have P_ij = 0 and so receive no gradient from row i.
//
// The GPU side (the backward ladder: bwd_v1_cublas.cu, cudnn_sdpa_backward.cpp, the registry in
// attention_backward.cpp) follows the forward's rules: device pointers, a workspace of at least
// the variant's workspace_bytes(shape), a stream; arguments checked before any CUDA call
// (std::invalid_argument with one line), launches checked, no synchronisation.
#include <cstdint>
#include <string>
#include <vector>

#include "attention.hpp"

namespace day05 {

// FLOPs of the backward, counted as FlashAttention counts them: five GEMMs of 2 S^2 D per head
// (S = Q K^T recomputed, dV = P^T dO, dP = dO V^T, dQ = dS K, dK = dS^T Q), 10 B H S^2 D, i.e.
// 2.5x attention_flops(s); half of that when causal. The element-wise work is not counted.
double attention_backward_flops(const AttentionShape& s);

struct BackwardReference {
  std::vector<double> dq, dk, dv;  // [B, H, S, D]
  // Each gradient element's scale, the sum of the absolute values of the terms it adds up (as
  // abs_o is for O): an error is measured against tol x this, so a cancelling sum is not held to a
  // tighter bound than the rounding of its terms allows. dP_ij and D_i are themselves dot products
  // whose rounding scales with their absolute terms, so they enter by those:
  //   abs_dv[j] = sum_i P_ij |dO_i|
  //   abs_dq[i] = c sum_j P_ij (|dO_i|.|V_j| + |dO_i|.abs_o_i) |K_j|,  abs_o_i = sum_j P_ij |V_j|
  //   abs_dk[j] = c sum_i P_ij (|dO_i|.|V_j| + |dO_i|.abs_o_i) |Q_i|
  std::vector<double> abs_dq, abs_dk, abs_dv;
  std::vector<double> o;      // [B, H, S, D]: the forward's output, recomputed in double
  std::vector<double> lse;    // [B, H, S]: the row log-sum-exp
  std::vector<double> delta;  // [B, H, S]: D_i = dO_i . O_i
};

// The gradients of one head (bh = b H + h), written into r's vectors at that head's offsets (they
// must already have the full sizes; attention_backward_cpu sizes them). It walks the query rows
// one at a time, keeping only one row of P, so it needs O(S D) memory at any S. Returns the FLOPs
// it did (12 D per unmasked (i, j) pair: the five products, and O recomputed).
double attention_backward_head_cpu(const AttentionShape& s, const float* q, const float* k,
                                   const float* v, const float* dout, int64_t bh,
                                   BackwardReference& r);
// Every head. Throws std::invalid_argument on a bad shape or tensors of the wrong size.
BackwardReference attention_backward_cpu(const AttentionShape& s, const std::vector<float>& q,
                                         const std::vector<float>& k, const std::vector<float>& v,
                                         const std::vector<float>& dout);

// ---- the GPU backward ------------------------------------------------------------------------
// A backward launcher's tensors. Q, K, V, dO and the outputs dQ, dK, dV are [B, H, S, D] like the
// forward's; O is the forward's output and lse its row log-sum-exp [B, H, S] in fp32, the natural
// log of sum_j exp(c q_i . k_j) over the unmasked keys, exactly what the flash forwards (v3, v4,
// v5) and cuDNN's (its "stats") write. The training path feeds the GPU forward's O and lse.
template <class T>
struct BackwardTensors {
  const T *q = nullptr, *k = nullptr, *v = nullptr, *o = nullptr, *dout = nullptr;
  const float* lse = nullptr;
  T *dq = nullptr, *dk = nullptr, *dv = nullptr;
  bool any_null() const {
    return q == nullptr || k == nullptr || v == nullptr || o == nullptr || dout == nullptr ||
           lse == nullptr || dq == nullptr || dk == nullptr || dv == nullptr;
  }
};

using AttnBwdFp32Fn = void (*)(const AttentionShape&, const BackwardTensors<float>&,
                               void* workspace, size_t workspace_bytes, cudaStream_t);
using AttnBwdBf16Fn = void (*)(const AttentionShape&, const BackwardTensors<__nv_bfloat16>&,
                               void* workspace, size_t workspace_bytes, cudaStream_t);

// bwd v1 (bwd_v1_cublas.cu): S and dP materialised head-chunk by head-chunk, cuBLAS GEMMs. The
// bf16 form needs sm_80 code (cuBLAS's bf16 GEMMs); the fp32 form runs anywhere.
void attention_bwd_v1_cublas(const AttentionShape&, const BackwardTensors<__nv_bfloat16>&, void*,
                             size_t, cudaStream_t);
void attention_bwd_v1_cublas_fp32(const AttentionShape&, const BackwardTensors<float>&, void*,
                                  size_t, cudaStream_t);
// Heads per chunk: as many as fit kScoreBudgetBytes with one head's S x S fp32 scratch and its
// S x S P / dS (in the tensors' type: `element_bytes` 2 or 4); all heads when they fit.
int64_t bwd_v1_heads_per_chunk(const AttentionShape& s, size_t element_bytes);
size_t bwd_v1_workspace_bytes(const AttentionShape& s);       // bf16 form
size_t bwd_v1_fp32_workspace_bytes(const AttentionShape& s);  // fp32 form
std::string bwd_v1_refusal(const AttentionShape& s);
std::string bwd_v1_fp32_refusal(const AttentionShape& s);

// bwd v2 (bwd_v2_flash_mma.cu): FlashAttention-2's tiled backward on mma.sync bf16 (sm_80), no
// S x S matrix; dQ accumulated in fp32 by atomics in the workspace. D = 64 and 128.
void attention_bwd_v2_flash_mma(const AttentionShape&, const BackwardTensors<__nv_bfloat16>&, void*,
                                size_t, cudaStream_t);
size_t bwd_v2_workspace_bytes(const AttentionShape& s);  // B H S D + B H S floats
std::string bwd_v2_refusal(const AttentionShape& s);
// bwd v2b (the same file): bwd v2 with a separate dQ pass: a second kernel per query tile
// loops over the key tiles and recomputes S and dP, so dQ needs no atomics and no accumulator.
void attention_bwd_v2b_flash_mma_dq_pass(const AttentionShape&,
                                         const BackwardTensors<__nv_bfloat16>&, void*, size_t,
                                         cudaStream_t);
size_t bwd_v2b_workspace_bytes(const AttentionShape& s);  // B H S floats (D_i)
std::string bwd_v2b_refusal(const AttentionShape& s);
// bwd v2c (the same file): bwd v2 with 128 keys per block (8 warps): half the dQ atomics. Its
// workspace is bwd v2's. D = 128 takes 120.5 KB of shared memory per block: refused on GPUs that
// give a block less (sm_86, sm_89: 99 KB), with the figures in one line.
void attention_bwd_v2c_flash_mma_128_keys(const AttentionShape&,
                                          const BackwardTensors<__nv_bfloat16>&, void*, size_t,
                                          cudaStream_t);
std::string bwd_v2c_refusal(const AttentionShape& s);
// bwd v2d (the same file): bwd v2c with dQ's partials added by 8-byte vector reductions (needs
// sm_90 code). Workspace and refusals as bwd v2c's.
void attention_bwd_v2d_flash_mma_vector_red(const AttentionShape&,
                                            const BackwardTensors<__nv_bfloat16>&, void*, size_t,
                                            cudaStream_t);
std::string bwd_v2d_refusal(const AttentionShape& s);

// bwd v3 (bwd_v3_flash_wgmma.cu): FlashAttention-3's backward on Hopper's wgmma and TMA (sm_90a
// code only): a block per 128 keys, a TMA producer warpgroup and 2 consumer warpgroups; dQ
// accumulated in fp32 by vector reductions in the workspace. D = 64 and 128.
void attention_bwd_v3_flash_wgmma(const AttentionShape&, const BackwardTensors<__nv_bfloat16>&,
                                  void*, size_t, cudaStream_t);
// [B H S D fp32, on a 256-byte boundary][D_i: B H S_pad fp32, on a 256-byte boundary][lse log2 e:
// B H S_pad fp32], S_pad = S rounded up to a multiple of 64.
size_t bwd_v3_workspace_bytes(const AttentionShape& s);
std::string bwd_v3_refusal(const AttentionShape& s);

// cuDNN's fused attention backward (cudnn_sdpa_backward.cpp, the cuDNN frontend's sdpa_backward):
// the bf16 rows' library. Refused with a one-line note where the frontend or cuDNN is missing or
// cuDNN has no plan for the shape.
void attention_cudnn_sdpa_backward(const AttentionShape&, const BackwardTensors<__nv_bfloat16>&,
                                   void*, size_t, cudaStream_t);
size_t cudnn_sdpa_backward_workspace_bytes(const AttentionShape& s);
std::string cudnn_sdpa_backward_refusal(const AttentionShape& s);

// ---- the backward registry: the binary's --backward rows, the tests and the README table -----
struct AttentionBackwardVariant {
  const char* name;
  const char* description;
  Precision precision;
  AttnBwdFp32Fn fp32 = nullptr;  // set for kFp32
  AttnBwdBf16Fn bf16 = nullptr;  // set for kBf16
  size_t (*workspace_bytes)(const AttentionShape&);
  std::string (*refusal)(const AttentionShape&);
  bool is_library = false;  // the library row of its precision
  gpu100::ArchNeed needs = gpu100::ArchNeed::kAny;
  const char* tags = "";
};
const std::vector<AttentionBackwardVariant>& attention_backward_variants();
const AttentionBackwardVariant* find_backward_variant(const std::string& name);  // nullptr: unknown

// ---- the training step: one layer's forward, then its backward, as one unit -----------------
// A bf16 forward that writes O and the row log-sum-exp (at the start of its workspace, as the
// flash rows and cuDNN's do: `is_flash` in the registry), then a bf16 backward fed that O and
// log-sum-exp and a given dO. The binary's --training-step rows time the two together.

// FLOPs of the step: the forward's 4 B H S^2 D and the backward's 10 B H S^2 D, 14 B H S^2 D, half
// of that when causal (scripts/torch_baselines.py counts its PyTorch training step the same way).
double attention_training_step_flops(const AttentionShape& s);

// The step's tensors, all [B, H, S, D] bf16: the inputs Q, K, V and dO, the outputs O, dQ, dK, dV.
struct TrainingStepTensors {
  const __nv_bfloat16 *q = nullptr, *k = nullptr, *v = nullptr, *dout = nullptr;
  __nv_bfloat16 *o = nullptr, *dq = nullptr, *dk = nullptr, *dv = nullptr;
};

struct TrainingStep {
  const AttentionVariant* forward = nullptr;
  const AttentionBackwardVariant* backward = nullptr;
  // "" when this build runs both on the current GPU at shape s, else the first reason in one line.
  std::string refusal(const AttentionShape& s) const;
  // The forward's workspace (the row log-sum-exp at its start, then any of its own) and the
  // backward's; callers allocate both once, outside any timed loop.
  size_t forward_workspace_bytes(const AttentionShape& s) const;
  size_t backward_workspace_bytes(const AttentionShape& s) const;
  // The forward, then the backward, on `stream`; no synchronisation. Throws std::invalid_argument
  // on null tensors or a null forward workspace (before any CUDA call), and on a refusal (which
  // may build cuDNN's plan first); each launcher then checks its own workspace's size.
  void run(const AttentionShape& s, const TrainingStepTensors& t, void* forward_workspace,
           size_t forward_workspace_bytes, void* backward_workspace,
           size_t backward_workspace_bytes, cudaStream_t stream) const;
  // "v5_flash_wgmma+bwd_v3_flash_wgmma": the row's name ("-" for a side that is missing).
  std::string name() const;
};
// The build's own step at shape s: the fastest bf16 flash forward it runs (best_flash_bf16()) and
// the backward ladder's last rung that it runs and that takes s (the registry's non-library bf16
// rows are in lesson order, and the last that runs is the fastest the README measured for each
// build: bwd v3 where there is sm_90a code, else bwd v2d with sm_90 code, else bwd v2b). A rung
// tagged "not_in_step" (bwd v2c: no faster than v2b, slower at D = 64) is passed over. `backward`
// is null when no rung takes s.
TrainingStep own_training_step(const AttentionShape& s);
// The library's step: the bf16 library rows of the forward's and the backward's registries
// (cuDNN's fused attention forward, then its backward fed its own O and stats).
TrainingStep library_training_step();

// The gradients' check: element e passes when |got - ref| <= tol * abs_dX[e] (the reference's
// scales above; check_output in attention.hpp). The tolerances, and why (README, "The backward
// ladder"): every term of a gradient's sum carries the rounding of P and of dS to the storage
// precision and the output's own rounding, plus the forward's log-sum-exp error, which scales a
// whole row of P.
constexpr double kBwdFp32Tol = 5e-5;
constexpr double kBwdBf16Tol = 2e-2;
inline double backward_tolerance(Precision p) {
  return p == Precision::kFp32 ? kBwdFp32Tol : kBwdBf16Tol;
}

}  // namespace day05
