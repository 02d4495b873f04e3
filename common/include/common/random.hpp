#pragma once
// Seeded random inputs, reproducible on every platform and never zero.
//
// Element i is a pure function of (seed, i) through the SplitMix64 hash, so the values do not
// depend on the standard library's distributions (which differ between libstdc++ and libc++),
// and a 2^28-element input fills in well under a second.
#include <cstddef>
#include <cstdint>
#include <vector>

// The hash and the value below are callable from device code too (fill_uniform_device,
// device_random.hpp, computes the same values on the GPU).
#if defined(__CUDACC__)
#define GPU100_HOST_DEVICE __host__ __device__
#else
#define GPU100_HOST_DEVICE
#endif

namespace gpu100 {

// The SplitMix64 finaliser (Steele, Lea, Flood 2014): a well-mixed 64-bit hash of x.
GPU100_HOST_DEVICE constexpr uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// A value in (lo, hi): the 24-bit grid point (k + 1/2) / 2^24 mapped onto the interval, so with
// a symmetric interval such as [-1, 1] it is never exactly zero (zero would need 2k + 1 = 2^24).
GPU100_HOST_DEVICE inline double uniform_at(uint64_t seed, uint64_t i, double lo, double hi) {
  const uint64_t k = splitmix64(seed * 0x9E3779B97F4A7C15ull + i) >> 40;  // top 24 bits
  return lo + (hi - lo) * ((double(k) + 0.5) / double(1 << 24));
}

// Fills data[0, n) with values uniform in (lo, hi); [-1, 1] by default.
template <typename T>
void fill_uniform(T* data, size_t n, uint64_t seed, double lo = -1.0, double hi = 1.0) {
  for (size_t i = 0; i < n; ++i) data[i] = static_cast<T>(uniform_at(seed, i, lo, hi));
}

template <typename T = float>
std::vector<T> random_vector(size_t n, uint64_t seed, double lo = -1.0, double hi = 1.0) {
  std::vector<T> v(n);
  fill_uniform(v.data(), n, seed, lo, hi);
  return v;
}

// Integers uniform in [lo, hi] (inclusive), for exact integer tests; zero is allowed only when
// the caller's range includes it.
inline std::vector<int32_t> random_ints(size_t n, uint64_t seed, int32_t lo, int32_t hi) {
  std::vector<int32_t> v(n);
  const uint64_t span = uint64_t(int64_t(hi) - int64_t(lo) + 1);
  for (size_t i = 0; i < n; ++i) {
    v[i] = static_cast<int32_t>(int64_t(lo) +
                                int64_t(splitmix64(seed * 0xD1B54A32D192ED03ull + i) % span));
  }
  return v;
}

}  // namespace gpu100
