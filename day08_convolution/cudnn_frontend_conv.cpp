// cudnn_frontend_conv.hpp: one convolution as a cuDNN graph (conv_fprop), every engine
// configuration the heuristics offer built and timed. Host code only; built at -O1 (its headers are
// the slowest of the project to compile, and nothing here is hot).
#include "cudnn_frontend_conv.hpp"

#if GPU100_HAVE_CUDNN_FRONTEND
#include <cudnn_frontend.h>

#include <algorithm>
#include <stdexcept>
#include <unordered_map>

#include "common/cuda_check.hpp"
#include "common/cudnn_check.hpp"
#include "common/device_buffer.hpp"
#include "common/timer.hpp"
#include "conv_layer.hpp"
#endif

namespace day08 {

#if GPU100_HAVE_CUDNN_FRONTEND

namespace fe = cudnn_frontend;

CudnnFrontendTiming cudnn_frontend_conv_best(const ConvShape& s, bool bf16) {
  check_conv_args(s);
  CudnnFrontendTiming out;
  const cudnnHandle_t handle = gpu100::cudnn_thread_handle();
  CUDNN_CHECK(cudnnSetStream(handle, nullptr));
  const int64_t n = s.n, c = s.c, h = s.h, w = s.w, k = s.k, r = s.r, sw = s.s;
  const int64_t p = s.p(), q = s.q();
  // The graph: y = conv(x, w) on channels-last tensors (the innermost stride is the channel's).
  fe::graph::Graph g;
  g.set_io_data_type(bf16 ? fe::DataType_t::BFLOAT16 : fe::DataType_t::FLOAT)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  constexpr int64_t kX = 1, kW = 2, kY = 3;  // the tensors' uids in the variant pack
  auto x = g.tensor(fe::graph::Tensor_attributes()
                        .set_name("x")
                        .set_uid(kX)
                        .set_dim({n, c, h, w})
                        .set_stride({h * w * c, 1, w * c, c}));
  auto wt = g.tensor(fe::graph::Tensor_attributes()
                         .set_name("w")
                         .set_uid(kW)
                         .set_dim({k, c, r, sw})
                         .set_stride({r * sw * c, 1, sw * c, c}));
  auto y = g.conv_fprop(x, wt,
                        fe::graph::Conv_fprop_attributes()
                            .set_padding({s.pad, s.pad})
                            .set_stride({s.stride, s.stride})
                            .set_dilation({s.dilation, s.dilation}));
  y->set_output(true).set_uid(kY).set_dim({n, k, p, q}).set_stride({p * q * k, 1, q * k, k});
  // Each step only after the one before it succeeded; the first failure is the answer's error.
  const auto ok = [&](fe::error_t e) {
    if (e.is_bad()) out.error = e.get_message();
    return e.is_good();
  };
  if (!ok(g.validate()) || !ok(g.build_operation_graph(handle)) ||
      !ok(g.create_execution_plans({fe::HeurMode_t::A, fe::HeurMode_t::FALLBACK})) ||
      !ok(g.check_support(handle)) || !ok(g.build_plans(handle, fe::BuildPlanPolicy_t::ALL))) {
    return out;
  }
  const int64_t plans = g.get_execution_plan_count();
  int64_t workspace_bytes = 0;
  for (int64_t i = 0; i < plans; ++i) {
    int64_t bytes = 0;
    if (g.get_workspace_size_plan_at_index(i, bytes).is_good()) {
      workspace_bytes = std::max(workspace_bytes, bytes);
    }
  }
  RandomConvOperands ops(s, bf16, 31);
  gpu100::DeviceBuffer<char> workspace(size_t(std::max<int64_t>(workspace_bytes, 1)));
  std::unordered_map<int64_t, void*> pack = {
      {kX, ops.x.data()}, {kW, ops.w.data()}, {kY, ops.y.data()}};
  gpu100::GpuTimer timer;
  gpu100::TimingOptions options;
  options.warmup = 2;
  options.iters = 7;
  for (int64_t i = 0; i < plans; ++i) {
    // A configuration that did not build, or does not run, is passed over.
    if (g.execute_plan_at_index(handle, pack, workspace.data(), i).is_bad()) continue;
    CUDA_CHECK(cudaDeviceSynchronize());
    const double ms = timer
                          .time(
                              [&] {
                                fe::error_t e =
                                    g.execute_plan_at_index(handle, pack, workspace.data(), i);
                                if (e.is_bad()) throw std::runtime_error(e.get_message());
                              },
                              options)
                          .median_ms;
    ++out.timed;
    if (out.timed == 1 || ms < out.ms) {
      out.ms = ms;
      out.engine.clear();
      (void)g.get_plan_name_at_index(i, out.engine);
    }
  }
  if (out.timed == 0 && out.error.empty()) {
    out.error = "none of cuDNN's " + std::to_string(plans) + " engine configurations ran";
  }
  return out;
}

#else  // the frontend's headers were not found at configure time

CudnnFrontendTiming cudnn_frontend_conv_best(const ConvShape& s, bool) {
  check_conv_args(s);
  CudnnFrontendTiming out;
  out.error =
      "the cuDNN frontend was not found when this build was configured "
      "(./scripts/setup.sh --frontend-only fetches it)";
  return out;
}

#endif

}  // namespace day08
