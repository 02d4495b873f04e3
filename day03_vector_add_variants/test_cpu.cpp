// day03 CPU tests: the references against values worked out by hand, the registries, the chunk
// plan of the pipeline, the diffusion step's tolerance, and bad sizes and arguments.
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/catch.hpp"
#include "vector_add_variants.cuh"

using Catch::Approx;

TEST_CASE("silu_cpu: hand-checked values", "[cpu]") {
  CHECK(day03::silu_cpu(0.0f) == 0.0f);
  CHECK(day03::silu_cpu(1.0f) == Approx(0.7310585786).epsilon(1e-6));    // 1 / (1 + e^-1)
  CHECK(day03::silu_cpu(-1.0f) == Approx(-0.2689414214).epsilon(1e-6));  // -1 / (1 + e)
  CHECK(day03::silu_cpu(2.0f) == Approx(1.7615941560).epsilon(1e-6));    // 2 / (1 + e^-2)
  CHECK(day03::silu_cpu(20.0f) == Approx(20.0).epsilon(1e-6));           // sigmoid(20) ~ 1
  CHECK(std::fabs(day03::silu_cpu(-20.0f)) < 1e-7f);                     // -20 e^-20 ~ -4e-8
}

TEST_CASE("silu_fused_cpu: y = silu(a + b * c)", "[cpu]") {
  const std::vector<float> a = {1.0f, 0.0f, -0.5f, 0.25f};
  const std::vector<float> b = {2.0f, 3.0f, 0.5f, -1.0f};
  const std::vector<float> c = {0.5f, 0.0f, 1.0f, 0.25f};
  std::vector<float> y(a.size(), -7.0f);
  day03::silu_fused_cpu(a.data(), b.data(), c.data(), y.data(), 4);
  CHECK(y[0] == Approx(1.7615941560).epsilon(1e-6));  // u = 1 + 2 * 0.5 = 2
  CHECK(y[1] == 0.0f);                                // u = 0
  CHECK(y[2] == 0.0f);                                // u = -0.5 + 0.5 = 0
  CHECK(y[3] == 0.0f);                                // u = 0.25 - 0.25 = 0
  CHECK_THROWS_AS(day03::silu_fused_cpu(a.data(), b.data(), c.data(), y.data(), -1),
                  std::invalid_argument);
}

TEST_CASE("add_cpu: every type, hand-checked, with round-to-nearest-even", "[cpu]") {
  {
    const std::vector<int32_t> a = {1, -5, 1 << 30, 0}, b = {2, 5, (1 << 30) - 1, -7};
    std::vector<int32_t> c(4);
    day03::add_cpu(a.data(), b.data(), c.data(), 4);
    CHECK(c == std::vector<int32_t>{3, 0, 2147483647, -7});
  }
  {
    const std::vector<double> a = {0.1, 1.0, -2.5}, b = {0.2, 1e-17, 2.5};
    std::vector<double> c(3);
    day03::add_cpu(a.data(), b.data(), c.data(), 3);
    CHECK(c[0] == 0.1 + 0.2);  // 0.30000000000000004, the same IEEE add on both sides
    CHECK(c[1] == 1.0);        // 1e-17 is below half an ulp of 1.0
    CHECK(c[2] == 0.0);
  }
  {
    // fp16 has 10 fraction bits: 1 + 2^-11 is exactly halfway between 1 and 1 + 2^-10 and rounds
    // to the even one, 1; 1 + 3 * 2^-11 is halfway between 1 + 2^-10 and 1 + 2^-9: rounds up.
    const std::vector<__half> a = gpu100::convert_from_float<__half>({1.0f, 1.0f, 0.5f});
    const std::vector<__half> b = gpu100::convert_from_float<__half>({0x1p-11f, 0x3p-11f, 0.25f});
    std::vector<__half> c(3);
    day03::add_cpu(a.data(), b.data(), c.data(), 3);
    CHECK(static_cast<float>(c[0]) == 1.0f);
    CHECK(static_cast<float>(c[1]) == 1.0f + 0x1p-9f);
    CHECK(static_cast<float>(c[2]) == 0.75f);
  }
  {
    // bf16 has 7 fraction bits: 1 + 2^-8 is halfway, rounds to 1; 1 + 3 * 2^-8 rounds to 1 + 2^-6.
    const std::vector<__nv_bfloat16> a = gpu100::convert_from_float<__nv_bfloat16>({1.0f, 1.0f});
    const std::vector<__nv_bfloat16> b =
        gpu100::convert_from_float<__nv_bfloat16>({0x1p-8f, 0x3p-8f});
    std::vector<__nv_bfloat16> c(2);
    day03::add_cpu(a.data(), b.data(), c.data(), 2);
    CHECK(static_cast<float>(c[0]) == 1.0f);
    CHECK(static_cast<float>(c[1]) == 1.0f + 0x1p-6f);
  }
  float x = 1.0f;
  CHECK_THROWS_AS(day03::add_cpu(&x, &x, &x, -1), std::invalid_argument);
}

