#pragma once
// day06_scan: the pieces the kernels share. Internal: only this day's .cu files include it.
//
// - argument checks and the carving of a workspace into aligned arrays;
// - warp_reduce / warp_inclusive_scan: the __shfl_down_sync / __shfl_up_sync ladders;
// - block_reduce / block_exclusive_scan: a warp step, the warp totals through shared memory, a
//   second warp step over them;
// - the tile helpers of v4..v6: a tile is THREADS x ITEMS consecutive elements, thread t owns
//   ITEMS consecutive elements of it (the "blocked" arrangement), loaded with 16-byte vectors when
//   the tile is full and the pointer aligned.
#include <cuda_runtime.h>

#include <cstdint>
#include <stdexcept>
#include <string>

#include "common/math.hpp"

namespace day06::detail {

constexpr unsigned kFullMask = 0xffffffffu;

inline void check_n(int64_t n, int64_t max_n, const char* who) {
  if (n < 0) {
    throw std::invalid_argument(std::string(who) + ": n must be >= 0, got " + std::to_string(n));
  }
  if (n > max_n) {
    throw std::invalid_argument(std::string(who) + ": n = " + std::to_string(n) +
                                " is more than this variant's maximum " + std::to_string(max_n));
  }
}

using gpu100::aligned16;  // common/math.hpp

// Hands out 256-byte-aligned pieces of a caller's workspace; throws when it is too small.
class Carver {
 public:
  Carver(void* base, size_t bytes, const char* who)
      : base_(static_cast<char*>(base)), bytes_(bytes), who_(who) {}
  template <typename U>
  U* take(size_t count) {
    const size_t begin = used_;
    used_ = gpu100::round_up<size_t>(used_ + count * sizeof(U), 256);
    if (used_ > bytes_ || (count > 0 && base_ == nullptr)) {
      throw std::invalid_argument(std::string(who_) + ": workspace too small (" +
                                  std::to_string(bytes_) + " bytes)");
    }
    return reinterpret_cast<U*>(base_ + begin);
  }
  // The bytes `take` would need for the same sequence of counts.
  template <typename U>
  static size_t need(size_t count) {
    return gpu100::round_up<size_t>(count * sizeof(U), 256);
  }

