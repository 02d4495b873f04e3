#pragma once
// What day05's two cuDNN rows share (cudnn_sdpa.cpp, the forward; cudnn_sdpa_backward.cpp, the
// backward): a graph of the cuDNN frontend per shape, built on first use and kept, and the steps
// that turn a described graph into a plan. Included only where the frontend was found
// (GPU100_HAVE_CUDNN_FRONTEND).
#include <cudnn_frontend.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "attention.hpp"
#include "common/cudnn_check.hpp"

namespace day05::cudnn_sdpa_graph {

namespace fe = cudnn_frontend;

struct Plan {
  AttentionShape s;
  std::shared_ptr<fe::graph::Graph> graph;
  int64_t workspace = 0;
  std::string error;  // why cuDNN cannot run this shape ("" when it can)
};

// An empty graph with bf16 tensors and fp32 softmax and accumulation.
inline std::shared_ptr<fe::graph::Graph> bf16_graph() {
  auto g = std::make_shared<fe::graph::Graph>();
  g->set_io_data_type(fe::DataType_t::BFLOAT16)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  return g;
}

// A [B, H, S, D] tensor (D contiguous), the layout of every day05 tensor.
inline std::vector<int64_t> bhsd_dim(const AttentionShape& s) {
  return {s.b, s.h, s.s, s.d};
}
inline std::vector<int64_t> bhsd_stride(const AttentionShape& s) {
  return {int64_t(s.h) * s.s * s.d, int64_t(s.s) * s.d, s.d, 1};
}
inline std::shared_ptr<fe::graph::Tensor_attributes> bhsd_tensor(fe::graph::Graph& g,
                                                                 const AttentionShape& s,
                                                                 const char* name, int64_t uid) {
  return g.tensor(fe::graph::Tensor_attributes()
                      .set_name(name)
                      .set_uid(uid)
                      .set_dim(bhsd_dim(s))
                      .set_stride(bhsd_stride(s)));
}

// Validates the described graph g, builds its plans (heuristics mode A) and asks for its
// workspace. Each step only after the one before it succeeded; the first failure is the plan's
// error (the row's refusal), else the plan keeps g.
inline Plan finish(const AttentionShape& s, std::shared_ptr<fe::graph::Graph> g) {
  Plan p;
  p.s = s;
  const cudnnHandle_t h = gpu100::cudnn_thread_handle();
  auto ok = [&](fe::error_t st) {
    if (!st.is_good()) p.error = st.get_message();
    return st.is_good();
  };
  if (!ok(g->validate()) || !ok(g->build_operation_graph(h)) ||
      !ok(g->create_execution_plans({fe::HeurMode_t::A})) || !ok(g->check_support(h)) ||
      !ok(g->build_plans(h)) || !ok(g->get_workspace_size(p.workspace))) {
    return p;
  }
  p.graph = std::move(g);
  return p;
}

// One plan per shape, built by `build` on the first call for that shape and kept (thread-safe).
// Each row owns one cache (a static in its file), so the forward's and the backward's plans of a
// shape do not collide.
class PlanCache {
 public:
  explicit PlanCache(std::function<Plan(const AttentionShape&)> build) : build_(std::move(build)) {}
  const Plan& get(const AttentionShape& s) {
    std::lock_guard<std::mutex> lock(m_);
    for (const auto& p : plans_) {
      if (same(p->s, s)) return *p;
    }
    plans_.push_back(std::make_unique<Plan>(build_(s)));
    return *plans_.back();
  }

 private:
  static bool same(const AttentionShape& a, const AttentionShape& b) {
    return a.b == b.b && a.h == b.h && a.s == b.s && a.d == b.d && a.causal == b.causal;
  }
  std::function<Plan(const AttentionShape&)> build_;
  std::mutex m_;
  std::vector<std::unique_ptr<Plan>> plans_;
};

}  // namespace day05::cudnn_sdpa_graph
