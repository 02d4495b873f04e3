// The library row of day05's bf16 rows: cuDNN's fused scaled-dot-product attention, the kernel
// PyTorch's SDPA dispatches to on Hopper for bf16, built through the cuDNN frontend's graph API
// (header-only C++, from pip's nvidia-cudnn-frontend, which scripts/setup.sh fetches where the
// network allows). Q, K, V and O are day05's [B, H, S, D] bf16 tensors; the row log-sum-exp
// (cuDNN's "stats", [B, H, S, 1] fp32) goes to the start of the workspace, where the flash rows
// write theirs, and cuDNN's own workspace follows it. One graph per shape, built on first use and
// kept.
#include <algorithm>
#include <cmath>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

#include "attention.hpp"
#include "common/device_info.hpp"
#include "common/math.hpp"

#if GPU100_HAVE_CUDNN_FRONTEND
#include <cudnn_frontend.h>

#include "common/cudnn_check.hpp"
#endif

namespace day05 {

namespace {

constexpr size_t kAlign = 256;  // cuDNN's workspace starts on this boundary after the LSE

size_t lse_bytes(const AttentionShape& s) {
  return gpu100::round_up(size_t(s.rows()) * sizeof(float), kAlign);
}

#if GPU100_HAVE_CUDNN_FRONTEND
namespace fe = cudnn_frontend;

enum Uid : int64_t { kQ = 1, kK, kV, kO, kStats };

cudnnHandle_t handle() {
  return gpu100::cudnn_thread_handle();
}

struct Plan {
  AttentionShape s;
  std::shared_ptr<fe::graph::Graph> graph;
  int64_t workspace = 0;
  std::string error;  // why cuDNN cannot run this shape ("" when it can)
};

bool same(const AttentionShape& a, const AttentionShape& b) {
  return a.b == b.b && a.h == b.h && a.s == b.s && a.d == b.d && a.causal == b.causal;
}

// The graph for shape s: Q, K, V and O [B, H, S, D] bf16 (D contiguous), fp32 softmax and
// accumulation, scale 1 / sqrt(D), the causal mask aligned top-left (query i sees keys 0..i, as
// day05's), and the stats output.
Plan build(const AttentionShape& s) {
  Plan p;
  p.s = s;
  auto g = std::make_shared<fe::graph::Graph>();
  g->set_io_data_type(fe::DataType_t::BFLOAT16)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  const std::vector<int64_t> dim = {s.b, s.h, s.s, s.d};
  const std::vector<int64_t> stride = {int64_t(s.h) * s.s * s.d, int64_t(s.s) * s.d, s.d, 1};
  auto tensor = [&](const char* name, Uid uid) {
    return g->tensor(
        fe::graph::Tensor_attributes().set_name(name).set_uid(uid).set_dim(dim).set_stride(stride));
  };
  auto q = tensor("Q", kQ), k = tensor("K", kK), v = tensor("V", kV);
  auto opts = fe::graph::SDPA_attributes().set_name("sdpa").set_generate_stats(true).set_attn_scale(
      1.f / std::sqrt(float(s.d)));
  if (s.causal) opts.set_causal_mask(true);
  auto [o, stats] = g->sdpa(q, k, v, opts);
  o->set_output(true).set_uid(kO).set_dim(dim).set_stride(stride);
  stats->set_output(true).set_uid(kStats).set_data_type(fe::DataType_t::FLOAT);
  const cudnnHandle_t h = handle();
  // Each step only after the one before it succeeded; the first failure is the refusal's reason.
  auto ok = [&](fe::error_t st) {
    if (!st.is_good()) p.error = st.get_message();
    return st.is_good();
  };
  if (!ok(g->validate()) || !ok(g->build_operation_graph(h)) ||
      !ok(g->create_execution_plans({fe::HeurMode_t::A})) || !ok(g->check_support(h)) ||
      !ok(g->build_plans(h))) {
    return p;
  }
  if (auto st = g->get_workspace_size(p.workspace); !st.is_good()) {
    p.error = st.get_message();
    return p;
  }
  p.graph = g;
  return p;
}

const Plan& plan_for(const AttentionShape& s) {
  static std::mutex m;
  static std::vector<std::unique_ptr<Plan>> plans;
  std::lock_guard<std::mutex> lock(m);
  for (const auto& p : plans) {
    if (same(p->s, s)) return *p;
  }
  plans.push_back(std::make_unique<Plan>(build(s)));
  return *plans.back();
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
  const cudnnHandle_t h = handle();
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
