#pragma once
// capstone_dual_conv: the dual-stream (RGB + depth) convolution layer of a multi-channel network
// (MCConv2d).
//
// Two image streams share the batch, the spatial size and the number of output channels K:
//   out1 = act(bn1(conv(rgb,   W1) + b1))   rgb   [N, C1, H, W] -> out1 [N, K, P, Q]
//   out2 = act(bn2(conv(depth, W2) + b2))   depth [N, C2, H, W] -> out2 [N, K, P, Q]
// with KCRS filters, zero padding, cross-correlation (cuDNN's and PyTorch's convention).
// BatchNorm is the inference form: y = (v - mean) / sqrt(var + eps) * gamma + beta, that is a
// per-channel scale and shift; it is either applied after the convolution (kScaleShift) or folded
// into the weights and bias (kFolded). The activation is none, ReLU or SiLU (v * sigmoid(v)).
//
// The implementations (the `use_kernel` flag) are in one registry, implementations():
// it drives the binary, the tests and the README table. Every forward is asynchronous on the
// caller's stream, takes device pointers and checks its launches.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace capstone {

enum class Activation { kNone, kRelu, kSilu };
enum class BnMode { kScaleShift, kFolded };
enum class OutType { kFp32, kBf16 };

const char* to_string(Activation a);
Activation parse_activation(const std::string& name);  // "none", "relu", "silu"; throws

// The layer's geometry: per-stream input channels, the shared K, R x S, stride and padding.
struct DualConvShape {
  int c1 = 3, c2 = 1;
  int k = 64, r = 3, s = 3;
  int stride = 1, pad = 1;
  int c(int stream) const { return stream == 0 ? c1 : c2; }
  int p(int h) const { return (h + 2 * pad - r) / stride + 1; }
  int q(int w) const { return (w + 2 * pad - s) / stride + 1; }
};

// The batch of one forward call: both streams must have the same N, H and W.
struct BatchShape {
  int n = 1, h = 1, w = 1;
};

// One input tensor [n, c, h, w] on the device.
struct InputTensor {
  const float* data = nullptr;
  int n = 0, c = 0, h = 0, w = 0;
};

// Thrown by an implementation that cannot run here (cuDNN not built in) or for this layer; the
// binary reports such a row as skipped, never as failed.
class NotAvailable : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Inference BatchNorm parameters for one stream (K values each).
struct BatchNormParams {
  std::vector<float> gamma, beta, mean, var;
  float eps = 1e-5f;
};

// One stream's parameters as the CPU reference and the class take them.
struct StreamParams {
  std::vector<float> weight;  // K x C x R x S
  std::vector<float> bias;    // K, or empty
  bool has_bn = false;
  BatchNormParams bn;
};

// Seeded parameters of one stream, for the binary and the tests: weights in [-1, 1] scaled by
// 1/sqrt(C R S) (so the outputs stay O(1) at any depth); with `bias`, a bias in [-0.5, 0.5]; with
// `bn`, BN statistics (gamma and var in [0.5, 1.5], beta and mean in [-0.5, 0.5]).
StreamParams random_params(const DualConvShape& shape, int stream, bool bias, bool bn,
                           uint64_t seed);

// ---- CPU reference (double accumulation) -------------------------------------------------------
// y [N, K, P, Q] of one stream, epilogue included, every element computed in double and rounded
// once to float.
std::vector<float> conv_stream_cpu(const DualConvShape& shape, int stream, const BatchShape& b,
                                   const std::vector<float>& x, const StreamParams& prm,
                                   Activation act);
// One output element (n, k, p, q) of one stream in double: for the sampled checks at large N.
double conv_point_cpu(const DualConvShape& shape, int stream, const BatchShape& b, const float* x,
                      const StreamParams& prm, Activation act, int n, int k, int p, int q);
// conv_point_cpu at flat [N, K, P, Q] output indices (from gpu100::sample_points).
std::vector<double> conv_points_cpu(const DualConvShape& shape, int stream, const BatchShape& b,
                                    const float* x, const StreamParams& prm, Activation act,
                                    const std::vector<int64_t>& idx);
// The tolerance of an fp32 result: |got - ref| <= abs_tol + rel_tol |ref| with abs_tol growing
// with the number of products summed (C R S); bf16 output adds its rounding (2^-8 relative).
double abs_tolerance(const DualConvShape& shape, OutType out);
double rel_tolerance(OutType out);

// ---- the implementations -----------------------------------------------------------------------
enum class Impl {
  kCudnnSeq,         // two cudnnConvolutionForward, then BN and activation as separate kernels
  kCudnnTwoStreams,  // the same, each stream's work on its own CUDA stream
  kCudnnFused,       // cudnnConvolutionBiasActivationForward, BN folded
  kOwnSeq,           // day08::conv2d_forward once per stream (own_conv2d), then the epilogue
  kOwnTwoStreams,    // the same on two CUDA streams
  kDualNaive,        // one launch for both streams: one thread per output element
  kDualHalo,         // + day08 halo tiles of the input in shared memory
  kDualRegblock,     // + 16 channels x 4 pixels per thread, weights in shared memory, float4 stores
  kDualStoreBound,   // 3 x 3 stride 1 pad 1, C in {1, 3} compiled in, 72 registers (else v3)
  kDualIgemm,        // implicit GEMM through day04's tiles, both streams in one launch
  kLearner,          // a learner's dual kernel (mine/*.cu): its ImplInfo's `launch`
};

