// day08 cuDNN baselines: the library a user would call instead, in the same run (fp32, TF32, and
// bf16 NHWC for v6).
// The first call for a (shape, math) pair builds the descriptors, asks
// cudnnFindConvolutionForwardAlgorithm for every forward algorithm, re-times each one that obeys
// the math mode with the project's timer, keeps the fastest, and allocates its workspace; later
// calls only launch (so the timed loop allocates nothing). Without cuDNN the launchers throw and
// the binary skips their rows. That set-up (descriptors, cudnnFind, the choice) is
// day08::CudnnConvPlan, defined here and declared in cudnn_conv_plan.hpp so that the capstone's
// cuDNN rows use the same code.
#include <stdexcept>
#include <string>

#include "conv_day.hpp"

#if GPU100_HAVE_CUDNN
#include <fmt/format.h>

#include <map>
#include <memory>
#include <mutex>

#include <algorithm>
#include <vector>

#include "common/cudnn_check.hpp"
#include "common/device_buffer.hpp"
#include "common/timer.hpp"
#include "conv_layer.hpp"
#include "cudnn_conv_plan.hpp"
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

const char* math_name(cudnnMathType_t m) {
  return m == CUDNN_TENSOR_OP_MATH ? "tensor-op math"
         : m == CUDNN_FMA_MATH     ? "FMA math"
                                   : "default math";
}

}  // namespace

// ---- CudnnConvPlan (cudnn_conv_plan.hpp): the set-up shared with the capstone -------------------

CudnnConvPlan::Descriptors::~Descriptors() {
  if (x != nullptr) cudnnDestroyTensorDescriptor(x);
  if (y != nullptr) cudnnDestroyTensorDescriptor(y);
  if (bias != nullptr) cudnnDestroyTensorDescriptor(bias);
  if (w != nullptr) cudnnDestroyFilterDescriptor(w);
  if (conv != nullptr) cudnnDestroyConvolutionDescriptor(conv);
}

