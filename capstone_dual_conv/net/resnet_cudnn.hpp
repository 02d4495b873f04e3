#pragma once
// ResNet-18 and MC-ResNet18 through the libraries: what a user of cuDNN and cuBLAS (or of
// PyTorch, which calls them) gets. Every convolution is one cuDNN call with its BN folded into the
// weights and the bias (cudnnConvolutionBiasActivationForward: bias, residual and ReLU fused); the
// pools are resnet.hpp's; the FC is cuBLAS SGEMM. The trunks run one after the other on one
// stream, and every activation lives in one arena planned by liveness (resnet_arena.hpp).
//
// Precisions (gpu100::Precision):
//   fp32  fp32 NCHW activations, cuDNN in FMA math (no TF32: PyTorch with allow_tf32 off), FC in
//         cuBLAS's default math (no TF32).
//   tf32  fp32 NCHW activations, cuDNN in tensor-op math (TF32 allowed), FC in TF32.
//   bf16  bf16 NHWC activations, fp32 accumulation, tensor-op math; the stems' 3 and 1 input
//         channels are padded to 8 (to_nhwc_bf16); the pooled features and the FC are fp32.
//
// Only resnet_cudnn.cpp includes cudnn.h: without cuDNN the class still compiles and its
// constructor throws capstone::NotAvailable ("skipped: cuDNN not found").
#include <cuda_runtime.h>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "common/precision.hpp"
#include "resnet.hpp"

namespace capstone::resnet {

class CudnnNet {
 public:
  // Checks the weights (check_net_weights), folds every BN and uploads the weights: fp32 KCRS for
  // fp32 and tf32, bf16 KRSC for bf16. Creates the object's cuDNN and cuBLAS handles.
  CudnnNet(const NetWeights& w, gpu100::Precision p);
  ~CudnnNet();
  CudnnNet(const CudnnNet&) = delete;
  CudnnNet& operator=(const CudnnNet&) = delete;

  // Plans a forward at batch n and input size h x w: each convolution's cuDNN descriptors and
  // algorithm (cudnnFind, on `stream`), the activations' offsets in one arena, and one workspace
  // for the largest need of any layer (and cuBLAS's); then allocates the arena (only when it
  // grows) and tries each layer's fused call once, keeping the unfused sequence (convolution, bias
  // and residual adds, ReLU) for the layers cuDNN refuses it. Synchronises `stream`.
  // Throws gpu100::UsageError for a non-positive size and when the arena and workspace would not
  // leave 256 MiB of device memory free (checked before cudnnFind and again after it, before any
  // allocation), and std::invalid_argument (day08::check_conv_args, check_pool_args) when a layer
  // has 2^31 elements or more. A second call at the planned shape does nothing.
  void plan(int n, int h, int w, cudaStream_t stream = nullptr);
  size_t arena_bytes() const;  // the arena's size, workspace included; 0 before plan()

  // inputs: one fp32 NCHW device pointer per trunk ([n, trunk_channels(model)[i], h, w], at the
  // planned shape); logits: fp32 [n, classes] on the device. Asynchronous on `stream`, no
  // allocation. Throws gpu100::UsageError before plan(), std::invalid_argument for a wrong
  // number of inputs or a null pointer.
  void forward(const std::vector<const float*>& inputs, float* logits,
               cudaStream_t stream = nullptr);

  // One line: the precision, the algorithms chosen (count per algorithm), how many layers run
  // fused and how many unfused, and the arena's size.
  std::string describe() const;

  int classes() const;
  gpu100::Precision precision() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace capstone::resnet
