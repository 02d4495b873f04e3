// day04 CPU tests: the references against values worked out by hand, argument checks, registry.
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/catch.hpp"
#include "gemm.hpp"
#include "transpose.hpp"

using Catch::Approx;

TEST_CASE("gemm_cpu: a 2 x 3 times 3 x 2 product by hand", "[cpu]") {
  const std::vector<float> a = {1, 2, 3,   // row 0
                                4, 5, 6};  // row 1
  const std::vector<float> b = {7,  8,     // row 0
                                9,  10,    // row 1
                                11, 12};   // row 2
  std::vector<float> c = {1, 1, 1, 1};
  day04::gemm_cpu({2, 2, 3}, 1.0, a.data(), b.data(), 0.0, c.data());
  CHECK(c == std::vector<float>{58, 64, 139, 154});
  // alpha = 2, beta = -1 on top of that result: 2 * AB - AB = AB
  day04::gemm_cpu({2, 2, 3}, 2.0, a.data(), b.data(), -1.0, c.data());
  CHECK(c == std::vector<float>{58, 64, 139, 154});
}

TEST_CASE("gemm_cpu: beta = 0 never reads C (NaN stays out)", "[cpu]") {
  const std::vector<float> a = {2}, b = {3};
  std::vector<float> c = {std::numeric_limits<float>::quiet_NaN()};
  day04::gemm_cpu({1, 1, 1}, 1.0, a.data(), b.data(), 0.0, c.data());
  CHECK(c[0] == 6.0f);
  CHECK(day04::dot_cpu({1, 1, 1}, a.data(), b.data(), 0, 0) == 6.0);
}

TEST_CASE("gemm: bad shapes and null pointers are rejected", "[cpu]") {
  float x = 0;
  CHECK_THROWS_AS(day04::check_gemm_args({0, 1, 1}, &x, &x, &x), std::invalid_argument);
  CHECK_THROWS_AS(day04::check_gemm_args({1, -3, 1}, &x, &x, &x), std::invalid_argument);
  CHECK_THROWS_AS(day04::check_gemm_args({1, 1, 1}, nullptr, &x, &x), std::invalid_argument);
  CHECK_NOTHROW(day04::check_gemm_args({1, 1, 1}, &x, &x, &x));
  CHECK_THROWS_AS(day04::gemm("no_such_variant", {1, 1, 1}, 1.f, &x, &x, 0.f, &x),
                  std::invalid_argument);
  CHECK_THROWS_AS(day04::gemm("v10_mma_bf16", {1, 1, 1}, 1.f, &x, &x, 0.f, &x),
                  std::invalid_argument);  // a bf16 variant has no fp32 entry point
}

TEST_CASE("transpose_cpu: by hand", "[cpu]") {
  const std::vector<float> in = {1, 2, 3, 4, 5, 6};  // 2 x 3
  std::vector<float> out(6);
  day04::transpose_cpu(in.data(), out.data(), 2, 3);
  CHECK(out == std::vector<float>{1, 4, 2, 5, 3, 6});  // 3 x 2
  CHECK_THROWS_AS(day04::transpose_cpu(in.data(), out.data(), 0, 3), std::invalid_argument);
}

TEST_CASE("registry: unique names, each variant names a cuBLAS row of its precision", "[cpu]") {
  const auto& vs = day04::gemm_variants();
  for (const auto& v : vs) {
    INFO(v.name);
    CHECK(day04::find_gemm_variant(v.name) == &v);
    CHECK(int(v.fp32 != nullptr) + int(v.bf16 != nullptr) + int(v.fp8 != nullptr) == 1);
    CHECK((v.bf16 != nullptr) == (v.precision == day04::Precision::kBf16));
    CHECK((v.fp8 != nullptr) == (v.precision == day04::Precision::kFp8));
    if (v.fp8 != nullptr) CHECK(v.refusal != nullptr);  // FP8 has a shape rule (K % 16)
    if (!v.is_library) {
      const auto* lib = day04::find_gemm_variant(v.library);
      REQUIRE(lib != nullptr);
      CHECK(lib->is_library);
      CHECK(lib->precision == v.precision);
    }
  }
  CHECK(day04::sgemm_v8_configs().size() >= 3);
  CHECK(std::string(day04::transpose_variants().front().name) == "t1_row_per_block");
}

TEST_CASE("row notes: the TMA kernels say how they ran a shape TMA cannot describe", "[cpu]") {
  const day04::GemmShape aligned{4096, 4096, 4096}, odd{4097, 4097, 4097}, odd_n{4096, 4100, 4096};
  for (const char* name : {"v11_wgmma_bf16", "v12_wgmma_ws_bf16", "v13_wgmma_cluster_bf16"}) {
    INFO(name);
    const auto* v = day04::find_gemm_variant(name);
    REQUIRE(v != nullptr);
    REQUIRE(v->row_note != nullptr);
    CHECK(v->row_note(aligned).empty());
    CHECK_FALSE(v->row_note(odd).empty());
    CHECK_FALSE(v->row_note(odd_n).empty());  // N % 8 == 4
  }
  CHECK(day04::find_gemm_variant("v11_wgmma_bf16")->row_note(odd).find("v10") != std::string::npos);
  CHECK(day04::find_gemm_variant("v13_wgmma_cluster_bf16")->row_note(odd).find("staged") !=
        std::string::npos);
}

