// capstone CPU tests: the double reference against hand-worked values, the layer's validation
// (every check runs before any GPU call), the registry and the tolerances. No GPU needed.
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/catch.hpp"
#include "dual_conv.hpp"

using capstone::Activation;
using capstone::BatchShape;
using capstone::DualConv2d;
using capstone::DualConvShape;
using capstone::InputTensor;
using capstone::StreamParams;

namespace {

// One 3 x 3 channel, values 1..9, a 3 x 3 filter of ones, padding 1: each output is the sum of
// its 3 x 3 neighbourhood.
DualConvShape one_channel() {
  DualConvShape s;
  s.c1 = 1, s.c2 = 1, s.k = 1, s.r = 3, s.s = 3, s.stride = 1, s.pad = 1;
  return s;
}
const std::vector<float> kX = {1, 2, 3, 4, 5, 6, 7, 8, 9};

}  // namespace

TEST_CASE("conv_stream_cpu sums neighbourhoods by hand", "[cpu]") {
  StreamParams prm;
  prm.weight.assign(9, 1.f);
  const auto y =
      capstone::conv_stream_cpu(one_channel(), 0, BatchShape{1, 3, 3}, kX, prm, Activation::kNone);
  CHECK(y == std::vector<float>{12, 21, 16, 27, 45, 33, 24, 39, 28});
}

TEST_CASE("conv_stream_cpu: stride 2, no padding, two channels, K = 2", "[cpu]") {
  DualConvShape s;
  s.c1 = 2, s.k = 2, s.r = 2, s.s = 2, s.stride = 2, s.pad = 0;
  // Two 4 x 4 channels: channel 0 = 0..15, channel 1 = 100 everywhere.
  std::vector<float> x(32);
  for (int i = 0; i < 16; ++i) x[i] = float(i), x[16 + i] = 100.f;
  StreamParams prm;
  // Filter 0: picks the top-left of each window in channel 0. Filter 1: sums channel 1's window.
  prm.weight = {1, 0, 0, 0, 0, 0, 0, 0, /* k = 1 */ 0, 0, 0, 0, 1, 1, 1, 1};
  CHECK(s.p(4) == 2);
  CHECK(s.q(4) == 2);
  const auto y = capstone::conv_stream_cpu(s, 0, BatchShape{1, 4, 4}, x, prm, Activation::kNone);
  CHECK(y == std::vector<float>{0, 2, 8, 10, 400, 400, 400, 400});
}

TEST_CASE("the epilogue: bias, BatchNorm, ReLU and SiLU by hand", "[cpu]") {
  StreamParams prm;
  prm.weight.assign(9, 1.f);
  prm.bias = {-20.f};
  prm.has_bn = true;
  prm.bn.gamma = {2.f}, prm.bn.beta = {1.f}, prm.bn.mean = {5.f}, prm.bn.var = {3.f};
  prm.bn.eps = 1.f;  // sqrt(var + eps) = 2, so BN(v) = (v - 5) / 2 * 2 + 1 = v - 4
  const BatchShape b{1, 3, 3};
  // Centre: 45 - 20 = 25, BN -> 21. Corner: 12 - 20 = -8, BN -> -12.
  const auto lin = capstone::conv_stream_cpu(one_channel(), 0, b, kX, prm, Activation::kNone);
  CHECK(lin[4] == 21.f);
  CHECK(lin[0] == -12.f);
  const auto relu = capstone::conv_stream_cpu(one_channel(), 0, b, kX, prm, Activation::kRelu);
  CHECK(relu[4] == 21.f);
  CHECK(relu[0] == 0.f);
  const auto silu = capstone::conv_stream_cpu(one_channel(), 0, b, kX, prm, Activation::kSilu);
  CHECK(silu[0] == Catch::Approx(-12.0 / (1.0 + std::exp(12.0))));
  CHECK(silu[4] == Catch::Approx(21.0 / (1.0 + std::exp(-21.0))));
  CHECK(capstone::conv_point_cpu(one_channel(), 0, b, kX.data(), prm, Activation::kNone, 0, 0, 1,
                                 1) == 21.0);
}

TEST_CASE("the registry drives use_kernel", "[cpu]") {
  const auto& impls = capstone::implementations();
  for (const char* name : {"cudnn_seq", "own_seq", "dual_naive", "dual_store_bound"}) {
    CHECK(capstone::find_implementation(name) != nullptr);  // contains; more may be added
  }
  for (size_t i = 0; i < impls.size(); ++i) {
    REQUIRE(capstone::find_implementation(impls[i].name) == &impls[i]);
    for (size_t j = i + 1; j < impls.size(); ++j)
      CHECK(std::string(impls[i].name) != impls[j].name);
  }
  CHECK(capstone::find_implementation("v99") == nullptr);
  DualConv2d layer(DualConvShape{});
  layer.use_kernel("dual_igemm");
  CHECK(layer.kernel() == capstone::Impl::kDualIgemm);
  CHECK_THROWS_AS(layer.use_kernel("v99"), std::invalid_argument);
  CHECK(capstone::parse_activation("silu") == Activation::kSilu);
  CHECK_THROWS_AS(capstone::parse_activation("gelu"), std::invalid_argument);
}

