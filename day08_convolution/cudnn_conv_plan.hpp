#pragma once
// day08::CudnnConvPlan: one cuDNN forward convolution (NCHW fp32 input, KCRS fp32 filters, NKPQ
// fp32 output; or, for CudnnPick::kBf16Nhwc and kTf32Nhwc, the same tensors in NHWC, bf16 or fp32)
// planned once: its
// descriptors, the fastest of the algorithms cudnnFindConvolutionForwardAlgorithm returns (each
// re-timed with the project's timer), and the workspace that algorithm needs. day08's cudnn_fp32 /
// cudnn_tf32 / cudnn_bf16_nhwc rows (cudnn_baselines.cpp) and the capstone's cuDNN rows both build
// on it, so the set-up is written once. The caller owns the cuDNN handle and the workspace buffer
// (day08 keeps one handle per thread, the capstone one per stream), and adds whatever else it
// launches (cudnnAddTensor for a bias, cudnnConvolutionBiasActivationForward) through the
// descriptor accessors.
//
// Only for targets built with cuDNN (GPU100_HAVE_CUDNN, set by linking gpu100::cudnn, which
// day08::conv does publicly when cuDNN is found): include it under #if GPU100_HAVE_CUDNN.
#if !GPU100_HAVE_CUDNN
#error "cudnn_conv_plan.hpp needs cuDNN: include it only under #if GPU100_HAVE_CUDNN"
#endif

#include <cuda_runtime.h>
#include <cudnn.h>

#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

#include "conv.hpp"

namespace day08 {

// Which of cudnnFind's results are candidates (each is then re-timed, the fastest kept).
enum class CudnnPick {
  // day08 cudnn_fp32. Descriptor in CUDNN_FMA_MATH (no tensor cores); the FMA-math results, or
  // if there are none the default-math ones; the launch uses the chosen result's math.
  kFp32Fma,
  // day08 cudnn_tf32. Descriptor in CUDNN_TENSOR_OP_MATH (cuDNN may use TF32 for fp32 data);
  // results of any math; the launch uses the chosen result's math.
  kTf32,
  // The capstone (fp32 as PyTorch with allow_tf32 off). Descriptor in CUDNN_FMA_MATH; the results
  // whose math is not CUDNN_TENSOR_OP_MATH; the descriptor stays in FMA math.
  kFp32NotTensorOp,
  // day08 cudnn_bf16_nhwc. x, w and y in bf16 NHWC (x [n][h][w][c], w [k][r][s][c], y
  // [n][p][q][k]; the bias descriptor stays fp32 NCHW), fp32 compute (cuDNN's
  // PSEUDO_BFLOAT16_CONFIG, its only bf16 one), descriptor in CUDNN_TENSOR_OP_MATH; results of
  // any math, launched with the chosen result's math. The three picks above are fp32 NCHW.
  kBf16Nhwc,
  // The capstone's TF32 layer figure: kTf32 on fp32 NHWC tensors (x, w and y in kBf16Nhwc's
  // layouts), as PyTorch runs channels_last fp32. On NCHW data cuDNN's Hopper TF32 kernels are
  // wrapped in two layout conversions, which made kTf32 half as fast at the network's first stage.
  kTf32Nhwc,
};

// Thrown when cudnnFind returns no algorithm that the pick accepts (what(): "cuDNN: no forward
// algorithm for <shape>").
class CudnnNoAlgorithm : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class CudnnConvPlan {
 public:
  // Builds the descriptors for `s` (x [n,c,h,w], w [k,c,r,s], y [n,k,p,q], bias [1,k,1,1], the
  // convolution with s's padding, stride and dilation), checks that cuDNN's output shape is
  // s.p() x s.q(), runs cudnnFindConvolutionForwardAlgorithm on `stream` (it times every
  // algorithm once, on scratch buffers it allocates), then re-times the pick's candidates on
  // scratch operands of its own with gpu100::GpuTimer and keeps the fastest (slow: call it
  // outside timed loops). Throws gpu100::CudnnError on a failed cuDNN call and CudnnNoAlgorithm
  // as above.
  CudnnConvPlan(cudnnHandle_t handle, const ConvShape& s, CudnnPick pick, cudaStream_t stream);
  ~CudnnConvPlan() = default;
  CudnnConvPlan(const CudnnConvPlan&) = delete;
  CudnnConvPlan& operator=(const CudnnConvPlan&) = delete;

  // y = conv(x, w) with the chosen algorithm (cudnnConvolutionForward, alpha 1, beta 0), on
  // `stream` (set on the handle first). workspace: at least found_workspace_bytes() bytes. The
  // pointers are fp32 (bf16 for kBf16Nhwc), in the layouts above.
  void forward(cudnnHandle_t handle, const void* x, const void* w, void* y, void* workspace,
               size_t workspace_bytes, cudaStream_t stream) const;

  cudnnConvolutionFwdAlgo_t algo() const { return algo_; }
  // The workspace cudnnFind reported for the chosen algorithm.
  size_t found_workspace_bytes() const { return found_workspace_bytes_; }
  // cudnnGetConvolutionForwardWorkspaceSize for any algorithm on these descriptors (the capstone
  // sizes one workspace for its own choice and for the fused path's IMPLICIT_PRECOMP_GEMM).
  size_t workspace_bytes(cudnnHandle_t handle, cudnnConvolutionFwdAlgo_t algo) const;
  // "IMPLICIT_PRECOMP_GEMM (FMA math, workspace 0.0 MB; the fastest of 6 re-timed, 0.1234 ms;
  // cudnnFind's first: WINOGRAD_NONFUSED)": what the binaries print.
  const std::string& choice() const { return choice_; }

  cudnnTensorDescriptor_t x_desc() const { return d_.x; }
  cudnnFilterDescriptor_t w_desc() const { return d_.w; }
  cudnnTensorDescriptor_t y_desc() const { return d_.y; }
  cudnnTensorDescriptor_t bias_desc() const { return d_.bias; }
  cudnnConvolutionDescriptor_t conv_desc() const { return d_.conv; }

 private:
  // The descriptors in their own RAII member, so a constructor that throws half-way still
  // destroys the ones it created.
  struct Descriptors {
    cudnnTensorDescriptor_t x = nullptr, y = nullptr, bias = nullptr;
    cudnnFilterDescriptor_t w = nullptr;
    cudnnConvolutionDescriptor_t conv = nullptr;
    Descriptors() = default;
    Descriptors(const Descriptors&) = delete;
    Descriptors& operator=(const Descriptors&) = delete;
    ~Descriptors();
  };
  struct Retimed {
    int index;  // into cudnnFind's results
    double ms;  // its median time (0 when it was the only candidate)
  };
  Retimed retime(cudnnHandle_t handle, const ConvShape& s, CudnnPick pick,
                 const cudnnConvolutionFwdAlgoPerf_t* perf, const std::vector<int>& candidates,
                 cudaStream_t stream);
  Descriptors d_;
  cudnnConvolutionFwdAlgo_t algo_{};
  size_t found_workspace_bytes_ = 0;
  std::string choice_;
};

}  // namespace day08
