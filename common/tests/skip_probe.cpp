// common_skip_probe: the test cases common.ctest_reports_skips hands to ctest under the project's
// skip rule (cmake/check_skip_rule.cmake). They are hidden (the "[." tag), so the executable is
// never registered with the project's ctest and a plain ctest run does not list them.
#include "common/catch.hpp"

TEST_CASE("probe: skips through GPU100_SKIP", "[.probe]") {
  GPU100_SKIP("the probe's reason");
  FAIL("not reached: GPU100_SKIP leaves the test case");
}

#if GPU100_CATCH2_MAJOR == 3
// The case that once reached ctest as a failure: Catch2's own SKIP, with no GPU100_SKIP line.
TEST_CASE("probe: skips through Catch2's own SKIP", "[.probe]") {
  SKIP("planted: Catch2's SKIP called directly");
}
#endif

TEST_CASE("probe: passes", "[.probe]") {
  CHECK(1 + 1 == 2);
}

TEST_CASE("probe: fails", "[.probe]") {
  CHECK(1 + 1 == 3);
}
