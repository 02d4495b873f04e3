#pragma once
// Catch2 2.13 / 3.x compatibility: every test file includes this header instead of Catch2's, so
// the same tests build on Debian 12 / Ubuntu 22.04 (Catch2 2.13) and Ubuntu 24.04 (Catch2 3.x).
//
// GPU100_REQUIRE_GPU() starts every GPU test case: on a machine with no CUDA device it prints
// GPU100_SKIP (which ctest reports as Skipped, see cmake/Gpu100.cmake) and leaves the test case.
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <vector>

#include "common/device_info.hpp"

#if GPU100_CATCH2_MAJOR == 3
#include <catch2/catch_approx.hpp>
#include <catch2/catch_test_macros.hpp>
#include <catch2/generators/catch_generators.hpp>
#include <catch2/matchers/catch_matchers_floating_point.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#else
#include <catch2/catch.hpp>
namespace Catch {
using Detail::Approx;  // Catch2 3.x spells it Catch::Approx
}
#endif

#if GPU100_CATCH2_MAJOR == 3 && defined(SKIP)
#define GPU100_SKIP_TEST_CASE(msg) SKIP(msg)
#else
#define GPU100_SKIP_TEST_CASE(msg) return
#endif

#define GPU100_REQUIRE_GPU()                                                 \
  do {                                                                       \
    if (!::gpu100::gpu_available()) {                                        \
      std::cout << "GPU100_SKIP: no CUDA device, test skipped" << std::endl; \
      GPU100_SKIP_TEST_CASE("no CUDA device");                               \
    }                                                                        \
  } while (0)

namespace gpu100 {

// The test sizes at or below $GPU100_TEST_MAX_N (all of them when it is unset). The sanitizer
// runs set it, since compute-sanitizer slows kernels and copies by one or two orders of magnitude.
inline std::vector<int64_t> test_sizes(std::vector<int64_t> sizes) {
  const char* cap = std::getenv("GPU100_TEST_MAX_N");
  if (cap == nullptr || *cap == '\0') return sizes;
  const int64_t max_n = std::strtoll(cap, nullptr, 10);
  std::vector<int64_t> kept;
  for (int64_t n : sizes) {
    if (n <= max_n) kept.push_back(n);
  }
  return kept;
}

// True under scripts/sanitize.sh ($GPU100_SANITIZE set). The tests then skip the library rows
// (cuDNN): the sanitizers check this project's kernels, and cudnnFind* times every algorithm,
// which under initcheck took longer than the whole run's time limit on the H100.
inline bool sanitizer_run() {
  const char* v = std::getenv("GPU100_SANITIZE");
  return v != nullptr && *v != '\0' && *v != '0';
}

}  // namespace gpu100