CudnnConvPlan::CudnnConvPlan(cudnnHandle_t handle, const ConvShape& s, CudnnPick pick,
                             cudaStream_t stream) {
  const int P = s.p(), Q = s.q();
  CUDNN_CHECK(cudnnCreateTensorDescriptor(&d_.x));
  CUDNN_CHECK(cudnnCreateTensorDescriptor(&d_.y));
  CUDNN_CHECK(cudnnCreateTensorDescriptor(&d_.bias));
  CUDNN_CHECK(cudnnCreateFilterDescriptor(&d_.w));
  CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&d_.conv));
  // fp32 NCHW / KCRS, or for kBf16Nhwc and kTf32Nhwc NHWC / KRSC in bf16 or fp32 (the dimensions
  // are given in the same n, c, h, w order for both formats). The compute type is fp32 either way.
  const bool bf16 = pick == CudnnPick::kBf16Nhwc;
  const bool nhwc = bf16 || pick == CudnnPick::kTf32Nhwc;
  const cudnnDataType_t data = bf16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT;
  const cudnnTensorFormat_t format = nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
  CUDNN_CHECK(cudnnSetTensor4dDescriptor(d_.x, format, data, s.n, s.c, s.h, s.w));
  CUDNN_CHECK(cudnnSetTensor4dDescriptor(d_.y, format, data, s.n, s.k, P, Q));
  CUDNN_CHECK(
      cudnnSetTensor4dDescriptor(d_.bias, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, s.k, 1, 1));
  CUDNN_CHECK(cudnnSetFilter4dDescriptor(d_.w, data, format, s.k, s.c, s.r, s.s));
  CUDNN_CHECK(cudnnSetConvolution2dDescriptor(d_.conv, s.pad, s.pad, s.stride, s.stride, s.dilation,
                                              s.dilation, CUDNN_CROSS_CORRELATION,
                                              CUDNN_DATA_FLOAT));
  // fp32 means fp32: FMA math forbids TF32 tensor-core algorithms; tensor-op math allows them
  // (and is what bf16 tensor cores need).
  const bool any_math = pick == CudnnPick::kTf32 || pick == CudnnPick::kTf32Nhwc || bf16;
  const cudnnMathType_t math = any_math ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH;
  CUDNN_CHECK(cudnnSetConvolutionMathType(d_.conv, math));
  int dims[4];
  CUDNN_CHECK(cudnnGetConvolutionNdForwardOutputDim(d_.conv, d_.x, d_.w, 4, dims));
  if (dims[0] != s.n || dims[1] != s.k || dims[2] != P || dims[3] != Q) {
    throw std::runtime_error("cuDNN: output shape differs from day08's");
  }
  // cudnnFind runs every algorithm once on scratch buffers it allocates, on the handle's stream,
  // and returns them sorted by that one run's time, fastest first.
  CUDNN_CHECK(cudnnSetStream(handle, stream));
  cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
  int n_out = 0;
  CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithm(handle, d_.x, d_.w, d_.conv, d_.y,
                                                   CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &n_out, perf));
  // The candidates the pick accepts, in cudnnFind's order.
  std::vector<int> candidates;
  if (pick == CudnnPick::kFp32NotTensorOp) {
    // The capstone's rule: any result that is not tensor-op math.
    for (int i = 0; i < n_out; ++i) {
      if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].mathType != CUDNN_TENSOR_OP_MATH) {
        candidates.push_back(i);
      }
    }
  } else {
    // day08's rule: the fp32 row takes the FMA-math results (no tensor cores); only if there is
    // none, the default-math ones (its note says so). The tf32 and bf16 rows take any.
    for (int pass = 0; pass < 2 && candidates.empty(); ++pass) {
      for (int i = 0; i < n_out; ++i) {
        if (perf[i].status != CUDNN_STATUS_SUCCESS) continue;
        if (!any_math && perf[i].mathType != (pass == 0 ? CUDNN_FMA_MATH : CUDNN_DEFAULT_MATH)) {
          continue;
        }
        candidates.push_back(i);
      }
    }
  }
  if (candidates.empty()) throw CudnnNoAlgorithm("cuDNN: no forward algorithm for " + to_string(s));
  // cudnnFind ranks from a single run each, and its order moves from one run to the next when two
  // algorithms are close: every candidate is re-timed here with the project's timer (the median
  // of repeats after a warm-up, the L2 flushed between them, as every row is timed) on random
  // operands, and the fastest kept.
  const Retimed best = retime(handle, s, pick, perf, candidates, stream);
  algo_ = perf[best.index].algo;
  // day08 launches with the math type the algorithm was timed with; the capstone keeps the
  // descriptor in FMA math (as it was measured).
  if (pick != CudnnPick::kFp32NotTensorOp) {
    CUDNN_CHECK(cudnnSetConvolutionMathType(d_.conv, perf[best.index].mathType));
  }
  found_workspace_bytes_ = perf[best.index].memory;
  std::string how = "its only candidate";
  if (candidates.size() > 1) {
    how = fmt::format(
        "the fastest of {} re-timed, {:.4f} ms; {}", candidates.size(), best.ms,
        best.index == candidates.front()
            ? std::string("cudnnFind's first too")
            : fmt::format("cudnnFind's first: {}", algo_name(perf[candidates.front()].algo)));
  }
  choice_ = fmt::format("{} ({}, workspace {:.1f} MB; {})", algo_name(algo_),
                        math_name(perf[best.index].mathType), perf[best.index].memory / 1e6, how);
}

