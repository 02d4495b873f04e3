// The ResNet-18 layer list, its FLOP count, the pools' argument checks and CPU references.
#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>

#include "resnet.hpp"

namespace capstone::resnet {

Trunk resnet18_trunk(int in_channels) {
  Trunk t;
  t.stem = {in_channels, 64, 7, 2, 3};
  int c = 64;
  for (const auto& [c_out, stride] : {std::pair{64, 1}, {128, 2}, {256, 2}, {512, 2}}) {
    for (int b = 0; b < 2; ++b) {
      const int s = b == 0 ? stride : 1;
      BasicBlock blk;
      blk.conv1 = {c, c_out, 3, s, 1};
      blk.conv2 = {c_out, c_out, 3, 1, 1};
      blk.downsample = s != 1 || c != c_out;
      blk.shortcut = {c, c_out, 1, s, 0};
      t.blocks.push_back(blk);
      c = c_out;
    }
  }
  return t;
}

namespace {
double conv_flops(const ConvSpec& cv, int h, int w) {
  return 2.0 * cv.c_in * cv.c_out * cv.r * cv.r * double(cv.out(h)) * cv.out(w);
}
}  // namespace

double trunk_flops(const Trunk& t, int h, int w) {
  double f = conv_flops(t.stem, h, w);
  h = t.pool_out(t.stem.out(h));
  w = t.pool_out(t.stem.out(w));
  for (const BasicBlock& b : t.blocks) {
    f += conv_flops(b.conv1, h, w);
    const int h1 = b.conv1.out(h), w1 = b.conv1.out(w);
    f += conv_flops(b.conv2, h1, w1);
    if (b.downsample) f += conv_flops(b.shortcut, h, w);
    h = h1, w = w1;
  }
  return f;
}

const char* to_string(Model m) {
  return m == Model::kMcResNet18 ? "mc_resnet18" : "resnet18";
}

Model parse_model(const std::string& name) {
  if (name == "mc_resnet18") return Model::kMcResNet18;
  if (name == "resnet18") return Model::kResNet18;
  throw std::invalid_argument("unknown model '" + name + "' (mc_resnet18 or resnet18)");
}

std::vector<int> trunk_channels(Model m) {
  return m == Model::kMcResNet18 ? std::vector<int>{3, 1} : std::vector<int>{3};
}

int default_classes(Model m) {
  return m == Model::kMcResNet18 ? 15 : 1000;
}

double net_flops(Model m, int h, int w, int classes) {
  double f = 0;
  for (int c : trunk_channels(m)) f += trunk_flops(resnet18_trunk(c), h, w) + 2.0 * 512 * classes;
  return f;
}

double logits_tolerance(gpu100::Precision p) {
  return p == gpu100::Precision::kFp32 ? 1e-4 : p == gpu100::Precision::kTf32 ? 5e-3 : 3e-2;
}

namespace {
void check_size(const std::string& name, size_t got, size_t want) {
  if (got != want) {
    throw std::invalid_argument("weights: " + name + " has " + std::to_string(got) +
                                " values, the model needs " + std::to_string(want));
  }
}
void check_conv_bn(const std::string& name, const ConvBn& cb, const ConvSpec& spec) {
  check_size(name + ".weight", cb.w.size(), size_t(spec.c_out) * spec.c_in * spec.r * spec.r);
  for (const auto* v : {&cb.gamma, &cb.beta, &cb.mean, &cb.var}) {
    check_size(name + " BN", v->size(), size_t(spec.c_out));
  }
}
}  // namespace

void check_net_weights(const NetWeights& wts) {
  const std::vector<int> channels = trunk_channels(wts.model);
  if (wts.trunks.size() != channels.size()) {
    throw std::invalid_argument("weights: " + std::to_string(wts.trunks.size()) +
                                " trunks, the model has " + std::to_string(channels.size()));
  }
  for (size_t i = 0; i < channels.size(); ++i) {
    const Trunk t = resnet18_trunk(channels[i]);
    const TrunkWeights& tw = wts.trunks[i];
    const std::string tn = "trunk " + std::to_string(i);
    check_conv_bn(tn + " stem", tw.stem, t.stem);
    check_size(tn + " blocks", tw.conv1.size(), t.blocks.size());
    check_size(tn + " blocks", tw.conv2.size(), t.blocks.size());
    check_size(tn + " blocks", tw.shortcut.size(), t.blocks.size());
    for (size_t b = 0; b < t.blocks.size(); ++b) {
      const std::string bn = tn + " block " + std::to_string(b);
      check_conv_bn(bn + " conv1", tw.conv1[b], t.blocks[b].conv1);
      check_conv_bn(bn + " conv2", tw.conv2[b], t.blocks[b].conv2);
      if (t.blocks[b].downsample)
        check_conv_bn(bn + " shortcut", tw.shortcut[b], t.blocks[b].shortcut);
    }
  }
  if (wts.classes < 1) throw std::invalid_argument("weights: no classes");
  check_size("fc.weight", wts.fc_w.size(), size_t(wts.classes) * wts.features());
  check_size("fc.bias", wts.fc_b.size(), size_t(wts.classes));
}

void check_pool_args(int n, int c, int h, int w, int k, int s, int p) {
  if (n < 1 || c < 1 || h < 1 || w < 1 || k < 1 || s < 1 || p < 0) {
    throw std::invalid_argument("pool: sizes, window and stride must be positive, padding >= 0");
  }
  if (p >= k) throw std::invalid_argument("pool: padding must be smaller than the window");
  if (h + 2 * p < k || w + 2 * p < k) {
    throw std::invalid_argument("pool: the window " + std::to_string(k) + " is larger than the " +
                                std::to_string(h) + " x " + std::to_string(w) + " padded input");
  }
  if (int64_t(n) * c * h * w >= (int64_t(1) << 31)) {
    throw std::invalid_argument("pool: at most 2^31 - 1 input elements");
  }
}

std::vector<double> maxpool_cpu(const std::vector<float>& x, int n, int c, int h, int w, int k,
                                int s, int p, bool nhwc) {
  check_pool_args(n, c, h, w, k, s, p);
  const int P = (h + 2 * p - k) / s + 1, Q = (w + 2 * p - k) / s + 1;
  auto at = [&](int ni, int ci, int hi, int wi, int H, int W) -> size_t {
    return nhwc ? ((size_t(ni) * H + hi) * W + wi) * c + ci
                : ((size_t(ni) * c + ci) * H + hi) * W + wi;
  };
  std::vector<double> y(size_t(n) * c * P * Q);
  for (int ni = 0; ni < n; ++ni)
    for (int ci = 0; ci < c; ++ci)
      for (int pi = 0; pi < P; ++pi)
        for (int qi = 0; qi < Q; ++qi) {
          double m = -std::numeric_limits<double>::infinity();
          for (int a = 0; a < k; ++a)
            for (int b = 0; b < k; ++b) {
              const int hi = pi * s - p + a, wi = qi * s - p + b;
              if (hi >= 0 && hi < h && wi >= 0 && wi < w)
                m = std::max(m, double(x[at(ni, ci, hi, wi, h, w)]));
            }
          y[at(ni, ci, pi, qi, P, Q)] = m;
        }
  return y;
}

std::vector<double> global_avgpool_cpu(const std::vector<float>& x, int n, int c, int h, int w,
                                       bool nhwc) {
  check_pool_args(n, c, h, w, 1, 1, 0);
  std::vector<double> y(size_t(n) * c, 0.0);
  for (int ni = 0; ni < n; ++ni)
    for (int ci = 0; ci < c; ++ci) {
      double sum = 0;
      for (int i = 0; i < h * w; ++i) {
        sum += x[nhwc ? (size_t(ni) * h * w + i) * c + ci : (size_t(ni) * c + ci) * h * w + i];
      }
      y[size_t(ni) * c + ci] = sum / (double(h) * w);
    }
  return y;
}

}  // namespace capstone::resnet