 private:
  char* base_;
  size_t bytes_;
  size_t used_ = 0;
  const char* who_;
};

// The number of SMs of the current device, asked once.
int sm_count();

// 16 bytes of T: float4 or int4.
template <typename T>
struct Vec4;
template <>
struct Vec4<float> {
  using type = float4;
};
template <>
struct Vec4<int32_t> {
  using type = int4;
};

// ---- warp level ----

// Sum over the 32 lanes, left in lane 0 (tree order: lane i adds lane i + 16, + 8, ...).
template <typename T>
__device__ __forceinline__ T warp_reduce(T v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(kFullMask, v, offset);
  return v;
}

// Inclusive scan over the 32 lanes (Kogge-Stone with shuffles: 5 steps, lane i adds the value of
// lane i - 1, i - 2, i - 4, ... when that lane exists).
template <typename T>
__device__ __forceinline__ T warp_inclusive_scan(T v) {
  const int lane = threadIdx.x & 31;
  for (int offset = 1; offset < 32; offset <<= 1) {
    const T other = __shfl_up_sync(kFullMask, v, offset);
    if (lane >= offset) v += other;
  }
  return v;
}

// ---- block level (THREADS a multiple of 32, at most 1024) ----

// The block's sum, valid in thread 0. `warp_sums` holds THREADS / 32 elements of shared memory;
// the caller must __syncthreads() before reusing it.
template <typename T, int THREADS>
__device__ __forceinline__ T block_reduce(T v, T* warp_sums) {
  constexpr int kWarps = THREADS / 32;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warp_reduce(v);
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();  // every warp's sum is in shared memory
  T total = T(0);
  if (warp == 0) {
    total = warp_reduce(lane < kWarps ? warp_sums[lane] : T(0));
  }
  return total;
}

// The exclusive prefix of v over the threads of the block (thread 0 gets 0), and the block's
// total in `block_total` for every thread. `warp_sums` holds THREADS / 32 elements of shared
// memory; the caller must __syncthreads() before reusing it.
template <typename T, int THREADS>
__device__ __forceinline__ T block_exclusive_scan(T v, T* warp_sums, T& block_total) {
  constexpr int kWarps = THREADS / 32;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const T inclusive = warp_inclusive_scan(v);
  // The exclusive value of a lane is its left neighbour's inclusive one (not inclusive - v, which
  // would round once more in fp32).
  T exclusive = __shfl_up_sync(kFullMask, inclusive, 1);
  if (lane == 0) exclusive = T(0);
  if (lane == 31) warp_sums[warp] = inclusive;
  __syncthreads();  // every warp total is written
  if (warp == 0) {
    T w = lane < kWarps ? warp_sums[lane] : T(0);
    w = warp_inclusive_scan(w);
    if (lane < kWarps) warp_sums[lane] = w;  // now the inclusive scan of the warp totals
  }
  __syncthreads();  // the scanned warp totals are visible
  block_total = warp_sums[kWarps - 1];
  return warp > 0 ? warp_sums[warp - 1] + exclusive : exclusive;
}

// ---- tiles (v4..v6) ----

// Loads thread t's ITEMS elements of the tile starting at `base`: x[base + t*ITEMS + j]; elements
// at or past n read as 0. A full tile with a 16-byte-aligned x uses ITEMS / 4 vector loads.
template <typename T, int ITEMS>
__device__ __forceinline__ void load_items(const T* __restrict__ x, int64_t base, int64_t n,
                                           bool vector_ok, T (&items)[ITEMS]) {
  static_assert(ITEMS % 4 == 0, "ITEMS must be a multiple of 4 for the 16-byte loads");
  const int64_t first = base + static_cast<int64_t>(threadIdx.x) * ITEMS;
  if (vector_ok && first + ITEMS <= n) {
    using V = typename Vec4<T>::type;
    const V* src = reinterpret_cast<const V*>(x + first);
#pragma unroll
    for (int k = 0; k < ITEMS / 4; ++k) {
      const V v = src[k];
      items[4 * k] = v.x;
      items[4 * k + 1] = v.y;
      items[4 * k + 2] = v.z;
      items[4 * k + 3] = v.w;
    }
  } else {
#pragma unroll
    for (int j = 0; j < ITEMS; ++j) items[j] = first + j < n ? x[first + j] : T(0);
  }
}

// Stores thread t's ITEMS outputs, skipping those at or past n.
template <typename T, int ITEMS>
__device__ __forceinline__ void store_items(T* y, int64_t base, int64_t n, bool vector_ok,
                                            const T (&items)[ITEMS]) {
  const int64_t first = base + static_cast<int64_t>(threadIdx.x) * ITEMS;
  if (vector_ok && first + ITEMS <= n) {
    using V = typename Vec4<T>::type;
    V* dst = reinterpret_cast<V*>(y + first);
#pragma unroll
    for (int k = 0; k < ITEMS / 4; ++k) {
      V v;
      v.x = items[4 * k];
      v.y = items[4 * k + 1];
      v.z = items[4 * k + 2];
      v.w = items[4 * k + 3];
      dst[k] = v;
    }
  } else {
#pragma unroll
    for (int j = 0; j < ITEMS; ++j) {
      if (first + j < n) y[first + j] = items[j];
    }
  }
}

// In place: items becomes its own inclusive scan (sequential, in registers). Returns the total.
template <typename T, int ITEMS>
__device__ __forceinline__ T thread_inclusive_scan(T (&items)[ITEMS]) {
#pragma unroll
  for (int j = 1; j < ITEMS; ++j) items[j] += items[j - 1];
  return items[ITEMS - 1];
}

// Turns a thread's inclusive items into the outputs: carry + inclusive (or carry + exclusive).
// The exclusive value of item j is the inclusive value of item j - 1, so no subtraction.
template <typename T, int ITEMS>
__device__ __forceinline__ void finish_items(T (&items)[ITEMS], T carry, bool exclusive) {
  if (exclusive) {
#pragma unroll
    for (int j = ITEMS - 1; j > 0; --j) items[j] = carry + items[j - 1];
    items[0] = carry;
  } else {
#pragma unroll
    for (int j = 0; j < ITEMS; ++j) items[j] = carry + items[j];
  }
}

}  // namespace day06::detail

namespace day06::detail {

// v4's recursion, shared with v5 (which scans its tile sums with it): y = scan of x for any n,
// taking its tile-sum arrays from `carver`. Instantiated for float and int32_t in
// v4_hierarchical.cu. hierarchical_workspace_bytes(n) is what it takes for n elements.
template <typename T>
void hierarchical_scan(const T* x, T* y, int64_t n, bool exclusive, Carver& carver,
                       cudaStream_t stream);
size_t hierarchical_workspace_bytes(int64_t n);

}  // namespace day06::detail