// Times each candidate on scratch operands filled with random values (RandomConvOperands), with
// the math type cudnnFind ran it with (FMA math kept for the capstone's fp32 pick), and returns
// the fastest. One candidate needs no timing.
CudnnConvPlan::Retimed CudnnConvPlan::retime(cudnnHandle_t handle, const ConvShape& s,
                                             CudnnPick pick,
                                             const cudnnConvolutionFwdAlgoPerf_t* perf,
                                             const std::vector<int>& candidates,
                                             cudaStream_t stream) {
  if (candidates.size() == 1) return {candidates.front(), 0.0};
  size_t ws = 0;
  for (int i : candidates) ws = std::max(ws, perf[i].memory);
  RandomConvOperands ops(s, pick == CudnnPick::kBf16Nhwc, 11, stream);
  gpu100::DeviceBuffer<char> workspace(std::max<size_t>(ws, 1));
  static gpu100::GpuTimer timer;  // one L2-flush buffer for every plan of the process
  gpu100::TimingOptions options;
  options.warmup = 2;
  options.iters = 7;
  options.stream = stream;
  Retimed best{candidates.front(), 0.0};
  bool first = true;
  const float one = 1.f, zero = 0.f;
  for (int i : candidates) {
    if (pick != CudnnPick::kFp32NotTensorOp) {
      CUDNN_CHECK(cudnnSetConvolutionMathType(d_.conv, perf[i].mathType));
    }
    const double ms =
        timer
            .time(
                [&] {
                  CUDNN_CHECK(cudnnConvolutionForward(
                      handle, &one, d_.x, ops.x.data(), d_.w, ops.w.data(), d_.conv, perf[i].algo,
                      workspace.data(), workspace.bytes(), &zero, d_.y, ops.y.data()));
                },
                options)
            .median_ms;
    if (first || ms < best.ms) best = {i, ms};
    first = false;
  }
  return best;
}

void CudnnConvPlan::forward(cudnnHandle_t handle, const void* x, const void* w, void* y,
                            void* workspace, size_t workspace_bytes, cudaStream_t stream) const {
  CUDNN_CHECK(cudnnSetStream(handle, stream));
  const float one = 1.f, zero = 0.f;
  CUDNN_CHECK(cudnnConvolutionForward(handle, &one, d_.x, x, d_.w, w, d_.conv, algo_, workspace,
                                      workspace_bytes, &zero, d_.y, y));
}

size_t CudnnConvPlan::workspace_bytes(cudnnHandle_t handle, cudnnConvolutionFwdAlgo_t algo) const {
  size_t bytes = 0;
  CUDNN_CHECK(
      cudnnGetConvolutionForwardWorkspaceSize(handle, d_.x, d_.w, d_.conv, d_.y, algo, &bytes));
  return bytes;
}

// ---- day08's cudnn_fp32 / cudnn_tf32 / cudnn_bf16_nhwc rows ----------------------------------

