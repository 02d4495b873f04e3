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

}  // namespace gpu100
