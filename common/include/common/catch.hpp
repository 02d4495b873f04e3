#pragma once
// Catch2 2.13 / 3.x compatibility: every test file includes this header instead of Catch2's, so
// the same tests build on Debian 12 / Ubuntu 22.04 (Catch2 2.13) and Ubuntu 24.04 (Catch2 3.x).
//
// GPU100_REQUIRE_GPU() starts every GPU test case: on a machine with no CUDA device it prints
// GPU100_SKIP (which ctest reports as Skipped, see cmake/Gpu100.cmake) and leaves the test case.
#include <iostream>

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