TEST_CASE("random_input: seeded, in range, never zero for the floating types", "[cpu]") {
  const auto ints = day03::random_input<int32_t>(1000, 5);
  for (int32_t v : ints) CHECK((v >= -(1 << 30) && v <= (1 << 30)));
  const auto h = day03::random_input<__half>(1000, 5);
  for (const __half& v : h) {
    const float f = static_cast<float>(v);
    CHECK((f >= -1.0f && f <= 1.0f));
  }
  CHECK(day03::random_input<double>(100, 9) == day03::random_input<double>(100, 9));
}

TEST_CASE("registry: day02's kernel is v1 and CUB is the one library row", "[cpu]") {
  const auto& vs = day03::variants();
  REQUIRE_FALSE(vs.empty());
  CHECK(std::string(vs.front().name) == "v1_naive");
  CHECK(vs.front().launch == &day02::vector_add_v1);
  int libraries = 0;
  for (size_t i = 0; i < vs.size(); ++i) {
    CHECK(day03::find_variant(vs[i].name) == &vs[i]);
    if (vs[i].is_library) {
      ++libraries;
      CHECK(vs[i].launch == &day02::vector_add_cub);
    }
  }
  CHECK(libraries == 1);
  CHECK(day03::find_variant("v9") == nullptr);
}

TEST_CASE("silu registry: the byte counts that bound the fusion speedup", "[cpu]") {
  const auto& sv = day03::silu_variants();
  REQUIRE(sv.size() >= 3);  // the fused kernel and the two chains, in that order
  CHECK(std::string(sv[0].name) == "silu_fused");
  CHECK(sv[0].kernels == 1);
  CHECK(sv[0].arrays_moved == 4);  // read a, b, c; write y
  CHECK(sv[1].kernels == 3);
  CHECK(sv[1].arrays_moved == 3 + 3 + 2);  // mul, add, silu
  CHECK(sv[2].kernels == 4);
  CHECK(sv[2].arrays_moved == 3 + 3 + 2 + 3);  // mul, add, sigmoid, mul
  // The best the fused kernel can do at a bandwidth-bound size: 2x and 2.75x, not 2.5x and more.
  CHECK(sv[1].arrays_moved / double(sv[0].arrays_moved) == 2.0);
  CHECK(sv[2].arrays_moved / double(sv[0].arrays_moved) == 2.75);
}

TEST_CASE("plan_chunks: every element once, 1 KiB-aligned chunk starts, bad arguments rejected",
          "[cpu]") {
  for (int64_t n : {int64_t(1), int64_t(255), int64_t(1000), int64_t(1000003), int64_t(1) << 26}) {
    for (int chunks : {1, 2, 3, 7, 16}) {
      INFO("n = " << n << ", chunks = " << chunks);
      const auto plan = day03::plan_chunks(n, chunks);
      REQUIRE(!plan.empty());
      CHECK(static_cast<int>(plan.size()) <= chunks);
      int64_t next = 0;
      for (const auto& c : plan) {
        CHECK(c.begin == next);
        CHECK(c.begin % 256 == 0);
        CHECK(c.count > 0);
        next = c.begin + c.count;
      }
      CHECK(next == n);
    }
  }
  CHECK(day03::plan_chunks(0, 4).empty());
  CHECK_THROWS_AS(day03::plan_chunks(-1, 4), std::invalid_argument);
  CHECK_THROWS_AS(day03::plan_chunks(100, 0), std::invalid_argument);
}

