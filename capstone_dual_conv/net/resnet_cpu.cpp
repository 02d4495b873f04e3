// MC-ResNet18's weights and its CPU reference forward: fp32 activations, double sums, BN folded.
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <thread>
#include <vector>

#include "common/random.hpp"
#include "resnet.hpp"

namespace capstone::resnet {

FoldedConv fold(const ConvBn& layer, double eps) {
  const ConvSpec& cv = layer.spec;
  const size_t per_k = size_t(cv.c_in) * cv.r * cv.r;
  if (layer.w.size() != per_k * cv.c_out || layer.gamma.size() != size_t(cv.c_out) ||
      layer.beta.size() != size_t(cv.c_out) || layer.mean.size() != size_t(cv.c_out) ||
      layer.var.size() != size_t(cv.c_out)) {
    throw std::invalid_argument("fold: the weights do not match the layer's shape");
  }
  FoldedConv f{cv, std::vector<float>(layer.w.size()), std::vector<float>(cv.c_out)};
  for (int k = 0; k < cv.c_out; ++k) {
    if (!(layer.var[k] >= 0)) throw std::invalid_argument("fold: a BN variance is negative");
    const double scale = double(layer.gamma[k]) / std::sqrt(double(layer.var[k]) + eps);
    for (size_t i = 0; i < per_k; ++i) {
      f.w[k * per_k + i] = static_cast<float>(layer.w[k * per_k + i] * scale);
    }
    f.b[k] = static_cast<float>(layer.beta[k] - layer.mean[k] * scale);
  }
  return f;
}

namespace {

// Normal(0, 1) from two of the project's uniform draws (Box-Muller), so the weights are the same
// on every platform.
float normal_at(uint64_t seed, uint64_t i) {
  const double u1 = gpu100::uniform_at(seed, 2 * i, 0.0, 1.0);
  const double u2 = gpu100::uniform_at(seed, 2 * i + 1, 0.0, 1.0);
  return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2));
}

ConvBn random_conv_bn(const ConvSpec& cv, uint64_t seed) {
  ConvBn l;
  l.spec = cv;
  const size_t count = size_t(cv.c_out) * cv.c_in * cv.r * cv.r;
  const double std_dev = std::sqrt(2.0 / (double(cv.c_in) * cv.r * cv.r));
  l.w.resize(count);
  for (size_t i = 0; i < count; ++i) l.w[i] = static_cast<float>(std_dev * normal_at(seed, i));
  l.gamma = gpu100::random_vector<float>(cv.c_out, seed + 1, 0.5, 1.5);
  l.beta = gpu100::random_vector<float>(cv.c_out, seed + 2, -0.1, 0.1);
  l.mean = gpu100::random_vector<float>(cv.c_out, seed + 3, -0.1, 0.1);
  l.var = gpu100::random_vector<float>(cv.c_out, seed + 4, 0.5, 1.5);
  return l;
}

// Runs body(k) for k in [0, count) on `threads` threads (0: the hardware's count).
template <class Body>
void parallel_for(int count, int threads, Body body) {
  if (threads <= 0) threads = std::max(1u, std::thread::hardware_concurrency());
  threads = std::min(threads, count);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      for (int k = t; k < count; k += threads) body(k);
    });
  }
  for (auto& th : pool) th.join();
}

std::vector<float> maxpool(const Trunk& t, const std::vector<float>& x, int n, int c, int h,
                           int w) {
  const std::vector<double> y =
      maxpool_cpu(x, n, c, h, w, t.pool_k, t.pool_stride, t.pool_pad, false);
  return std::vector<float>(y.begin(), y.end());
}

}  // namespace

TrunkWeights random_trunk_weights(const Trunk& t, uint64_t seed) {
  TrunkWeights wts;
  wts.stem = random_conv_bn(t.stem, seed);
  uint64_t s = seed;
  for (const BasicBlock& b : t.blocks) {
    wts.conv1.push_back(random_conv_bn(b.conv1, s += 16));
    wts.conv2.push_back(random_conv_bn(b.conv2, s += 16));
    wts.shortcut.push_back(b.downsample ? random_conv_bn(b.shortcut, s += 16) : ConvBn{});
  }
  return wts;
}

NetWeights random_net_weights(Model model, uint64_t seed, int classes) {
  NetWeights m;
  m.model = model;
  const std::vector<int> channels = trunk_channels(model);
  for (size_t i = 0; i < channels.size(); ++i) {
    m.trunks.push_back(random_trunk_weights(resnet18_trunk(channels[i]), seed + 100000 * i));
  }
  m.classes = classes > 0 ? classes : default_classes(model);
  const double bound = 1.0 / std::sqrt(double(m.features()));
  m.fc_w =
      gpu100::random_vector<float>(size_t(m.classes) * m.features(), seed + 200000, -bound, bound);
  m.fc_b = gpu100::random_vector<float>(size_t(m.classes), seed + 200001, -bound, bound);
  return m;
}

