#pragma once
// The networks the dual-stream layer exists for: ResNet-18 (torchvision's resnet18 layout) and
// MC-ResNet18, two ResNet-18 trunks (RGB, 3 channels; depth, 1 channel) whose 512-feature outputs
// are concatenated into one Linear(1024 -> 15). This header holds the layer list, the FLOP count
// and the two pooling layers the trunk needs besides convolutions, with their CPU references.
//
// A trunk: stem conv 7x7/2 (pad 3), BN, ReLU, max-pool 3x3/2 (pad 1); four stages of two
// BasicBlocks (64, 128, 256, 512 channels; each stage after the first opens with stride 2 and a
// 1x1/2 conv + BN downsample on the shortcut); global average pool to 512 features.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/precision.hpp"

namespace capstone::resnet {

struct ConvSpec {
  int c_in = 1, c_out = 1, r = 3, stride = 1, pad = 1;
  int out(int size) const { return (size + 2 * pad - r) / stride + 1; }
};
struct BasicBlock {
  ConvSpec conv1, conv2;
  bool downsample = false;  // a 1x1 conv + BN on the shortcut (stride or channels change)
  ConvSpec shortcut;
};
struct Trunk {
  ConvSpec stem;
  int pool_k = 3, pool_stride = 2, pool_pad = 1;
  std::vector<BasicBlock> blocks;
  int features = 512;
  int pool_out(int size) const { return (size + 2 * pool_pad - pool_k) / pool_stride + 1; }
};

// ResNet-18's trunk on `in_channels` input channels.
Trunk resnet18_trunk(int in_channels);

// FLOPs counted as 2 per multiply-add of the convolutions and the FC (net_flops below) (BN is
// folded into the convs; pools, bias and residual adds are not counted): 3.63 GFLOP for ResNet-18
// at 224 x 224 and 32.0 GFLOP for MC-ResNet18 at 416 x 544, per image.
double trunk_flops(const Trunk& t, int h, int w);

// ---- weights ----
// One convolution with its inference BatchNorm (running statistics), as torchvision stores them,
// and the same layer with the BN folded in: w' = w * gamma / sqrt(var + eps) per output channel,
// b' = beta - mean * gamma / sqrt(var + eps).
struct ConvBn {
  ConvSpec spec;
  std::vector<float> w;  // [c_out, c_in, r, r]
  std::vector<float> gamma, beta, mean, var;
};
struct FoldedConv {
  ConvSpec spec;
  std::vector<float> w, b;
};
FoldedConv fold(const ConvBn& layer, double eps = 1e-5);

// A trunk's layers: the stem, then per block conv1, conv2 and the shortcut (empty without one).
struct TrunkWeights {
  ConvBn stem;
  std::vector<ConvBn> conv1, conv2, shortcut;
};
// The two networks: MC-ResNet18 (two trunks, RGB with 3 input channels and depth with 1, and
// Linear(1024 -> 15)) and torchvision's ResNet-18 (one trunk on 3 channels, Linear(512 -> 1000)).
enum class Model { kMcResNet18, kResNet18 };
const char* to_string(Model m);            // "mc_resnet18", "resnet18"
Model parse_model(const std::string&);     // the reverse; throws std::invalid_argument
std::vector<int> trunk_channels(Model m);  // input channels per trunk: {3, 1} or {3}
int default_classes(Model m);              // 15 or 1000
double net_flops(Model m, int h, int w, int classes);

struct NetWeights {
  Model model = Model::kMcResNet18;
  std::vector<TrunkWeights> trunks;  // one per trunk_channels(model), in that order
  std::vector<float> fc_w, fc_b;     // [classes, 512 * trunks] and [classes]
  int classes = 15;
  int features() const { return 512 * int(trunks.size()); }
};
// Deterministic random weights from `seed`: He-normal convs (standard deviation sqrt(2 / fan_in)),
// BN gamma and var in [0.5, 1.5], beta and mean in [-0.1, 0.1]; the FC uniform in
// +-1/sqrt(features), as torch.nn.Linear initialises it. classes 0: default_classes(model).
TrunkWeights random_trunk_weights(const Trunk& t, uint64_t seed);
NetWeights random_net_weights(Model model, uint64_t seed, int classes = 0);
// The pass rule of a network's logits against the CPU reference (and PyTorch): relative L2 error
// ||got - ref|| / ||ref|| at most 1e-4 in fp32, 5e-3 in TF32, 3e-2 in bf16 (bf16 activations are
// rounded to 8 mantissa bits after every layer).
double logits_tolerance(gpu100::Precision p);
// Throws std::invalid_argument naming the first tensor whose size does not match the model.
void check_net_weights(const NetWeights& wts);

// ---- CPU reference ----
// fp32 activations between layers, every sum in double, BN folded; NCHW. `threads` splits each
// convolution's output channels (0: the hardware's count); the result does not depend on it.
// A trunk's features: [n, 512].
std::vector<float> trunk_forward_cpu(const Trunk& t, const TrunkWeights& wts,
                                     const std::vector<float>& x, int n, int h, int w,
                                     int threads = 0);
// The network's logits [n, classes] from one input per trunk ([n, trunk_channels[i], h, w]).
std::vector<float> net_forward_cpu(const NetWeights& wts,
                                   const std::vector<std::vector<float>>& inputs, int n, int h,
                                   int w, int threads = 0);
// One convolution with its bias, and a residual added before the optional ReLU: the building
// block of the forward above. x [n, c_in, h, w] -> [n, c_out, P, Q].
std::vector<float> conv_cpu(const FoldedConv& cv, const std::vector<float>& x, int n, int h, int w,
                            const std::vector<float>* residual, bool relu, int threads = 0);

// ---- pools ----
// Max pool, window k x k, stride s, padding p on each side that never wins (as
// torch.nn.MaxPool2d: padded positions are -inf). Output P = (H + 2p - k) / s + 1, likewise Q.
// Global average pool: y[n][c] = the mean of x[n][c][.][.] (fp32 accumulation).
// Layouts: fp32 NCHW, bf16 NHWC (channels last, as the bf16 network keeps activations), and fp32
// NHWC (the TF32 network's on Hopper).
// The launchers take device pointers, throw std::invalid_argument before any CUDA call for a
// non-positive size, a window larger than the padded input or p >= k, check their launches and do
// not synchronise.
void check_pool_args(int n, int c, int h, int w, int k, int s, int p);
void maxpool_nchw(const float* x, float* y, int n, int c, int h, int w, int k, int s, int p,
                  cudaStream_t stream);
void maxpool_nhwc_bf16(const __nv_bfloat16* x, __nv_bfloat16* y, int n, int c, int h, int w, int k,
                       int s, int p, cudaStream_t stream);
void global_avgpool_nchw(const float* x, float* y, int n, int c, int h, int w, cudaStream_t stream);
// The bf16 network's features are fp32: the mean of bf16 values, accumulated and kept in fp32.
void global_avgpool_nhwc_bf16(const __nv_bfloat16* x, float* y, int n, int c, int h, int w,
                              cudaStream_t stream);
// The TF32 network on Hopper keeps fp32 NHWC activations after its stem (day08 v11's layout): its
// average pool reads fp32 NHWC.
void global_avgpool_nhwc(const float* x, float* y, int n, int c, int h, int w, cudaStream_t stream);
// NCHW fp32 [n, c, h, w] -> NHWC bf16 [n, h, w_pad, c_pad], channels c .. c_pad - 1 and columns
// w .. w_pad - 1 zero (the bf16 network pads its stems' 3 and 1 input channels to 4 or 8, the
// tensor-core kernel's granule, and with 4 channels the width to an even one).
void to_nhwc_bf16(const float* x, __nv_bfloat16* y, int n, int c, int h, int w, int c_pad,
                  int w_pad, cudaStream_t stream);

// CPU references in double, on the values the GPU reads (for bf16: the rounded values, as floats);
// `nhwc` picks the layout of x and y.
std::vector<double> maxpool_cpu(const std::vector<float>& x, int n, int c, int h, int w, int k,
                                int s, int p, bool nhwc);
std::vector<double> global_avgpool_cpu(const std::vector<float>& x, int n, int c, int h, int w,
                                       bool nhwc);

}  // namespace capstone::resnet