// ---- the diffusion denoising step ----
// abar = 0.64 gives sqrt(abar) = 0.8 and sqrt(1 - abar) = 0.6, so x0 = (x_t - 0.6 eps) / 0.8; with
// inputs that are short binary fractions every result below is a float exactly.

TEST_CASE("diffusion_cpu: hand-worked values, the clamp at both ends", "[cpu]") {
  const day03::DiffusionStep step{0.64, 0.5};
  const std::vector<float> x = {0.5f, 1.0f, -1.0f, 0.5f, -0.25f};
  const std::vector<float> e = {0.25f, -1.0f, 1.0f, -0.5f, 0.5f};
  const std::vector<float> p = {0.125f, 1.0f, -0.5f, 1.0f, 0.25f};
  std::vector<float> out(x.size(), -7.0f);
  day03::diffusion_cpu(x.data(), e.data(), p.data(), out.data(), 5, step);
  CHECK(out[0] == 0.28125f);   // x0 = (0.5 - 0.15) / 0.8 = 0.4375; 0.21875 + 0.0625
  CHECK(out[1] == 1.0f);       // x0 = (1 + 0.6) / 0.8 = 2; 1 + 0.5 = 1.5, clamped to 1
  CHECK(out[2] == -1.0f);      // x0 = -2; -1 - 0.25 = -1.25, clamped to -1
  CHECK(out[3] == 1.0f);       // x0 = (0.5 + 0.3) / 0.8 = 1; 0.5 + 0.5 = 1, on the bound
  CHECK(out[4] == -0.21875f);  // x0 = (-0.25 - 0.3) / 0.8 = -0.6875; -0.34375 + 0.125

  // abar = 1: no noise left, x0 = x_t; w = 1: out = clamp(x0), prev ignored.
  day03::diffusion_cpu(x.data(), e.data(), p.data(), out.data(), 5, {1.0, 1.0});
  CHECK(out == std::vector<float>{0.5f, 1.0f, -1.0f, 0.5f, -0.25f});
  // w = 0: out is prev exactly, whatever x0 (abar = 0.3: irrational coefficients).
  const std::vector<float> q = {0.3f, -0.7f, 0.1f, -1.0f, 1.0f};
  day03::diffusion_cpu(x.data(), e.data(), q.data(), out.data(), 5, {0.3, 0.0});
  CHECK(out == q);
  // A small abar: x0 = (0.5 - sqrt(0.99) 0.25) / 0.1 = 2.5126..., blended 0.1 x0 + 0.9 (-0.5).
  day03::diffusion_cpu(x.data(), e.data(), std::vector<float>(5, -0.5f).data(), out.data(), 1,
                       {0.01, 0.1});
  CHECK(out[0] == Approx(0.1 * ((0.5 - std::sqrt(0.99) * 0.25) / 0.1) + 0.9 * -0.5).epsilon(1e-7));
}

