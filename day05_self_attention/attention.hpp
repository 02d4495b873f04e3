#pragma once
// day05_self_attention: multi-head scaled dot-product attention, forward pass.
//
//   O = softmax(Q K^T / sqrt(D) + mask) V      Q, K, V, O: [B, H, S, D], row-major, contiguous
//
// The host API of the day, exported by the library target day05::attention. Every launcher takes
// device pointers, a device workspace of at least the variant's `workspace_bytes(shape)` bytes
// (allocated once by the caller, outside any timed loop) and a stream; it checks its arguments
// (std::invalid_argument before any CUDA call), checks its launches (CUDA_CHECK_LAST) and does
// not synchronise. The mask, when `causal` is set, lets query i see keys j <= i only.
//
// Precisions: v1-v3 take and return fp32. v4 and v5 take bf16 Q, K, V (converted once by the
// caller, outside any timed region) and write bf16 O; they compute in fp32 (accumulators and
// softmax statistics).
//
// Extra device memory: v1 materialises the whole B x H x S x S score matrix (refused above
// kScoreBudgetBytes); v2 the scores of as many heads at a time as fit in that budget; the flash
// variants v3, v4 and v5 no S x S matrix at all, only the log-sum-exp of each row (4 B H S bytes),
// which they write to the start of the workspace (a backward pass would need it); v5 at D = 64
// without the mask also room for a split last round (v5_workspace_bytes, below).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/arch.hpp"
#include "common/compare.hpp"
#include "common/precision.hpp"

namespace day05 {

struct AttentionShape {
  int b = 1, h = 1, s = 1, d = 64;
  bool causal = false;

