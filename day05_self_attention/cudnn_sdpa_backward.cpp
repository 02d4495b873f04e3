// The library row of day05's bf16 backward rows: cuDNN's fused attention backward, the kernel
// PyTorch's SDPA runs for the gradients on its cuDNN backend, built through the cuDNN frontend's
// graph API (sdpa_backward; the header-only frontend that scripts/setup.sh fetches). It takes what
// the forward left behind: O and the row log-sum-exp, which cuDNN calls its stats ([B, H, S, 1]
// fp32). They are the same numbers as day05's flash forwards write: cuDNN's forward stores the
// natural log of sum_j exp(c q_i . k_j) when asked to generate stats, and its backward recomputes
// P as exp(c Q K^T - stats) (cudnn_frontend/node/scaled_dot_product_flash_attention.h), so a
// forward of either kind can feed it. Q, K, V, O, dO, dQ, dK, dV are [B, H, S, D] bf16; the
// softmax and the accumulation are fp32 (dQ is summed in an fp32 buffer in cuDNN's workspace).
// One graph per shape, built on first use and kept, as the forward's row does.
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

#include "attention_backward.hpp"
#include "common/device_info.hpp"

#if GPU100_HAVE_CUDNN_FRONTEND
#include "common/cudnn_check.hpp"
#include "cudnn_sdpa_graph.hpp"
#endif

namespace day05 {

namespace {

#if GPU100_HAVE_CUDNN_FRONTEND
namespace fe = cudnn_frontend;
using cudnn_sdpa_graph::Plan;

enum Uid : int64_t { kQ = 1, kK, kV, kO, kDO, kStats, kDQ, kDK, kDV };

// The graph for shape s: the eight tensors [B, H, S, D] bf16, the stats [B, H, S, 1] fp32, scale
// 1 / sqrt(D), the causal mask aligned top-left (query i sees keys 0..i), fp32 softmax and
// accumulation.
Plan build(const AttentionShape& s) {
  auto g = cudnn_sdpa_graph::bf16_graph();
  auto tensor = [&](const char* name, Uid uid) {
    return cudnn_sdpa_graph::bhsd_tensor(*g, s, name, uid);
  };
  auto q = tensor("Q", kQ), k = tensor("K", kK), v = tensor("V", kV), o = tensor("O", kO),
       dout = tensor("dO", kDO);
  auto stats = g->tensor(fe::graph::Tensor_attributes()
                             .set_name("stats")
                             .set_uid(kStats)
                             .set_dim({s.b, s.h, s.s, 1})
                             .set_stride({int64_t(s.h) * s.s, s.s, 1, 1})
                             .set_data_type(fe::DataType_t::FLOAT));
  auto opts = fe::graph::SDPA_backward_attributes()
                  .set_name("sdpa_backward")
                  .set_attn_scale(1.f / std::sqrt(float(s.d)));
  if (s.causal) opts.set_causal_mask(true);
  auto [dq, dk, dv] = g->sdpa_backward(q, k, v, o, dout, stats, opts);
  for (auto& [t, uid] : {std::pair{dq, kDQ}, std::pair{dk, kDK}, std::pair{dv, kDV}}) {
    t->set_output(true)
        .set_uid(uid)
        .set_dim(cudnn_sdpa_graph::bhsd_dim(s))
        .set_stride(cudnn_sdpa_graph::bhsd_stride(s));
  }
  return cudnn_sdpa_graph::finish(s, std::move(g));
}

const Plan& plan_for(const AttentionShape& s) {
  static cudnn_sdpa_graph::PlanCache cache(build);
  return cache.get(s);
}
#endif

}  // namespace

std::string cudnn_sdpa_backward_refusal(const AttentionShape& s) {
#if GPU100_HAVE_CUDNN_FRONTEND
  if (s.d % 8 != 0) {
    return fmt::format("cuDNN's fused attention backward takes D a multiple of 8 (got D = {})",
                       s.d);
  }
  if (!gpu100::gpu_available()) return "";  // the plan needs a GPU; the launcher asks again
  const Plan& p = plan_for(s);
  return p.error.empty() ? "" : "cuDNN has no fused attention backward for this shape: " + p.error;
#else
  (void)s;
  return "skipped: the cuDNN frontend headers were not found (scripts/setup.sh fetches them)";
#endif
}

size_t cudnn_sdpa_backward_workspace_bytes(const AttentionShape& s) {
#if GPU100_HAVE_CUDNN_FRONTEND
  // Known once the plan is built, which needs a GPU and a shape cuDNN takes.
  if (!cudnn_sdpa_backward_refusal(s).empty() || !gpu100::gpu_available()) return 0;
  return size_t(std::max<int64_t>(plan_for(s).workspace, 0));
#else
  (void)s;
  return 0;
#endif
}

void attention_cudnn_sdpa_backward(const AttentionShape& s, const BackwardTensors<__nv_bfloat16>& t,
                                   void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  // The shape and the tensors first: nothing reaches cuDNN before.
  check_shape(s);
  if (t.any_null()) throw std::invalid_argument("cudnn_sdpa_bwd: null tensors");
  if (const std::string why = cudnn_sdpa_backward_refusal(s); !why.empty()) {
    throw std::invalid_argument("cudnn_sdpa_bwd: " + why);
  }
#if GPU100_HAVE_CUDNN_FRONTEND
  const Plan& p = plan_for(s);
  if (!p.error.empty()) throw std::invalid_argument("cudnn_sdpa_bwd: " + p.error);
  const size_t need = size_t(std::max<int64_t>(p.workspace, 0));
  if (workspace_bytes < need || (need > 0 && workspace == nullptr)) {
    throw std::invalid_argument(fmt::format("cudnn_sdpa_bwd: a workspace of {} bytes{}, {} needed",
                                            workspace_bytes, workspace == nullptr ? " (null)" : "",
                                            need));
  }
  const cudnnHandle_t h = gpu100::cudnn_thread_handle();
  CUDNN_CHECK(cudnnSetStream(h, stream));
  using bf16 = __nv_bfloat16;
  std::unordered_map<int64_t, void*> ptrs = {{kQ, const_cast<bf16*>(t.q)},
                                             {kK, const_cast<bf16*>(t.k)},
                                             {kV, const_cast<bf16*>(t.v)},
                                             {kO, const_cast<bf16*>(t.o)},
                                             {kDO, const_cast<bf16*>(t.dout)},
                                             {kStats, const_cast<float*>(t.lse)},
                                             {kDQ, t.dq},
                                             {kDK, t.dk},
                                             {kDV, t.dv}};
  if (auto st = p.graph->execute(h, ptrs, workspace); !st.is_good()) {
    throw std::runtime_error("cudnn_sdpa_bwd: cuDNN's execute failed: " + st.get_message());
  }
#else
  (void)workspace, (void)workspace_bytes, (void)stream;
#endif
}

}  // namespace day05
