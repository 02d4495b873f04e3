#pragma once
// day06's GPU checks of one reduction: the day's tests run them on every reduction of the
// registry, and the test cases generated for a learner's reduction (mine_test.cpp.in) on that one.
#include <algorithm>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "common/catch.hpp"
#include "common/compare.hpp"
#include "common/cuda_check.hpp"
#include "common/device_buffer.hpp"
#include "common/random.hpp"
#include "scan.cuh"

namespace day06_tests {

// 1; around a warp; around the tiles of every variant (256, 512, 1024, 2048, 4096, 8192
// elements); many tiles + 7; v6's big tiles (26624 elements, used from ~5.3 M on an H100) ending
// one element short of and one past a tile; 2^24 + 3 (631 big v6 tiles, three levels of v4's
// tile sums at 2048).
inline const std::vector<int64_t> kSizes = {1,
                                            31,
                                            32,
                                            33,
                                            255,
                                            257,
                                            511,
                                            513,
                                            1023,
                                            1025,
                                            2047,
                                            2049,
                                            4095,
                                            4097,
                                            8191,
                                            8193,
                                            409607,
                                            200 * 26624 - 1,
                                            200 * 26624 + 1,
                                            (1 << 24) + 3};

inline void sync_check() {
  CUDA_CHECK(cudaPeekAtLastError());
  CUDA_CHECK(cudaDeviceSynchronize());
}

template <typename T>
inline std::vector<T> input(int64_t n, uint64_t seed) {
  if constexpr (std::is_same_v<T, float>) {
    return gpu100::random_vector<float>(static_cast<size_t>(n), seed);
  } else {
    return gpu100::random_ints(static_cast<size_t>(n), seed, -100, 100);  // |prefix| < 2^31
  }
}

inline const day06::ReduceVariant& reduction(const std::string& name) {
  const day06::ReduceVariant* v = day06::find_reduce_variant(name);
  if (v == nullptr) throw std::logic_error("no reduction " + name);
  return *v;
}

// Fresh inputs at every size (fp32 in [-1, 1], int32 in [-100, 100]), the output poisoned, the
// workspace the variant asks for; fp32 within the day's bound, int32 exact.
template <typename T>
void check_reduction(const day06::ReduceVariant& v, uint64_t seed) {
  for (int64_t n : gpu100::test_sizes(kSizes)) {
    INFO(v.name << " " << day06::precision_name<T>() << ", n = " << n);
    const std::vector<T> x = input<T>(n, ++seed);
    const size_t ws_bytes = v.workspace_bytes(n);
    gpu100::DeviceBuffer<T> d_x(n), d_out(1);
    gpu100::DeviceBuffer<char> ws(std::max<size_t>(ws_bytes, 1));
    d_x.upload(x);
    d_out.poison();
    day06::launcher<T>(v)(d_x.data(), d_out.data(), n, ws.data(), ws_bytes, nullptr);
    sync_check();
    const gpu100::CompareResult cmp = day06::check_reduce(x, d_out.download()[0]);
    INFO(cmp.summary());
    REQUIRE(cmp.ok);
  }
}

// n = 0 writes the empty sum (0); a negative n throws std::invalid_argument before any CUDA call.
inline void check_reduction_bad_sizes(const day06::ReduceVariant& v) {
  INFO(v.name);
  gpu100::DeviceBuffer<float> x(4), out(1);
  gpu100::DeviceBuffer<char> ws(std::max<size_t>(v.workspace_bytes(1), 1));
  out.poison();
  v.fp32(x.data(), out.data(), 0, ws.data(), ws.bytes(), nullptr);
  sync_check();
  CHECK(out.download()[0] == 0.0f);
  CHECK_THROWS_AS(v.fp32(x.data(), out.data(), -1, ws.data(), ws.bytes(), nullptr),
                  std::invalid_argument);
}

}  // namespace day06_tests
