#pragma once
// MC-ResNet18 and ResNet-18 on the curriculum's own kernels (resnet.hpp has the layer list).
//
// Every convolution is day08's fused layer form (day08::conv2d_fused, conv2d_fused_winograd and
// conv2d_fused_bf16_nhwc):
// BN folded into the weights and the bias, and the bias, the block's residual and the ReLU applied
// in the convolution's own store. The pools are resnet.hpp's, the FC one warp per logit.
//   fp32: fp32 NCHW activations, FMA only (no TF32): day08's Winograd form (v7's F(2x2, 3x3) or
//         v14's F(4x4, 3x3) kernel, picked per layer) for the 3x3 stride-1 layers, on filters
//         transformed once, in the constructor; v15's implicit GEMM for the others (the stem, the
//         stride-2 and 1x1 layers), on filters transposed to CRSK once.
//   tf32: TF32 tensor cores, fp32 accumulation. Where the GPU runs the build's sm_90a code, fp32
//         NHWC activations and KRSC weights, day08 v11's kernel (TMA im2col, wgmma .tf32, which
//         takes only K-major operands) for every layer after the stem, and the stem, its ReLU and
//         the max pool as one kernel (resnet_stem.hpp) from the fp32 NCHW input to NHWC. Elsewhere
//         fp32 NCHW throughout, day08 v5's kernel (mma.sync), and the pool on its own.
//   bf16: bf16 NHWC activations and KRSC weights: the stem, its ReLU and the max pool as one
//         kernel (resnet_stem.hpp) from the fp32 NCHW input; then, where the GPU runs the build's
//         sm_90a code, day08 v10's kernel (TMA im2col, wgmma) for every convolution, else v6's
//         (mma.sync); bf16 tensor cores, fp32 accumulation and bias. The pooled features are fp32.
// The trunks of MC-ResNet18 run in one of three ways:
//   sequential: one after the other on the caller's stream;
//   streams:    each on its own CUDA stream, joined by events (the GPU may overlap them);
//   dual:       in lock-step, one launch for both trunks wherever their layers have the same shape
//               (every layer after the stems, which have 3 and 1 input channels).
// Memory: plan() lays every activation out in one arena by liveness (resnet_arena.hpp) and
// allocates it once; forward() allocates nothing.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/arch.hpp"
#include "common/device_buffer.hpp"
#include "common/precision.hpp"
#include "conv.hpp"
#include "resnet.hpp"
#include "resnet_arena.hpp"

namespace capstone::resnet {

enum class Trunks { kSequential, kStreams, kDual };

// The GPU code the network needs in a precision: fp32 runs day08's FMA kernels, on any build;
// TF32 and bf16 run tensor-core kernels (day08's v5, v10 or v6, v11; the fused stem), which need
// an sm_80 build.
gpu100::ArchNeed net_needs(gpu100::Precision precision);
const char* to_string(Trunks t);            // "sequential", "streams", "dual"
Trunks parse_trunks(const std::string& s);  // the reverse; throws std::invalid_argument

class Net {
 public:
  // Folds the BN of every convolution and uploads the weights in the precision's layout. Throws
  // std::invalid_argument for weights that do not match their model, and gpu100::ArchUnavailable
  // ("... needs an sm_80 build ...") for a precision this build has no code for on this GPU.
  // only_trunk >= 0 makes a part of the network: that trunk alone (trunks sequential), for
  // running the trunks on different GPUs (multi_gpu/net_parallel.hpp). A part computes its
  // trunk's features only; the FC, which needs every trunk's, is the caller's call to fc().
  Net(const NetWeights& weights, gpu100::Precision precision, Trunks trunks, int only_trunk = -1);
  ~Net();
  Net(const Net&) = delete;
  Net& operator=(const Net&) = delete;

