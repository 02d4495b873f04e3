// capstone_dual_conv: the CPU reference, the registry and the DualConv2d class (parameters on
// the device, validation, and the dispatch to each implementation).
#include "dual_conv.hpp"

#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "common/cuda_check.hpp"
#include "common/device_buffer.hpp"
#include "common/device_info.hpp"
#include "common/learner.hpp"
#include "common/random.hpp"
#include "common/sample.hpp"
#include "conv.hpp"
#include "cudnn_conv.hpp"
#include "kernels.cuh"

namespace capstone {

const char* to_string(Activation a) {
  switch (a) {
    case Activation::kRelu:
      return "relu";
    case Activation::kSilu:
      return "silu";
    default:
      return "none";
  }
}

Activation parse_activation(const std::string& name) {
  if (name == "none") return Activation::kNone;
  if (name == "relu") return Activation::kRelu;
  if (name == "silu") return Activation::kSilu;
  throw std::invalid_argument("unknown activation '" + name + "' (none, relu, silu)");
}

// ---- CPU reference ------------------------------------------------------------------------------

namespace {

double epilogue_cpu(double v, const StreamParams& prm, Activation act, int k) {
  if (!prm.bias.empty()) v += prm.bias[k];
  if (prm.has_bn) {
    v = (v - prm.bn.mean[k]) / std::sqrt(double(prm.bn.var[k]) + prm.bn.eps) * prm.bn.gamma[k] +
        prm.bn.beta[k];
  }
  if (act == Activation::kRelu) v = std::max(v, 0.0);
  if (act == Activation::kSilu) v = v / (1.0 + std::exp(-v));
  return v;
}

}  // namespace

double conv_point_cpu(const DualConvShape& sh, int stream, const BatchShape& b, const float* x,
                      const StreamParams& prm, Activation act, int n, int k, int p, int q) {
  const int c_n = sh.c(stream);
  double acc = 0;
  for (int c = 0; c < c_n; ++c) {
    for (int r = 0; r < sh.r; ++r) {
      const int ih = p * sh.stride - sh.pad + r;
      if (ih < 0 || ih >= b.h) continue;
      for (int s = 0; s < sh.s; ++s) {
        const int iw = q * sh.stride - sh.pad + s;
        if (iw < 0 || iw >= b.w) continue;
        acc += double(x[((int64_t(n) * c_n + c) * b.h + ih) * b.w + iw]) *
               double(prm.weight[((int64_t(k) * c_n + c) * sh.r + r) * sh.s + s]);
      }
    }
  }
  return epilogue_cpu(acc, prm, act, k);
}

std::vector<double> conv_points_cpu(const DualConvShape& sh, int stream, const BatchShape& b,
                                    const float* x, const StreamParams& prm, Activation act,
                                    const std::vector<int64_t>& idx) {
  const gpu100::Dims4 d{b.n, sh.k, sh.p(b.h), sh.q(b.w)};
  std::vector<double> ref(idx.size());
  for (size_t j = 0; j < idx.size(); ++j) {
    const gpu100::Index4 o = gpu100::unflatten(d, idx[j]);
    ref[j] = conv_point_cpu(sh, stream, b, x, prm, act, int(o.n), int(o.c), int(o.h), int(o.w));
  }
  return ref;
}

StreamParams random_params(const DualConvShape& sh, int stream, bool bias, bool bn, uint64_t seed) {
  StreamParams prm;
  const int crs = sh.c(stream) * sh.r * sh.s;
  prm.weight = gpu100::random_vector<float>(size_t(sh.k) * crs, seed);
  for (auto& v : prm.weight) v /= std::sqrt(float(crs));
  if (bias) prm.bias = gpu100::random_vector<float>(sh.k, seed + 1, -0.5, 0.5);
  if (bn) {
    prm.has_bn = true;
    prm.bn.gamma = gpu100::random_vector<float>(sh.k, seed + 2, 0.5, 1.5);
    prm.bn.beta = gpu100::random_vector<float>(sh.k, seed + 3, -0.5, 0.5);
    prm.bn.mean = gpu100::random_vector<float>(sh.k, seed + 4, -0.5, 0.5);
    prm.bn.var = gpu100::random_vector<float>(sh.k, seed + 5, 0.5, 1.5);
  }
  return prm;
}

std::vector<float> conv_stream_cpu(const DualConvShape& sh, int stream, const BatchShape& b,
                                   const std::vector<float>& x, const StreamParams& prm,
                                   Activation act) {
  const int P = sh.p(b.h), Q = sh.q(b.w);
  std::vector<float> y(size_t(b.n) * sh.k * P * Q);
  size_t i = 0;
  for (int n = 0; n < b.n; ++n)
    for (int k = 0; k < sh.k; ++k)
      for (int p = 0; p < P; ++p)
        for (int q = 0; q < Q; ++q) {
          y[i++] =
              static_cast<float>(conv_point_cpu(sh, stream, b, x.data(), prm, act, n, k, p, q));
        }
  return y;
}

double abs_tolerance(const DualConvShape& sh, OutType out) {
  // fp32 sums of C*R*S products of values in [-1, 1]: the rounding error grows at most linearly
  // with their number (in practice like its square root); BN's scale is at most ~2 in the tests.
  const double fp32 = 1e-6 + 2e-6 * std::max(sh.c1, sh.c2) * sh.r * sh.s;
  return out == OutType::kBf16 ? fp32 + 1e-2 : fp32;
}

double rel_tolerance(OutType out) {
  return out == OutType::kBf16 ? 8e-3 : 1e-5;
}

static const char* own_conv2d(const day08::ConvShape& cs) {
  // Winograd F(2x2, 3x3) does 2.25x fewer multiplies than the direct sum, but its transforms are
  // extra passes: worth it where the layer is bound by its FMAs (the deep layer: 0.61 ms against
  // v4's 1.13 ms and cuDNN's 0.68 ms at N = 32 in day08's own run), not at the stem's C = 3,
  // where the stores bound the layer.
  return cs.c >= 16 && day08::winograd_takes(cs) ? "v7_winograd" : "best_fp32";
}

// ---- registry -----------------------------------------------------------------------------------

namespace {
struct LearnerTag;  // this registry's list of learner entries (common/learner.hpp)
}

void add_learner_implementation(const ImplInfo& info) {
  gpu100::learner_entries<ImplInfo, LearnerTag>().push_back(info);
}

const std::vector<ImplInfo>& implementations() {
  static const std::vector<ImplInfo> kImpls = gpu100::with_learner<ImplInfo>(
      {
          {"cudnn_seq",
           "library: cudnnConvolutionForward per stream (cudnnFind), then BN, act passes",
           Impl::kCudnnSeq, true, false, false, "baseline sweep epilogue epilogue_sweep"},
          {"cudnn_two_streams", "library: the same, each stream on its own CUDA stream",
           Impl::kCudnnTwoStreams, true, false, false, "sweep"},
          {"cudnn_fused", "library: cudnnConvolutionBiasActivationForward, BN folded into W and b",
           Impl::kCudnnFused, true, true, false, "fused_only epilogue epilogue_sweep"},
          {"own_seq",
           "day08's conv per stream (v7 Winograd at 3x3 stride 1 with C >= 16, else best_fp32), "
           "then BN, act passes",
           Impl::kOwnSeq, false, false, false, "sweep epilogue"},
          {"own_two_streams", "the same, each stream on its own CUDA stream", Impl::kOwnTwoStreams,
           false, false, false},
          {"dual_naive", "one launch, both streams: one thread per output element",
           Impl::kDualNaive, false, true, true},
          {"dual_halo", "+ day08 halo tiles in shared memory, 8 channels per pass", Impl::kDualHalo,
           false, true, true},
          {"dual_regblock", "+ 16 channels x 4 pixels per thread, smem weights, 16-byte stores",
           Impl::kDualRegblock, false, true, true, "sweep epilogue epilogue_sweep"},
          {"dual_igemm", "implicit GEMM with day04's tiles, both streams in one launch",
           Impl::kDualIgemm, false, true, true, "sweep epilogue"},
          {"dual_store_bound",
           "+ 3x3/stride 1/pad 1 and C in {1,3} compiled in, 8 ch x 4 px, 72 regs (else v3)",
           Impl::kDualStoreBound, false, true, true, "sweep epilogue epilogue_sweep"},
      },
      gpu100::learner_entries<ImplInfo, LearnerTag>());
  return kImpls;
}

const ImplInfo* find_implementation(const std::string& name) {
  for (const auto& i : implementations()) {
    if (name == i.name) return &i;
  }
  return nullptr;
}

bool cudnn_available() {
#if GPU100_HAVE_CUDNN
  return true;
#else
  return false;
#endif
}

namespace {
const ImplInfo& info_of(Impl impl) {
  for (const auto& i : implementations()) {
    if (i.impl == impl) return i;
  }
  throw std::logic_error("implementation missing from the registry");
}
}  // namespace

// ---- the class ----------------------------------------------------------------------------------

struct DualConv2d::State {
  struct Stream {
    bool set = false;
    bool has_affine = false;  // a bias or BN: the epilogue is not the identity
    bool has_bn = false;
    gpu100::DeviceBuffer<float> w, wf, scale, beta, ones;
  };
  Stream s[2];
  cudaStream_t side[2] = {nullptr, nullptr};
  cudaEvent_t fork = nullptr, join[2] = {nullptr, nullptr};
  std::unique_ptr<detail::CudnnConv> cudnn[2];