TEST_CASE("quantize_e4m3: the scale maps absmax to 448, values round to e4m3, none to zero",
          "[cpu][fp8]") {
  const std::vector<float> x = {1.f, -0.5f, 0.3f, 1e-9f, -1e-9f};
  const day04::Fp8Tensor t = day04::quantize_e4m3(x);
  CHECK(t.scale == 1.f / 448.f);
  const std::vector<float> q = day04::e4m3_to_float(t.q);
  CHECK(q[0] == 448.f);
  CHECK(q[1] == -224.f);
  // 0.3 x 448 = 134.4: e4m3 has 3 mantissa bits, spacing 16 in [128, 256): 128 is nearest.
  CHECK(q[2] == 128.f);
  CHECK(q[3] == 0x1p-9f);  // would round to 0: the smallest subnormal of its sign instead
  CHECK(q[4] == -0x1p-9f);
  // Saturation at +-448: the scale makes |x| / scale <= 448 always.
  CHECK(day04::e4m3_to_float(day04::quantize_e4m3({-3.f, 2.f}).q)[0] == -448.f);
}

TEST_CASE("gemm_fp8_cpu: a 2 x 2 x 2 product by hand, with the scales", "[cpu][fp8]") {
  day04::Fp8Tensor a, b_t;
  for (float v : {1.f, 2.f, 3.f, 4.f}) a.q.push_back(__nv_fp8_e4m3(v));    // A = [1 2; 3 4]
  for (float v : {5.f, 7.f, 6.f, 8.f}) b_t.q.push_back(__nv_fp8_e4m3(v));  // B = [5 6; 7 8]
  a.scale = 0.5f;
  b_t.scale = 0.25f;
  std::vector<float> c(4, std::numeric_limits<float>::quiet_NaN());
  day04::gemm_fp8_cpu({2, 2, 2}, a, b_t, c.data());
  // A B = [19 22; 43 50], times 0.5 x 0.25
  CHECK(c == std::vector<float>{19 / 8.f, 22 / 8.f, 43 / 8.f, 50 / 8.f});
  CHECK(day04::dot_fp8_cpu({2, 2, 2}, a, b_t, 1, 0) == 43 / 8.0);
  CHECK(day04::transpose_host({1, 2, 3, 4, 5, 6}, 2, 3) == std::vector<float>{1, 4, 2, 5, 3, 6});
}

TEST_CASE("FP8: K % 16 != 0, null scales, misaligned operands and scales are refused with one line",
          "[cpu][fp8]") {
  CHECK(day04::gemm_fp8_refusal({4096, 4096, 4096}).empty());
  CHECK(day04::gemm_fp8_refusal({1, 77, 16}).empty());  // M and N are free
  const std::string why = day04::gemm_fp8_refusal({64, 64, 4097});
  CHECK(why.find("multiple of 16") != std::string::npos);
  CHECK(why.find("4112") != std::string::npos);  // the padded K it suggests
  CHECK(why.find('\n') == std::string::npos);
  alignas(16) unsigned char buf[64] = {};
  alignas(16) const float scales[8] = {1.f, 1.f};
  const float& scale = scales[0];
  CHECK_THROWS_AS(day04::check_gemm_fp8_args({2, 2, 16}, buf, buf, &scale, &scales[1], buf),
                  std::invalid_argument);  // a scale 4 bytes past a 16-byte boundary
  CHECK_THROWS_AS(day04::check_gemm_fp8_args({2, 2, 24}, buf, buf, &scale, &scale, buf),
                  std::invalid_argument);
  CHECK_THROWS_AS(day04::check_gemm_fp8_args({2, 2, 16}, buf, buf, nullptr, &scale, buf),
                  std::invalid_argument);
  CHECK_THROWS_AS(day04::check_gemm_fp8_args({2, 2, 16}, buf + 1, buf, &scale, &scale, buf),
                  std::invalid_argument);
  CHECK_THROWS_AS(day04::check_gemm_fp8_args({0, 2, 16}, buf, buf, &scale, &scale, buf),
                  std::invalid_argument);
  CHECK_NOTHROW(day04::check_gemm_fp8_args({2, 2, 16}, buf, buf, &scale, &scale, buf));
  // Every FP8 launcher checks its arguments before any CUDA call: this runs with no GPU.
  const auto* fp8 = reinterpret_cast<const __nv_fp8_e4m3*>(buf);
  auto* c = reinterpret_cast<__nv_bfloat16*>(buf);
  for (const auto& v : day04::gemm_variants()) {
    if (v.fp8 == nullptr) continue;
    INFO(v.name);
    try {
      v.fp8({2, 2, 40}, fp8, fp8, &scale, &scale, c, nullptr);
      FAIL("no exception");
    } catch (const std::invalid_argument& e) {
      CHECK(std::string(e.what()).find("multiple of 16") != std::string::npos);
    }
    CHECK(v.refusal({2, 2, 40}).find("multiple of 16") != std::string::npos);  // no GPU touched
  }
}

TEST_CASE("FP8 tolerance: 2^-9 sqrt(K) + 8 u K absolute, 2^-8 relative (README, FP8)",
          "[cpu][fp8]") {
  const gpu100::Tolerance t = day04::gemm_tolerance(day04::Precision::kFp8, 4096);
  CHECK(t.abs_tol == Approx(0.125 + 8 * 4096 * 0x1p-24));
  CHECK(t.rel_tol == 0x1p-8);
  CHECK(std::string(gpu100::to_string(day04::Precision::kFp8)) == "fp8");
}