  // Plans the arena for a batch of n images of h x w and allocates it (once per shape; it only
  // grows). Throws gpu100::UsageError, before any allocation, for an empty batch, a layer too
  // large for the kernels' 32-bit indexing, or an arena larger than the free device memory (with
  // its bytes).
  void plan(int n, int h, int w);
  // The arena's bytes for a batch, without allocating (the same layout plan() makes). Throws
  // gpu100::UsageError for an empty batch.
  size_t arena_bytes_for(int n, int h, int w) const;
  // Lays the arena out for a batch (once per shape: the programs, the offsets, every layer checked
  // against the kernels' limits, as plan() does) without allocating it, and returns its bytes:
  // the workspace the forward below needs. Throws gpu100::UsageError like plan().
  size_t prepare(int n, int h, int w);
  size_t arena_bytes() const { return arena_.bytes(); }

  // inputs: one fp32 NCHW device pointer per trunk ([n, trunk_channels(model)[i], h, w]; a part
  // takes its one trunk's); logits: fp32 [n, classes] on the device, or null for the trunks alone
  // (their features, features(t), stay in the arena; a part must pass null). Plans first if the
  // shape changed; asynchronous on `stream` (streams mode forks from it and joins back into it).
  void forward(const std::vector<const float*>& inputs, int n, int h, int w, float* logits,
               cudaStream_t stream = nullptr);
  // The same forward with its activations in the caller's `workspace` (arena_bytes_for(n, h, w)
  // bytes or more, kArenaAlign-aligned) instead of the Net's own arena, which it neither allocates
  // nor touches: for a framework whose stream-ordered allocator owns the memory (the PyTorch
  // extension), so that a call inside a CUDA graph capture allocates nothing of its own. Checks
  // the shape and the layers like plan(), but not the free memory. Throws std::invalid_argument
  // for a workspace that is null, short or unaligned.
  void forward(const std::vector<const float*>& inputs, int n, int h, int w, float* logits,
               void* workspace, size_t workspace_bytes, cudaStream_t stream = nullptr);

  // The same forward replayed as one CUDA graph: the first call for these pointers and this shape
  // runs forward() once (planning, and the GEMM's one-time tuning), captures it on an internal
  // stream and instantiates the graph; later calls only launch it on `stream`. What the graph
  // removes is the CPU's cost of issuing each kernel (about 60 launches per trunk).
  void forward_graph(const std::vector<const float*>& inputs, int n, int h, int w, float* logits,
                     cudaStream_t stream = nullptr);

  // Timed sequential forwards with an event between steps (the median of `reps` for each step):
  // the GPU time of each step, named by its kind ("stem 7x7/2", "conv 3x3/1 l1" .. "l4" (the
  // stage), "conv 3x3/2 l2", "shortcut 1x1/2", "max pool", "avg pool", "convert", "fc"), its FLOPs
  // (0 for the pools) and its compulsory bytes. For the README's breakdown.
  struct StepTime {
    std::string kind;
    double ms = 0, flops = 0;
    double bytes = 0;  // the step's compulsory traffic: its inputs, weights and output, once each
    day08::ConvShape shape;  // a convolution's shape, as the model defines it (unpadded channels)
  };
  std::vector<StepTime> profile(const std::vector<const float*>& inputs, int n, int h, int w,
                                float* logits, int reps = 5);

  // The pooled features of this Net's trunk t, fp32 [n, 512] in the arena, as the last forward
  // (at the planned shape) left them. Overwritten by the next forward.
  const float* features(int t) const;
  // The FC alone: logits [n, classes] from one fp32 [n, 512] feature pointer per trunk of the
  // model, in trunk order (for a part, its own features(0) and the other part's, copied here).
  void fc(const std::vector<const float*>& features, int n, float* logits, cudaStream_t stream);

  int classes() const { return classes_; }
  int trunk_count() const { return int(trunk_.size()); }  // 1 for a part
  Model model() const { return model_; }
  gpu100::Precision precision() const { return precision_; }
  Trunks trunks() const { return trunks_; }

