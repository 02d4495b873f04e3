#pragma once
// Catch2 2.13 / 3.x compatibility: every test file includes this header instead of Catch2's, so
// the same tests build on Debian 12 / Ubuntu 22.04 (Catch2 2.13) and Ubuntu 24.04 (Catch2 3.x).
//
// Skipping. A test case that cannot run here ends with GPU100_SKIP(reason), the one way a test
// case skips: it prints "GPU100_SKIP: <reason>", which ctest's skip rule matches (see
// cmake/Gpu100.cmake), then leaves the test case. Catch2 3's own SKIP, which it calls, also
// ends the process with status 4, which ctest takes as Skipped as well; Catch2 2.13 has no skip,
// so there the printed line is all ctest sees. Never call Catch2's SKIP directly: the test
// common.ctest_reports_skips fails when a skip would reach ctest as a failure.
//   GPU100_REQUIRE_GPU() starts every GPU test case: it skips on a machine with no CUDA device,
//   or when the build holds no code the GPU can run.
//   GPU100_REQUIRE_BUILD(need, what) does the same for a test case of one variant that needs
//   newer GPU code than the build has for this GPU ("needs an sm_90a build"). A test case that
//   loops over every variant calls gpu100::lacks_code() instead and leaves the missing ones out.
//   GPU100_SKIP_LACKED(registry) skips a test case that names what the build lacks.
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "common/arch.hpp"
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

// Not for test files: GPU100_SKIP prints the line ctest needs and then calls this.
#if GPU100_CATCH2_MAJOR == 3 && defined(SKIP)
#define GPU100_DETAIL_END_SKIPPED(msg) SKIP(msg)
#else
#define GPU100_DETAIL_END_SKIPPED(msg) return
#endif

#define GPU100_SKIP(reason)                                           \
  do {                                                                \
    const std::string gpu100_skip_reason_ = (reason);                 \
    std::cout << "GPU100_SKIP: " << gpu100_skip_reason_ << std::endl; \
    GPU100_DETAIL_END_SKIPPED(gpu100_skip_reason_);                   \
  } while (0)

#define GPU100_REQUIRE_GPU()                                                     \
  do {                                                                           \
    const std::string gpu100_reason_ = ::gpu100::gpu_unusable_reason();          \
    if (!gpu100_reason_.empty()) GPU100_SKIP(gpu100_reason_ + ", test skipped"); \
  } while (0)

#define GPU100_REQUIRE_BUILD(need, what)                                                  \
  do {                                                                                    \
    GPU100_REQUIRE_GPU();                                                                 \
    if (!::gpu100::build_has(need)) {                                                     \
      GPU100_SKIP(std::string(what) + " " + ::gpu100::needs_text(need) +                  \
                  " (CMAKE_CUDA_ARCHITECTURES=" + ::gpu100::build_architectures() + ")"); \
    }                                                                                     \
  } while (0)

// GPU100_SKIP_LACKED(registry) ends a test case as Skipped, listing the registry's variants whose
// code this build lacks for the running GPU, when there are any. Each day with such variants has
// one test case that does it, so ctest's skip list names them and the build each needs.
#define GPU100_SKIP_LACKED(registry)                                              \
  do {                                                                            \
    const std::string gpu100_lacked_ = ::gpu100::lacked_variants(registry);       \
    if (!gpu100_lacked_.empty()) {                                                \
      GPU100_SKIP(std::string("this build (CMAKE_CUDA_ARCHITECTURES=") +          \
                  ::gpu100::build_architectures() + ") lacks " + gpu100_lacked_); \
    }                                                                             \
  } while (0)

namespace gpu100 {

// "v5_flash_wgmma (needs an sm_90a build), ...": the variants of a registry (entries with .name
// and .needs) that this build cannot run on this GPU; "" when it runs them all.
template <class Registry>
std::string lacked_variants(const Registry& registry) {
  std::string out;
  for (const auto& v : registry) {
    if (build_has(v.needs)) continue;
    out += (out.empty() ? "" : ", ") + std::string(v.name) + " (" + needs_text(v.needs) + ")";
  }
  return out;
}

// In a loop over a registry: true when this build lacks the variant's code for this GPU. The loop
// skips it (the day's GPU100_SKIP_LACKED test case reports it); one line says so in the log.
template <class Variant>
bool lacks_code(const Variant& v) {
  if (build_has(v.needs)) return false;
  std::cout << "not run here: " << v.name << " " << needs_text(v.needs) << std::endl;
  return true;
}

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
