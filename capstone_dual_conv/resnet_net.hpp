#pragma once
// MC-ResNet18 on the GPU, the first path: fp32 NCHW, the two trunks one after the other. Each
// convolution runs through day08::conv2d_forward("best_fp32") with its BN folded into the weights
// and the bias; the residual add and the ReLU are one elementwise pass; the pools are resnet.hpp's;
// the FC is two day04::gemm calls (one per trunk's 512 features) onto the bias.
#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "common/device_buffer.hpp"
#include "resnet.hpp"

namespace capstone::resnet {

class McResNet18 {
 public:
  // Folds the BN of every convolution and uploads the weights.
  explicit McResNet18(const McWeights& weights);

  // Plans the activation buffers for a batch: four buffers of the largest activation and the two
  // feature vectors. forward() plans on its first call at a shape; call this
  // first to keep every allocation out of a timed forward. Throws std::invalid_argument for an
  // empty batch and when the buffers would not fit in the free device memory.
  void plan(int n, int h, int w);
  size_t arena_bytes() const;

  // rgb [n, 3, h, w] and depth [n, 1, h, w] fp32 on the device -> logits [n, classes].
  void forward(const float* rgb, const float* depth, int n, int h, int w, float* logits,
               cudaStream_t stream = nullptr);
  int classes() const { return classes_; }

 private:
  struct Layer {
    ConvSpec spec;
    gpu100::DeviceBuffer<float> w, b;
  };
  struct DeviceTrunk {
    Trunk t;
    Layer stem;
    std::vector<Layer> conv1, conv2, shortcut;
  };
  DeviceTrunk upload(const Trunk& t, const TrunkWeights& wts);
  // One trunk: x -> features [n, 512].
  void trunk_forward(const DeviceTrunk& dt, const float* x, int n, int h, int w, float* features,
                     cudaStream_t stream);

  DeviceTrunk rgb_, depth_;
  int classes_;
  gpu100::DeviceBuffer<float> fc_rgb_t_, fc_depth_t_, fc_b_;  // [512, classes] each, [classes]
  int plan_n_ = 0, plan_h_ = 0, plan_w_ = 0;
  gpu100::DeviceBuffer<float> act_[4], feat_[2];
};

}  // namespace capstone::resnet
