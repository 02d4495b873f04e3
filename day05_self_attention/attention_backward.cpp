// day05: the backward registry (the binary's --backward rows, the tests and the README's backward
// table), the forward's registry's counterpart. The ladder's rungs come before the library row:
// bwd_v1_cublas, bwd_v2_flash_mma, bwd_v2b_flash_mma_dq_pass, bwd_v2c_flash_mma_128_keys and
// bwd_v2d_flash_mma_vector_red (mma.sync), then bwd_v3_flash_wgmma (Hopper: wgmma, TMA). Then the
// training step: a forward and a backward from the two registries, run as one unit.
#include <fmt/format.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "attention_backward.hpp"
#include "common/tags.hpp"

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
      {"bwd_v2c_flash_mma_128_keys",
       "bwd_v2_flash_mma with 128 keys per block (8 warps of 16 keys): each query tile serves "
       "twice the keys, so half the dQ atomics and half the Q / dO loads per key",
       P::kBf16, nullptr, attention_bwd_v2c_flash_mma_128_keys, bwd_v2_workspace_bytes,
       bwd_v2c_refusal, false, gpu100::ArchNeed::kSm80, "not_in_step"},
      {"bwd_v2d_flash_mma_vector_red",
       "bwd_v2c with dQ's partials added by 8-byte vector reductions (sm_90): whole 32-byte L2 "
       "sectors, half the reduction instructions",
       P::kBf16, nullptr, attention_bwd_v2d_flash_mma_vector_red, bwd_v2_workspace_bytes,
       bwd_v2d_refusal, false, gpu100::ArchNeed::kSm90},
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

// ---- the training step -----------------------------------------------------------------------

double attention_training_step_flops(const AttentionShape& s) {
  return attention_flops(s) + attention_backward_flops(s);
}

namespace {
// "" when this build's code for the current GPU runs `v` at s, else the reason.
template <class Variant>
std::string cannot_run(const Variant* v, const char* what, const AttentionShape& s) {
  if (v == nullptr) return fmt::format("no {} takes {}", what, shape_label(s));
  if (!gpu100::build_has(v->needs)) {
    return fmt::format("{} {} (CMAKE_CUDA_ARCHITECTURES={})", v->name, gpu100::needs_text(v->needs),
                       gpu100::build_architectures());
  }
  if (v->precision != Precision::kBf16) return std::string(v->name) + " is not a bf16 variant";
  return v->refusal(s);
}
}  // namespace

std::string TrainingStep::refusal(const AttentionShape& s) const {
  if (std::string why = cannot_run(forward, "bf16 flash forward", s); !why.empty()) return why;
  if (!forward->is_flash) {
    return std::string(forward->name) + " writes no row log-sum-exp for a backward to take";
  }
  return cannot_run(backward, "backward of this build", s);
}

size_t TrainingStep::forward_workspace_bytes(const AttentionShape& s) const {
  return forward == nullptr ? 0 : forward->workspace_bytes(s);
}

size_t TrainingStep::backward_workspace_bytes(const AttentionShape& s) const {
  return backward == nullptr ? 0 : backward->workspace_bytes(s);
}

std::string TrainingStep::name() const {
  return fmt::format("{}+{}", forward != nullptr ? forward->name : "-",
                     backward != nullptr ? backward->name : "-");
}

void TrainingStep::run(const AttentionShape& s, const TrainingStepTensors& t,
                       void* forward_workspace, size_t forward_workspace_bytes,
                       void* backward_workspace, size_t backward_workspace_bytes,
                       cudaStream_t stream) const {
  check_shape(s);
  if (t.q == nullptr || t.k == nullptr || t.v == nullptr || t.dout == nullptr || t.o == nullptr ||
      t.dq == nullptr || t.dk == nullptr || t.dv == nullptr || forward_workspace == nullptr) {
    throw std::invalid_argument("training step " + name() + ": null tensors or workspace");
  }
  if (const std::string why = refusal(s); !why.empty()) {
    throw std::invalid_argument("training step " + name() + ": " + why);
  }
  // The forward writes O, and the row log-sum-exp at the start of its workspace...
  forward->bf16(s, t.q, t.k, t.v, t.o, forward_workspace, forward_workspace_bytes, stream);
  // ...which the backward reads there, on the same stream.
  BackwardTensors<__nv_bfloat16> b;
  b.q = t.q, b.k = t.k, b.v = t.v, b.o = t.o, b.dout = t.dout;
  b.lse = static_cast<const float*>(forward_workspace);
  b.dq = t.dq, b.dk = t.dk, b.dv = t.dv;
  backward->bf16(s, b, backward_workspace, backward_workspace_bytes, stream);
}

TrainingStep own_training_step(const AttentionShape& s) {
  TrainingStep step;
  step.forward = find_variant(best_flash_bf16());
  for (const auto& v : attention_backward_variants()) {
    if (v.is_library || v.precision != Precision::kBf16 || gpu100::has_tag(v.tags, "mine") ||
        gpu100::has_tag(v.tags, "not_in_step")) {
      continue;
    }
    if (gpu100::build_has(v.needs) && v.refusal(s).empty()) step.backward = &v;  // the last wins
  }
  return step;
}

TrainingStep library_training_step() {
  TrainingStep step;
  for (const auto& v : attention_variants()) {
    if (v.is_library && v.precision == Precision::kBf16) step.forward = &v;
  }
  for (const auto& v : attention_backward_variants()) {
    if (v.is_library && v.precision == Precision::kBf16) step.backward = &v;
  }
  return step;
}

}  // namespace day05
