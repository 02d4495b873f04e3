// ResNet-18 and MC-ResNet18 through cuDNN and cuBLAS (resnet_cudnn.hpp). The descriptors and
// cudnnFind are day08's CudnnConvPlan (linked through day08::conv, not copied); what is the
// capstone's own is here: the weights in each precision's layout, the forward as a list of steps,
// the arena planned from the steps' tensor lifetimes, the fused convolution call with its
// unfused fallback, and the FC.
#include "resnet_cudnn.hpp"

#include <string>
#include <vector>

#include "dual_conv.hpp"  // capstone::NotAvailable

#if GPU100_HAVE_CUDNN
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cudnn.h>
#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <map>
#include <stdexcept>
#include <tuple>
#include <utility>

#include "common/cublas_check.hpp"
#include "common/cuda_check.hpp"
#include "common/cudnn_check.hpp"
#include "common/device_buffer.hpp"
#include "common/device_info.hpp"
#include "common/errors.hpp"
#include "common/half.hpp"
#include "conv_day.hpp"
#include "cudnn_conv_plan.hpp"
#include "resnet_arena.hpp"
#endif

namespace capstone::resnet {

#if GPU100_HAVE_CUDNN

namespace {

using bf16 = __nv_bfloat16;
using gpu100::Precision;

constexpr size_t kMiB = size_t(1) << 20;
// Device memory a plan leaves free: cuDNN's and cuBLAS's own buffers, the caller's tensors.
constexpr size_t kHeadroom = 256 * kMiB;
// The least workspace the arena holds, lent to cuBLAS for the FC (cublasSetWorkspace): cuBLAS's
// recommendation for GPUs before Hopper; the FC's GEMMs are tiny.
constexpr size_t kCublasWorkspace = 4 * kMiB;
// The bf16 stems' input channels: to_nhwc_bf16 pads the caller's 3 or 1 channels to 8.
constexpr int kStemChannels = 8;
constexpr int kFeatures = 512;  // per trunk

size_t align_up(size_t x) {
  return (x + kArenaAlign - 1) / kArenaAlign * kArenaAlign;
}
double mib(size_t bytes) {
  return double(bytes) / double(kMiB);
}

// ---- owners of the library objects this file creates (day08's plan owns the convolution's) ----

// The object's cuDNN and cuBLAS handles: a member declared first, so destroyed last.
struct Handles {
  cudnnHandle_t cudnn = nullptr;
  cublasHandle_t cublas = nullptr;
  Handles() {
    CUDNN_CHECK(cudnnCreate(&cudnn));
    const cublasStatus_t st = cublasCreate(&cublas);
    if (st != CUBLAS_STATUS_SUCCESS) {
      cudnnDestroy(cudnn);
      gpu100::check_cublas(st, "cublasCreate(&cublas)", __FILE__, __LINE__);
    }
  }
  ~Handles() {
    if (cublas != nullptr) cublasDestroy(cublas);
    if (cudnn != nullptr) cudnnDestroy(cudnn);
  }
  Handles(const Handles&) = delete;
  Handles& operator=(const Handles&) = delete;
};

class TensorDesc {
 public:
  TensorDesc() { CUDNN_CHECK(cudnnCreateTensorDescriptor(&d_)); }
  ~TensorDesc() {
    if (d_ != nullptr) cudnnDestroyTensorDescriptor(d_);
  }
  TensorDesc(TensorDesc&& other) noexcept : d_(std::exchange(other.d_, nullptr)) {}
  TensorDesc& operator=(TensorDesc&& other) noexcept {
    std::swap(d_, other.d_);  // other's destructor frees the old one
    return *this;
  }
  TensorDesc(const TensorDesc&) = delete;
  TensorDesc& operator=(const TensorDesc&) = delete;
  void set(cudnnTensorFormat_t format, cudnnDataType_t type, int n, int c, int h, int w) {
    CUDNN_CHECK(cudnnSetTensor4dDescriptor(d_, format, type, n, c, h, w));
  }
  cudnnTensorDescriptor_t get() const { return d_; }

