#pragma once
// Small integer helpers, defined once for the whole repository.
#include <cuda_runtime.h>  // __host__ __device__

#include <cstdint>

namespace gpu100 {

// ceil(a / b) for positive integers: the number of blocks (or tiles) needed to cover a elements.
template <typename T>
constexpr __host__ __device__ T ceil_div(T a, T b) {
  return (a + b - 1) / b;
}

// Rounds a up to a multiple of b.
template <typename T>
constexpr __host__ __device__ T round_up(T a, T b) {
  return ceil_div(a, b) * b;
}

// True when p is 16-byte aligned, so it may be read or written as float4 / uint4, or copied by
// a 16-byte cp.async or the TMA. cudaMalloc returns 256-byte-aligned memory, but the launchers
// take any pointer (a + 1 is legal), and a 16-byte access through a misaligned pointer faults.
inline __host__ __device__ bool aligned16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

}  // namespace gpu100
