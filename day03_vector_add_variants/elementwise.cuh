#pragma once
// day03_vector_add_variants: the pieces the kernels share. Internal: only the .cu files of this
// day include it (the host API is vector_add_variants.cuh).
//
// - the block size and the number of 16-byte packs a v4 thread keeps in flight;
// - Pack16<Word>: 16 bytes of Words, aligned so that one instruction loads or stores all of them;
// - AddOp<T>: what "add" means for each element type, on whole 32/64-bit words (half2, bf162)
//   and on single elements (for the scalar tail);
// - the launch arithmetic: how many packs a call can use, and the grid that covers it.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>

#include "common/math.hpp"

namespace day03::detail {

constexpr int kThreads = 256;  // threads per block in every day03 kernel
constexpr int kUnroll = 4;     // v4: packs each thread loads before it uses any of them

inline void check_size(int64_t n, const char* who) {
  if (n < 0) {
    throw std::invalid_argument(std::string(who) + ": n must be >= 0, got " + std::to_string(n));
  }
}

using gpu100::aligned16;  // common/math.hpp

// Blocks of kThreads threads that give every one of `threads` work items its own thread.
// At least one block, so that a launch with only a scalar tail still has threads to run it.
inline unsigned blocks_for(int64_t threads) {
  const int64_t blocks = std::max<int64_t>(1, gpu100::ceil_div<int64_t>(threads, kThreads));
  if (blocks > std::numeric_limits<int>::max()) {
    throw std::invalid_argument("day03: n too large for one grid");
  }
  return static_cast<unsigned>(blocks);
}

// 16 bytes of Words, moved with one 128-bit load or store (LDG.E.128 / STG.E.128), the widest
// access a thread can make. alignas(16) alone is not enough: the compiler splits a struct of
// __half2 into four 32-bit accesses, so load16 / store16 move the bytes as a uint4 and copy the
// bits into the words (the copy is register renaming, no instruction).
template <typename Word>
struct alignas(16) Pack16 {
  static constexpr int kWords = 16 / sizeof(Word);
  Word w[kWords];
};

template <typename Word>
__device__ __forceinline__ Pack16<Word> load16(const Pack16<Word>* p) {
  const uint4 raw = *reinterpret_cast<const uint4*>(p);
  Pack16<Word> out;
  memcpy(&out, &raw, sizeof(out));
  return out;
}

template <typename Word>
__device__ __forceinline__ void store16(Pack16<Word>* p, const Pack16<Word>& v) {
  uint4 raw;
  memcpy(&raw, &v, sizeof(raw));
  *reinterpret_cast<uint4*>(p) = raw;
}

// Addition per element type. Word is the unit the packed arithmetic works on: the element itself
// for fp32, fp64 and int32, a pair of elements for fp16 and bf16 (one HADD2 adds both halves).
template <typename T>
struct AddOp {
  using Word = T;
  static constexpr int kPerWord = 1;
  __device__ static Word add(Word x, Word y) { return x + y; }
  __device__ static T add1(T x, T y) { return x + y; }
};

template <>
struct AddOp<__half> {
  using Word = __half2;
  static constexpr int kPerWord = 2;
  __device__ static Word add(Word x, Word y) { return __hadd2(x, y); }
  __device__ static __half add1(__half x, __half y) { return __hadd(x, y); }
};

template <>
struct AddOp<__nv_bfloat16> {
  using Word = __nv_bfloat162;
  static constexpr int kPerWord = 2;
  __device__ static Word add(Word x, Word y) { return __hadd2(x, y); }
  __device__ static __nv_bfloat16 add1(__nv_bfloat16 x, __nv_bfloat16 y) { return __hadd(x, y); }
};

}  // namespace day03::detail
