// day04 CPU tests: the references against values worked out by hand, argument checks, registry.
#include <stdexcept>
#include <string>
#include <vector>

#include "common/catch.hpp"
#include "gemm.hpp"
#include "transpose.hpp"

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
    CHECK(((v.fp32 != nullptr) != (v.bf16 != nullptr)));
    CHECK((v.bf16 != nullptr) == (v.precision == day04::Precision::kBf16));
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
