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
#include <vector>

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

// FLOPs counted as 2 per multiply-add of the convolutions and the FC (BN is folded into the convs;
// pools, bias and residual adds are not counted): 3.63 GFLOP for ResNet-18 at 224 x 224 and
// 32.0 GFLOP for MC-ResNet18 at 416 x 544, per image.
double trunk_flops(const Trunk& t, int h, int w);
double resnet18_flops(int h, int w, int classes = 1000);
double mc_resnet18_flops(int h, int w, int classes = 15);

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
struct McWeights {
  TrunkWeights rgb, depth;
  std::vector<float> fc_w, fc_b;  // [classes, 1024] and [classes]
  int classes = 15;
};
// Deterministic random weights from `seed`: He-normal convs (standard deviation sqrt(2 / fan_in)),
// BN gamma and var in [0.5, 1.5], beta and mean in [-0.1, 0.1]; the FC uniform in
// +-1/sqrt(1024), as torch.nn.Linear initialises it.
TrunkWeights random_trunk_weights(const Trunk& t, uint64_t seed);
McWeights random_mc_weights(uint64_t seed, int classes = 15);

// ---- CPU reference ----
// fp32 activations between layers, every sum in double, BN folded; NCHW. `threads` splits each
// convolution's output channels (0: the hardware's count); the result does not depend on it.
// A trunk's features: [n, 512]. MC-ResNet18's logits: [n, classes].
std::vector<float> trunk_forward_cpu(const Trunk& t, const TrunkWeights& wts,
                                     const std::vector<float>& x, int n, int h, int w,
                                     int threads = 0);
std::vector<float> mc_resnet18_cpu(const McWeights& wts, const std::vector<float>& rgb,
                                   const std::vector<float>& depth, int n, int h, int w,
                                   int threads = 0);
// One convolution with its bias, and a residual added before the optional ReLU: the building
// block of the forward above. x [n, c_in, h, w] -> [n, c_out, P, Q].
std::vector<float> conv_cpu(const FoldedConv& cv, const std::vector<float>& x, int n, int h, int w,
                            const std::vector<float>* residual, bool relu, int threads = 0);

// ---- pools ----
// Max pool, window k x k, stride s, padding p on each side that never wins (as
// torch.nn.MaxPool2d: padded positions are -inf). Output P = (H + 2p - k) / s + 1, likewise Q.
// Global average pool: y[n][c] = the mean of x[n][c][.][.] (fp32 accumulation).
// Two layouts: fp32 NCHW, and bf16 NHWC (channels last, as the bf16 network keeps activations).
// The launchers take device pointers, throw std::invalid_argument before any CUDA call for a
// non-positive size, a window larger than the padded input or p >= k, check their launches and do
// not synchronise.
void check_pool_args(int n, int c, int h, int w, int k, int s, int p);
void maxpool_nchw(const float* x, float* y, int n, int c, int h, int w, int k, int s, int p,
                  cudaStream_t stream);
void maxpool_nhwc_bf16(const __nv_bfloat16* x, __nv_bfloat16* y, int n, int c, int h, int w, int k,
                       int s, int p, cudaStream_t stream);
void global_avgpool_nchw(const float* x, float* y, int n, int c, int h, int w, cudaStream_t stream);
void global_avgpool_nhwc_bf16(const __nv_bfloat16* x, __nv_bfloat16* y, int n, int c, int h, int w,
                              cudaStream_t stream);

// CPU references in double, on the values the GPU reads (for bf16: the rounded values, as floats);
// `nhwc` picks the layout of x and y.
std::vector<double> maxpool_cpu(const std::vector<float>& x, int n, int c, int h, int w, int k,
                                int s, int p, bool nhwc);
std::vector<double> global_avgpool_cpu(const std::vector<float>& x, int n, int c, int h, int w,
                                       bool nhwc);

}  // namespace capstone::resnet
