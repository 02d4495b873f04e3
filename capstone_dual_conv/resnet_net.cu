// MC-ResNet18's first GPU path (resnet_net.hpp): fp32, sequential trunks, layers from day08 and
// day04 by linking, pools from resnet_pools.cu.
#include <algorithm>
#include <stdexcept>
#include <string>

#include "common/cuda_check.hpp"
#include "common/device_info.hpp"
#include "common/math.hpp"
#include "conv.hpp"
#include "gemm.hpp"
#include "resnet_net.hpp"

namespace capstone::resnet {

namespace {

constexpr int kThreads = 256;

// y = relu(y + residual) (residual may be null): the epilogue of a conv whose bias day08 added.
__global__ void add_relu_kernel(float* y, const float* residual, int64_t count) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= count) return;
  const float v = y[i] + (residual != nullptr ? residual[i] : 0.f);
  y[i] = fmaxf(v, 0.f);
}

// Every row of the logits starts as the FC's bias; the two GEMMs then add onto it (beta = 1).
__global__ void fill_rows_kernel(float* y, const float* row, int rows, int cols) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < rows * cols) y[i] = row[i % cols];
}

day08::ConvShape conv_shape(const ConvSpec& s, int n, int h, int w) {
  day08::ConvShape cs;
  cs.n = n, cs.c = s.c_in, cs.h = h, cs.w = w, cs.k = s.c_out, cs.r = s.r, cs.s = s.r;
  cs.stride = s.stride, cs.pad = s.pad, cs.dilation = 1;
  return cs;
}

}  // namespace

McResNet18::DeviceTrunk McResNet18::upload(const Trunk& t, const TrunkWeights& wts) {
  auto layer = [](const ConvBn& cb) {
    const FoldedConv f = fold(cb);
    Layer l{f.spec, gpu100::DeviceBuffer<float>(f.w.size()),
            gpu100::DeviceBuffer<float>(f.b.size())};
    l.w.upload(f.w);
    l.b.upload(f.b);
    return l;
  };
  DeviceTrunk dt;
  dt.t = t;
  dt.stem = layer(wts.stem);
  for (size_t i = 0; i < t.blocks.size(); ++i) {
    dt.conv1.push_back(layer(wts.conv1[i]));
    dt.conv2.push_back(layer(wts.conv2[i]));
    dt.shortcut.push_back(t.blocks[i].downsample ? layer(wts.shortcut[i]) : Layer{});
  }
  return dt;
}

McResNet18::McResNet18(const McWeights& weights)
    : rgb_(upload(resnet18_trunk(3), weights.rgb)),
      depth_(upload(resnet18_trunk(1), weights.depth)),
      classes_(weights.classes) {
  if (weights.fc_w.size() != size_t(classes_) * 1024 || weights.fc_b.size() != size_t(classes_)) {
    throw std::invalid_argument("McResNet18: the FC weights do not match 1024 -> classes");
  }
  // W [classes, 1024] -> W^T split by trunk: [512, classes] each (row-major, for day04::gemm).
  std::vector<float> t_rgb(size_t(512) * classes_), t_depth(size_t(512) * classes_);
  for (int j = 0; j < classes_; ++j)
    for (int i = 0; i < 512; ++i) {
      t_rgb[size_t(i) * classes_ + j] = weights.fc_w[size_t(j) * 1024 + i];
      t_depth[size_t(i) * classes_ + j] = weights.fc_w[size_t(j) * 1024 + 512 + i];
    }
  fc_rgb_t_ = gpu100::DeviceBuffer<float>(t_rgb.size());
  fc_depth_t_ = gpu100::DeviceBuffer<float>(t_depth.size());
  fc_b_ = gpu100::DeviceBuffer<float>(size_t(classes_));
  fc_rgb_t_.upload(t_rgb);
  fc_depth_t_.upload(t_depth);
  fc_b_.upload(weights.fc_b);
}

