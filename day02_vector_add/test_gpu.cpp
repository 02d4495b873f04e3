// day02 GPU tests: every variant against the CPU reference at awkward sizes, with fresh seeded
// random inputs and the output poisoned with NaN before each launch.
#include <cmath>
#include <stdexcept>
#include <vector>

#include "common/catch.hpp"
#include "common/compare.hpp"
#include "common/cuda_check.hpp"
#include "common/device_buffer.hpp"
#include "common/random.hpp"
#include "vector_add.cuh"

namespace {

// 1, a prime below a warp, one past a block, a prime, past a block multiple, 2^20 + 7, and one
// element past the 2^24 mark.
const std::vector<int64_t> kSizes = {1, 31, 257, 1000, 65537, (1 << 20) + 7, (1 << 24) + 1};

}  // namespace

TEST_CASE("every variant matches the CPU exactly at awkward sizes", "[gpu]") {
  GPU100_REQUIRE_GPU();
  uint64_t seed = 1000;
  for (const auto& v : day02::variants()) {
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
}

TEST_CASE("every variant works in place (C aliases A)", "[gpu]") {
  GPU100_REQUIRE_GPU();
  const int64_t n = 100003;
  for (const auto& v : day02::variants()) {
    INFO("variant " << v.name);
    const auto a = gpu100::random_vector<float>(n, 77);
    const auto b = gpu100::random_vector<float>(n, 78);
    std::vector<float> ref(n);
    day02::vector_add_cpu(a.data(), b.data(), ref.data(), n);
    gpu100::DeviceBuffer<float> d_a(n), d_b(n);
    d_a.upload(a);
    d_b.upload(b);
    v.launch(d_a.data(), d_b.data(), d_a.data(), n, nullptr);
    CUDA_CHECK(cudaDeviceSynchronize());
    REQUIRE(gpu100::compare(ref, d_a.download(), 0.0, 0.0).ok);
  }
}

TEST_CASE("n = 0 launches nothing and a negative n is rejected", "[gpu]") {
  GPU100_REQUIRE_GPU();
  gpu100::DeviceBuffer<float> d(4);
  d.poison();
  for (const auto& v : day02::variants()) {
    INFO("variant " << v.name);
    v.launch(d.data(), d.data(), d.data(), 0, nullptr);
    CUDA_CHECK(cudaDeviceSynchronize());
    for (float x : d.download()) CHECK(std::isnan(x));  // untouched
    CHECK_THROWS_AS(v.launch(d.data(), d.data(), d.data(), -5, nullptr), std::invalid_argument);
  }
  CHECK(cudaGetLastError() == cudaSuccess);
}