  int64_t heads() const { return int64_t(b) * h; }
  int64_t rows() const { return heads() * s; }     // query rows, B H S
  int64_t elements() const { return rows() * d; }  // elements of Q (and K, V, O)
};

constexpr int kMaxD = 256;
constexpr int64_t kMaxS = int64_t(1) << 20;
// The largest S x S score buffer v1 (all heads at once) and v2 (one chunk of heads) may allocate.
constexpr size_t kScoreBudgetBytes = size_t(4) << 30;

// Throws std::invalid_argument unless b, h, s >= 1, s <= kMaxS, d even in [2, kMaxD] and the
// tensors have fewer than 2^40 elements.
void check_shape(const AttentionShape& s);
// "B=8 H=16 S=2048 D=64 causal"
std::string shape_label(const AttentionShape& s);
// FLOPs counted the FlashAttention way: 4 B H S^2 D (two GEMMs of 2 S^2 D per head), half of
// that when causal. Softmax and rescaling are not counted.
double attention_flops(const AttentionShape& s);
// 1 / sqrt(D).
float softmax_scale(int d);

// ---- launchers -------------------------------------------------------------------------------
using AttnFp32Fn = void (*)(const AttentionShape&, const float* q, const float* k, const float* v,
                            float* o, void* workspace, size_t workspace_bytes, cudaStream_t);
using AttnBf16Fn = void (*)(const AttentionShape&, const __nv_bfloat16* q, const __nv_bfloat16* k,
                            const __nv_bfloat16* v, __nv_bfloat16* o, void* workspace,
                            size_t workspace_bytes, cudaStream_t);

void attention_v1_naive(const AttentionShape&, const float*, const float*, const float*, float*,
                        void*, size_t, cudaStream_t);
void attention_v2_cublas(const AttentionShape&, const float*, const float*, const float*, float*,
                         void*, size_t, cudaStream_t);
void attention_v3_flash_fp32(const AttentionShape&, const float*, const float*, const float*,
                             float*, void*, size_t, cudaStream_t);
void attention_v4_flash_bf16(const AttentionShape&, const __nv_bfloat16*, const __nv_bfloat16*,
                             const __nv_bfloat16*, __nv_bfloat16*, void*, size_t, cudaStream_t);
// v4 needs code built for sm_80 or newer (bf16 mma.sync), v5 for sm_90a (wgmma, TMA); where the
// running code lacks it they throw gpu100::ArchUnavailable before any launch.
void attention_v5_flash_wgmma(const AttentionShape&, const __nv_bfloat16*, const __nv_bfloat16*,
                              const __nv_bfloat16*, __nv_bfloat16*, void*, size_t, cudaStream_t);

// Where the flash kernels v4 and v5 write O: [B, H, S, D] like Q, K and V (the launchers above),
// or token-major [B, S, H, D], i.e. row b S + s of a [B S, H D] matrix, the one the attention
// block's output projection multiplies (block.hpp): each row goes straight to its place, so no
// transposition follows.
enum class OLayout { kBHSD, kBSHD };
void attention_v4_flash_bf16(const AttentionShape&, const __nv_bfloat16*, const __nv_bfloat16*,
                             const __nv_bfloat16*, __nv_bfloat16*, OLayout, void*, size_t,
                             cudaStream_t);
void attention_v5_flash_wgmma(const AttentionShape&, const __nv_bfloat16*, const __nv_bfloat16*,
                              const __nv_bfloat16*, __nv_bfloat16*, OLayout, void*, size_t,
                              cudaStream_t);
// v5 at D = 64 without the mask runs one block per SM, each walking query tiles of `rows`
// queries (items) in rounds. When the last round has items for at most half of the blocks, each
// of its items is cut along the keys into `splits` parts (blocks / items of that round, at most
// the item's key tiles) that every block shares, and a second small kernel adds the parts up (the
// flash-decoding combine). Items from split_from on are split; split_from = items, splits = 1:
// none. On 132 SMs, B 1 H 8 S 16384: 688 items, the last 28 in 4 parts each.
struct V5TailSplit {
  int64_t items = 0, split_from = 0;
  int blocks = 0, splits = 1, rows = 0;
};
V5TailSplit v5_tail_split(const AttentionShape& s, int sms);
// v5's workspace: the row log-sum-exp, then (D = 64, not causal) room for the split round's
// parts, a row block of O in fp32 and its log-sum-exps each. Given only flash_workspace_bytes,
// v5 runs without the split.
size_t v5_workspace_bytes(const AttentionShape& s);

// The fastest flash kernel this build runs on the current GPU: v5 where it has sm_90a code, else
// v4 (sm_80 and newer; throws gpu100::ArchUnavailable below that). Returns the variant's name.
const char* attention_flash_bf16(const AttentionShape&, const __nv_bfloat16* q,
                                 const __nv_bfloat16* k, const __nv_bfloat16* v, __nv_bfloat16* o,
                                 OLayout layout, void* workspace, size_t workspace_bytes,
                                 cudaStream_t stream);
const char* best_flash_bf16();  // "v5_flash_wgmma" or "v4_flash_bf16", as the above would choose

// The library row of the bf16 rows: cuDNN's fused attention (cudnn_sdpa.cpp, through the cuDNN
// frontend's graph API; refused with a note where the headers or cuDNN are missing). It writes the
// row log-sum-exp at the start of the workspace, as the flash rows do.
void attention_cudnn_sdpa(const AttentionShape&, const __nv_bfloat16*, const __nv_bfloat16*,
                          const __nv_bfloat16*, __nv_bfloat16*, void*, size_t, cudaStream_t);
bool have_cudnn_sdpa();  // built with the cuDNN frontend
size_t cudnn_sdpa_workspace_bytes(const AttentionShape& s);
std::string cudnn_sdpa_refusal(const AttentionShape& s);

// Workspace sizes and refusals ("" when the variant runs this shape; otherwise the one-line
// reason, which the launcher also throws as std::invalid_argument).
size_t v1_workspace_bytes(const AttentionShape& s);
size_t v2_workspace_bytes(const AttentionShape& s);
size_t flash_workspace_bytes(const AttentionShape& s);  // v3-v5: the row log-sum-exp
std::string v1_refusal(const AttentionShape& s);
std::string v2_refusal(const AttentionShape& s);
std::string v3_refusal(const AttentionShape& s);
std::string v4_refusal(const AttentionShape& s);
std::string v5_refusal(const AttentionShape& s);
// v2 runs its GEMMs on this many heads at a time (all of them when the scores fit the budget).
int64_t v2_heads_per_chunk(const AttentionShape& s);

// ---- the registry: drives the binary's rows, the tests and the README table ------------------
using gpu100::Precision;  // common/precision.hpp (day05 has fp32 and bf16 variants)
using gpu100::to_string;

struct AttentionVariant {
  const char* name;
  const char* description;
  Precision precision;
  AttnFp32Fn fp32 = nullptr;  // set for kFp32
  AttnBf16Fn bf16 = nullptr;  // set for kBf16
  size_t (*workspace_bytes)(const AttentionShape&);
  std::string (*refusal)(const AttentionShape&);
  bool is_flash = false;  // writes the row log-sum-exp; no S x S matrix
  bool is_library =
      false;  // the library row of its precision: v2 (cuBLAS) for fp32, cuDNN for bf16
  gpu100::ArchNeed needs = gpu100::ArchNeed::kAny;  // the GPU code it needs (common/arch.hpp)
  const char* tags = "";  // "mine": a learner's variant (common/learner.hpp)
};
// The day's own variants, then the learner's (mine/*.cu).
const std::vector<AttentionVariant>& attention_variants();
// Adds a learner's variant (tagged "mine") from its file in mine/ (common/learner.hpp).
void add_learner_variant(const AttentionVariant& v);
const AttentionVariant* find_variant(const std::string& name);  // nullptr when unknown

// ---- CPU reference (double) ------------------------------------------------------------------
// The probabilities of one query row (head bh = b * H + h, query i): p[j] = softmax over the
// unmasked keys (j <= i when causal) of s_j = q_i . k_j / sqrt(D), written to p[0, keys). Returns
// the row's log-sum-exp, log sum_j exp(s_j). The forward's and the backward's references share it.
double attention_probs_cpu(const AttentionShape& s, const float* q, const float* k, int64_t bh,
                           int i, double* p);
// One query row (head bh = b * H + h, query i): o[d] = sum_j p_j v[j][d], abs_o[d] = sum_j p_j
// |v[j][d]| (the scale the error is measured against), lse = log sum_j exp(s_j) over the unmasked
// keys, s_j = q_i . k_j / sqrt(D). Returns the FLOPs it did (4 D per key).
double attention_row_cpu(const AttentionShape& s, const float* q, const float* k, const float* v,
                         int64_t bh, int i, double* o, double* abs_o, double* lse);
struct Reference {
  std::vector<double> o, abs_o;  // [B, H, S, D]
  std::vector<double> lse;       // [B, H, S]
};
Reference attention_cpu(const AttentionShape& s, const std::vector<float>& q,
                        const std::vector<float>& k, const std::vector<float>& v);

// ---- checks ----------------------------------------------------------------------------------
// Element e passes when |got - ref| <= tol * abs_o[e]: the error of a weighted sum of V is
// bounded by the rounding unit times sum_j p_j |v_j| (see the README): that is the allowance of
// gpu100::record, so err_over_tol is the largest |got - ref| / (tol * abs_o). NaN never passes.
constexpr double kFp32Tol = 2e-5;
constexpr double kBf16Tol = 1e-2;
inline double tolerance(Precision p) {
  return p == Precision::kFp32 ? kFp32Tol : kBf16Tol;
}
gpu100::CompareResult check_output(const std::vector<double>& ref,
                                   const std::vector<double>& abs_ref,
                                   const std::vector<float>& got, double tol);
// The log-sum-exp: |got - ref| <= tol * max(1, |ref|).
gpu100::CompareResult check_lse(const std::vector<double>& ref, const std::vector<float>& got,
                                double tol);

}  // namespace day05
