#pragma once
// The cuDNN baseline behind a small interface, so that only cudnn_conv.cpp includes cudnn.h and
// the whole capstone builds without cuDNN (the constructor then throws NotAvailable).
#include <cuda_runtime.h>

#include <memory>

namespace capstone::detail {

struct ConvGeometry {
  int n, c, h, w, k, r, s, stride, pad;
  bool operator<(const ConvGeometry& o) const;
};

// One cuDNN handle and, per geometry, the descriptors, the algorithm chosen by
// cudnnFindConvolutionForwardAlgorithm (fp32 FMA math: no TF32) and one workspace, allocated at
// the first call for that geometry and reused by every later call.
class CudnnConv {
 public:
  CudnnConv();  // throws NotAvailable without cuDNN
  ~CudnnConv();
  CudnnConv(const CudnnConv&) = delete;
  CudnnConv& operator=(const CudnnConv&) = delete;

  // y = conv(x, w)  (cudnnConvolutionForward)
  void conv(const ConvGeometry& g, const float* x, const float* w, float* y, cudaStream_t stream);
  // y = act(conv(x, w) + bias)  (cudnnConvolutionBiasActivationForward); act: 0 identity, 1 ReLU.
  void conv_bias_act(const ConvGeometry& g, const float* x, const float* w, const float* bias,
                     int act, float* y, cudaStream_t stream);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace capstone::detail
