#pragma once
// day02's GPU checks of one variant: the day's tests run them on every variant of the registry,
// and the test cases generated for a learner's variant (mine_test.cpp.in) on that one.
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/catch.hpp"
#include "common/compare.hpp"
#include "common/cuda_check.hpp"
#include "common/device_buffer.hpp"
#include "common/random.hpp"
#include "vector_add.cuh"

namespace day02_tests {

// 1, a prime below a warp, one past a block, a prime, past a block multiple, 2^20 + 7, and one
// element past the 2^24 mark.
inline const std::vector<int64_t> kSizes = {1, 31, 257, 1000, 65537, (1 << 20) + 7, (1 << 24) + 1};

inline const day02::Variant& variant(const std::string& name) {
  const day02::Variant* v = day02::find_variant(name);
  if (v == nullptr) throw std::logic_error("no variant " + name);
  return *v;
}

// Fresh random inputs at every size, C poisoned with NaN, compared exactly with the CPU.
inline void check_sizes(const day02::Variant& v, uint64_t seed) {
  for (int64_t n : gpu100::test_sizes(kSizes)) {
    INFO("variant " << v.name << ", n = " << n);
    const auto a = gpu100::random_vector<float>(n, ++seed);
    const auto b = gpu100::random_vector<float>(n, ++seed);
    std::vector<float> ref(n);
    day02::vector_add_cpu(a.data(), b.data(), ref.data(), n);
    gpu100::DeviceBuffer<float> d_a(n), d_b(n), d_c(n);
    d_a.upload(a);
    d_b.upload(b);
    d_c.poison();
    v.launch(d_a.data(), d_b.data(), d_c.data(), n, nullptr);
    CUDA_CHECK(cudaPeekAtLastError());
    CUDA_CHECK(cudaDeviceSynchronize());
    const auto cmp = gpu100::compare(ref, d_c.download(), 0.0, 0.0);
    INFO(cmp.summary());
    REQUIRE(cmp.ok);
  }
}

// C may alias A.
inline void check_in_place(const day02::Variant& v) {
  const int64_t n = 100003;
  INFO("variant " << v.name << ", n = " << n << ", C aliases A");
  const auto a = gpu100::random_vector<float>(n, 77);
  const auto b = gpu100::random_vector<float>(n, 78);
  std::vector<float> ref(n);
  day02::vector_add_cpu(a.data(), b.data(), ref.data(), n);
  gpu100::DeviceBuffer<float> d_a(n), d_b(n);
  d_a.upload(a);
  d_b.upload(b);
  v.launch(d_a.data(), d_b.data(), d_a.data(), n, nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());
  const auto cmp = gpu100::compare(ref, d_a.download(), 0.0, 0.0);
  INFO(cmp.summary());
  REQUIRE(cmp.ok);
}

// n = 0 launches nothing; a negative n throws std::invalid_argument before any CUDA call.
inline void check_bad_sizes(const day02::Variant& v) {
  INFO("variant " << v.name);
  gpu100::DeviceBuffer<float> d(4);
  d.poison();
  v.launch(d.data(), d.data(), d.data(), 0, nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());
  for (float x : d.download()) CHECK(std::isnan(x));  // untouched
  CHECK_THROWS_AS(v.launch(d.data(), d.data(), d.data(), -5, nullptr), std::invalid_argument);
  CHECK(cudaGetLastError() == cudaSuccess);
}

}  // namespace day02_tests
