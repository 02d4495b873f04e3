// The cuDNN baseline: what a user of cuDNN (or of PyTorch, which calls it) gets for each stream.
// The descriptors, cudnnFind and the algorithm choice are day08's CudnnConvPlan (linked through
// day08::conv, not copied); what is the capstone's own is here: a handle per object, the plans
// per shape, one workspace that also fits the fused call, and the activation descriptors.
#include "cudnn_conv.hpp"

#include <algorithm>
#include <map>
#include <string>
#include <tuple>

#include "dual_conv.hpp"

#if GPU100_HAVE_CUDNN
#include <cudnn.h>

#include "common/cudnn_check.hpp"
#include "common/device_buffer.hpp"
#include "cudnn_conv_plan.hpp"
#endif

namespace capstone::detail {

#if GPU100_HAVE_CUDNN

namespace {

// The map key: every field of the shape (dilation is 1 here, but a key that skips a field could
// hand back the plan of another shape).
struct ShapeLess {
  bool operator()(const day08::ConvShape& a, const day08::ConvShape& b) const {
    return std::tie(a.n, a.c, a.h, a.w, a.k, a.r, a.s, a.stride, a.pad, a.dilation) <
           std::tie(b.n, b.c, b.h, b.w, b.k, b.r, b.s, b.stride, b.pad, b.dilation);
  }
};

// One shape's plan: day08's descriptors and algorithm, the workspace, and the two activation
// descriptors of the fused call.
struct Plan {
  std::unique_ptr<day08::CudnnConvPlan> conv;
  cudnnActivationDescriptor_t relu = nullptr, identity = nullptr;
  gpu100::DeviceBuffer<char> workspace;
  size_t ws_bytes = 0;

  Plan() = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan() {
    if (relu) cudnnDestroyActivationDescriptor(relu);
    if (identity) cudnnDestroyActivationDescriptor(identity);
  }
};

}  // namespace

struct CudnnConv::Impl {
  cudnnHandle_t handle = nullptr;
  std::map<day08::ConvShape, std::unique_ptr<Plan>, ShapeLess> plans;

  ~Impl() {
    plans.clear();
    if (handle) cudnnDestroy(handle);
  }

  Plan& plan(const day08::ConvShape& s, cudaStream_t stream) {
    auto it = plans.find(s);
    if (it != plans.end()) return *it->second;
    auto pl = std::make_unique<Plan>();
    CUDNN_CHECK(cudnnCreateActivationDescriptor(&pl->relu));
    CUDNN_CHECK(cudnnCreateActivationDescriptor(&pl->identity));
    CUDNN_CHECK(cudnnSetActivationDescriptor(pl->relu, CUDNN_ACTIVATION_RELU,
                                             CUDNN_NOT_PROPAGATE_NAN, 0.0));
    CUDNN_CHECK(cudnnSetActivationDescriptor(pl->identity, CUDNN_ACTIVATION_IDENTITY,
                                             CUDNN_NOT_PROPAGATE_NAN, 0.0));
    // fp32 means fp32: FMA math forbids TF32 tensor-core algorithms (PyTorch with allow_tf32 off);
    // cudnnFind then ranks every algorithm by time and the fastest non-tensor-op one is kept.
    try {
      pl->conv = std::make_unique<day08::CudnnConvPlan>(handle, s,
                                                        day08::CudnnPick::kFp32NotTensorOp, stream);
    } catch (const day08::CudnnNoAlgorithm&) {
      throw NotAvailable("cuDNN found no fp32 algorithm for this convolution");
    }
    // One workspace for the found algorithm and for IMPLICIT_PRECOMP_GEMM (the only algorithm
    // cudnnConvolutionBiasActivationForward accepts with the identity activation).
    const size_t ws1 = pl->conv->workspace_bytes(handle, pl->conv->algo());
    const size_t ws2 =
        pl->conv->workspace_bytes(handle, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM);
    pl->ws_bytes = std::max(ws1, ws2);
    pl->workspace = gpu100::DeviceBuffer<char>(std::max<size_t>(pl->ws_bytes, 1));
    Plan& ref = *pl;
    plans.emplace(s, std::move(pl));
    return ref;
  }
};

CudnnConv::CudnnConv() : impl_(std::make_unique<Impl>()) {
  CUDNN_CHECK(cudnnCreate(&impl_->handle));
}
CudnnConv::~CudnnConv() = default;

void CudnnConv::conv(const day08::ConvShape& s, const float* x, const float* w, float* y,
                     cudaStream_t stream) {
  Plan& pl = impl_->plan(s, stream);
  pl.conv->forward(impl_->handle, x, w, y, pl.workspace.data(), pl.ws_bytes, stream);
}

void CudnnConv::conv_bias_act(const day08::ConvShape& s, const float* x, const float* w,
                              const float* bias, int act, float* y, cudaStream_t stream) {
  Plan& pl = impl_->plan(s, stream);
  CUDNN_CHECK(cudnnSetStream(impl_->handle, stream));
  const day08::CudnnConvPlan& c = *pl.conv;
  const float one = 1.f, zero = 0.f;
  const bool relu = act == 1;
  const cudnnConvolutionFwdAlgo_t algo =
      relu ? c.algo() : CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM;
  // z = y with alpha2 = 0: z is not read.
  CUDNN_CHECK(cudnnConvolutionBiasActivationForward(
      impl_->handle, &one, c.x_desc(), x, c.w_desc(), w, c.conv_desc(), algo, pl.workspace.data(),
      pl.ws_bytes, &zero, c.y_desc(), y, c.bias_desc(), bias, relu ? pl.relu : pl.identity,
      c.y_desc(), y));
}

#else  // no cuDNN: every call site sees NotAvailable

struct CudnnConv::Impl {};
CudnnConv::CudnnConv() {
  throw NotAvailable("skipped: cuDNN not found");
}
CudnnConv::~CudnnConv() = default;
void CudnnConv::conv(const day08::ConvShape&, const float*, const float*, float*, cudaStream_t) {
  throw NotAvailable("skipped: cuDNN not found");
}
void CudnnConv::conv_bias_act(const day08::ConvShape&, const float*, const float*, const float*,
                              int, float*, cudaStream_t) {
  throw NotAvailable("skipped: cuDNN not found");
}

#endif

}  // namespace capstone::detail
