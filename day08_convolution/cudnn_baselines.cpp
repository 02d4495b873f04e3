// day08 cuDNN baselines: the library a user would call instead, in the same run.
// The first call for a (shape, math) pair builds the descriptors, asks
// cudnnFindConvolutionForwardAlgorithm to time every forward algorithm, keeps the fastest one
// that obeys the math mode, and allocates its workspace; later calls only launch (so the timed
// loop allocates nothing). Without cuDNN the launchers throw and the binary skips their rows.
#include <stdexcept>
#include <string>

#include "conv_day.hpp"

#if GPU100_HAVE_CUDNN
#include <fmt/format.h>

#include <map>
#include <memory>
#include <mutex>

#include "common/cudnn_check.hpp"
#include "common/device_buffer.hpp"
#endif

namespace day08 {

#if GPU100_HAVE_CUDNN

namespace {

const char* algo_name(cudnnConvolutionFwdAlgo_t a) {
  switch (a) {
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM:
      return "IMPLICIT_GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM:
      return "IMPLICIT_PRECOMP_GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_GEMM:
      return "GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_DIRECT:
      return "DIRECT";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT:
      return "FFT";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING:
      return "FFT_TILING";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD:
      return "WINOGRAD";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED:
      return "WINOGRAD_NONFUSED";
    default:
      return "unknown";
  }
}

cudnnHandle_t handle() {
  thread_local struct Owner {
    cudnnHandle_t h = nullptr;
    ~Owner() {
      if (h != nullptr) cudnnDestroy(h);
    }
  } owner;
  if (owner.h == nullptr) CUDNN_CHECK(cudnnCreate(&owner.h));
  return owner.h;
}

struct Plan {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr, bias = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  cudnnConvolutionFwdAlgo_t algo{};
  gpu100::DeviceBuffer<char> workspace;
  std::string choice;
  ~Plan() {
    if (x != nullptr) cudnnDestroyTensorDescriptor(x);
    if (y != nullptr) cudnnDestroyTensorDescriptor(y);
    if (bias != nullptr) cudnnDestroyTensorDescriptor(bias);
    if (w != nullptr) cudnnDestroyFilterDescriptor(w);
    if (conv != nullptr) cudnnDestroyConvolutionDescriptor(conv);
  }
};

std::string key_of(const ConvShape& s, bool tf32) {
  return fmt::format("{} {} {} {} {} {} {} {} {} {} {}", s.n, s.c, s.h, s.w, s.k, s.r, s.s,
                     s.stride, s.pad, s.dilation, tf32 ? "tf32" : "fp32");
}

std::mutex& plans_mutex() {
  static std::mutex m;
  return m;
}
std::map<std::string, std::unique_ptr<Plan>>& plans() {
  static std::map<std::string, std::unique_ptr<Plan>> p;
  return p;
}

Plan& plan_for(const ConvShape& s, bool tf32, cudaStream_t stream) {
  std::lock_guard<std::mutex> lock(plans_mutex());
  auto& slot = plans()[key_of(s, tf32)];
  if (slot) return *slot;
  auto p = std::make_unique<Plan>();
  const int P = s.p(), Q = s.q();
  CUDNN_CHECK(cudnnCreateTensorDescriptor(&p->x));
  CUDNN_CHECK(cudnnCreateTensorDescriptor(&p->y));
  CUDNN_CHECK(cudnnCreateTensorDescriptor(&p->bias));
  CUDNN_CHECK(cudnnCreateFilterDescriptor(&p->w));
  CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&p->conv));
  CUDNN_CHECK(
      cudnnSetTensor4dDescriptor(p->x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, s.n, s.c, s.h, s.w));
  CUDNN_CHECK(
      cudnnSetTensor4dDescriptor(p->y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, s.n, s.k, P, Q));
  CUDNN_CHECK(
      cudnnSetTensor4dDescriptor(p->bias, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, s.k, 1, 1));
  CUDNN_CHECK(
      cudnnSetFilter4dDescriptor(p->w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, s.k, s.c, s.r, s.s));
  CUDNN_CHECK(cudnnSetConvolution2dDescriptor(p->conv, s.pad, s.pad, s.stride, s.stride, s.dilation,
                                              s.dilation, CUDNN_CROSS_CORRELATION,
                                              CUDNN_DATA_FLOAT));
  const cudnnMathType_t math = tf32 ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH;
  CUDNN_CHECK(cudnnSetConvolutionMathType(p->conv, math));
  int n_out = 0, dims[4];
  CUDNN_CHECK(cudnnGetConvolutionNdForwardOutputDim(p->conv, p->x, p->w, 4, dims));
  if (dims[0] != s.n || dims[1] != s.k || dims[2] != P || dims[3] != Q) {
    throw std::runtime_error("cuDNN: output shape differs from day08's");
  }
  cudnnHandle_t h = handle();
  CUDNN_CHECK(cudnnSetStream(h, stream));
  cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
  CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithm(h, p->x, p->w, p->conv, p->y,
                                                   CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &n_out, perf));
  // The results are sorted by time, fastest first. The fp32 row takes the fastest FMA-math one
  // (no tensor cores); only if there is none, the fastest default-math one (its note says so).
  int best = -1;
  for (int pass = 0; pass < 2 && best < 0; ++pass) {
    for (int i = 0; i < n_out && best < 0; ++i) {
      if (perf[i].status != CUDNN_STATUS_SUCCESS) continue;
      if (!tf32 && perf[i].mathType != (pass == 0 ? CUDNN_FMA_MATH : CUDNN_DEFAULT_MATH)) continue;
      best = i;
    }
  }
  if (best < 0) throw std::runtime_error("cuDNN: no forward algorithm for " + to_string(s));
  p->algo = perf[best].algo;
  CUDNN_CHECK(cudnnSetConvolutionMathType(p->conv, perf[best].mathType));
  p->workspace = gpu100::DeviceBuffer<char>(perf[best].memory);
  p->choice = fmt::format("{} ({}, workspace {:.1f} MB)", algo_name(p->algo),
                          perf[best].mathType == CUDNN_TENSOR_OP_MATH ? "tensor-op math"
                          : perf[best].mathType == CUDNN_FMA_MATH     ? "FMA math"
                                                                      : "default math",
                          perf[best].memory / 1e6);
  slot = std::move(p);
  return *slot;
}