namespace {

cudnnHandle_t handle() {
  return gpu100::cudnn_thread_handle();
}

CudnnPick pick_of(ConvPrecision p, bool nhwc) {
  return p == ConvPrecision::kTf32   ? (nhwc ? CudnnPick::kTf32Nhwc : CudnnPick::kTf32)
         : p == ConvPrecision::kBf16 ? CudnnPick::kBf16Nhwc
                                     : CudnnPick::kFp32Fma;
}

// A day08 row's plan: the shared cuDNN set-up (cudnn_conv_plan.hpp) and the workspace its
// algorithm needs, allocated once with the plan.
struct Plan {
  CudnnConvPlan conv;
  gpu100::DeviceBuffer<char> workspace;
  Plan(const ConvShape& s, ConvPrecision p, bool nhwc, cudaStream_t stream)
      : conv(handle(), s, pick_of(p, nhwc), stream), workspace(conv.found_workspace_bytes()) {}
};

std::string key_of(const ConvShape& s, ConvPrecision p, bool nhwc) {
  return fmt::format("{} {} {} {} {} {} {} {} {} {} {}{}", s.n, s.c, s.h, s.w, s.k, s.r, s.s,
                     s.stride, s.pad, s.dilation, to_string(p), nhwc ? " nhwc" : "");
}

std::mutex& plans_mutex() {
  static std::mutex m;
  return m;
}
std::map<std::string, std::unique_ptr<Plan>>& plans() {
  static std::map<std::string, std::unique_ptr<Plan>> p;
  return p;
}

Plan& plan_for(const ConvShape& s, ConvPrecision p, bool nhwc, cudaStream_t stream) {
  std::lock_guard<std::mutex> lock(plans_mutex());
  auto& slot = plans()[key_of(s, p, nhwc)];
  if (!slot) slot = std::make_unique<Plan>(s, p, nhwc, stream);
  return *slot;
}

// nhwc: the bf16 row's and cudnn_tf32_nhwc's layouts (x NHWC, w KRSC, y NPQK); the bias add reads
// the [1, K, 1, 1] bias through each output's strides, whatever their layout.
void run(const ConvShape& s, ConvPrecision p, const void* x, const void* w, const float* bias,
         void* y, cudaStream_t stream, bool nhwc = false) {
  check_conv_args(s);
  Plan& plan = plan_for(s, p, nhwc || p == ConvPrecision::kBf16, stream);
  cudnnHandle_t h = handle();
  plan.conv.forward(h, x, w, y, plan.workspace.data(), plan.workspace.bytes(), stream);
  const float one = 1.f;
  if (bias != nullptr) {
    CUDNN_CHECK(cudnnAddTensor(h, &one, plan.conv.bias_desc(), bias, &one, plan.conv.y_desc(), y));
  }
}

}  // namespace

bool have_cudnn() {
  return true;
}
void conv2d_cudnn_fp32(const ConvShape& s, const float* x, const float* w, const float* bias,
                       float* y, cudaStream_t stream) {
  run(s, ConvPrecision::kFp32, x, w, bias, y, stream);
}
void conv2d_cudnn_tf32(const ConvShape& s, const float* x, const float* w, const float* bias,
                       float* y, cudaStream_t stream) {
  run(s, ConvPrecision::kTf32, x, w, bias, y, stream);
}
void conv2d_cudnn_tf32_nhwc(const ConvShape& s, const float* x, const float* w, const float* bias,
                            float* y, cudaStream_t stream) {
  run(s, ConvPrecision::kTf32, x, w, bias, y, stream, true);
}
void conv2d_cudnn_bf16_nhwc(const ConvShape& s, const __nv_bfloat16* x, const __nv_bfloat16* w,
                            const float* bias, __nv_bfloat16* y, cudaStream_t stream) {
  check_conv_args(s);
  if (const std::string why = cudnn_bf16_refusal(s, bias != nullptr); !why.empty()) {
    throw std::invalid_argument("cudnn_bf16_nhwc: " + why);
  }
  run(s, ConvPrecision::kBf16, x, w, nullptr, y, stream);
}
std::string cudnn_choice(const ConvShape& s, ConvPrecision p, bool nhwc) {
  std::lock_guard<std::mutex> lock(plans_mutex());
  auto it = plans().find(key_of(s, p, nhwc || p == ConvPrecision::kBf16));
  return it == plans().end() || !it->second ? std::string() : it->second->conv.choice();
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
void conv2d_cudnn_tf32_nhwc(const ConvShape& s, const float*, const float*, const float*, float*,
                            cudaStream_t) {
  check_conv_args(s);
  throw std::runtime_error("skipped: cuDNN not found");
}
void conv2d_cudnn_bf16_nhwc(const ConvShape& s, const __nv_bfloat16*, const __nv_bfloat16*,
                            const float* bias, __nv_bfloat16*, cudaStream_t) {
  check_conv_args(s);
  if (const std::string why = cudnn_bf16_refusal(s, bias != nullptr); !why.empty()) {
    throw std::invalid_argument("cudnn_bf16_nhwc: " + why);
  }
  throw std::runtime_error("skipped: cuDNN not found");
}
std::string cudnn_choice(const ConvShape&, ConvPrecision, bool) {
  return "";
}

#endif

}  // namespace day08
