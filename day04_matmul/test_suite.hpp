#pragma once
// day04's GPU checks of one GEMM: the day's tests run them on every variant of the registry, and
// the test cases generated for a learner's GEMM (mine_test.cpp.in) on that one.
#include <algorithm>
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
#include "gemm.hpp"

namespace day04_tests {

// The last two are multiples of 4 but of no tile size: v8_cp_async's 16-byte
// path with partial tiles, and K = 20, shorter than v8_cp_async's ring of stages.
inline const std::vector<day04::GemmShape> kShapes = {
    {1, 1, 1},
    {33, 33, 33},
    {1, 1000, 33},
    {1000, 1, 17},
    {127, 129, 257},
    {128, 128, 128},
    {257, 96, 1000},
    {4097, 33, 64},
    {65, 67, 2048},
    {130, 260, 36},
    {300, 264, 200},
    {132, 68, 44},
    {260, 136, 20},
    // 12 x 5 tiles of 128 x 256: v17's grouped order in a band of 4 pair rows and a short one of 2
    {1500, 1100, 96}};

// Runs variant v on fresh inputs and compares with the double-precision CPU reference.
// beta == 0: C starts as NaN and must be fully overwritten; otherwise C starts random. calls > 1
// (beta == 0 only): the variant runs that many times on the same C, which must hold one product.
inline void check_variant(const day04::GemmVariant& v, day04::GemmShape s, float alpha, float beta,
                          uint64_t seed, int calls = 1) {
  INFO("variant " << v.name << ", " << s.m << " x " << s.n << " x " << s.k << ", alpha " << alpha
                  << ", beta " << beta);
  auto a = gpu100::random_vector<float>(size_t(s.m) * s.k, seed);
  auto b = gpu100::random_vector<float>(size_t(s.k) * s.n, seed + 1);
  const auto c0 = gpu100::random_vector<float>(size_t(s.m) * s.n, seed + 2);
  const bool bf16 = v.precision == day04::Precision::kBf16;
  if (bf16) {  // the reference multiplies exactly the values the GPU sees
    a = gpu100::round_trip<__nv_bfloat16>(a);
    b = gpu100::round_trip<__nv_bfloat16>(b);
  }
  std::vector<float> ref = c0;
  day04::gemm_cpu(s, alpha, a.data(), b.data(), beta, ref.data());

  gpu100::DeviceBuffer<float> d_c(ref.size());
  if (beta == 0.f) {
    d_c.poison();
  } else {
    d_c.upload(c0);
  }
  if (bf16) {
    gpu100::DeviceBuffer<__nv_bfloat16> d_a(a.size()), d_b(b.size());
    d_a.upload(gpu100::convert_from_float<__nv_bfloat16>(a));
    d_b.upload(gpu100::convert_from_float<__nv_bfloat16>(b));
    for (int i = 0; i < calls; ++i)
      v.bf16(s, alpha, d_a.data(), d_b.data(), beta, d_c.data(), nullptr);
    CUDA_CHECK(cudaPeekAtLastError());
    CUDA_CHECK(cudaDeviceSynchronize());
  } else {
    gpu100::DeviceBuffer<float> d_a(a.size()), d_b(b.size());
    d_a.upload(a);
    d_b.upload(b);
    for (int i = 0; i < calls; ++i)
      v.fp32(s, alpha, d_a.data(), d_b.data(), beta, d_c.data(), nullptr);
    CUDA_CHECK(cudaPeekAtLastError());
    CUDA_CHECK(cudaDeviceSynchronize());
  }
  // The day's one pass rule (day04::gemm_tolerance), the binary's too.
  const gpu100::Tolerance tol = day04::gemm_tolerance(v.precision, s.k, alpha);
  const auto cmp = gpu100::compare(ref, d_c.download(), tol.abs_tol, tol.rel_tol);
  INFO(cmp.summary());
  REQUIRE(cmp.ok);
}

// The FP8 shapes: K a multiple of 16 (the format's rule), M and N anything: 1, primes, one past
// and one short of the 128 x 128 tile, K shorter than one 128-wide k-tile, K one 16 past 4096.
inline const std::vector<day04::GemmShape> kFp8Shapes = {
    {1, 1, 16},
    {77, 77, 48},
    {1, 4095, 64},
    {4095, 1, 32},
    {128, 128, 128},
    {129, 257, 144},
    {255, 200, 2048},
    {77, 4095, 4112},
    {4095, 77, 4112},
    {256, 384, 4096},
    // more tiles than SMs (16 x 17 and 12 x 14), so that a persistent variant's blocks take
    // several tiles each, with an even and an odd count of k-tiles (2 and 3, the last one short;
    // the k-tile counts above run 1, 2, 3, 16, 32 and 33, for v15's two accumulators)
    {2000, 2100, 160},
    {1500, 1700, 272}};

// Runs FP8 variant v on fresh inputs (random in [-range, range], quantised to e4m3 with their own
// per-tensor scales) and compares with the CPU's exact product of the e4m3 values. C starts as
// NaN and must be fully overwritten. The absolute tolerance scales with range^2, as the products
// do.
inline void check_fp8_variant(const day04::GemmVariant& v, day04::GemmShape s, uint64_t seed,
                              float range = 1.f) {
  INFO("variant " << v.name << ", " << s.m << " x " << s.n << " x " << s.k << ", inputs in +-"
                  << range);
  const auto a =
      day04::quantize_e4m3(gpu100::random_vector<float>(size_t(s.m) * s.k, seed, -range, range));
  const auto b_t = day04::quantize_e4m3(
      gpu100::random_vector<float>(size_t(s.n) * s.k, seed + 1, -range, range));
  std::vector<float> ref(size_t(s.m) * s.n);
  day04::gemm_fp8_cpu(s, a, b_t, ref.data());

  gpu100::DeviceBuffer<__nv_fp8_e4m3> d_a(a.q.size()), d_bt(b_t.q.size());
  gpu100::DeviceBuffer<float> d_scales(8);  // scale_a at 0, scale_b at 4 (16-byte aligned)
  gpu100::DeviceBuffer<__nv_bfloat16> d_c(ref.size());
  d_a.upload(a.q);
  d_bt.upload(b_t.q);
  d_scales.upload(std::vector<float>{a.scale, 0, 0, 0, b_t.scale, 0, 0, 0});
  d_c.poison();
  v.fp8(s, d_a.data(), d_bt.data(), d_scales.data(), d_scales.data() + 4, d_c.data(), nullptr);
  CUDA_CHECK(cudaPeekAtLastError());
  CUDA_CHECK(cudaDeviceSynchronize());
  const gpu100::Tolerance tol = day04::gemm_tolerance(v.precision, s.k, double(range) * range);
  const auto cmp =
      gpu100::compare(ref, gpu100::convert_to_float(d_c.download()), tol.abs_tol, tol.rel_tol);
  INFO(cmp.summary());
  REQUIRE(cmp.ok);
}

inline const day04::GemmVariant& variant(const std::string& name) {
  const day04::GemmVariant* v = day04::find_gemm_variant(name);
  if (v == nullptr) throw std::logic_error("no GEMM variant " + name);
  return *v;
}

}  // namespace day04_tests
