// day05: the backward registry (the binary's --backward rows, the tests and the README's backward
// table), the forward's registry's counterpart. The ladder's rungs come before the library row:
// bwd_v1_cublas, bwd_v2_flash_mma and bwd_v2b_flash_mma_dq_pass (mma.sync), then
// bwd_v3_flash_wgmma (Hopper: wgmma, TMA).
#include <string>
#include <vector>

#include "attention_backward.hpp"

namespace day05 {

const std::vector<AttentionBackwardVariant>& attention_backward_variants() {
  using P = Precision;
  static const std::vector<AttentionBackwardVariant> variants = {
      {"bwd_v1_cublas_fp32",
       "bwd_v1_cublas in fp32 (SGEMMs, P and dS stored in fp32): the fp32 rows' library path",
       P::kFp32, attention_bwd_v1_cublas_fp32, nullptr, bwd_v1_fp32_workspace_bytes,
       bwd_v1_fp32_refusal, true},
      {"bwd_v1_cublas",
       "the chain rule on cuBLAS: S = Q K^T recomputed, P from the forward's log-sum-exp, dV, dP, "
       "dS = P o (dP - D), dQ, dK; bf16 GEMMs (fp32 accumulation), S x S buffers per head chunk",
       P::kBf16, nullptr, attention_bwd_v1_cublas, bwd_v1_workspace_bytes, bwd_v1_refusal, false,
       gpu100::ArchNeed::kSm80},
      {"bwd_v2_flash_mma",
       "FlashAttention-2's tiled backward on mma.sync bf16: a block per 64 keys keeps K, V, dK, dV "
       "on chip and walks the query tiles, P and dS recomputed in registers, dQ by fp32 atomics",
       P::kBf16, nullptr, attention_bwd_v2_flash_mma, bwd_v2_workspace_bytes, bwd_v2_refusal, false,
       gpu100::ArchNeed::kSm80},
      {"bwd_v2b_flash_mma_dq_pass",
       "bwd_v2_flash_mma without atomics: dK, dV as there, dQ by a second kernel per query tile "
       "that loops over the key tiles (S and dP recomputed), written once in bf16",
       P::kBf16, nullptr, attention_bwd_v2b_flash_mma_dq_pass, bwd_v2b_workspace_bytes,
       bwd_v2b_refusal, false, gpu100::ArchNeed::kSm80},
      {"bwd_v3_flash_wgmma",
       "FlashAttention-3's backward on Hopper: wgmma from shared memory (P^T and dS^T from "
       "registers), a TMA producer warpgroup feeding Q and dO through an mbarrier ring, 128 keys "
       "per block over 2 consumer warpgroups, dQ by fp32 vector reductions",
       P::kBf16, nullptr, attention_bwd_v3_flash_wgmma, bwd_v3_workspace_bytes, bwd_v3_refusal,
       false, gpu100::ArchNeed::kSm90a},
      {"cudnn_sdpa_bwd",
       "cuDNN's fused attention backward (the frontend's sdpa_backward; PyTorch's SDPA backward on "
       "its cuDNN backend): the bf16 rows' library",
       P::kBf16, nullptr, attention_cudnn_sdpa_backward, cudnn_sdpa_backward_workspace_bytes,
       cudnn_sdpa_backward_refusal, true, gpu100::ArchNeed::kSm80},
  };
  return variants;
}

const AttentionBackwardVariant* find_backward_variant(const std::string& name) {
  for (const auto& v : attention_backward_variants()) {
    if (name == v.name) return &v;
  }
  return nullptr;
}

}  // namespace day05
