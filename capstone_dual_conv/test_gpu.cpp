// capstone GPU tests: every implementation against the double CPU reference at small awkward
// shapes (H, W not tile multiples; C = 1, 3, 5, 64; K = 1, 7, 20, 64; stride 2; padding 0; 1 x 1
// and 5 x 5 filters) with and without bias, BN (scale/shift and folded) and each activation, fp32
// and bf16 outputs; day08's library called directly; bad inputs; and, tagged [timing], every
// implementation against cuDNN at the benchmark shapes.
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/tags.hpp"
#include "conv.hpp"
#include "test_suite.hpp"

using namespace capstone_tests;  // with the capstone types it names

TEST_CASE("every implementation matches the CPU at awkward shapes and epilogues", "[gpu]") {
  GPU100_REQUIRE_GPU();
  uint64_t seed = 1000;
  for (const auto& impl : capstone::implementations()) {
    if (gpu100::has_tag(impl.tags, "mine")) continue;  // checked by its own test cases
    capstone_tests::check_implementation(impl, seed += 100);
  }
}

TEST_CASE("day08::conv2d_forward is called from outside its folder", "[gpu]") {
  GPU100_REQUIRE_GPU();
  // The day08 library, linked (not copied): one stream of a small stem, with bias.
  day08::ConvShape cs;
  cs.n = 2, cs.c = 3, cs.h = 15, cs.w = 22, cs.k = 7, cs.r = 3, cs.s = 3, cs.stride = 1, cs.pad = 1;
  DualConvShape sh = make_shape(3, 1, 7, 3, 1, 1);
  const BatchShape b{2, 15, 22};
  StreamParams prm = make_params(sh, 0, Epi::kBiasRelu, 77);
  const std::vector<float> x = gpu100::random_vector<float>(size_t(2) * 3 * 15 * 22, 78);
  const std::vector<float> ref = capstone::conv_stream_cpu(sh, 0, b, x, prm, Activation::kNone);
  gpu100::DeviceBuffer<float> d_x(x.size()), d_w(prm.weight.size()), d_b(7),
      d_y(size_t(2) * 7 * cs.p() * cs.q());
  d_x.upload(x);
  d_w.upload(prm.weight);
  d_b.upload(prm.bias);
  d_y.poison();
  day08::conv2d_forward("best_fp32", cs, d_x.data(), d_w.data(), d_b.data(), d_y.data(), nullptr);
  sync_check();
  const gpu100::CompareResult r =
      gpu100::compare(ref, d_y.download(), capstone::abs_tolerance(sh, OutType::kFp32),
                      capstone::rel_tolerance(OutType::kFp32));
  INFO(r.summary());
  REQUIRE(r.ok);
}

TEST_CASE("bad inputs are rejected on the GPU path too", "[gpu]") {
  GPU100_REQUIRE_GPU();
  DualConv2d layer(DualConvShape{});
  gpu100::DeviceBuffer<float> x(3 * 8 * 8), y(64 * 8 * 8);
  // Parameters never set.
  CHECK_THROWS_AS(layer.forward({x.data(), 1, 3, 8, 8}, {x.data(), 1, 1, 8, 8}, y.data(), y.data()),
                  std::invalid_argument);
  layer.set_params(0, make_params(layer.shape(), 0, Epi::kNone, 5));
  layer.set_params(1, make_params(layer.shape(), 1, Epi::kNone, 6));
  // Mismatched spatial sizes, null outputs.
  CHECK_THROWS_AS(layer.forward({x.data(), 1, 3, 8, 8}, {x.data(), 1, 1, 8, 7}, y.data(), y.data()),
                  std::invalid_argument);
  CHECK_THROWS_AS(layer.forward({x.data(), 1, 3, 8, 8}, {x.data(), 1, 1, 8, 8}, nullptr, y.data()),
                  std::invalid_argument);
  // Outputs that cannot fit in device memory: 30000 images of 64 x 416 x 544 floats (3.5 TB).
  CHECK_THROWS_AS(layer.check_fits_in_memory(BatchShape{30000, 416, 544}), std::invalid_argument);
  CHECK_NOTHROW(layer.check_fits_in_memory(BatchShape{1, 16, 16}));
  // bf16 output on an implementation that writes fp32 only.
  layer.use_kernel("own_seq");
  layer.set_output_type(OutType::kBf16);
  CHECK_THROWS_AS(layer.forward({x.data(), 1, 3, 8, 8}, {x.data(), 1, 1, 8, 8}, y.data(), y.data()),
                  capstone::NotAvailable);
}

TEST_CASE("every implementation matches cuDNN at the benchmark shapes", "[gpu][timing]") {
  GPU100_REQUIRE_GPU();
  if (!capstone::cudnn_available()) {
    WARN("skipped: cuDNN not found");
    return;
  }
  struct Bench {
    DualConvShape shape;
    BatchShape batch;
  };
  const std::vector<Bench> benches = {{make_shape(3, 1, 64, 3, 1, 1), {2, 416, 544}},
                                      {make_shape(64, 64, 64, 3, 1, 1), {2, 104, 136}}};
  uint64_t seed = 9000;
  for (const Bench& bench : benches) {
    const Inputs in = make_inputs(bench.shape, bench.batch, seed += 10);
    DualConv2d layer(bench.shape);
    layer.set_params(0, make_params(bench.shape, 0, Epi::kBiasBnFoldedRelu, seed + 1));
    layer.set_params(1, make_params(bench.shape, 1, Epi::kBiasBnFoldedRelu, seed + 2));
    layer.set_activation(Activation::kRelu);
    layer.use_kernel("cudnn_seq");
    std::vector<float> lib2;
    const std::vector<float> lib1 = run_layer(layer, in, lib2);
    for (const auto& impl : capstone::implementations()) {
      if (gpu100::has_tag(impl.tags, "mine")) continue;  // checked by its own test cases
      INFO(impl.name << " at C1 " << bench.shape.c1 << ", N " << bench.batch.n << " "
                     << bench.batch.h << "x" << bench.batch.w);
      layer.use_kernel(std::string(impl.name));
      std::vector<float> got2;
      const std::vector<float> got1 = run_layer(layer, in, got2);
      // Both sides are fp32 sums in different orders: twice the one-sided tolerance.
      const double at = 2 * capstone::abs_tolerance(bench.shape, OutType::kFp32);
      const gpu100::CompareResult r1 = gpu100::compare(lib1, got1, at, 2e-5);
      INFO("rgb: " << r1.summary());
      REQUIRE(r1.ok);
      const gpu100::CompareResult r2 = gpu100::compare(lib2, got2, at, 2e-5);
      INFO("depth: " << r2.summary());
      REQUIRE(r2.ok);
    }
  }
}
