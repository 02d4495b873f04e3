// day06 CPU tests: the references against hand-worked values, the fp32 tolerance, the registries
// and the rejection of bad sizes (no GPU needed).
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "common/catch.hpp"
#include "scan.cuh"

TEST_CASE("reduce_cpu sums by hand", "[cpu]") {
  const std::vector<float> f = {1.5f, -2.0f, 4.25f, 0.25f};
  CHECK(day06::reduce_cpu(f.data(), 4) == 4.0);
  CHECK(day06::reduce_cpu(f.data(), 0) == 0.0);
  const std::vector<int32_t> i = {3, -7, 100, 5};
  CHECK(day06::reduce_cpu(i.data(), 4) == 101);
  // Wraps modulo 2^32 like the GPU's 32-bit adds: 2^31 - 1 + 1 = -2^31.
  const std::vector<int32_t> big = {2147483647, 1};
  CHECK(day06::reduce_cpu(big.data(), 2) == -2147483647 - 1);
}

TEST_CASE("scan_cpu inclusive and exclusive by hand", "[cpu]") {
  const std::vector<int32_t> x = {3, 1, 7, 0, 4, 1, 6, 3};
  std::vector<int32_t> y(8);
  day06::scan_cpu(x.data(), y.data(), 8, false);
  CHECK(y == std::vector<int32_t>{3, 4, 11, 11, 15, 16, 22, 25});
  day06::scan_cpu(x.data(), y.data(), 8, true);
  CHECK(y == std::vector<int32_t>{0, 3, 4, 11, 11, 15, 16, 22});
  const std::vector<float> f = {0.5f, 0.25f, -1.0f, 2.0f};
  std::vector<float> g(4);
  day06::scan_cpu(f.data(), g.data(), 4, false);
  CHECK(g == std::vector<float>{0.5f, 0.75f, -0.25f, 1.75f});
  day06::scan_cpu(f.data(), g.data(), 4, true);
  CHECK(g == std::vector<float>{0.0f, 0.5f, 0.75f, -0.25f});
}

TEST_CASE("scan_cpu accumulates fp32 in double", "[cpu]") {
  // 2^24 + 1 + 1: in fp32, 2^24 + 1 rounds back to 2^24 each time; in double it does not.
  const std::vector<float> f = {16777216.0f, 1.0f, 1.0f};
  std::vector<float> g(3);
  day06::scan_cpu(f.data(), g.data(), 3, false);
  CHECK(g[2] == 16777218.0f);
}

TEST_CASE("check_scan applies the sum of abs bound", "[cpu]") {
  const std::vector<float> x = {1.0f, -1.0f, 1.0f, -1.0f};
  // The bound at element i is 32 * 2^-24 * (i + 1): about 1.9e-6 at i = 0.
  std::vector<float> got = {1.0f, 0.0f, 1.0f, 0.0f};
  CHECK(day06::check_scan(x, got, false).ok);
  got[1] = 1e-6f;  // inside 32 * 2^-24 * 2 = 3.8e-6
  CHECK(day06::check_scan(x, got, false).ok);
  got[1] = 1e-5f;  // outside
  CHECK_FALSE(day06::check_scan(x, got, false).ok);
  got[1] = std::nanf("");  // a poisoned element never passes
  CHECK_FALSE(day06::check_scan(x, got, false).ok);
  CHECK(day06::check_scan(x, std::vector<float>{0.0f, 1.0f, 0.0f, 1.0f}, true).ok);
  CHECK_FALSE(day06::check_scan(x, std::vector<float>{0.0f, 1.0f, 0.0f}, true).ok);
  const std::vector<int32_t> xi = {1, 2, 3};
  CHECK(day06::check_scan(xi, std::vector<int32_t>{1, 3, 6}, false).ok);
  CHECK_FALSE(day06::check_scan(xi, std::vector<int32_t>{1, 3, 7}, false).ok);
  CHECK(day06::check_reduce(xi, 6).ok);
  CHECK_FALSE(day06::check_reduce(xi, 7).ok);
  CHECK(day06::check_reduce(x, 0.0f).ok);
  CHECK_FALSE(day06::check_reduce(x, 1e-3f).ok);
}

TEST_CASE("the registries list every variant once with a library row last", "[cpu]") {
  const auto& reduces = day06::reduce_variants();
  REQUIRE_FALSE(reduces.empty());
  CHECK(std::strcmp(reduces.front().name, "r1_interleaved_divergent") == 0);
  CHECK(reduces.back().is_library);
  const auto& scans = day06::scan_variants();
  REQUIRE_FALSE(scans.empty());
  CHECK(scans.back().is_library);
  CHECK(day06::find_scan_variant("v6_decoupled_lookback") != nullptr);
  CHECK(day06::find_scan_variant("v99") == nullptr);
  CHECK(day06::find_reduce_variant("r7_vectorized") != nullptr);
  for (const auto& v : scans) {
    CHECK(v.fp32 != nullptr);
    CHECK(v.int32 != nullptr);
  }
  CHECK(day06::find_scan_variant("v1_kogge_stone")->max_n == 1024);
  CHECK(day06::find_scan_variant("v4_hierarchical")->max_n == day06::kMaxN);
}

TEST_CASE("bad sizes are rejected before any CUDA call", "[cpu]") {
  std::vector<float> f(4);
  std::vector<int32_t> i(4);
  CHECK_THROWS_AS(day06::scan_cpu(f.data(), f.data(), -1, false), std::invalid_argument);
  CHECK_THROWS_AS(day06::reduce_cpu(i.data(), -3), std::invalid_argument);
  // The launchers check n first, so these throw without touching the GPU.
  for (const auto& v : day06::scan_variants()) {
    INFO(v.name);
    CHECK_THROWS_AS(v.fp32(nullptr, nullptr, -5, false, nullptr, 0, nullptr),
                    std::invalid_argument);
    CHECK_THROWS_AS(v.int32(nullptr, nullptr, v.max_n + 1, false, nullptr, 0, nullptr),
                    std::invalid_argument);
  }
  for (const auto& v : day06::reduce_variants()) {
    INFO(v.name);
    CHECK_THROWS_AS(v.fp32(nullptr, nullptr, -1, nullptr, 0, nullptr), std::invalid_argument);
    CHECK_THROWS_AS(v.int32(nullptr, nullptr, day06::kMaxN + 1, nullptr, 0, nullptr),
                    std::invalid_argument);
  }
}

TEST_CASE("the workspaces grow with n", "[cpu]") {
  CHECK(day06::reduce_workspace_bytes(1 << 20) >= 2 * 4 * ((1 << 20) / 256));
  CHECK(day06::scan_v4_workspace_bytes(2048) == 0);  // one tile: no tile sums
  CHECK(day06::scan_v4_workspace_bytes(2049) > 0);
  CHECK(day06::scan_v6_workspace_bytes(1) >= 2 * 8);  // counter + one status word
  CHECK(day06::scan_v6_workspace_bytes(day06::kMaxN) >= (day06::kMaxN / 8192 + 1) * 8);
}