void run(const ConvShape& s, bool tf32, const float* x, const float* w, const float* bias, float* y,
         cudaStream_t stream) {
  check_conv_args(s);
  Plan& p = plan_for(s, tf32, stream);
  cudnnHandle_t h = handle();
  CUDNN_CHECK(cudnnSetStream(h, stream));
  const float one = 1.f, zero = 0.f;
  CUDNN_CHECK(cudnnConvolutionForward(h, &one, p.x, x, p.w, w, p.conv, p.algo, p.workspace.data(),
                                      p.workspace.bytes(), &zero, p.y, y));
  if (bias != nullptr) CUDNN_CHECK(cudnnAddTensor(h, &one, p.bias, bias, &one, p.y, y));
}

}  // namespace

bool have_cudnn() {
  return true;
}
void conv2d_cudnn_fp32(const ConvShape& s, const float* x, const float* w, const float* bias,
                       float* y, cudaStream_t stream) {
  run(s, false, x, w, bias, y, stream);
}
void conv2d_cudnn_tf32(const ConvShape& s, const float* x, const float* w, const float* bias,
                       float* y, cudaStream_t stream) {
  run(s, true, x, w, bias, y, stream);
}
std::string cudnn_choice(const ConvShape& s, bool tf32) {
  std::lock_guard<std::mutex> lock(plans_mutex());
  auto it = plans().find(key_of(s, tf32));
  return it == plans().end() || !it->second ? std::string() : it->second->choice;
}

#else  // no cuDNN: the rows say so

bool have_cudnn() {
  return false;
}
void conv2d_cudnn_fp32(const ConvShape&, const float*, const float*, const float*, float*,
                       cudaStream_t) {
  throw std::runtime_error("skipped: cuDNN not found");
}
void conv2d_cudnn_tf32(const ConvShape&, const float*, const float*, const float*, float*,
                       cudaStream_t) {
  throw std::runtime_error("skipped: cuDNN not found");
}
std::string cudnn_choice(const ConvShape&, bool) {
  return "";
}

#endif

}  // namespace day08