std::vector<float> conv_cpu(const FoldedConv& cv, const std::vector<float>& x, int n, int h, int w,
                            const std::vector<float>* residual, bool relu, int threads) {
  const ConvSpec& s = cv.spec;
  const int P = s.out(h), Q = s.out(w);
  if (P < 1 || Q < 1) throw std::invalid_argument("conv_cpu: the output would be empty");
  if (x.size() != size_t(n) * s.c_in * h * w) throw std::invalid_argument("conv_cpu: x's size");
  std::vector<float> y(size_t(n) * s.c_out * P * Q);
  if (residual != nullptr && residual->size() != y.size()) {
    throw std::invalid_argument("conv_cpu: the residual's size");
  }
  parallel_for(s.c_out, threads, [&](int k) {
    for (int ni = 0; ni < n; ++ni)
      for (int p = 0; p < P; ++p)
        for (int q = 0; q < Q; ++q) {
          double acc = cv.b[k];
          for (int c = 0; c < s.c_in; ++c) {
            const float* plane = x.data() + (size_t(ni) * s.c_in + c) * h * w;
            const float* filt = cv.w.data() + (size_t(k) * s.c_in + c) * s.r * s.r;
            for (int r = 0; r < s.r; ++r) {
              const int ih = p * s.stride - s.pad + r;
              if (ih < 0 || ih >= h) continue;
              for (int t = 0; t < s.r; ++t) {
                const int iw = q * s.stride - s.pad + t;
                if (iw >= 0 && iw < w)
                  acc += double(plane[size_t(ih) * w + iw]) * filt[r * s.r + t];
              }
            }
          }
          const size_t at = ((size_t(ni) * s.c_out + k) * P + p) * Q + q;
          if (residual != nullptr) acc += (*residual)[at];
          y[at] = static_cast<float>(relu ? std::max(acc, 0.0) : acc);
        }
  });
  return y;
}

std::vector<float> trunk_forward_cpu(const Trunk& t, const TrunkWeights& wts,
                                     const std::vector<float>& x, int n, int h, int w,
                                     int threads) {
  if (n < 1 || h < 1 || w < 1) throw std::invalid_argument("trunk_forward_cpu: an empty input");
  std::vector<float> a = conv_cpu(fold(wts.stem), x, n, h, w, nullptr, true, threads);
  h = t.stem.out(h), w = t.stem.out(w);
  a = maxpool(t, a, n, t.stem.c_out, h, w);
  h = t.pool_out(h), w = t.pool_out(w);
  for (size_t i = 0; i < t.blocks.size(); ++i) {
    const BasicBlock& b = t.blocks[i];
    const std::vector<float> shortcut =
        b.downsample ? conv_cpu(fold(wts.shortcut[i]), a, n, h, w, nullptr, false, threads) : a;
    const std::vector<float> mid = conv_cpu(fold(wts.conv1[i]), a, n, h, w, nullptr, true, threads);
    const int h1 = b.conv1.out(h), w1 = b.conv1.out(w);
    a = conv_cpu(fold(wts.conv2[i]), mid, n, h1, w1, &shortcut, true, threads);
    h = h1, w = w1;
  }
  const std::vector<double> f = global_avgpool_cpu(a, n, t.features, h, w, false);
  return std::vector<float>(f.begin(), f.end());
}

std::vector<float> net_forward_cpu(const NetWeights& wts,
                                   const std::vector<std::vector<float>>& inputs, int n, int h,
                                   int w, int threads) {
  check_net_weights(wts);
  const std::vector<int> channels = trunk_channels(wts.model);
  if (inputs.size() != channels.size()) {
    throw std::invalid_argument("net_forward_cpu: one input per trunk");
  }
  std::vector<std::vector<float>> features;
  for (size_t i = 0; i < channels.size(); ++i) {
    features.push_back(
        trunk_forward_cpu(resnet18_trunk(channels[i]), wts.trunks[i], inputs[i], n, h, w, threads));
  }
  const int f = wts.features();
  std::vector<float> logits(size_t(n) * wts.classes);
  for (int ni = 0; ni < n; ++ni)
    for (int j = 0; j < wts.classes; ++j) {
      double acc = wts.fc_b[j];
      for (size_t t = 0; t < features.size(); ++t)
        for (int i = 0; i < 512; ++i) {
          acc += double(wts.fc_w[size_t(j) * f + 512 * t + i]) * features[t][size_t(ni) * 512 + i];
        }
      logits[size_t(ni) * wts.classes + j] = static_cast<float>(acc);
    }
  return logits;
}

}  // namespace capstone::resnet