 private:
  cudnnTensorDescriptor_t d_ = nullptr;
};

class Activation {
 public:
  explicit Activation(cudnnActivationMode_t mode) {
    CUDNN_CHECK(cudnnCreateActivationDescriptor(&d_));
    const cudnnStatus_t st = cudnnSetActivationDescriptor(d_, mode, CUDNN_NOT_PROPAGATE_NAN, 0.0);
    if (st != CUDNN_STATUS_SUCCESS) {
      cudnnDestroyActivationDescriptor(d_);
      gpu100::check_cudnn(st, "cudnnSetActivationDescriptor", __FILE__, __LINE__);
    }
  }
  ~Activation() { cudnnDestroyActivationDescriptor(d_); }
  Activation(const Activation&) = delete;
  Activation& operator=(const Activation&) = delete;
  cudnnActivationDescriptor_t get() const { return d_; }

 private:
  cudnnActivationDescriptor_t d_ = nullptr;
};

// ---- the weights ----

// One convolution with its BN folded, in the layout its precision reads: fp32 KCRS, or bf16 KRSC
// with the input channels padded to c_in (the stem's 3 or 1 to 8). The bias descriptor is
// [1, K, 1, 1] in the activations' data type and layout: a bf16 bias on a bf16 y, as PyTorch's
// cudnn_convolution_relu passes it, and as day08 found cudnnAddTensor needs (its bf16 row has no
// bias for that reason). A layer whose fused call cuDNN refuses runs unfused (choose_fused).
struct Layer {
  ConvSpec spec;
  int c_in = 0;
  bool relu = true;  // false for the 1x1 shortcut, whose output joins the residual
  gpu100::DeviceBuffer<float> w32, b32;
  gpu100::DeviceBuffer<bf16> w16, b16;
  TensorDesc bias;
  const void* w() const {
    return w16.empty() ? static_cast<const void*>(w32.data())
                       : static_cast<const void*>(w16.data());
  }
  const void* b() const {
    return b16.empty() ? static_cast<const void*>(b32.data())
                       : static_cast<const void*>(b16.data());
  }
};

Layer make_layer(const ConvBn& cb, bool relu, bool bf16_layout) {
  const FoldedConv f = fold(cb);
  Layer l;
  l.spec = f.spec;
  l.relu = relu;
  const int K = f.spec.c_out, C = f.spec.c_in, R = f.spec.r;
  if (!bf16_layout) {
    l.c_in = C;
    l.w32 = gpu100::DeviceBuffer<float>(f.w.size());
    l.w32.upload(f.w);
    l.b32 = gpu100::DeviceBuffer<float>(f.b.size());
    l.b32.upload(f.b);
    l.bias.set(CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, K, 1, 1);
    return l;
  }
  l.c_in = (C + kStemChannels - 1) / kStemChannels * kStemChannels;
  // KCRS fp32 -> KRSC bf16, channels C .. c_in - 1 zero (day08's host conversion).
  day08::ConvShape cs;
  cs.k = K, cs.c = C, cs.r = cs.s = R;
  const std::vector<bf16> krsc = day08::to_krsc_bf16(cs, f.w, l.c_in);
  l.w16 = gpu100::DeviceBuffer<bf16>(krsc.size());
  l.w16.upload(krsc);
  l.b16 = gpu100::DeviceBuffer<bf16>(f.b.size());
  l.b16.upload(gpu100::convert_from_float<bf16>(f.b));
  l.bias.set(CUDNN_TENSOR_NHWC, CUDNN_DATA_BFLOAT16, 1, K, 1, 1);
  return l;
}

struct DeviceTrunk {
  Trunk t;
  int channels = 0;  // the caller's input channels
  Layer stem;
  std::vector<Layer> conv1, conv2, shortcut;  // shortcut[b] has no weights without a downsample
};

DeviceTrunk upload_trunk(int channels, const TrunkWeights& tw, bool bf16_layout) {
  DeviceTrunk dt;
  dt.t = resnet18_trunk(channels);
  dt.channels = channels;
  dt.stem = make_layer(tw.stem, true, bf16_layout);
  for (size_t b = 0; b < dt.t.blocks.size(); ++b) {
    dt.conv1.push_back(make_layer(tw.conv1[b], true, bf16_layout));
    dt.conv2.push_back(make_layer(tw.conv2[b], true, bf16_layout));
    dt.shortcut.push_back(dt.t.blocks[b].downsample ? make_layer(tw.shortcut[b], false, bf16_layout)
                                                    : Layer{});
  }
  return dt;
}

// ---- the steps of a forward ----

enum class OpKind { kToNhwc, kConv, kMaxPool, kAvgPool, kFc };
constexpr int kInput = -2;  // in: the caller's input of the step's trunk
constexpr int kNone = -1;

// One step. Tensors are indices into the arena's tensor list.
struct Op {
  OpKind kind = OpKind::kConv;
  int trunk = 0;
  int in = kNone, out = kNone, residual = kNone;
  int c = 0, h = 0, w = 0;                     // the input's channels and size
  const Layer* layer = nullptr;                // kConv
  const day08::CudnnConvPlan* conv = nullptr;  // kConv, once the plans exist
  bool fused = true;  // kConv: one cudnnConvolutionBiasActivationForward, else the fallback
};

Op make_op(OpKind kind, int trunk, int in, int c, int h, int w) {
  Op op;
  op.kind = kind, op.trunk = trunk, op.in = in, op.c = c, op.h = h, op.w = w;
  return op;
}

day08::ConvShape conv_shape(const Op& op, int n) {
  day08::ConvShape s;
  s.n = n, s.c = op.layer->c_in, s.h = op.h, s.w = op.w, s.k = op.layer->spec.c_out;
  s.r = s.s = op.layer->spec.r;
  s.stride = op.layer->spec.stride, s.pad = op.layer->spec.pad, s.dilation = 1;
  return s;
}

// The plans are kept per shape (every field a ResNet varies), so that the layers of one shape
// share one cudnnFind and a second plan() at another shape reuses the shapes both have.
using ShapeKey = std::tuple<int, int, int, int, int, int, int, int>;
ShapeKey key_of(const day08::ConvShape& s) {
  return {s.n, s.c, s.h, s.w, s.k, s.r, s.stride, s.pad};
}

// cudnnGetConvolutionForwardWorkspaceSize, or 0 where cuDNN does not offer `algo` for these
// descriptors (a fused call that needs it is then refused at plan time: that layer runs unfused).
size_t algo_workspace(cudnnHandle_t h, const day08::CudnnConvPlan& c,
                      cudnnConvolutionFwdAlgo_t algo) {
  size_t bytes = 0;
  const cudnnStatus_t st = cudnnGetConvolutionForwardWorkspaceSize(
      h, c.x_desc(), c.w_desc(), c.conv_desc(), c.y_desc(), algo, &bytes);
  return st == CUDNN_STATUS_SUCCESS ? bytes : 0;
}

// A status with which cuDNN declines a call before launching anything: the combination is not
// supported, or not accepted for these descriptors. cuDNN 9 has categories of such codes.
bool refused(cudnnStatus_t st) {
#ifdef CUDNN_STATUS_CATEGORY
  const int category = CUDNN_STATUS_CATEGORY(st);
  return category == CUDNN_STATUS_NOT_SUPPORTED || category == CUDNN_STATUS_BAD_PARAM;
#else
  return st == CUDNN_STATUS_NOT_SUPPORTED || st == CUDNN_STATUS_BAD_PARAM;
#endif
}

// "IMPLICIT_PRECOMP_GEMM (FMA math)": day08's description of the chosen algorithm, without its
// workspace. The fused 1x1 shortcut runs IMPLICIT_PRECOMP_GEMM whatever cudnnFind chose.
std::string algo_label(const Op& op) {
  if (op.fused && !op.layer->relu) return "IMPLICIT_PRECOMP_GEMM (fused identity)";
  const std::string& c = op.conv->choice();
  const size_t cut = c.find(", workspace");
  return cut == std::string::npos ? c : c.substr(0, cut) + ")";
}

const NetWeights& checked(const NetWeights& wts) {
  check_net_weights(wts);
  return wts;
}

}  // namespace

struct CudnnNet::Impl {
  Impl(const NetWeights& wts, Precision p);

