// day02 CPU tests: the reference against values worked out by hand, and bad sizes.
#include <stdexcept>
#include <vector>

#include "common/catch.hpp"
#include "vector_add.cuh"

TEST_CASE("vector_add_cpu: hand-checked values", "[cpu]") {
  const std::vector<float> a = {1.0f, -2.5f, 0.25f, 1e30f, 3.0f};
  const std::vector<float> b = {10.0f, 2.5f, 0.5f, 1e30f, -1e-8f};
  std::vector<float> c(a.size(), -1.0f);
  day02::vector_add_cpu(a.data(), b.data(), c.data(), static_cast<int64_t>(a.size()));
  CHECK(c[0] == 11.0f);
  CHECK(c[1] == 0.0f);
  CHECK(c[2] == 0.75f);
  CHECK(c[3] == 2e30f);
  CHECK(c[4] == 3.0f);  // 1e-8 is below half an ulp of 3.0f: rounds back to 3
}

TEST_CASE("vector_add_cpu: n = 0 does nothing, negative n is rejected", "[cpu]") {
  std::vector<float> c = {7.0f};
  day02::vector_add_cpu(nullptr, nullptr, c.data(), 0);
  CHECK(c[0] == 7.0f);
  CHECK_THROWS_AS(day02::vector_add_cpu(c.data(), c.data(), c.data(), -1), std::invalid_argument);
}

TEST_CASE("registry: names are unique and the library row is marked", "[cpu]") {
  const auto& vs = day02::variants();
  REQUIRE(vs.size() >= 2);
  int libraries = 0;
  for (size_t i = 0; i < vs.size(); ++i) {
    CHECK(day02::find_variant(vs[i].name) == &vs[i]);
    libraries += vs[i].is_library ? 1 : 0;
  }
  CHECK(libraries == 1);
  CHECK(day02::find_variant("no_such_variant") == nullptr);
}