TEST_CASE("bad layers and bad inputs are rejected before any GPU call", "[cpu]") {
  DualConvShape bad;
  bad.k = 0;
  CHECK_THROWS_AS(DualConv2d(bad), std::invalid_argument);
  bad = DualConvShape{};
  bad.stride = 0;
  CHECK_THROWS_AS(DualConv2d(bad), std::invalid_argument);
  bad = DualConvShape{};
  bad.pad = -1;
  CHECK_THROWS_AS(DualConv2d(bad), std::invalid_argument);

  DualConv2d layer(DualConvShape{});  // 3 + 1 -> 64, 3 x 3, pad 1
  float dummy = 0;
  const InputTensor rgb{&dummy, 2, 3, 16, 20};
  // The streams' batch or spatial sizes differ.
  CHECK_THROWS_AS(layer.check_inputs(rgb, InputTensor{&dummy, 3, 1, 16, 20}),
                  std::invalid_argument);
  CHECK_THROWS_AS(layer.check_inputs(rgb, InputTensor{&dummy, 2, 1, 15, 20}),
                  std::invalid_argument);
  CHECK_THROWS_AS(layer.check_inputs(rgb, InputTensor{&dummy, 2, 1, 16, 21}),
                  std::invalid_argument);
  // Wrong channel counts, empty tensors, null data.
  CHECK_THROWS_AS(layer.check_inputs(rgb, InputTensor{&dummy, 2, 2, 16, 20}),
                  std::invalid_argument);
  CHECK_THROWS_AS(
      layer.check_inputs(InputTensor{&dummy, 0, 3, 16, 20}, InputTensor{&dummy, 0, 1, 16, 20}),
      std::invalid_argument);
  CHECK_THROWS_AS(
      layer.check_inputs(InputTensor{&dummy, 2, 3, 0, 20}, InputTensor{&dummy, 2, 1, 0, 20}),
      std::invalid_argument);
  CHECK_THROWS_AS(
      layer.check_inputs(InputTensor{nullptr, 2, 3, 16, 20}, InputTensor{&dummy, 2, 1, 16, 20}),
      std::invalid_argument);
  const BatchShape ok = layer.check_inputs(rgb, InputTensor{&dummy, 2, 1, 16, 20});
  CHECK(ok.n == 2);
  CHECK(ok.h == 16);
  // forward checks its inputs first, so this throws without touching the GPU.
  CHECK_THROWS_AS(layer.forward(rgb, InputTensor{&dummy, 2, 1, 15, 20}, &dummy, &dummy),
                  std::invalid_argument);
  // A filter larger than the padded input, and sizes past int32 indexing.
  DualConvShape big_filter;
  big_filter.r = big_filter.s = 7, big_filter.pad = 0;
  CHECK_THROWS_AS(DualConv2d(big_filter).check_batch(BatchShape{1, 5, 5}), std::invalid_argument);
  CHECK_THROWS_AS(layer.check_batch(BatchShape{1, 1 << 16, 1 << 16}), std::invalid_argument);
  CHECK_THROWS_AS(layer.check_batch(BatchShape{-1, 4, 4}), std::invalid_argument);
  // Output bytes: N K P Q floats per stream.
  CHECK(layer.output_bytes(BatchShape{8, 416, 544}) == size_t(8) * 64 * 416 * 544 * 4);
  layer.set_output_type(capstone::OutType::kBf16);
  CHECK(layer.output_bytes(BatchShape{8, 416, 544}) == size_t(8) * 64 * 416 * 544 * 2);
}

TEST_CASE("set_params rejects wrong sizes and negative variances before uploading", "[cpu]") {
  DualConv2d layer(DualConvShape{});
  StreamParams prm;
  prm.weight.assign(64 * 3 * 9 - 1, 0.5f);
  CHECK_THROWS_AS(layer.set_params(0, prm), std::invalid_argument);
  prm.weight.assign(64 * 3 * 9, 0.5f);
  prm.bias.assign(63, 0.f);
  CHECK_THROWS_AS(layer.set_params(0, prm), std::invalid_argument);
  prm.bias.clear();
  prm.has_bn = true;
  prm.bn.gamma.assign(64, 1.f), prm.bn.beta.assign(64, 0.f), prm.bn.mean.assign(64, 0.f);
  prm.bn.var.assign(64, -1.f);
  CHECK_THROWS_AS(layer.set_params(0, prm), std::invalid_argument);
  CHECK_THROWS_AS(layer.set_params(2, prm), std::invalid_argument);
}

TEST_CASE("tolerances grow with C R S and with bf16 output", "[cpu]") {
  DualConvShape stem, deep;
  deep.c1 = deep.c2 = 64;
  CHECK(capstone::abs_tolerance(stem, capstone::OutType::kFp32) <
        capstone::abs_tolerance(deep, capstone::OutType::kFp32));
  CHECK(capstone::abs_tolerance(deep, capstone::OutType::kFp32) < 2e-3);
  CHECK(capstone::rel_tolerance(capstone::OutType::kBf16) >
        capstone::rel_tolerance(capstone::OutType::kFp32));
}