  bool is_bf16() const { return prec == Precision::kBf16; }
  template <class T>
  T* at(int tensor) const {
    return arena.at<T>(offsets[size_t(tensor)]);
  }
  void* workspace() const { return arena.at<char>(ws_offset); }

  // plan()'s stages, in order.
  void build_steps();
  size_t act_bytes(int c, int hh, int ww) const;
  int add_tensor(size_t bytes);
  int add_conv(int trunk, const Layer& l, int in, int residual, int& hh, int& ww);
  void add_trunk(int trunk, int feature_tensor);
  void set_lifetimes();
  void check_memory(size_t arena_part, size_t ws, bool ws_known) const;
  void check_steps() const;
  void make_plans(cudaStream_t stream);
  size_t workspace_bytes() const;
  const void* trial_input(const Op& op) const;
  void choose_fused(cudaStream_t stream);

  // forward()'s.
  cudnnStatus_t conv_fused(const Op& op, const void* x) const;
  void conv_unfused(const Op& op, const void* x, cudaStream_t stream) const;
  void fc(const float* feats, float* logits, cudaStream_t stream) const;
  void run(const Op& op, const std::vector<const float*>& inputs, float* logits,
           cudaStream_t stream) const;

  int classes, features;  // first: the weights are checked before any library call
  Precision prec;
  Handles handles;
  Activation relu{CUDNN_ACTIVATION_RELU}, identity{CUDNN_ACTIVATION_IDENTITY};
  std::vector<DeviceTrunk> trunks;
  gpu100::DeviceBuffer<float> fc_w, fc_b;  // [classes, features] and [classes]
  TensorDesc fc_bias, logits_desc;         // [1, classes, 1, 1] and [n, classes, 1, 1]
  std::map<ShapeKey, std::unique_ptr<day08::CudnnConvPlan>> plans;

