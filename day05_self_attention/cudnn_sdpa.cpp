// The library row of day05's bf16 rows: cuDNN's fused scaled-dot-product attention, the kernel
// PyTorch's SDPA dispatches to on Hopper for bf16, built through the cuDNN frontend's graph API
// (header-only C++, from pip's nvidia-cudnn-frontend, which scripts/setup.sh fetches where the
// network allows). Q, K, V and O are day05's [B, H, S, D] bf16 tensors; the row log-sum-exp
// (cuDNN's "stats", [B, H, S, 1] fp32) goes to the start of the workspace, where the flash rows
// write theirs, and cuDNN's own workspace follows it. One graph per shape, built on first use and
// kept.
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

#include "attention.hpp"
#include "common/device_info.hpp"
#include "common/math.hpp"

#if GPU100_HAVE_CUDNN_FRONTEND
#include "common/cudnn_check.hpp"
#include "cudnn_sdpa_graph.hpp"
#endif

namespace day05 {

namespace {

constexpr size_t kAlign = 256;  // cuDNN's workspace starts on this boundary after the LSE

size_t lse_bytes(const AttentionShape& s) {
  return gpu100::round_up(size_t(s.rows()) * sizeof(float), kAlign);
}

#if GPU100_HAVE_CUDNN_FRONTEND
namespace fe = cudnn_frontend;
using cudnn_sdpa_graph::Plan;

enum Uid : int64_t { kQ = 1, kK, kV, kO, kStats };

// The graph for shape s: Q, K, V and O [B, H, S, D] bf16, fp32 softmax and accumulation, scale
// 1 / sqrt(D), the causal mask aligned top-left (query i sees keys 0..i, as day05's), and the
// stats output.
Plan build(const AttentionShape& s) {
  auto g = cudnn_sdpa_graph::bf16_graph();
  auto q = cudnn_sdpa_graph::bhsd_tensor(*g, s, "Q", kQ);
  auto k = cudnn_sdpa_graph::bhsd_tensor(*g, s, "K", kK);
  auto v = cudnn_sdpa_graph::bhsd_tensor(*g, s, "V", kV);
  auto opts = fe::graph::SDPA_attributes().set_name("sdpa").set_generate_stats(true).set_attn_scale(
      1.f / std::sqrt(float(s.d)));
  if (s.causal) opts.set_causal_mask(true);
  auto [o, stats] = g->sdpa(q, k, v, opts);
  o->set_output(true)
      .set_uid(kO)
      .set_dim(cudnn_sdpa_graph::bhsd_dim(s))
      .set_stride(cudnn_sdpa_graph::bhsd_stride(s));
  stats->set_output(true).set_uid(kStats).set_data_type(fe::DataType_t::FLOAT);
  return cudnn_sdpa_graph::finish(s, std::move(g));
}

const Plan& plan_for(const AttentionShape& s) {
  static cudnn_sdpa_graph::PlanCache cache(build);
  return cache.get(s);
}
#endif

}  // namespace

bool have_cudnn_sdpa() {
#if GPU100_HAVE_CUDNN_FRONTEND
  return true;
#else
  return false;
#endif
}

std::string cudnn_sdpa_refusal(const AttentionShape& s) {
#if GPU100_HAVE_CUDNN_FRONTEND
  if (s.d % 8 != 0 || s.d > 256) {
    return fmt::format("cuDNN's fused attention takes D a multiple of 8 up to 256 (got D = {})",
                       s.d);
  }
  if (!gpu100::gpu_available()) return "";  // the plan needs a GPU; the launcher asks again
  const Plan& p = plan_for(s);
  return p.error.empty() ? "" : "cuDNN has no fused attention for this shape: " + p.error;
#else
  (void)s;
  return "skipped: the cuDNN frontend headers were not found (scripts/setup.sh fetches them)";
#endif
}

size_t cudnn_sdpa_workspace_bytes(const AttentionShape& s) {
#if GPU100_HAVE_CUDNN_FRONTEND
  // cuDNN's part is known once the plan is built, which needs a GPU and a shape cuDNN takes.
  if (!cudnn_sdpa_refusal(s).empty() || !gpu100::gpu_available()) return lse_bytes(s);
  return lse_bytes(s) + size_t(std::max<int64_t>(plan_for(s).workspace, 0));
#else
  return lse_bytes(s);
#endif
}

void attention_cudnn_sdpa(const AttentionShape& s, const __nv_bfloat16* q, const __nv_bfloat16* k,
                          const __nv_bfloat16* v, __nv_bfloat16* o, void* workspace,
                          size_t workspace_bytes, cudaStream_t stream) {
  // The shape and the log-sum-exp's part of the workspace first: nothing reaches cuDNN before.
  check_shape(s);
  if (q == nullptr || k == nullptr || v == nullptr || o == nullptr || workspace == nullptr ||
      workspace_bytes < lse_bytes(s)) {
    throw std::invalid_argument(
        fmt::format("cudnn_sdpa: null tensors or a workspace of {} bytes ({} at least)",
                    workspace_bytes, lse_bytes(s)));
  }
  if (const std::string why = cudnn_sdpa_refusal(s); !why.empty()) {
    throw std::invalid_argument("cudnn_sdpa: " + why);
  }
#if GPU100_HAVE_CUDNN_FRONTEND
  const Plan& p = plan_for(s);
  if (!p.error.empty()) throw std::invalid_argument("cudnn_sdpa: " + p.error);
  if (workspace_bytes < cudnn_sdpa_workspace_bytes(s)) {
    throw std::invalid_argument(fmt::format("cudnn_sdpa: a workspace of {} bytes, {} needed",
                                            workspace_bytes, cudnn_sdpa_workspace_bytes(s)));
  }
  const cudnnHandle_t h = gpu100::cudnn_thread_handle();
  CUDNN_CHECK(cudnnSetStream(h, stream));
  auto* ws = static_cast<char*>(workspace);
  std::unordered_map<int64_t, void*> ptrs = {{kQ, const_cast<__nv_bfloat16*>(q)},
                                             {kK, const_cast<__nv_bfloat16*>(k)},
                                             {kV, const_cast<__nv_bfloat16*>(v)},
                                             {kO, o},
                                             {kStats, ws}};
  if (auto st = p.graph->execute(h, ptrs, ws + lse_bytes(s)); !st.is_good()) {
    throw std::runtime_error("cudnn_sdpa: cuDNN's execute failed: " + st.get_message());
  }
#else
  (void)q, (void)k, (void)v, (void)o, (void)workspace, (void)workspace_bytes, (void)stream;
#endif
}

}  // namespace day05