namespace detail {
struct DualArgs;  // kernels.cuh: both streams' pointers, the shape and the epilogue
}
// A dual kernel's launcher: both streams in one launch (see kernels.cuh).
using DualLaunchFn = void (*)(const detail::DualArgs&, cudaStream_t);

struct ImplInfo {
  const char* name;         // "dual_regblock"
  const char* description;  // one line: what changed
  Impl impl;
  bool is_library;      // the cuDNN rows
  bool fused_epilogue;  // bias, BN and activation applied in registers before the one store
  bool bf16_output;     // can write bf16
  // Which rows of the binary it has (gpu100::has_tag): "baseline" (the row the others are compared
  // with), "epilogue" (a row with bias + BN + activation), "fused_only" (no plain-conv row),
  // "sweep" (plain rows timed by --sweep), "epilogue_sweep" (epilogue rows timed by --sweep).
  const char* tags = "";
  DualLaunchFn launch = nullptr;  // set for a learner's kernel (Impl::kLearner)
};
const std::vector<ImplInfo>& implementations();  // the capstone's own, then the learner's
// Adds a learner's dual kernel (Impl::kLearner, tag "mine") from its file in mine/
// (common/learner.hpp).
void add_learner_implementation(const ImplInfo& info);
const ImplInfo* find_implementation(const std::string& name);  // nullptr if unknown
bool cudnn_available();                                        // built with cuDNN

class DualConv2d {
 public:
  // Throws std::invalid_argument for a non-positive size or a filter larger than the padded input
  // can ever hold (checked again per batch in check_batch).
  explicit DualConv2d(const DualConvShape& shape);
  ~DualConv2d();
  DualConv2d(const DualConv2d&) = delete;
  DualConv2d& operator=(const DualConv2d&) = delete;

  const DualConvShape& shape() const { return shape_; }

  // Uploads one stream's parameters (stream 0: RGB, 1: depth). Throws std::invalid_argument when
  // a vector has the wrong length or a BN variance is negative.
  void set_params(int stream, const StreamParams& prm);
  void set_activation(Activation a) { act_ = a; }
  void set_bn_mode(BnMode m) { bn_mode_ = m; }
  void set_output_type(OutType t) { out_type_ = t; }
  void use_kernel(Impl impl) { impl_ = impl; }
  void use_kernel(const std::string& name);  // throws std::invalid_argument for an unknown name
  Impl kernel() const { return impl_; }
  Activation activation() const { return act_; }
  BnMode bn_mode() const { return bn_mode_; }
  OutType output_type() const { return out_type_; }

  // Checks a batch: positive sizes, an output of at least 1 x 1, and indices inside int64.
  // Throws std::invalid_argument with a clear message.
  void check_batch(const BatchShape& b) const;
  // Checks the two inputs against each other and the layer (same N, H and W; channels C1 and
  // C2; no empty tensor; non-null data) and returns their batch shape. Throws
  // std::invalid_argument with a clear message.
  BatchShape check_inputs(const InputTensor& rgb, const InputTensor& depth) const;
  // Bytes of one stream's output for this batch (at the current output type).
  size_t output_bytes(const BatchShape& b) const;
  // Throws std::invalid_argument when the two outputs (plus `extra_bytes`) would not fit in the
  // device memory that is free now.
  void check_fits_in_memory(const BatchShape& b, size_t extra_bytes = 0) const;

  // out1, out2: [N, K, P, Q] device buffers of float (or __nv_bfloat16 with OutType::kBf16).
  // The first call for a batch shape on a cuDNN implementation runs cudnnFind and allocates the
  // workspace (once; later calls with that shape allocate nothing).
  // Throws std::invalid_argument for bad inputs (check_inputs) or parameters never set, and
  // NotAvailable for a cuDNN implementation without cuDNN or bf16 output on an implementation
  // that writes fp32 only.
  void forward(const InputTensor& rgb, const InputTensor& depth, void* out1, void* out2,
               cudaStream_t stream = nullptr);

  struct State;  // device buffers, streams, cuDNN handles (dual_conv.cpp)

 private:
  DualConvShape shape_;
  Activation act_ = Activation::kNone;
  BnMode bn_mode_ = BnMode::kScaleShift;
  OutType out_type_ = OutType::kFp32;
  Impl impl_ = Impl::kDualStoreBound;
  const ImplInfo* learner_ = nullptr;  // the learner's kernel when impl_ is kLearner
  std::unique_ptr<State> state_;
};

}  // namespace capstone
