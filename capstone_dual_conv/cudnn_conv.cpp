// The cuDNN baseline: what a user of cuDNN (or of PyTorch, which calls it) gets for each stream.
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
#endif

namespace capstone::detail {

bool ConvGeometry::operator<(const ConvGeometry& o) const {
  return std::tie(n, c, h, w, k, r, s, stride, pad) <
         std::tie(o.n, o.c, o.h, o.w, o.k, o.r, o.s, o.stride, o.pad);
}

#if GPU100_HAVE_CUDNN

namespace {

struct Plan {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr, bias = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  cudnnActivationDescriptor_t relu = nullptr, identity = nullptr;
  cudnnConvolutionFwdAlgo_t algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
  gpu100::DeviceBuffer<char> workspace;
  size_t ws_bytes = 0;

  Plan() = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan() {
    if (x) cudnnDestroyTensorDescriptor(x);
    if (y) cudnnDestroyTensorDescriptor(y);
    if (bias) cudnnDestroyTensorDescriptor(bias);
    if (w) cudnnDestroyFilterDescriptor(w);
    if (conv) cudnnDestroyConvolutionDescriptor(conv);
    if (relu) cudnnDestroyActivationDescriptor(relu);
    if (identity) cudnnDestroyActivationDescriptor(identity);
  }
};

}  // namespace

struct CudnnConv::Impl {
  cudnnHandle_t handle = nullptr;
  std::map<ConvGeometry, std::unique_ptr<Plan>> plans;

  ~Impl() {
    plans.clear();
    if (handle) cudnnDestroy(handle);
  }

  Plan& plan(const ConvGeometry& g) {
    auto it = plans.find(g);
    if (it != plans.end()) return *it->second;
    auto pl = std::make_unique<Plan>();
    const int p = (g.h + 2 * g.pad - g.r) / g.stride + 1,
              q = (g.w + 2 * g.pad - g.s) / g.stride + 1;
    CUDNN_CHECK(cudnnCreateTensorDescriptor(&pl->x));
    CUDNN_CHECK(cudnnCreateTensorDescriptor(&pl->y));
    CUDNN_CHECK(cudnnCreateTensorDescriptor(&pl->bias));
    CUDNN_CHECK(cudnnCreateFilterDescriptor(&pl->w));
    CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&pl->conv));
    CUDNN_CHECK(cudnnCreateActivationDescriptor(&pl->relu));
    CUDNN_CHECK(cudnnCreateActivationDescriptor(&pl->identity));
    CUDNN_CHECK(
        cudnnSetTensor4dDescriptor(pl->x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, g.n, g.c, g.h, g.w));
    CUDNN_CHECK(
        cudnnSetTensor4dDescriptor(pl->y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, g.n, g.k, p, q));
    CUDNN_CHECK(
        cudnnSetTensor4dDescriptor(pl->bias, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, g.k, 1, 1));
    CUDNN_CHECK(
        cudnnSetFilter4dDescriptor(pl->w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, g.k, g.c, g.r, g.s));
    CUDNN_CHECK(cudnnSetConvolution2dDescriptor(pl->conv, g.pad, g.pad, g.stride, g.stride, 1, 1,
                                                CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    // fp32 means fp32: FMA math forbids TF32 tensor-core algorithms (PyTorch with allow_tf32 off).
    CUDNN_CHECK(cudnnSetConvolutionMathType(pl->conv, CUDNN_FMA_MATH));
    CUDNN_CHECK(cudnnSetActivationDescriptor(pl->relu, CUDNN_ACTIVATION_RELU,
                                             CUDNN_NOT_PROPAGATE_NAN, 0.0));
    CUDNN_CHECK(cudnnSetActivationDescriptor(pl->identity, CUDNN_ACTIVATION_IDENTITY,
                                             CUDNN_NOT_PROPAGATE_NAN, 0.0));
    // cudnnFind runs every algorithm once on scratch buffers it allocates, and ranks them by time.
    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    int returned = 0;
    CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithm(
        handle, pl->x, pl->w, pl->conv, pl->y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &returned, perf));
    bool found = false;
    for (int i = 0; i < returned && !found; ++i) {
      if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].mathType != CUDNN_TENSOR_OP_MATH) {
        pl->algo = perf[i].algo;
        found = true;
      }
    }
    if (!found) throw NotAvailable("cuDNN found no fp32 algorithm for this convolution");
    // One workspace for the found algorithm and for IMPLICIT_PRECOMP_GEMM (the only algorithm
    // cudnnConvolutionBiasActivationForward accepts with the identity activation).
    size_t ws1 = 0, ws2 = 0;
    CUDNN_CHECK(cudnnGetConvolutionForwardWorkspaceSize(handle, pl->x, pl->w, pl->conv, pl->y,
                                                        pl->algo, &ws1));
    CUDNN_CHECK(cudnnGetConvolutionForwardWorkspaceSize(
        handle, pl->x, pl->w, pl->conv, pl->y, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM,
        &ws2));
    pl->ws_bytes = std::max(ws1, ws2);
    pl->workspace = gpu100::DeviceBuffer<char>(std::max<size_t>(pl->ws_bytes, 1));
    Plan& ref = *pl;
    plans.emplace(g, std::move(pl));
    return ref;
  }
};

CudnnConv::CudnnConv() : impl_(std::make_unique<Impl>()) {
  CUDNN_CHECK(cudnnCreate(&impl_->handle));
}
CudnnConv::~CudnnConv() = default;

void CudnnConv::conv(const ConvGeometry& g, const float* x, const float* w, float* y,
                     cudaStream_t stream) {
  CUDNN_CHECK(cudnnSetStream(impl_->handle, stream));
  Plan& pl = impl_->plan(g);
  const float one = 1.f, zero = 0.f;
  CUDNN_CHECK(cudnnConvolutionForward(impl_->handle, &one, pl.x, x, pl.w, w, pl.conv, pl.algo,
                                      pl.workspace.data(), pl.ws_bytes, &zero, pl.y, y));
}

void CudnnConv::conv_bias_act(const ConvGeometry& g, const float* x, const float* w,
                              const float* bias, int act, float* y, cudaStream_t stream) {
  CUDNN_CHECK(cudnnSetStream(impl_->handle, stream));
  Plan& pl = impl_->plan(g);
  const float one = 1.f, zero = 0.f;
  const bool relu = act == 1;
  const cudnnConvolutionFwdAlgo_t algo =
      relu ? pl.algo : CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM;
  // z = y with alpha2 = 0: z is not read.
  CUDNN_CHECK(cudnnConvolutionBiasActivationForward(
      impl_->handle, &one, pl.x, x, pl.w, w, pl.conv, algo, pl.workspace.data(), pl.ws_bytes, &zero,
      pl.y, y, pl.bias, bias, relu ? pl.relu : pl.identity, pl.y, y));
}

#else  // no cuDNN: every call site sees NotAvailable

struct CudnnConv::Impl {};
CudnnConv::CudnnConv() {
  throw NotAvailable("skipped: cuDNN not found");
}
CudnnConv::~CudnnConv() = default;
void CudnnConv::conv(const ConvGeometry&, const float*, const float*, float*, cudaStream_t) {
  throw NotAvailable("skipped: cuDNN not found");
}
void CudnnConv::conv_bias_act(const ConvGeometry&, const float*, const float*, const float*, int,
                              float*, cudaStream_t) {
  throw NotAvailable("skipped: cuDNN not found");
}

#endif

}  // namespace capstone::detail
