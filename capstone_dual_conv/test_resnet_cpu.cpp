// capstone CPU tests of MC-ResNet18's pieces: the layer list and its FLOP count, the pools' CPU
// references on values worked out by hand, and their argument checks.
#include <cmath>
#include <stdexcept>
#include <vector>

#include "common/catch.hpp"
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
  CHECK(resnet18_flops(224, 224) == Catch::Approx(3.628e9).epsilon(1e-3));
  CHECK(mc_resnet18_flops(416, 544) == Catch::Approx(32.008e9).epsilon(1e-3));
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
