#pragma once
// The capstone's GPU checks of one implementation: its tests run them on every implementation of
// the registry, and the test cases generated for a learner's kernel (mine_test.cpp.in) on that one.
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
#include "dual_conv.hpp"

namespace capstone_tests {

using capstone::Activation;
using capstone::BatchShape;
using capstone::DualConv2d;
using capstone::DualConvShape;
using capstone::OutType;
using capstone::StreamParams;

inline void sync_check() {
  CUDA_CHECK(cudaPeekAtLastError());
  CUDA_CHECK(cudaDeviceSynchronize());
}

struct Case {
  DualConvShape shape;
  BatchShape batch;
};

inline DualConvShape make_shape(int c1, int c2, int k, int rs, int stride, int pad) {
  DualConvShape s;
  s.c1 = c1, s.c2 = c2, s.k = k, s.r = rs, s.s = rs, s.stride = stride, s.pad = pad;
  return s;
}

inline const std::vector<Case> kCases = {
    {make_shape(3, 1, 64, 3, 1, 1), {2, 19, 37}},  // the stem's channels, odd sizes
    {make_shape(5, 1, 7, 3, 2, 0), {1, 23, 30}},   // C = 5, K = 7, stride 2, no padding
    {make_shape(1, 3, 1, 3, 1, 1), {3, 17, 33}},   // K = 1
    {make_shape(3, 1, 20, 3, 1, 1), {1, 11, 68}},  // stem kernel: Q % 4 == 0, 2 column tiles
    // stem kernel, Q % 4 != 0 (the shifted epilogue; its tiles start every 124 columns): two
    // edge tiles and rows past P; K = 20, whose last channel group is partial; and inner tiles
    // (neither first nor last in the row) at each P Q % 4 (the step in alignment between planes:
    // 0 at 12 x 301, 1 at 5 x 377, 2 at 6 x 259, 3 at 9 x 255); Q = 61, one tile wider than the
    // row, and Q = 125, a second tile for the row's last column.
    {make_shape(3, 1, 64, 3, 1, 1), {1, 10, 131}},
    {make_shape(3, 1, 20, 3, 1, 1), {1, 11, 69}},
    {make_shape(3, 1, 64, 3, 1, 1), {1, 12, 301}},
    {make_shape(1, 3, 64, 3, 1, 1), {1, 5, 377}},
    {make_shape(3, 1, 64, 3, 1, 1), {1, 6, 259}},
    {make_shape(3, 1, 20, 3, 1, 1), {2, 9, 255}},
    {make_shape(3, 1, 64, 3, 1, 1), {2, 5, 61}},
    {make_shape(3, 1, 64, 3, 1, 1), {1, 7, 125}},
    {make_shape(3, 5, 64, 1, 1, 0), {1, 9, 41}},     // 1 x 1 filters, Q % 4 != 0
    {make_shape(16, 8, 20, 5, 2, 2), {2, 21, 26}},   // 5 x 5, stride 2
    {make_shape(64, 64, 64, 3, 1, 1), {1, 13, 20}},  // the deep layer's channels (several chunks)
};

enum class Epi { kNone, kBiasRelu, kBnSilu, kBiasBnFoldedRelu };

inline StreamParams make_params(const DualConvShape& sh, int stream, Epi epi, uint64_t seed) {
  const bool bias = epi == Epi::kBiasRelu || epi == Epi::kBiasBnFoldedRelu;
  const bool bn = epi == Epi::kBnSilu || epi == Epi::kBiasBnFoldedRelu;
  return capstone::random_params(sh, stream, bias, bn, seed);
}

inline Activation act_of(Epi e) {
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

inline Inputs make_inputs(const DualConvShape& sh, const BatchShape& b, uint64_t seed) {
  Inputs in;
  in.b = b;
  for (int s = 0; s < 2; ++s) {
    in.x[s] = gpu100::random_vector<float>(size_t(b.n) * sh.c(s) * b.h * b.w, seed + s);
    in.d_x[s] = gpu100::DeviceBuffer<float>(in.x[s].size());
    in.d_x[s].upload(in.x[s]);
  }
  return in;
}

inline std::vector<float> run_layer(DualConv2d& layer, const Inputs& in, std::vector<float>& out2) {
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

// One implementation at every awkward case and epilogue, fp32 and (where it writes them) bf16
// outputs, both streams against the double CPU reference.
inline void check_implementation(const capstone::ImplInfo& impl, uint64_t seed) {
  if (impl.is_library && gpu100::sanitizer_run()) return;  // cuDNN's kernels, not ours
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
      {
        for (OutType out : {OutType::kFp32, OutType::kBf16}) {
          if (out == OutType::kBf16 && !impl.bf16_output) continue;
          INFO(impl.name << (out == OutType::kBf16 ? " bf16" : " fp32") << ", C1 " << c.shape.c1
                         << " C2 " << c.shape.c2 << " K " << c.shape.k << " R " << c.shape.r
                         << " stride " << c.shape.stride << " pad " << c.shape.pad << ", N "
                         << c.batch.n << " H " << c.batch.h << " W " << c.batch.w << ", epilogue "
                         << int(epi));
          layer.use_kernel(std::string(impl.name));
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

inline const capstone::ImplInfo& implementation(const std::string& name) {
  const capstone::ImplInfo* i = capstone::find_implementation(name);
  if (i == nullptr) throw std::logic_error("no implementation " + name);
  return *i;
}

}  // namespace capstone_tests