void McResNet18::plan(int n, int h, int w) {
  if (n < 1 || h < 1 || w < 1) throw std::invalid_argument("McResNet18: an empty batch");
  if (n == plan_n_ && h == plan_h_ && w == plan_w_) return;
  // The largest activation of the trunk: the stem's output at most sizes, a deep layer's (more
  // channels, the map already 1 x 1) at tiny ones.
  const Trunk& t = rgb_.t;
  int hh = t.stem.out(h), ww = t.stem.out(w);
  size_t largest = size_t(t.stem.c_out) * hh * ww;
  hh = t.pool_out(hh), ww = t.pool_out(ww);
  for (const BasicBlock& b : t.blocks) {
    hh = b.conv1.out(hh), ww = b.conv1.out(ww);
    largest = std::max(largest, size_t(b.conv1.c_out) * hh * ww);
  }
  largest *= size_t(n);
  const size_t bytes = 4 * largest * sizeof(float) + 2 * size_t(n) * 512 * sizeof(float);
  if (bytes + (size_t(256) << 20) > gpu100::free_device_memory()) {
    throw std::invalid_argument("McResNet18: N=" + std::to_string(n) + " at " + std::to_string(h) +
                                "x" + std::to_string(w) + " needs " + std::to_string(bytes >> 20) +
                                " MiB of activations; not enough device memory is free");
  }
  for (auto& a : act_) a = gpu100::DeviceBuffer<float>(largest);
  for (auto& f : feat_) f = gpu100::DeviceBuffer<float>(size_t(n) * 512);
  plan_n_ = n, plan_h_ = h, plan_w_ = w;
}

size_t McResNet18::arena_bytes() const {
  return act_[0].bytes() * 4 + feat_[0].bytes() * 2;
}

void McResNet18::trunk_forward(const DeviceTrunk& dt, const float* x, int n, int h, int w,
                               float* features, cudaStream_t stream) {
  const Trunk& t = dt.t;
  auto conv = [&](const Layer& l, const float* in, int hh, int ww, float* out) {
    day08::conv2d_forward("best_fp32", conv_shape(l.spec, n, hh, ww), in, l.w.data(), l.b.data(),
                          out, stream);
  };
  auto add_relu = [&](float* y, const float* residual, int64_t count) {
    add_relu_kernel<<<unsigned(gpu100::ceil_div<int64_t>(count, kThreads)), kThreads, 0, stream>>>(
        y, residual, count);
    CUDA_CHECK_LAST();
  };
  float* buf[4] = {act_[0].data(), act_[1].data(), act_[2].data(), act_[3].data()};
  conv(dt.stem, x, h, w, buf[0]);
  h = t.stem.out(h), w = t.stem.out(w);
  add_relu(buf[0], nullptr, int64_t(n) * t.stem.c_out * h * w);
  maxpool_nchw(buf[0], buf[1], n, t.stem.c_out, h, w, t.pool_k, t.pool_stride, t.pool_pad, stream);
  h = t.pool_out(h), w = t.pool_out(w);
  int cur = 1;
  for (size_t i = 0; i < t.blocks.size(); ++i) {
    const BasicBlock& b = t.blocks[i];
    // Three other buffers: the block's middle, its shortcut (when it has a conv) and its output.
    int others[3], k = 0;
    for (int j = 0; j < 4; ++j) {
      if (j != cur) others[k++] = j;
    }
    const int mid = others[0], out = others[1], sc = b.downsample ? others[2] : cur;
    if (b.downsample) conv(dt.shortcut[i], buf[cur], h, w, buf[sc]);
    conv(dt.conv1[i], buf[cur], h, w, buf[mid]);
    const int h1 = b.conv1.out(h), w1 = b.conv1.out(w);
    add_relu(buf[mid], nullptr, int64_t(n) * b.conv1.c_out * h1 * w1);
    conv(dt.conv2[i], buf[mid], h1, w1, buf[out]);
    add_relu(buf[out], buf[sc], int64_t(n) * b.conv2.c_out * h1 * w1);
    cur = out, h = h1, w = w1;
  }
  global_avgpool_nchw(buf[cur], features, n, t.features, h, w, stream);
}

void McResNet18::forward(const float* rgb, const float* depth, int n, int h, int w, float* logits,
                         cudaStream_t stream) {
  if (rgb == nullptr || depth == nullptr || logits == nullptr) {
    throw std::invalid_argument("McResNet18::forward: a null pointer");
  }
  plan(n, h, w);
  trunk_forward(rgb_, rgb, n, h, w, feat_[0].data(), stream);
  trunk_forward(depth_, depth, n, h, w, feat_[1].data(), stream);
  fill_rows_kernel<<<unsigned(gpu100::ceil_div(n * classes_, kThreads)), kThreads, 0, stream>>>(
      logits, fc_b_.data(), n, classes_);
  CUDA_CHECK_LAST();
  const day04::GemmShape s{n, classes_, 512};
  day04::gemm("v8_autotuned", s, 1.f, feat_[0].data(), fc_rgb_t_.data(), 1.f, logits, stream);
  day04::gemm("v8_autotuned", s, 1.f, feat_[1].data(), fc_depth_t_.data(), 1.f, logits, stream);
}

}  // namespace capstone::resnet