 private:
  struct Layer {
    ConvSpec spec;
    int c_in = 0;         // input channels
    bool nhwc32 = false;  // TF32 on v11: fp32 NHWC in and out, w32 in KRSC
    gpu100::DeviceBuffer<float> w32, bias;
    gpu100::DeviceBuffer<float> wino;  // fp32 3x3/1: the filters Winograd-transformed, once
    gpu100::DeviceBuffer<float> crsk;  // the other fp32 layers: the filters in CRSK, once
    gpu100::DeviceBuffer<__nv_bfloat16> w16;
  };
  struct DeviceTrunk {
    Trunk t;
    std::vector<Layer> layers;  // stem, then per block conv1, conv2, shortcut (spec only if none)
  };
  // One step of a trunk's program: a conversion, a convolution or a pool. Tensor ids index the
  // program's tensors; -1 is the trunk's input (the caller's pointer).
  struct Op {
    // kStemPool: the stem, its ReLU and the max pool in one kernel (resnet_stem.hpp).
    enum Kind { kConv, kStemPool, kMaxPool, kAvgPool } kind = kConv;
    int layer = -1, in = -1, out = -1, residual = -1;
    bool relu = false;
    int c = 0, h = 0, w = 0;  // the input's channels and size
  };
  struct Program {
    std::vector<Op> ops;
    std::vector<ArenaTensor> tensors;  // bytes and lifetimes, in op indices
  };
  Program program(const DeviceTrunk& dt, int n, int h, int w) const;
  // prepare() and plan(): the layout (cached per shape), with own_arena the free-memory check of
  // the Net's own arena first, then every layer against the kernels' limits.
  size_t lay_out(int n, int h, int w, bool own_arena);
  void check_io(const std::vector<const float*>& inputs, const float* logits) const;
  void run(const std::vector<const float*>& inputs, int n, float* logits, cudaStream_t stream);
  // The arena layout: offsets per trunk and tensor.
  struct Layout {
    std::vector<std::vector<size_t>> offsets;
    size_t bytes = 0;
  };
  Layout layout(const std::vector<Program>& progs) const;
  DeviceTrunk upload(const Trunk& t, const TrunkWeights& wts) const;
  // The shape day08 sees for a layer at this batch and input size.
  static day08::ConvShape layer_shape(const Layer& l, int n, int h, int w);
  void run_op(int trunk, const Op& op, int n, const std::vector<const float*>& inputs,
              cudaStream_t stream);
  void conv(const std::vector<std::pair<int, const Op*>>& group, int n,
            const std::vector<const float*>& inputs, cudaStream_t stream);
  void run_trunk(int t, int n, const std::vector<const float*>& inputs, cudaStream_t stream);
  void run_dual(int n, const std::vector<const float*>& inputs, cudaStream_t stream);
  void* tensor(int trunk, int id) const;
  void fc(int n, float* logits, cudaStream_t stream);

  Model model_;
  int model_trunks_ = 1;  // the model's trunks: the FC reads 512 features from each
  int only_trunk_ = -1;   // >= 0: a part of the network, that trunk alone
  gpu100::Precision precision_;
  Trunks trunks_;
  int classes_;
  bool stem_pool_ = false;  // the stem and the max pool as one kernel (bf16; TF32 on Hopper)
  bool nhwc32_ = false;     // TF32 on Hopper: fp32 NHWC after the stem (day08 v11)
  std::vector<DeviceTrunk> trunk_;
  gpu100::DeviceBuffer<float> fc_w_, fc_b_;  // the FC's W [classes][512 x trunks] and bias
  std::vector<Program> progs_;
  Layout layout_;
  Arena arena_;
  char* workspace_ = nullptr;  // the caller's workspace during forward(..., workspace, ...)
  int plan_n_ = 0, plan_h_ = 0, plan_w_ = 0;
  cudaStream_t side_[2] = {nullptr, nullptr};  // streams mode
  // forward_graph: the captured forward and what it was captured for.
  cudaStream_t capture_ = nullptr;
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t graph_exec_ = nullptr;
  std::vector<const void*> graph_key_;
  cudaEvent_t fork_ = nullptr, join_[2] = {nullptr, nullptr};
};

}  // namespace capstone::resnet