TEST_CASE("diffusion_cpu: 16-bit outputs are rounded once, to nearest even", "[cpu]") {
  // abar = 1 and w = 1/2: out = (x_t + prev) / 2, computed exactly in double.
  {
    // bf16 has 8 significant bits: near 0.5 its spacing is 2^-8. 0.5 + 2^-9 is halfway between
    // 0.5 and 0.5 + 2^-8 and goes to the even 0.5; 0.5 + 3 * 2^-9 goes up to 0.5 + 2^-7.
    const auto x = gpu100::convert_from_float<__nv_bfloat16>({1.0f, 1.0f, 1.0f});
    const auto e = gpu100::convert_from_float<__nv_bfloat16>({0.5f, 0.5f, 0.5f});
    const auto p = gpu100::convert_from_float<__nv_bfloat16>({0x1p-8f, 0x3p-8f, 0x1p-8f});
    std::vector<__nv_bfloat16> out(3);
    day03::diffusion_cpu(x.data(), e.data(), p.data(), out.data(), 2, {1.0, 0.5});
    CHECK(static_cast<float>(out[0]) == 0.5f);
    CHECK(static_cast<float>(out[1]) == 0.5f + 0x1p-7f);
    // w = 1/2 + 2^-40: out = 0.5 + 2^-9 + 2^-40 - 2^-48, just above the halfway point: one
    // rounding gives 0.5 + 2^-8. A detour through float would lose the 2^-40 (float's spacing
    // there is 2^-24), land on the halfway point and round to 0.5.
    day03::diffusion_cpu(x.data() + 2, e.data() + 2, p.data() + 2, out.data() + 2, 1,
                         {1.0, 0.5 + 0x1p-40});
    CHECK(static_cast<float>(out[2]) == 0.5f + 0x1p-8f);
  }
  {
    // fp16 has 11 significant bits: near 0.5 its spacing is 2^-11; the same three cases.
    const auto x = gpu100::convert_from_float<__half>({1.0f, 1.0f, 1.0f});
    const auto e = gpu100::convert_from_float<__half>({0.5f, 0.5f, 0.5f});
    const auto p = gpu100::convert_from_float<__half>({0x1p-11f, 0x3p-11f, 0x1p-11f});
    std::vector<__half> out(3);
    day03::diffusion_cpu(x.data(), e.data(), p.data(), out.data(), 2, {1.0, 0.5});
    CHECK(static_cast<float>(out[0]) == 0.5f);
    CHECK(static_cast<float>(out[1]) == 0.5f + 0x1p-10f);
    day03::diffusion_cpu(x.data() + 2, e.data() + 2, p.data() + 2, out.data() + 2, 1,
                         {1.0, 0.5 + 0x1p-40});
    CHECK(static_cast<float>(out[2]) == 0.5f + 0x1p-11f);
  }
}

TEST_CASE("diffusion step: bad abar, w and n are rejected before any CUDA call", "[cpu]") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  for (const day03::DiffusionStep bad : std::vector<day03::DiffusionStep>{{0.0, 0.5},
                                                                          {-0.5, 0.5},
                                                                          {1.0 + 1e-12, 0.5},
                                                                          {nan, 0.5},
                                                                          {inf, 0.5},
                                                                          {0.5, -1e-12},
                                                                          {0.5, 1.0 + 1e-12},
                                                                          {0.5, nan},
                                                                          {0.5, -inf}}) {
    INFO("abar = " << bad.abar << ", w = " << bad.w);
    CHECK_THROWS_AS(day03::check_diffusion_step(bad, "test"), std::invalid_argument);
    float v = 0.25f;
    CHECK_THROWS_AS(day03::diffusion_cpu(&v, &v, &v, &v, 1, bad), std::invalid_argument);
    // The launchers check before they touch CUDA: these throw on a machine with no GPU, and the
    // pointers are never used.
    CHECK_THROWS_AS(day03::diffusion_fused<float>(nullptr, nullptr, nullptr, nullptr, nullptr,
                                                  nullptr, 4, bad, nullptr),
                    std::invalid_argument);
    CHECK_THROWS_AS(day03::diffusion_chain<__half>(nullptr, nullptr, nullptr, nullptr, nullptr,
                                                   nullptr, 0, bad, nullptr),
                    std::invalid_argument);
  }
  for (const day03::DiffusionStep good :
       std::vector<day03::DiffusionStep>{{1.0, 0.0}, {1.0, 1.0}, {1e-12, 0.5}, {0.5, 0.8}}) {
    CHECK_NOTHROW(day03::check_diffusion_step(good, "test"));
  }
  float v = 0.25f;
  CHECK_THROWS_AS(day03::diffusion_cpu(&v, &v, &v, &v, -1, {}), std::invalid_argument);
  CHECK_THROWS_AS(day03::diffusion_fused<__nv_bfloat16>(nullptr, nullptr, nullptr, nullptr, nullptr,
                                                        nullptr, -1, {}, nullptr),
                  std::invalid_argument);
  // The chain needs its two scratch arrays.
  CHECK_THROWS_AS(day03::diffusion_chain<float>(nullptr, nullptr, nullptr, nullptr, nullptr,
                                                nullptr, 4, {}, nullptr),
                  std::invalid_argument);
}

