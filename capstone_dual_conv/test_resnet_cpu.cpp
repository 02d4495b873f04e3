// capstone CPU tests of MC-ResNet18's pieces: the layer list and its FLOP count, the pools' CPU
// references on values worked out by hand, and their argument checks.
#include <cmath>
#include <stdexcept>
#include <vector>

#include "common/catch.hpp"
#include "common/random.hpp"
#include "resnet.hpp"

using namespace capstone::resnet;

TEST_CASE("resnet: the ResNet-18 trunk and its FLOP count", "[cpu]") {
  const Trunk t = resnet18_trunk(3);
  CHECK(t.stem.c_in == 3);
  CHECK(t.stem.out(224) == 112);
  CHECK(t.pool_out(112) == 56);
  REQUIRE(t.blocks.size() ==
          8);  // four stages of two BasicBlocks: the architecture, not a registry
  int downsamples = 0;
  for (const auto& b : t.blocks) downsamples += b.downsample ? 1 : 0;
  CHECK(downsamples == 3);
  CHECK(t.blocks.back().conv2.c_out == 512);
  // torchvision's resnet18 counts 1.81 G multiply-adds at 224 x 224: 3.63 GFLOP; two trunks at
  // 416 x 544 and the 1024 -> 15 FC: 32.0 GFLOP.
  CHECK(net_flops(Model::kResNet18, 224, 224, 1000) == Catch::Approx(3.628e9).epsilon(1e-3));
  CHECK(net_flops(Model::kMcResNet18, 416, 544, 15) == Catch::Approx(32.008e9).epsilon(1e-3));
  // Tiny inputs still give a 1 x 1 map at every layer.
  CHECK(trunk_flops(resnet18_trunk(1), 1, 1) > 0);
}

TEST_CASE("resnet: max pool and global average pool references, worked by hand", "[cpu]") {
  // One 3 x 4 plane: 3x3/2 with padding 1 gives a 2 x 2 map; padding never wins.
  const std::vector<float> x = {1,  -2, 3,  0,  //
                                -5, 6,  -7, 8,  //
                                9,  -1, 2,  -3};
  const auto y = maxpool_cpu(x, 1, 1, 3, 4, 3, 2, 1, false);
  REQUIRE(y.size() == 4);
  CHECK(y[0] == 6);                                 // rows 0-1, columns 0-1
  CHECK(y[1] == 8);                                 // rows 0-1, columns 1-3
  CHECK(y[2] == 9);                                 // rows 1-2, columns 0-1
  CHECK(y[3] == 8);                                 // rows 1-2, columns 1-3
  const std::vector<float> neg = {-4, -3, -2, -1};  // all negative: the result is not 0
  CHECK(maxpool_cpu(neg, 1, 1, 2, 2, 3, 2, 1, false)[0] == -1);
  // Two channels in NHWC: [h][w][c].
  const std::vector<float> nhwc = {1, 10, 2, 20, 3, 30, 4, 40};
  const auto avg = global_avgpool_cpu(nhwc, 1, 2, 2, 2, true);
  CHECK(avg[0] == Catch::Approx(2.5));
  CHECK(avg[1] == Catch::Approx(25.0));
  CHECK(global_avgpool_cpu(x, 1, 1, 3, 4, false)[0] == Catch::Approx(11.0 / 12));
}

TEST_CASE("resnet: bad pool arguments are rejected", "[cpu]") {
  CHECK_THROWS_AS(check_pool_args(0, 1, 4, 4, 3, 2, 1), std::invalid_argument);
  CHECK_THROWS_AS(check_pool_args(1, 1, 4, 4, 3, 0, 1), std::invalid_argument);
  CHECK_THROWS_AS(check_pool_args(1, 1, 4, 4, 3, 2, 3), std::invalid_argument);  // p >= k
  CHECK_THROWS_AS(check_pool_args(1, 1, 1, 1, 5, 1, 1), std::invalid_argument);  // window > input
  CHECK_NOTHROW(check_pool_args(1, 1, 1, 1, 3, 2, 1));
}

TEST_CASE("resnet: folding BN into the convolution changes nothing but rounding", "[cpu]") {
  const ConvSpec cv{3, 5, 3, 2, 1};
  const TrunkWeights wts = random_trunk_weights(resnet18_trunk(3), 11);
  ConvBn layer = wts.stem;  // a 7x7 conv: take its first channels' shape from cv instead
  layer.spec = cv;
  layer.w = gpu100::random_vector<float>(size_t(5) * 3 * 3 * 3, 12);
  layer.gamma.resize(5), layer.beta.resize(5), layer.mean.resize(5), layer.var.resize(5);
  const int n = 2, h = 9, w = 7;
  const auto x = gpu100::random_vector<float>(size_t(n) * 3 * h * w, 13);
  // Conv without bias, then BN by its definition, in double.
  FoldedConv plain{cv, layer.w, std::vector<float>(5, 0.f)};
  const auto raw = conv_cpu(plain, x, n, h, w, nullptr, false, 1);
  const auto folded = conv_cpu(fold(layer), x, n, h, w, nullptr, false, 1);
  const int P = cv.out(h), Q = cv.out(w);
  REQUIRE(raw.size() == folded.size());
  for (size_t i = 0; i < raw.size(); ++i) {
    const int k = int((i / (size_t(P) * Q)) % 5);
    const double bn =
        (raw[i] - layer.mean[k]) * layer.gamma[k] / std::sqrt(layer.var[k] + 1e-5) + layer.beta[k];
    REQUIRE(folded[i] == Catch::Approx(bn).margin(1e-5));
  }
  ConvBn bad = layer;
  bad.var[2] = -1.f;
  CHECK_THROWS_AS(fold(bad), std::invalid_argument);
}

TEST_CASE("resnet: the CPU forward is deterministic, per image, and thread-count free", "[cpu]") {
  const NetWeights wts = random_net_weights(Model::kMcResNet18, 7);
  const int h = 33, w = 47;
  const auto rgb = gpu100::random_vector<float>(size_t(2) * 3 * h * w, 21);
  const auto depth = gpu100::random_vector<float>(size_t(2) * 1 * h * w, 22);
  const auto logits = net_forward_cpu(wts, {rgb, depth}, 2, h, w, 2);
  REQUIRE(logits.size() == 2 * 15);
  for (float v : logits) REQUIRE(std::isfinite(v));
  CHECK(logits != std::vector<float>(30, logits[0]));  // not a constant
  // The same bits with one thread, and image 1 alone equals row 1 of the batch.
  CHECK(net_forward_cpu(wts, {rgb, depth}, 2, h, w, 1) == logits);
  const std::vector<float> rgb1(rgb.begin() + 3 * h * w, rgb.end());
  const std::vector<float> depth1(depth.begin() + h * w, depth.end());
  const auto one = net_forward_cpu(wts, {rgb1, depth1}, 1, h, w, 2);
  CHECK(std::vector<float>(logits.begin() + 15, logits.end()) == one);
  // A 1 x 1 input still runs (every layer keeps at least one pixel).
  CHECK(net_forward_cpu(wts, {std::vector<float>(3, 0.5f), std::vector<float>(1, 0.5f)}, 1, 1, 1, 1)
            .size() == 15);
}
