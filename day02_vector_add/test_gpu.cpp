// day02 GPU tests: every variant of the day against the CPU reference at awkward sizes, with fresh
// seeded random inputs and the output poisoned with NaN before each launch (test_suite.hpp). A
// learner's variant (mine/*.cu) gets test cases of its own, named after it (mine_test.cpp.in).
#include "common/tags.hpp"
#include "test_suite.hpp"

namespace {

// The day's own variants (a learner's are checked by their own test cases).
std::vector<const day02::Variant*> own_variants() {
  std::vector<const day02::Variant*> out;
  for (const auto& v : day02::variants()) {
    if (!gpu100::has_tag(v.tags, "mine")) out.push_back(&v);
  }
  return out;
}

}  // namespace

TEST_CASE("every variant matches the CPU exactly at awkward sizes", "[gpu]") {
  GPU100_REQUIRE_GPU();
  uint64_t seed = 1000;
  for (const auto* v : own_variants()) day02_tests::check_sizes(*v, seed += 100);
}

TEST_CASE("every variant works in place (C aliases A)", "[gpu]") {
  GPU100_REQUIRE_GPU();
  for (const auto* v : own_variants()) day02_tests::check_in_place(*v);
}

TEST_CASE("n = 0 launches nothing and a negative n is rejected", "[gpu]") {
  GPU100_REQUIRE_GPU();
  for (const auto* v : own_variants()) day02_tests::check_bad_sizes(*v);
}
