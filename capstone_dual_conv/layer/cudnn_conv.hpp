#pragma once
// The cuDNN baseline behind a small interface, so that only cudnn_conv.cpp includes cudnn.h and
// the whole capstone builds without cuDNN (the constructor then throws NotAvailable). The
// descriptors and cudnnFind are day08's (day08::CudnnConvPlan, day08_convolution/
// cudnn_conv_plan.hpp); this class adds the handle, the plans per shape, the workspace and the
// fused bias + activation call.
#include <cuda_runtime.h>

#include <memory>

#include "conv.hpp"  // day08::ConvShape

namespace capstone::detail {

// One cuDNN handle and, per shape, the descriptors, the algorithm chosen by
// cudnnFindConvolutionForwardAlgorithm (fp32 FMA math: no TF32) and one workspace, allocated at
// the first call for that shape and reused by every later call.
class CudnnConv {
 public:
  CudnnConv();  // throws NotAvailable without cuDNN
  ~CudnnConv();
  CudnnConv(const CudnnConv&) = delete;
  CudnnConv& operator=(const CudnnConv&) = delete;

  // y = conv(x, w)  (cudnnConvolutionForward)
  void conv(const day08::ConvShape& s, const float* x, const float* w, float* y,
            cudaStream_t stream);
  // y = act(conv(x, w) + bias)  (cudnnConvolutionBiasActivationForward); act: 0 identity, 1 ReLU.
  void conv_bias_act(const day08::ConvShape& s, const float* x, const float* w, const float* bias,
                     int act, float* y, cudaStream_t stream);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace capstone::detail