  ~State() {
    for (auto& st : side) {
      if (st) cudaStreamDestroy(st);
    }
    if (fork) cudaEventDestroy(fork);
    for (auto& e : join) {
      if (e) cudaEventDestroy(e);
    }
  }
  void make_streams() {
    if (side[0]) return;
    for (int i = 0; i < 2; ++i) {
      CUDA_CHECK(cudaStreamCreateWithFlags(&side[i], cudaStreamNonBlocking));
      CUDA_CHECK(cudaEventCreateWithFlags(&join[i], cudaEventDisableTiming));
    }
    CUDA_CHECK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
  }
  detail::CudnnConv& cudnn_for(int i) {
    if (!cudnn[i]) cudnn[i] = std::make_unique<detail::CudnnConv>();
    return *cudnn[i];
  }
};

DualConv2d::DualConv2d(const DualConvShape& sh) : shape_(sh), state_(std::make_unique<State>()) {
  if (sh.c1 <= 0 || sh.c2 <= 0 || sh.k <= 0 || sh.r <= 0 || sh.s <= 0 || sh.stride <= 0 ||
      sh.pad < 0) {
    throw std::invalid_argument(
        "DualConv2d: C1, C2, K, R, S and stride must be positive and padding non-negative");
  }
  const int64_t crs = int64_t(std::max(sh.c1, sh.c2)) * sh.r * sh.s;
  if (crs * sh.k > (int64_t(1) << 30) || sh.r > 1024 || sh.s > 1024 || sh.pad > 1024) {
    throw std::invalid_argument("DualConv2d: filters too large");
  }
}

DualConv2d::~DualConv2d() = default;

void DualConv2d::use_kernel(const std::string& name) {
  const ImplInfo* i = find_implementation(name);
  if (i == nullptr) throw std::invalid_argument("unknown implementation '" + name + "'");
  impl_ = i->impl;
  learner_ = i->impl == Impl::kLearner ? i : nullptr;
}

void DualConv2d::set_params(int stream, const StreamParams& prm) {
  if (stream != 0 && stream != 1) throw std::invalid_argument("set_params: stream must be 0 or 1");
  const int K = shape_.k;
  const size_t wsize = size_t(K) * shape_.c(stream) * shape_.r * shape_.s;
  if (prm.weight.size() != wsize) {
    throw std::invalid_argument("set_params: stream " + std::to_string(stream) + " needs " +
                                std::to_string(wsize) + " weights (K x C x R x S), got " +
                                std::to_string(prm.weight.size()));
  }
  if (!prm.bias.empty() && prm.bias.size() != size_t(K)) {
    throw std::invalid_argument("set_params: the bias needs K values");
  }
  std::vector<double> scale(K, 1.0), shift(K, 0.0);
  if (prm.has_bn) {
    const auto& bn = prm.bn;
    if (bn.gamma.size() != size_t(K) || bn.beta.size() != size_t(K) ||
        bn.mean.size() != size_t(K) || bn.var.size() != size_t(K)) {
      throw std::invalid_argument("set_params: BatchNorm needs K values of gamma, beta, mean, var");
    }
    for (int k = 0; k < K; ++k) {
      if (!(bn.var[k] >= 0) || !(bn.eps > 0)) {
        throw std::invalid_argument("set_params: BatchNorm variance must be >= 0 and eps > 0");
      }
      scale[k] = bn.gamma[k] / std::sqrt(double(bn.var[k]) + bn.eps);
      shift[k] = bn.beta[k] - bn.mean[k] * scale[k];
    }
  }
  // y = scale * (conv + bias) + shift = scale * conv + beta; folded: W' = scale * W.
  std::vector<float> h_scale(K), h_beta(K), h_ones(K, 1.f), h_wf(wsize);
  const size_t per_k = wsize / K;
  for (int k = 0; k < K; ++k) {
    h_scale[k] = static_cast<float>(scale[k]);
    h_beta[k] = static_cast<float>(scale[k] * (prm.bias.empty() ? 0.0 : prm.bias[k]) + shift[k]);
    for (size_t i = 0; i < per_k; ++i) {
      h_wf[k * per_k + i] = static_cast<float>(scale[k] * prm.weight[k * per_k + i]);
    }
  }
  State::Stream& st = state_->s[stream];
  st.w = gpu100::DeviceBuffer<float>(wsize);
  st.wf = gpu100::DeviceBuffer<float>(wsize);
  st.scale = gpu100::DeviceBuffer<float>(K);
  st.beta = gpu100::DeviceBuffer<float>(K);
  st.ones = gpu100::DeviceBuffer<float>(K);
  st.w.upload(prm.weight);
  st.wf.upload(h_wf);
  st.scale.upload(h_scale);
  st.beta.upload(h_beta);
  st.ones.upload(h_ones);
  st.has_bn = prm.has_bn;
  st.has_affine = prm.has_bn || !prm.bias.empty();
  st.set = true;
}

void DualConv2d::check_batch(const BatchShape& b) const {
  if (b.n <= 0 || b.h <= 0 || b.w <= 0) {
    throw std::invalid_argument(
        "DualConv2d: empty input (N, H and W must be positive; got N=" + std::to_string(b.n) +
        ", H=" + std::to_string(b.h) + ", W=" + std::to_string(b.w) + ")");
  }
  if (b.h + 2 * shape_.pad < shape_.r || b.w + 2 * shape_.pad < shape_.s) {
    throw std::invalid_argument("DualConv2d: the filter is larger than the padded input");
  }
  const int64_t P = shape_.p(b.h), Q = shape_.q(b.w);
  const int64_t cmax = std::max(shape_.c1, shape_.c2);
  if (int64_t(b.h) * b.w > std::numeric_limits<int>::max() ||
      P * Q > std::numeric_limits<int>::max() ||
      int64_t(b.n) * std::max<int64_t>(cmax, shape_.k) > std::numeric_limits<int>::max() / 2 ||
      double(b.n) * shape_.k * P * Q > 4e18 || double(b.n) * cmax * b.h * b.w > 4e18) {
    throw std::invalid_argument("DualConv2d: tensor too large to index");
  }
}

BatchShape DualConv2d::check_inputs(const InputTensor& rgb, const InputTensor& depth) const {
  auto dims = [](const InputTensor& t) {
    return "[" + std::to_string(t.n) + ", " + std::to_string(t.c) + ", " + std::to_string(t.h) +
           ", " + std::to_string(t.w) + "]";
  };
  for (const InputTensor* t : {&rgb, &depth}) {
    if (t->n <= 0 || t->c <= 0 || t->h <= 0 || t->w <= 0) {
      throw std::invalid_argument("DualConv2d: empty input tensor " + dims(*t));
    }
    if (t->data == nullptr) throw std::invalid_argument("DualConv2d: null input pointer");
  }
  if (rgb.n != depth.n || rgb.h != depth.h || rgb.w != depth.w) {
    throw std::invalid_argument("DualConv2d: the streams' batch or spatial sizes differ: rgb " +
                                dims(rgb) + " vs depth " + dims(depth));
  }
  if (rgb.c != shape_.c1 || depth.c != shape_.c2) {
    throw std::invalid_argument("DualConv2d: expected " + std::to_string(shape_.c1) + " and " +
                                std::to_string(shape_.c2) + " input channels, got rgb " +
                                dims(rgb) + " and depth " + dims(depth));
  }
  const BatchShape b{rgb.n, rgb.h, rgb.w};
  check_batch(b);
  return b;
}

size_t DualConv2d::output_bytes(const BatchShape& b) const {
  check_batch(b);
  return size_t(b.n) * shape_.k * shape_.p(b.h) * shape_.q(b.w) *
         (out_type_ == OutType::kBf16 ? 2 : 4);
}

void DualConv2d::check_fits_in_memory(const BatchShape& b, size_t extra_bytes) const {
  const double need = 2.0 * double(output_bytes(b)) + double(extra_bytes);
  const double free_bytes = double(gpu100::free_device_memory());
  if (need > free_bytes) {
    throw std::invalid_argument("DualConv2d: the outputs need " +
                                std::to_string(need / double(1 << 30)) + " GiB but only " +
                                std::to_string(free_bytes / double(1 << 30)) +
                                " GiB of device memory is free");
  }
}

void DualConv2d::forward(const InputTensor& rgb, const InputTensor& depth, void* out1, void* out2,
                         cudaStream_t stream) {
  const BatchShape b = check_inputs(rgb, depth);
  if (out1 == nullptr || out2 == nullptr) throw std::invalid_argument("DualConv2d: null output");
  if (!state_->s[0].set || !state_->s[1].set) {
    throw std::invalid_argument("DualConv2d: set_params was not called for both streams");
  }
  if (impl_ == Impl::kLearner && (learner_ == nullptr || learner_->launch == nullptr)) {
    throw std::invalid_argument("DualConv2d: a learner's kernel is chosen by its name");
  }
  const ImplInfo& info = impl_ == Impl::kLearner ? *learner_ : info_of(impl_);
  if (out_type_ == OutType::kBf16 && !info.bf16_output) {
    throw NotAvailable(std::string(info.name) + " writes fp32 only");
  }
  const int P = shape_.p(b.h), Q = shape_.q(b.w);
  const int act = static_cast<int>(act_);
  const bool fold = bn_mode_ == BnMode::kFolded;
  const InputTensor* in[2] = {&rgb, &depth};
  void* out[2] = {out1, out2};

  detail::DualArgs a;
  a.n = b.n, a.h = b.h, a.w = b.w, a.k = shape_.k, a.r = shape_.r, a.sw = shape_.s;
  a.stride = shape_.stride, a.pad = shape_.pad, a.p = P, a.q = Q, a.act = act;
  a.bf16 = out_type_ == OutType::kBf16;
  for (int i = 0; i < 2; ++i) {
    State::Stream& st = state_->s[i];
    a.s[i].x = in[i]->data;
    a.s[i].c = shape_.c(i);
    a.s[i].w = fold ? st.wf.data() : st.w.data();
    a.s[i].alpha = fold ? st.ones.data() : st.scale.data();
    a.s[i].beta = st.beta.data();
    a.s[i].y = out[i];
  }

  switch (impl_) {
    case Impl::kDualNaive:
      detail::launch_dual_naive(a, stream);
      return;
    case Impl::kDualHalo:
      detail::launch_dual_halo(a, stream);
      return;
    case Impl::kDualRegblock:
      detail::launch_dual_regblock(a, stream);
      return;
    case Impl::kDualStoreBound:
      detail::launch_dual_store_bound(a, stream);
      return;
    case Impl::kDualIgemm:
      detail::launch_dual_igemm(a, stream);
      return;
    case Impl::kLearner:
      learner_->launch(a, stream);
      return;
    default:
      break;
  }

  // The per-stream paths: one convolution per stream, then (except cudnn_fused) the epilogue as
  // separate passes over the output, as a framework runs Conv2d, BatchNorm2d and ReLU modules.
  const bool two = impl_ == Impl::kCudnnTwoStreams || impl_ == Impl::kOwnTwoStreams;
  const bool use_cudnn =
      impl_ == Impl::kCudnnSeq || impl_ == Impl::kCudnnTwoStreams || impl_ == Impl::kCudnnFused;
  if (use_cudnn) {
    state_->cudnn_for(0);
    state_->cudnn_for(1);
  }
  cudaStream_t st_of[2] = {stream, stream};
  if (two) {
    state_->make_streams();
    CUDA_CHECK(cudaEventRecord(state_->fork, stream));
    for (int i = 0; i < 2; ++i) {
      CUDA_CHECK(cudaStreamWaitEvent(state_->side[i], state_->fork, 0));
      st_of[i] = state_->side[i];
    }
  }
  for (int i = 0; i < 2; ++i) {
    State::Stream& st = state_->s[i];
    float* y = static_cast<float*>(out[i]);
    // One stream's convolution, as day08 describes it (for cuDNN and for day08's own kernels).
    day08::ConvShape cs;
    cs.n = b.n, cs.c = shape_.c(i), cs.h = b.h, cs.w = b.w, cs.k = shape_.k, cs.r = shape_.r;
    cs.s = shape_.s, cs.stride = shape_.stride, cs.pad = shape_.pad, cs.dilation = 1;
    const int64_t pq = int64_t(P) * Q;
    bool affine_done = false;
    if (impl_ == Impl::kCudnnFused) {
      // BN folded into W and b (whatever the layer's BnMode): y = act(conv(x, W') + b').
      state_->cudnn_for(i).conv_bias_act(cs, a.s[i].x, st.wf.data(), st.beta.data(),
                                         act_ == Activation::kRelu ? 1 : 0, y, st_of[i]);
      if (act_ == Activation::kSilu)
        detail::launch_activation(y, b.n * shape_.k * pq, act, st_of[i]);
      continue;
    }
    if (use_cudnn) {
      state_->cudnn_for(i).conv(cs, a.s[i].x, a.s[i].w, y, st_of[i]);
    } else {
      // With alpha = 1 (no BN, or BN folded) the bias goes into day08's own epilogue.
      const bool bias_only = st.has_affine && (fold || !st.has_bn);
      day08::conv2d_forward(own_conv2d(cs), cs, a.s[i].x, a.s[i].w,
                            bias_only ? st.beta.data() : nullptr, y, st_of[i]);
      affine_done = bias_only;
    }
    if (st.has_affine && !affine_done) {
      detail::launch_affine(y, a.s[i].alpha, a.s[i].beta, b.n, shape_.k, pq, st_of[i]);
    }
    detail::launch_activation(y, int64_t(b.n) * shape_.k * pq, act, st_of[i]);
  }
  if (two) {
    for (int i = 0; i < 2; ++i) {
      CUDA_CHECK(cudaEventRecord(state_->join[i], state_->side[i]));
      CUDA_CHECK(cudaStreamWaitEvent(stream, state_->join[i], 0));
    }
  }
}

}  // namespace capstone
