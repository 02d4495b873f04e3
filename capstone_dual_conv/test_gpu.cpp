// capstone GPU tests: every implementation against the double CPU reference at small awkward
// shapes (H, W not tile multiples; C = 1, 3, 5, 64; K = 1, 7, 20, 64; stride 2; padding 0; 1 x 1
// and 5 x 5 filters) with and without bias, BN (scale/shift and folded) and each activation, fp32
// and bf16 outputs; day08's library called directly; bad inputs; and, tagged [timing], every
// implementation against cuDNN at the benchmark shapes.
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/catch.hpp"
#include "common/compare.hpp"
#include "common/cuda_check.hpp"
#include "common/device_buffer.hpp"
#include "common/half.hpp"
#include "common/random.hpp"
#include "conv.hpp"
#include "dual_conv.hpp"

using capstone::Activation;
using capstone::BatchShape;
using capstone::DualConv2d;
using capstone::DualConvShape;
using capstone::OutType;
using capstone::StreamParams;

namespace {

void sync_check() {
  CUDA_CHECK(cudaPeekAtLastError());
  CUDA_CHECK(cudaDeviceSynchronize());
}

struct Case {
  DualConvShape shape;
  BatchShape batch;
};

DualConvShape make_shape(int c1, int c2, int k, int rs, int stride, int pad) {
  DualConvShape s;
  s.c1 = c1, s.c2 = c2, s.k = k, s.r = rs, s.s = rs, s.stride = stride, s.pad = pad;
  return s;
}

const std::vector<Case> kCases = {
    {make_shape(3, 1, 64, 3, 1, 1), {2, 19, 37}},    // the stem's channels, odd sizes
    {make_shape(5, 1, 7, 3, 2, 0), {1, 23, 30}},     // C = 5, K = 7, stride 2, no padding
    {make_shape(1, 3, 1, 3, 1, 1), {3, 17, 33}},     // K = 1
    {make_shape(3, 1, 20, 3, 1, 1), {1, 11, 68}},    // stem kernel: Q % 4 == 0, 2 column tiles
    {make_shape(3, 5, 64, 1, 1, 0), {1, 9, 41}},     // 1 x 1 filters, Q % 4 != 0
    {make_shape(16, 8, 20, 5, 2, 2), {2, 21, 26}},   // 5 x 5, stride 2
    {make_shape(64, 64, 64, 3, 1, 1), {1, 13, 20}},  // the deep layer's channels (several chunks)
};

enum class Epi { kNone, kBiasRelu, kBnSilu, kBiasBnFoldedRelu };

StreamParams make_params(const DualConvShape& sh, int stream, Epi epi, uint64_t seed) {
  const bool bias = epi == Epi::kBiasRelu || epi == Epi::kBiasBnFoldedRelu;
  const bool bn = epi == Epi::kBnSilu || epi == Epi::kBiasBnFoldedRelu;
  return capstone::random_params(sh, stream, bias, bn, seed);
}

Activation act_of(Epi e) {
  if (e == Epi::kBiasRelu || e == Epi::kBiasBnFoldedRelu) return Activation::kRelu;
  if (e == Epi::kBnSilu) return Activation::kSilu;
  return Activation::kNone;
}

// Runs the layer's current implementation; returns both outputs as floats (outputs poisoned
// first). Throws NotAvailable as the implementation does.
struct Inputs {
  BatchShape b;
  std::vector<float> x[2];
  gpu100::DeviceBuffer<float> d_x[2];
};

Inputs make_inputs(const DualConvShape& sh, const BatchShape& b, uint64_t seed) {
  Inputs in;
  in.b = b;
  for (int s = 0; s < 2; ++s) {
    in.x[s] = gpu100::random_vector<float>(size_t(b.n) * sh.c(s) * b.h * b.w, seed + s);
    in.d_x[s] = gpu100::DeviceBuffer<float>(in.x[s].size());
    in.d_x[s].upload(in.x[s]);
  }
  return in;
}

std::vector<float> run_layer(DualConv2d& layer, const Inputs& in, std::vector<float>& out2) {
  const DualConvShape& sh = layer.shape();
  const BatchShape& b = in.b;
  const size_t count = size_t(b.n) * sh.k * sh.p(b.h) * sh.q(b.w);
  const bool bf16 = layer.output_type() == OutType::kBf16;
  gpu100::DeviceBuffer<float> y1(count), y2(count);  // big enough for either type
  y1.poison();
  y2.poison();
  layer.forward({in.d_x[0].data(), b.n, sh.c1, b.h, b.w}, {in.d_x[1].data(), b.n, sh.c2, b.h, b.w},
                y1.data(), y2.data(), nullptr);
  sync_check();
  auto fetch = [&](const gpu100::DeviceBuffer<float>& y) {
    if (!bf16) return y.download();
    std::vector<__nv_bfloat16> h(count);
    CUDA_CHECK(cudaMemcpy(h.data(), y.data(), count * 2, cudaMemcpyDeviceToHost));
    return gpu100::convert_to_float(h);
  };
  out2 = fetch(y2);
  return fetch(y1);
}

}  // namespace

