#pragma once
// day07 device helpers shared by every kernel of the day: fp32 <-> storage conversions, the
// 16-byte vector type, warp / group / block sums and Welford's running statistics.
//
// Reusable pieces take no threadIdx of their own where they can; the group sums read threadIdx.x
// only to find their warp and lane, and document the barriers they contain.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "layernorm.cuh"

namespace day07 {

constexpr int kWarp = 32;
constexpr unsigned kFullMask = 0xffffffffu;

// ---- storage type <-> fp32 (every kernel computes in fp32) ----
__device__ __forceinline__ float to_float(float v) {
  return v;
}
__device__ __forceinline__ float to_float(bf16 v) {
  return __bfloat162float(v);
}
template <typename T>
__device__ __forceinline__ T from_float(float v);
template <>
__device__ __forceinline__ float from_float<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ bf16 from_float<bf16>(float v) {
  return __float2bfloat16_rn(v);
}

// V consecutive elements moved as one access: with sizeof(T) * V == 16 a load or store of a Vec
// is one 16-byte LDG.128 / STG.128 (4 floats or 8 bf16); with V == 1 it is a scalar access.
template <typename T, int V>
struct alignas(sizeof(T) * V) Vec {
  T v[V];
};

// True when p is 16-byte aligned (cudaMalloc gives 256; an offset pointer may not be).
inline bool aligned16(const void* p) {
  return (reinterpret_cast<uintptr_t>(p) & 15u) == 0;
}

// ---- sums ----
// Butterfly (xor) sum: every lane gets the total, the same bits in every lane (a + b == b + a).
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int offset = kWarp / 2; offset > 0; offset >>= 1) v += __shfl_xor_sync(kFullMask, v, offset);
  return v;
}

// The sum over a group of G consecutive threads of the block; every thread of the group gets it.
// G == 32: one warp, shuffles only, no barrier (so a warp may leave its block early).
// G > 32 (a multiple of 32, <= blockDim.x): the warps' totals meet in `scratch` (blockDim.x / 32
// floats); the function contains two __syncthreads(), so every thread of the block must call it.
template <int G>
__device__ __forceinline__ float group_sum(float v, float* scratch) {
  static_assert(G == kWarp || (G % kWarp == 0 && G <= 1024), "G is 32 or a multiple of 32");
  v = warp_sum(v);
  if constexpr (G > kWarp) {
    constexpr int kWarps = G / kWarp;
    const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
    if (lane == 0) scratch[warp] = v;
    __syncthreads();                           // every warp's total is in scratch
    const int first = warp / kWarps * kWarps;  // the group's first warp
    v = 0.f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) v += scratch[first + w];  // same order in every thread
    __syncthreads();  // all reads done before the next call overwrites scratch
  }
  return v;
}

// Two sums at once (the backward's two row reductions): scratch holds 2 * blockDim.x / 32 floats.
template <int G>
__device__ __forceinline__ void group_sum2(float& a, float& b, float* scratch) {
  a = warp_sum(a);
  b = warp_sum(b);
  if constexpr (G > kWarp) {
    constexpr int kWarps = G / kWarp;
    const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
    if (lane == 0) {
      scratch[2 * warp] = a;
      scratch[2 * warp + 1] = b;
    }
    __syncthreads();  // every warp's pair is in scratch
    const int first = warp / kWarps * kWarps;
    a = 0.f;
    b = 0.f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      a += scratch[2 * (first + w)];
      b += scratch[2 * (first + w) + 1];
    }
    __syncthreads();  // all reads done before scratch is reused
  }
}

// ---- Welford's running mean and M2 = sum (x - mean)^2 (Welford 1962; the merge is Chan, Golub
// and LeVeque 1979). n is a float: exact up to 2^24 elements, far above kMaxDim. ----
struct Welford {
  float n = 0.f, mean = 0.f, m2 = 0.f;
};

__device__ __forceinline__ void welford_add(Welford& w, float x) {
  w.n += 1.f;
  const float delta = x - w.mean;
  w.mean += delta / w.n;
  w.m2 += delta * (x - w.mean);  // the old and the new deviation: no E[x^2] - E[x]^2 cancellation
}

__device__ __forceinline__ Welford welford_merge(const Welford& a, const Welford& b) {
  const float n = a.n + b.n;
  if (b.n == 0.f) return a;
  if (a.n == 0.f) return b;
  const float delta = b.mean - a.mean;
  const float frac_b = b.n / n;
  Welford r;
  r.n = n;
  r.mean = a.mean + delta * frac_b;
  r.m2 = a.m2 + b.m2 + delta * delta * a.n * frac_b;
  return r;
}

// Merges the 32 lanes' statistics with a shuffle-down tree, then broadcasts lane 0's result, so
// every lane uses the same bits (the merge is not symmetric in a and b, so a butterfly could
// leave the lanes with different last bits).
__device__ __forceinline__ Welford warp_welford(Welford w) {
#pragma unroll
  for (int offset = kWarp / 2; offset > 0; offset >>= 1) {
    Welford other;
    other.n = __shfl_down_sync(kFullMask, w.n, offset);
    other.mean = __shfl_down_sync(kFullMask, w.mean, offset);
    other.m2 = __shfl_down_sync(kFullMask, w.m2, offset);
    w = welford_merge(w, other);
  }
  w.n = __shfl_sync(kFullMask, w.n, 0);
  w.mean = __shfl_sync(kFullMask, w.mean, 0);
  w.m2 = __shfl_sync(kFullMask, w.m2, 0);
  return w;
}

}  // namespace day07