  // The planned forward: its shape, steps, tensors and their offsets, and the workspace.
  bool ready = false;
  int n = 0, h = 0, w = 0;
  std::vector<Op> ops;
  std::vector<ArenaTensor> tensors;
  std::vector<size_t> offsets;
  size_t ws_offset = 0, ws_bytes = 0;
  Arena arena;
};

CudnnNet::Impl::Impl(const NetWeights& wts, Precision p)
    : classes(checked(wts).classes), features(wts.features()), prec(p) {
  // fp32 means fp32 in the FC too: cuBLAS's default math never rounds fp32 inputs to TF32.
  CUBLAS_CHECK(cublasSetMathMode(
      handles.cublas, p == Precision::kTf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
  const std::vector<int> channels = trunk_channels(wts.model);
  trunks.reserve(channels.size());
  for (size_t i = 0; i < channels.size(); ++i) {
    trunks.push_back(upload_trunk(channels[i], wts.trunks[i], is_bf16()));
  }
  fc_w = gpu100::DeviceBuffer<float>(wts.fc_w.size());
  fc_w.upload(wts.fc_w);
  fc_b = gpu100::DeviceBuffer<float>(wts.fc_b.size());
  fc_b.upload(wts.fc_b);
  fc_bias.set(CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, classes, 1, 1);
}

size_t CudnnNet::Impl::act_bytes(int c, int hh, int ww) const {
  return (is_bf16() ? sizeof(bf16) : sizeof(float)) * size_t(n) * size_t(c) * size_t(hh) *
         size_t(ww);
}

int CudnnNet::Impl::add_tensor(size_t bytes) {
  tensors.push_back({bytes, 0, 0});  // lifetimes: set_lifetimes()
  return int(tensors.size()) - 1;
}

// A convolution step from `in` (and `residual`) into a new tensor; hh, ww become its output size.
int CudnnNet::Impl::add_conv(int trunk, const Layer& l, int in, int residual, int& hh, int& ww) {
  Op op = make_op(OpKind::kConv, trunk, in, l.c_in, hh, ww);
  op.layer = &l;
  op.residual = residual;
  hh = l.spec.out(hh), ww = l.spec.out(ww);
  op.out = add_tensor(act_bytes(l.spec.c_out, hh, ww));
  ops.push_back(op);
  return op.out;
}

// A trunk's steps: (bf16: the input to NHWC bf16) the stem, the max pool, per block the shortcut
// conv (when it has one), conv1, and conv2 with the residual, then the global average pool into
// the trunk's rows of the features.
void CudnnNet::Impl::add_trunk(int trunk, int feature_tensor) {
  const DeviceTrunk& dt = trunks[size_t(trunk)];
  const Trunk& t = dt.t;
  int x = kInput, hh = h, ww = w;
  if (is_bf16()) {
    Op cv = make_op(OpKind::kToNhwc, trunk, kInput, dt.channels, hh, ww);
    cv.out = x = add_tensor(act_bytes(kStemChannels, hh, ww));
    ops.push_back(cv);
  }
  x = add_conv(trunk, dt.stem, x, kNone, hh, ww);
  Op pool = make_op(OpKind::kMaxPool, trunk, x, t.stem.c_out, hh, ww);
  hh = t.pool_out(hh), ww = t.pool_out(ww);
  pool.out = x = add_tensor(act_bytes(t.stem.c_out, hh, ww));
  ops.push_back(pool);
  for (size_t b = 0; b < t.blocks.size(); ++b) {
    int h1 = hh, w1 = ww, hs = hh, ws = ww;
    const int shortcut =
        t.blocks[b].downsample ? add_conv(trunk, dt.shortcut[b], x, kNone, hs, ws) : x;
    const int mid = add_conv(trunk, dt.conv1[b], x, kNone, h1, w1);
    x = add_conv(trunk, dt.conv2[b], mid, shortcut, h1, w1);
    hh = h1, ww = w1;
  }
  Op avg = make_op(OpKind::kAvgPool, trunk, x, t.features, hh, ww);
  avg.out = feature_tensor;
  ops.push_back(avg);
}

// Every step of a forward at (n, h, w), and the tensors' sizes and lifetimes. The features of all
// trunks are one fp32 tensor [trunks][n][512], live from the first average pool to the FC.
void CudnnNet::Impl::build_steps() {
  ops.clear();
  tensors.clear();
  const int feature_tensor = add_tensor(sizeof(float) * size_t(n) * size_t(features));
  for (size_t t = 0; t < trunks.size(); ++t) add_trunk(int(t), feature_tensor);
  Op fc_op = make_op(OpKind::kFc, 0, feature_tensor, features, 1, 1);
  ops.push_back(fc_op);
  set_lifetimes();
}

// A tensor is live from the step that writes it to the last step that reads it.
void CudnnNet::Impl::set_lifetimes() {
  for (ArenaTensor& t : tensors) t.first = INT_MAX, t.last = INT_MIN;
  for (int i = 0; i < int(ops.size()); ++i) {
    for (int id : {ops[size_t(i)].in, ops[size_t(i)].out, ops[size_t(i)].residual}) {
      if (id < 0) continue;
      tensors[size_t(id)].first = std::min(tensors[size_t(id)].first, i);
      tensors[size_t(id)].last = std::max(tensors[size_t(id)].last, i);
    }
  }
}

void CudnnNet::Impl::check_memory(size_t arena_part, size_t ws, bool ws_known) const {
  const size_t need = arena_part + ws;
  if (need <= arena.bytes()) return;  // the arena already holds it
  // Arena::reserve frees the old arena before it allocates the new one.
  const size_t free_bytes = gpu100::free_device_memory() + arena.bytes();
  if (need + kHeadroom <= free_bytes) return;
  const std::string ws_text = ws_known ? fmt::format("{:.1f} MiB", mib(ws)) : "not sized yet";
  throw gpu100::UsageError(fmt::format(
      "N={} at {}x{} needs {:.1f} MiB (arena {:.1f} MiB, cuDNN workspace {}) and {:.0f} MiB to "
      "spare; {:.1f} MiB free",
      n, h, w, mib(need), mib(arena_part), ws_text, mib(kHeadroom), mib(free_bytes)));
}

// The launchers' own argument checks, at plan time rather than half-way through a forward.
void CudnnNet::Impl::check_steps() const {
  for (const Op& op : ops) {
    const Trunk& t = trunks[size_t(op.trunk)].t;
    if (op.kind == OpKind::kConv) day08::check_conv_args(conv_shape(op, n));
    if (op.kind == OpKind::kMaxPool) {
      check_pool_args(n, op.c, op.h, op.w, t.pool_k, t.pool_stride, t.pool_pad);
    }
    if (op.kind == OpKind::kAvgPool) check_pool_args(n, op.c, op.h, op.w, 1, 1, 0);
  }
}

// Each convolution's descriptors and algorithm: cudnnFind once per shape. fp32 keeps to FMA math
// (no TF32, as PyTorch with allow_tf32 off); tf32 and bf16 allow tensor-op math.
void CudnnNet::Impl::make_plans(cudaStream_t stream) {
  const day08::CudnnPick pick = prec == Precision::kFp32   ? day08::CudnnPick::kFp32NotTensorOp
                                : prec == Precision::kTf32 ? day08::CudnnPick::kTf32
                                                           : day08::CudnnPick::kBf16Nhwc;
  for (Op& op : ops) {
    if (op.kind != OpKind::kConv) continue;
    const day08::ConvShape s = conv_shape(op, n);
    auto it = plans.find(key_of(s));
    if (it == plans.end()) {
      try {
        auto plan = std::make_unique<day08::CudnnConvPlan>(handles.cudnn, s, pick, stream);
        it = plans.emplace(key_of(s), std::move(plan)).first;
      } catch (const day08::CudnnNoAlgorithm& e) {
        throw NotAvailable(std::string(e.what()) + " in " + gpu100::to_string(prec));
      }
    }
    op.conv = it->second.get();
  }
}

// One workspace for every layer: its chosen algorithm, IMPLICIT_PRECOMP_GEMM for the fused
// identity activation, and at least cuBLAS's share.
size_t CudnnNet::Impl::workspace_bytes() const {
  size_t ws = kCublasWorkspace;
  for (const Op& op : ops) {
    if (op.kind != OpKind::kConv) continue;
    const day08::CudnnConvPlan& c = *op.conv;
    ws = std::max({ws, c.found_workspace_bytes(), algo_workspace(handles.cudnn, c, c.algo())});
    if (!op.layer->relu) {
      ws = std::max(
          ws, algo_workspace(handles.cudnn, c, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM));
    }
  }
  return align_up(ws);
}

// The fp32 stem reads the caller's input, which a plan does not have: its trial call reads arena
// bytes outside its output instead. The max pool's output (live with the stem's output, so
// elsewhere) is at least as large as the input, so such bytes exist below or above it.
const void* CudnnNet::Impl::trial_input(const Op& op) const {
  const size_t need = sizeof(float) * size_t(n) * size_t(op.c) * size_t(op.h) * size_t(op.w);
  const size_t out = offsets[size_t(op.out)];
  if (need <= out) return arena.at<char>(0);
  const size_t above = align_up(out + tensors[size_t(op.out)].bytes);
  if (above + need <= arena.bytes()) return arena.at<char>(above);
  throw std::logic_error("CudnnNet: no arena bytes for the stem's trial input");
}

// Tries each convolution's fused call once, on the zeroed arena. cuDNN declines combinations it
// does not fuse (the identity activation outside IMPLICIT_PRECOMP_GEMM; some bf16 NHWC cases)
// before launching anything: those layers take the unfused sequence, run once here too. So every
// convolution's kernels are loaded before the first forward. Any other error is thrown.
void CudnnNet::Impl::choose_fused(cudaStream_t stream) {
  CUDA_CHECK(cudaMemsetAsync(arena.at<char>(0), 0, arena.bytes(), stream));
  CUDNN_CHECK(cudnnSetStream(handles.cudnn, stream));
  for (Op& op : ops) {
    if (op.kind != OpKind::kConv) continue;
    const void* x = op.in == kInput ? trial_input(op) : at<char>(op.in);
    const cudnnStatus_t st = conv_fused(op, x);
    op.fused = st == CUDNN_STATUS_SUCCESS;
    if (op.fused) continue;
    if (!refused(st)) {
      gpu100::check_cudnn(st, "cudnnConvolutionBiasActivationForward (plan-time trial)", __FILE__,
                          __LINE__);
    }
    conv_unfused(op, x, stream);
  }
  CUDA_CHECK(cudaStreamSynchronize(stream));
}

// y = act(conv(x, w) + bias + residual), one call: alpha2 = 1 with z = the residual; alpha2 = 0
// and z = y (not read) without one. cuDNN fuses the identity activation only with
// IMPLICIT_PRECOMP_GEMM.
cudnnStatus_t CudnnNet::Impl::conv_fused(const Op& op, const void* x) const {
  const day08::CudnnConvPlan& c = *op.conv;
  const Layer& l = *op.layer;
  void* y = at<char>(op.out);
  const bool residual = op.residual != kNone;
  const void* z = residual ? static_cast<const void*>(at<char>(op.residual)) : y;
  const float one = 1.f, zero = 0.f;
  const cudnnConvolutionFwdAlgo_t algo =
      l.relu ? c.algo() : CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM;
  return cudnnConvolutionBiasActivationForward(
      handles.cudnn, &one, c.x_desc(), x, c.w_desc(), l.w(), c.conv_desc(), algo, workspace(),
      ws_bytes, residual ? &one : &zero, c.y_desc(), z, l.bias.get(), l.b(),
      l.relu ? relu.get() : identity.get(), c.y_desc(), y);
}

// The same as four calls, for the layers cuDNN does not fuse: the convolution (cudnnFind's
// algorithm), the bias, the residual, the ReLU (in place). In bf16 y is rounded after each.
void CudnnNet::Impl::conv_unfused(const Op& op, const void* x, cudaStream_t stream) const {
  const day08::CudnnConvPlan& c = *op.conv;
  const Layer& l = *op.layer;
  void* y = at<char>(op.out);
  const float one = 1.f, zero = 0.f;
  c.forward(handles.cudnn, x, l.w(), y, workspace(), ws_bytes, stream);
  CUDNN_CHECK(cudnnAddTensor(handles.cudnn, &one, l.bias.get(), l.b(), &one, c.y_desc(), y));
  if (op.residual != kNone) {
    CUDNN_CHECK(cudnnAddTensor(handles.cudnn, &one, c.y_desc(), at<char>(op.residual), &one,
                               c.y_desc(), y));
  }
  if (l.relu) {
    CUDNN_CHECK(cudnnActivationForward(handles.cudnn, relu.get(), &one, c.y_desc(), y, &zero,
                                       c.y_desc(), y));
  }
}

// logits [n, classes] = features x fc_w^T + fc_b, one GEMM per trunk onto the logits. cuBLAS is
// column-major: the row-major logits are the column-major C [classes, n] (ldc = classes); trunk
// t's columns of fc_w, row-major [classes, features], are the column-major [512, classes] at
// fc_w + 512 t (lda = features), transposed (OP_T); its features, row-major [n, 512], are the
// column-major B [512, n] (ldb = 512). The first GEMM overwrites C (beta = 0: C is not read),
// the others add; then cuDNN adds the bias to every row.
void CudnnNet::Impl::fc(const float* feats, float* logits, cudaStream_t stream) const {
  // cublasSetStream resets the workspace to cuBLAS's own pool: lend it the arena's after it.
  CUBLAS_CHECK(cublasSetStream(handles.cublas, stream));
  CUBLAS_CHECK(cublasSetWorkspace(handles.cublas, workspace(), ws_bytes));
  const float one = 1.f, zero = 0.f;
  for (size_t t = 0; t < trunks.size(); ++t) {
    CUBLAS_CHECK(cublasSgemm(handles.cublas, CUBLAS_OP_T, CUBLAS_OP_N, classes, n, kFeatures, &one,
                             fc_w.data() + t * kFeatures, features,
                             feats + t * size_t(n) * kFeatures, kFeatures, t == 0 ? &zero : &one,
                             logits, classes));
  }
  CUDNN_CHECK(cudnnAddTensor(handles.cudnn, &one, fc_bias.get(), fc_b.data(), &one,
                             logits_desc.get(), logits));
}

void CudnnNet::Impl::run(const Op& op, const std::vector<const float*>& inputs, float* logits,
                         cudaStream_t stream) const {
  const Trunk& t = trunks[size_t(op.trunk)].t;
  switch (op.kind) {
    case OpKind::kToNhwc:
      to_nhwc_bf16(inputs[size_t(op.trunk)], at<bf16>(op.out), n, op.c, op.h, op.w, kStemChannels,
                   op.w, stream);
      break;
    case OpKind::kConv: {
      const void* x = op.in == kInput ? static_cast<const void*>(inputs[size_t(op.trunk)])
                                      : static_cast<const void*>(at<char>(op.in));
      if (op.fused) {
        CUDNN_CHECK(conv_fused(op, x));
      } else {
        conv_unfused(op, x, stream);
      }
      break;
    }
    case OpKind::kMaxPool:
      if (is_bf16()) {
        maxpool_nhwc_bf16(at<bf16>(op.in), at<bf16>(op.out), n, op.c, op.h, op.w, t.pool_k,
                          t.pool_stride, t.pool_pad, stream);
      } else {
        maxpool_nchw(at<float>(op.in), at<float>(op.out), n, op.c, op.h, op.w, t.pool_k,
                     t.pool_stride, t.pool_pad, stream);
      }
      break;
    case OpKind::kAvgPool: {
      float* feats = at<float>(op.out) + size_t(op.trunk) * size_t(n) * kFeatures;
      if (is_bf16()) {
        global_avgpool_nhwc_bf16(at<bf16>(op.in), feats, n, op.c, op.h, op.w, stream);
      } else {
        global_avgpool_nchw(at<float>(op.in), feats, n, op.c, op.h, op.w, stream);
      }
      break;
    }
    case OpKind::kFc:
      fc(at<float>(op.in), logits, stream);
      break;
  }
}

// ---- the public class ----

CudnnNet::CudnnNet(const NetWeights& w, gpu100::Precision p)
    : impl_(std::make_unique<Impl>(w, p)) {}
CudnnNet::~CudnnNet() = default;

void CudnnNet::plan(int n, int h, int w, cudaStream_t stream) {
  Impl& m = *impl_;
  if (n < 1 || h < 1 || w < 1) {
    throw gpu100::UsageError(
        fmt::format("CudnnNet::plan: N={}, H={}, W={}: each must be positive", n, h, w));
  }
  if (m.ready && n == m.n && h == m.h && w == m.w) return;
  m.ready = false;
  m.n = n, m.h = h, m.w = w;
  m.build_steps();
  ArenaPlan layout = plan_arena(m.tensors);
  const size_t activations = align_up(layout.bytes);  // the workspace follows, aligned
  m.check_memory(activations, 0, false);  // before cudnnFind, which allocates its own scratch
  m.check_steps();
  m.make_plans(stream);
  const size_t ws = m.workspace_bytes();
  m.check_memory(activations, ws, true);
  m.arena.reserve(activations + ws);
  m.offsets = std::move(layout.offsets);
  m.ws_offset = activations;
  m.ws_bytes = ws;
  m.logits_desc.set(CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, m.classes, 1, 1);
  m.choose_fused(stream);
  m.ready = true;
}

size_t CudnnNet::arena_bytes() const {
  return impl_->arena.bytes();
}

void CudnnNet::forward(const std::vector<const float*>& inputs, float* logits,
                       cudaStream_t stream) {
  const Impl& m = *impl_;
  if (!m.ready) throw gpu100::UsageError("CudnnNet::forward: call plan(n, h, w) first");
  if (inputs.size() != m.trunks.size()) {
    throw std::invalid_argument(
        fmt::format("CudnnNet::forward: {} inputs for {} trunks", inputs.size(), m.trunks.size()));
  }
  for (const float* x : inputs) {
    if (x == nullptr) throw std::invalid_argument("CudnnNet::forward: a null input");
  }
  if (logits == nullptr) throw std::invalid_argument("CudnnNet::forward: null logits");
  CUDNN_CHECK(cudnnSetStream(m.handles.cudnn, stream));
  for (const Op& op : m.ops) m.run(op, inputs, logits, stream);
}

std::string CudnnNet::describe() const {
  const Impl& m = *impl_;
  const size_t v = cudnnGetVersion();
  const std::string head =
      fmt::format("cuDNN {}.{} {}", v / 10000, v / 100 % 100, gpu100::to_string(m.prec));
  if (!m.ready) return head + ": not planned";
  std::map<std::string, int> algos;
  int convs = 0, unfused = 0;
  for (const Op& op : m.ops) {
    if (op.kind != OpKind::kConv) continue;
    ++convs;
    unfused += op.fused ? 0 : 1;
    ++algos[algo_label(op)];
  }
  std::string list;
  for (const auto& [name, count] : algos) {
    list += fmt::format("{}{} x{}", list.empty() ? "" : ", ", name, count);
  }
  return fmt::format(
      "{}, N={} {}x{}: {} convolutions: {}; {} fused, {} unfused (conv, adds, ReLU); arena {:.1f} "
      "MiB incl. {:.1f} MiB workspace",
      head, m.n, m.h, m.w, convs, list, convs - unfused, unfused, mib(m.arena.bytes()),
      mib(m.ws_bytes));
}

int CudnnNet::classes() const {
  return impl_->classes;
}
gpu100::Precision CudnnNet::precision() const {
  return impl_->prec;
}

#else  // no cuDNN: the class exists, and says so

struct CudnnNet::Impl {};

CudnnNet::CudnnNet(const NetWeights&, gpu100::Precision) {
  throw NotAvailable("skipped: cuDNN not found");
}
CudnnNet::~CudnnNet() = default;
void CudnnNet::plan(int, int, int, cudaStream_t) {
  throw NotAvailable("skipped: cuDNN not found");
}
size_t CudnnNet::arena_bytes() const {
  return 0;
}
void CudnnNet::forward(const std::vector<const float*>&, float*, cudaStream_t) {
  throw NotAvailable("skipped: cuDNN not found");
}
std::string CudnnNet::describe() const {
  return "skipped: cuDNN not found";
}
int CudnnNet::classes() const {
  return 0;
}
gpu100::Precision CudnnNet::precision() const {
  return gpu100::Precision::kFp32;
}

#endif

}  // namespace capstone::resnet