TEST_CASE("every implementation matches the CPU at awkward shapes and epilogues", "[gpu]") {
  GPU100_REQUIRE_GPU();
  uint64_t seed = 1000;
  for (const Case& c : kCases) {
    const Inputs in = make_inputs(c.shape, c.batch, seed += 10);
    for (Epi epi : {Epi::kNone, Epi::kBiasRelu, Epi::kBnSilu, Epi::kBiasBnFoldedRelu}) {
      const StreamParams prm[2] = {make_params(c.shape, 0, epi, seed + 1),
                                   make_params(c.shape, 1, epi, seed + 2)};
      const Activation act = act_of(epi);
      const std::vector<float> ref[2] = {
          capstone::conv_stream_cpu(c.shape, 0, c.batch, in.x[0], prm[0], act),
          capstone::conv_stream_cpu(c.shape, 1, c.batch, in.x[1], prm[1], act)};
      DualConv2d layer(c.shape);
      layer.set_params(0, prm[0]);
      layer.set_params(1, prm[1]);
      layer.set_activation(act);
      layer.set_bn_mode(epi == Epi::kBiasBnFoldedRelu ? capstone::BnMode::kFolded
                                                      : capstone::BnMode::kScaleShift);
      for (const auto& impl : capstone::implementations()) {
        if (impl.is_library && gpu100::sanitizer_run()) continue;  // cuDNN's kernels, not ours
        for (OutType out : {OutType::kFp32, OutType::kBf16}) {
          if (out == OutType::kBf16 && !impl.bf16_output) continue;
          INFO(impl.name << (out == OutType::kBf16 ? " bf16" : " fp32") << ", C1 " << c.shape.c1
                         << " C2 " << c.shape.c2 << " K " << c.shape.k << " R " << c.shape.r
                         << " stride " << c.shape.stride << " pad " << c.shape.pad << ", N "
                         << c.batch.n << " H " << c.batch.h << " W " << c.batch.w << ", epilogue "
                         << int(epi));
          layer.use_kernel(impl.impl);
          layer.set_output_type(out);
          std::vector<float> got2;
          std::vector<float> got1;
          try {
            got1 = run_layer(layer, in, got2);
          } catch (const capstone::NotAvailable& e) {
            REQUIRE(impl.is_library);  // only the cuDNN rows may be unavailable
            continue;
          }
          const double at = capstone::abs_tolerance(c.shape, out);
          const double rt = capstone::rel_tolerance(out);
          const gpu100::CompareResult r1 = gpu100::compare(ref[0], got1, at, rt);
          INFO("rgb: " << r1.summary());
          REQUIRE(r1.ok);
          const gpu100::CompareResult r2 = gpu100::compare(ref[1], got2, at, rt);
          INFO("depth: " << r2.summary());
          REQUIRE(r2.ok);
        }
      }
    }
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
      INFO(impl.name << " at C1 " << bench.shape.c1 << ", N " << bench.batch.n << " "
                     << bench.batch.h << "x" << bench.batch.w);
      layer.use_kernel(impl.impl);
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
