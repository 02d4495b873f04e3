// day03 CPU tests: the references against values worked out by hand, the registries, the chunk
// plan of the pipeline, and bad sizes.
#include <cmath>
#include <cstring>
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
