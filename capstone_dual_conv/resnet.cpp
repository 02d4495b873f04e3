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

double resnet18_flops(int h, int w, int classes) {
  return trunk_flops(resnet18_trunk(3), h, w) + 2.0 * 512 * classes;
}

double mc_resnet18_flops(int h, int w, int classes) {
  return trunk_flops(resnet18_trunk(3), h, w) + trunk_flops(resnet18_trunk(1), h, w) +
         2.0 * 1024 * classes;
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