TEST_CASE("diffusion registry: kernels, arrays moved and the byte bound, for every type", "[cpu]") {
  day03::for_each_diffusion_type([](auto tag) {
    using T = typename decltype(tag)::type;
    INFO(day03::precision_name<T>());
    const auto& dv = day03::diffusion_variants<T>();
    REQUIRE(dv.size() == 2);  // the chain, then the fused kernel
    CHECK(std::string(dv[0].name) == "diffusion_chain");
    CHECK(dv[0].kernels == 7);
    CHECK(dv[0].arrays_moved == 2 + 3 + 2 + 2 + 2 + 3 + 2);  // mul sub div mul mul add clamp
    CHECK(dv[0].roundings == 6);                             // all but the clamp round to T
    CHECK(std::string(dv[1].name) == "diffusion_fused");
    CHECK(dv[1].kernels == 1);
    CHECK(dv[1].arrays_moved == 4);  // read x_t, eps, prev; write out
    CHECK(dv[1].roundings == 1);
    // The best the fused kernel can do at a bandwidth-bound size, the same for every type
    // because the chain stores its intermediates in the storage type.
    CHECK(dv[0].arrays_moved / double(dv[1].arrays_moved) == 4.0);
    CHECK(std::string(dv[0].name) == day03::diffusion_variants<float>()[0].name);
  });
}

TEST_CASE("diffusion check: the allowance scales with the terms, not the result", "[cpu]") {
  // M = w (|x_t| + sqrt(1 - abar) |eps|) / sqrt(abar) + (1 - w) |prev|.
  const day03::DiffusionStep step{0.64, 0.5};
  CHECK(day03::diffusion_magnitude(0.5, -0.25, -0.125, step) == Approx(0.46875).epsilon(1e-12));
  CHECK(day03::diffusion_allowance<float>(2.0, 1) == Approx(3e-6 + 3 * 0x1p-24 * 2.0));
  CHECK(day03::diffusion_allowance<__nv_bfloat16>(1.0, 6) == Approx(2e-6 + 8 * 0x1p-8));
  CHECK(day03::diffusion_allowance<__half>(1.0, 1) == Approx(2e-6 + 3 * 0x1p-11));

  // abar = 0.01, w = 1/2, x_t = 1, eps = -1, prev = -1: w x0 = 9.97 and (1 - w) prev = -0.5 give
  // out = 1 (clamped), but the terms have M = 10.47: the allowance is 1e-6 (1 + M) + 3 u M.
  const day03::DiffusionStep small{0.01, 0.5};
  const std::vector<float> x = {1.0f}, e = {-1.0f}, p = {-1.0f};
  const double m = day03::diffusion_magnitude(1.0, -1.0, -1.0, small);
  CHECK(m == Approx(0.5 * (1.0 + std::sqrt(0.99)) / 0.1 + 0.5));
  const double allow = day03::diffusion_allowance<float>(m, 1);
  const std::vector<float> ref = {0.75f};  // any reference value: the check compares got with it
  auto check = [&](float got) {
    return day03::check_diffusion(x, e, p, ref, std::vector<float>{got}, small, 1);
  };
  CHECK(check(0.75f).ok);
  CHECK(check(static_cast<float>(0.75 + 0.9 * allow)).ok);
  CHECK_FALSE(check(static_cast<float>(0.75 + 1.1 * allow)).ok);
  CHECK_FALSE(check(std::numeric_limits<float>::quiet_NaN()).ok);  // a poisoned element fails
  CHECK_FALSE(day03::check_diffusion(x, e, p, ref, std::vector<float>{0.75f, 0.75f}, small, 1).ok);
}
