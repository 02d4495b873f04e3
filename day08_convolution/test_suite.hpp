#pragma once
// day08's GPU checks of one Conv2d variant: the day's tests use its shapes, and the test cases
// generated for a learner's variant (mine_test.cpp.in) run it on them.
#include <stdexcept>
#include <string>
#include <vector>

#include "common/catch.hpp"
#include "common/compare.hpp"
#include "common/cuda_check.hpp"
#include "conv_day.hpp"
#include "conv_layer.hpp"

namespace day08_tests {

inline void sync_check() {
  CUDA_CHECK(cudaPeekAtLastError());
  CUDA_CHECK(cudaDeviceSynchronize());
}

inline day08::ConvShape make(int n, int c, int h, int w, int k, int r, int s, int stride, int pad,
                             int dilation = 1) {
  day08::ConvShape sh;
  sh.n = n, sh.c = c, sh.h = h, sh.w = w, sh.k = k, sh.r = r, sh.s = s;
  sh.stride = stride, sh.pad = pad, sh.dilation = dilation;
  return sh;
}

// The awkward layer shapes every variant runs (none a multiple of any tile).
inline std::vector<day08::ConvShape> awkward_shapes() {
  const std::vector<day08::ConvShape> all = {
      make(1, 1, 7, 9, 1, 3, 3, 1, 1),       // C = 1, K = 1
      make(2, 3, 19, 23, 5, 3, 3, 1, 0),     // C = 3, K = 5, padding 0
      make(3, 3, 17, 31, 5, 5, 5, 2, 2),     // 5x5, stride 2, padding 2
      make(1, 7, 13, 11, 70, 1, 1, 1, 0),    // 1x1, K past one 64-filter tile
      make(2, 5, 33, 35, 67, 3, 3, 2, 1),    // stride 2, K = 67
      make(1, 4, 20, 21, 8, 3, 3, 1, 2, 2),  // dilation 2
      make(3, 16, 14, 14, 64, 3, 3, 1, 1),   // C*R*S = 144 (16-byte weight rows), M = 588
      make(2, 6, 15, 12, 9, 3, 5, 1, 2),     // R != S
      make(1, 1, 5, 5, 1, 5, 5, 1, 0),       // a single output pixel
      make(2, 13, 21, 19, 70, 3, 3, 1, 1),   // 3x3 s1 (v7): C and K past a chunk, odd P and Q
  };
  std::vector<day08::ConvShape> kept;
  for (const auto& s : all) {
    const int64_t outputs = int64_t(s.n) * s.k * s.p() * s.q();
    if (!gpu100::test_sizes({outputs}).empty()) kept.push_back(s);
  }
  return kept;
}

inline const day08::Conv2dVariant& conv2d_variant(const std::string& name) {
  const day08::Conv2dVariant* v = day08::find_conv2d_variant(name);
  if (v == nullptr) throw std::logic_error("no Conv2d variant " + name);
  return *v;
}

// An fp32 Conv2d at every awkward shape, with and without bias: every output against the double
// CPU reference, the output poisoned first.
inline void check_conv2d_shapes(const day08::Conv2dVariant& v, uint64_t seed) {
  for (const auto& s : awkward_shapes()) {
    day08::ConvLayer layer(s, seed += 3, false);
    std::vector<int64_t> all(size_t(day08::output_dims(s).size()));
    for (size_t i = 0; i < all.size(); ++i) all[i] = int64_t(i);
    for (bool bias : {false, true}) {
      INFO(v.name << " at " << day08::to_string(s) << (bias ? " +bias" : ""));
      layer.poison();
      layer.launch(v, bias);
      sync_check();
      const gpu100::Tolerance tol = day08::conv2d_tolerance(s, v);
      const auto cmp = gpu100::compare(layer.reference_at(v, bias, all), layer.output(v),
                                       tol.abs_tol, tol.rel_tol);
      INFO(cmp.summary());
      REQUIRE(cmp.ok);
    }
  }
}

}  // namespace day08_tests
