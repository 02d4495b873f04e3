// day06 scan v6: single-pass scan with decoupled look-back (Merrill and Garland, "Single-pass
// Parallel Prefix Scan with Decoupled Look-back", NVIDIA 2016; CUB's DeviceScan works this way).
#include <cuda_runtime.h>

#include "common/cuda_check.hpp"
#include "scan.cuh"
#include "scan_device.cuh"

namespace day06 {

namespace {

constexpr int kThreads = 128;
constexpr int kItems = 64;           // per thread: sixteen 16-byte loads in flight
constexpr int kChunks = kItems / 4;  // one 16-byte vector per lane per chunk
constexpr int64_t kTile = int64_t(kThreads) * kItems;  // 8192 elements

// A tile's status word: the status in the high 32 bits, the 32 bits of the value (a float's bits
// or an int's) in the low 32. One 64-bit store publishes both at once, so a reader can never see
// a status with a stale value.
using Word = unsigned long long;
constexpr Word kInvalid = 0;    // nothing published yet (the memset before each launch)
constexpr Word kAggregate = 1;  // value = the sum of this tile alone
constexpr Word kInclusive = 2;  // value = the sum of this tile and every tile before it

__device__ __forceinline__ uint32_t bits_of(float v) {
  return __float_as_uint(v);
}
__device__ __forceinline__ uint32_t bits_of(int32_t v) {
  return static_cast<uint32_t>(v);
}
template <typename T>
__device__ __forceinline__ T value_of(Word w) {
  const uint32_t b = static_cast<uint32_t>(w & 0xffffffffull);
  if constexpr (std::is_same_v<T, float>) {
    return __uint_as_float(b);
  } else {
    return static_cast<int32_t>(b);
  }
}
__device__ __forceinline__ Word status_of(Word w) {
  return w >> 32;
}
template <typename T>
__device__ __forceinline__ Word pack(Word status, T value) {
  return (status << 32) | bits_of(value);
}

// The memory ordering. The status and the value share one naturally aligned 64-bit word, written
// with one st.relaxed.gpu and read with ld.relaxed.gpu. PTX makes such an access single-copy
// atomic, so a reader sees either the old word or the new one, never a new status with an old
// value, and the value needs no fence of its own. Nothing else is communicated through the flags
// (each block reads only its own x and writes only its own y), so no release/acquire ordering is
// needed either; gpu scope keeps the loads coherent (they are served by L2, never by a stale L1
// line). Measured: acquire/release (which also invalidates the SM's L1 on every spin) cost 3-4%.
__device__ __forceinline__ void publish(Word* p, Word w) {
  asm volatile("st.relaxed.gpu.u64 [%0], %1;" ::"l"(p), "l"(w) : "memory");
}
__device__ __forceinline__ Word read_status(const Word* p) {
  Word w;
  asm volatile("ld.relaxed.gpu.u64 %0, [%1];" : "=l"(w) : "l"(p) : "memory");
  return w;
}

// Warp 0 of tile `tile` (> 0): the sum of every tile before it. Lane i inspects tile
// `end - i`, so 32 predecessors at a time. The walk can end as soon as the closest kInclusive
// predecessor in the window has no kInvalid one between it and us: the sum of lanes 0 .. that lane
// is added in. If all 32 are aggregates their sum is added and the window moves 32 tiles back;
// otherwise the warp re-reads. Tiles before 0 count as kInclusive with value 0, so tile 0 always
// ends it.
template <typename T>
__device__ T look_back(const Word* status, int64_t tile) {
  const int lane = threadIdx.x & 31;
  T carry = T(0);
  for (int64_t end = tile - 1;; end -= 32) {
    const int64_t pred = end - lane;
    Word w;
    unsigned inclusive;
    for (;;) {
      w = pred >= 0 ? read_status(status + pred) : pack(kInclusive, T(0));
      const unsigned invalid = __ballot_sync(detail::kFullMask, status_of(w) == kInvalid);
      inclusive = __ballot_sync(detail::kFullMask, status_of(w) == kInclusive);
      if (invalid == 0) break;  // the window is complete
      if (inclusive != 0 && __ffs(inclusive) < __ffs(invalid))
        break;  // complete up to an inclusive
    }
    const int stop = inclusive != 0 ? __ffs(inclusive) - 1 : 31;
    T window = detail::warp_reduce(lane <= stop ? value_of<T>(w) : T(0));
    window = __shfl_sync(detail::kFullMask, window, 0);
    carry = window + carry;  // the window lies before what was added so far
    if (inclusive != 0) return carry;
  }
}

// The tile in "warp-striped" order: warp w owns the 32 * kItems consecutive elements from
// base + w * 32 * kItems, in kChunks chunks of 128; in chunk k, lane l owns the four elements
// 4l .. 4l + 3. Every 16-byte load or store of a warp then covers 512 contiguous bytes (v5's
// "blocked" order, 16 consecutive elements per thread, spreads one instruction over 2 KiB).
__device__ __forceinline__ int64_t striped_first(int64_t base, int chunk) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  return base + int64_t(warp) * 32 * kItems + chunk * 128 + 4 * lane;
}

template <typename T>
__device__ __forceinline__ void load_striped(const T* __restrict__ x, int64_t base, int64_t n,
                                             bool full, T (&items)[kItems]) {
#pragma unroll
  for (int k = 0; k < kChunks; ++k) {
    const int64_t first = striped_first(base, k);
    if (full) {
      const auto v = *reinterpret_cast<const typename detail::Vec4<T>::type*>(x + first);
      items[4 * k] = v.x;
      items[4 * k + 1] = v.y;
      items[4 * k + 2] = v.z;
      items[4 * k + 3] = v.w;
    } else {
#pragma unroll
      for (int j = 0; j < 4; ++j) items[4 * k + j] = first + j < n ? x[first + j] : T(0);
    }
  }
}

// The warp's scan of its 32 * kItems elements, chunk by chunk: the four items of a lane are
// scanned in registers, the lane totals by a 5-step shuffle scan, and `running` carries the
// warp's total from one chunk to the next. After it, items holds each lane's local inclusive
// scan of its four, and offset[k] what comes before them within the warp. Returns the warp total.
template <typename T>
__device__ __forceinline__ T warp_striped_scan(T (&items)[kItems], T (&offset)[kChunks]) {
  const int lane = threadIdx.x & 31;
  T running = T(0);
#pragma unroll
  for (int k = 0; k < kChunks; ++k) {
    items[4 * k + 1] += items[4 * k];
    items[4 * k + 2] += items[4 * k + 1];
    items[4 * k + 3] += items[4 * k + 2];
    const T inclusive = detail::warp_inclusive_scan(items[4 * k + 3]);
    T exclusive = __shfl_up_sync(detail::kFullMask, inclusive, 1);
    if (lane == 0) exclusive = T(0);
    offset[k] = running + exclusive;
    running += __shfl_sync(detail::kFullMask, inclusive, 31);
  }
  return running;
}

// y = carry + offset + local scan (or, for the exclusive scan, the local scan of the element
// before: no subtraction, so no extra fp32 rounding); outputs at or past n are skipped.
template <typename T>
__device__ __forceinline__ void store_striped(T* y, int64_t base, int64_t n, bool full, T carry,
                                              const T (&items)[kItems], const T (&offset)[kChunks],
                                              bool exclusive) {
#pragma unroll
  for (int k = 0; k < kChunks; ++k) {
    const T b = carry + offset[k];
    T out[4];
    if (exclusive) {
      out[0] = b;
      out[1] = b + items[4 * k];
      out[2] = b + items[4 * k + 1];
      out[3] = b + items[4 * k + 2];
    } else {
#pragma unroll
      for (int j = 0; j < 4; ++j) out[j] = b + items[4 * k + j];
    }
    const int64_t first = striped_first(base, k);
    if (full) {
      typename detail::Vec4<T>::type v;
      v.x = out[0];
      v.y = out[1];
      v.z = out[2];
      v.w = out[3];
      *reinterpret_cast<typename detail::Vec4<T>::type*>(y + first) = v;
    } else {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        if (first + j < n) y[first + j] = out[j];
      }
    }
  }
}

// v6: changed from v5: one pass. Each block takes the next tile index from a global counter,
// loads its 8192 elements once (sixteen 16-byte loads per thread, warp-striped so each instruction
// reads 512 contiguous bytes), scans them in registers and shuffles, publishes its tile sum
// (kAggregate) at once, then warp 0 looks back over the predecessors' words for its carry-in,
// publishes carry + sum (kInclusive) and the block writes its outputs. x is read once and y
// written once: 2n moves. Big tiles matter: a tile's time is mostly spent waiting for the
// look-back, so the bytes per look-back set the speed (measured: 4096-element tiles 1.2 ms, 8192
// 0.87 ms). Forward progress: tile ids are handed out in the order blocks start running, so a block
// only ever waits on tiles whose blocks already run (and never wait on it): no deadlock, whatever
// order the hardware schedules blocks in. (blockIdx.x would not give that guarantee.)
template <typename T>
__global__ void __launch_bounds__(kThreads) v6_kernel(const T* x, T* y, int64_t n, bool exclusive,
                                                      bool vector_ok, Word* counter, Word* status) {
  constexpr int kWarps = kThreads / 32;
  __shared__ T warp_sums[kWarps];
  __shared__ int64_t tile_smem;
  __shared__ T carry_smem;
  if (threadIdx.x == 0) tile_smem = static_cast<int64_t>(atomicAdd(counter, Word(1)));
  __syncthreads();  // every thread knows the tile
  const int64_t tile = tile_smem;
  const int64_t base = tile * kTile;
  const bool full = vector_ok && base + kTile <= n;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;

  T items[kItems], offset[kChunks];
  load_striped(x, base, n, full, items);
  const T warp_total = warp_striped_scan(items, offset);
  // The warp totals, scanned by warp 0: warp w's prefix within the tile, and the tile's sum.
  if (lane == 0) warp_sums[warp] = warp_total;
  __syncthreads();  // every warp total is written
  if (warp == 0) {
    T v = lane < kWarps ? warp_sums[lane] : T(0);
    v = detail::warp_inclusive_scan(v);
    if (lane < kWarps) warp_sums[lane] = v;
  }
  __syncthreads();  // the scanned warp totals are visible
  const T aggregate = warp_sums[kWarps - 1];
  const T prefix = warp > 0 ? warp_sums[warp - 1] : T(0);

  if (threadIdx.x < 32) {  // warp 0: publish, look back, publish again
    T carry = T(0);
    if (tile == 0) {
      if (threadIdx.x == 0) publish(status, pack(kInclusive, aggregate));
    } else {
      if (threadIdx.x == 0) publish(status + tile, pack(kAggregate, aggregate));
      carry = look_back<T>(status, tile);
      if (threadIdx.x == 0) publish(status + tile, pack(kInclusive, carry + aggregate));
    }
    if (threadIdx.x == 0) carry_smem = carry;
  }
  __syncthreads();  // the carry-in is in shared memory
  store_striped(y, base, n, full, carry_smem + prefix, items, offset, exclusive);
}

}  // namespace

size_t scan_v6_workspace_bytes(int64_t n) {
  const int64_t tiles = gpu100::ceil_div<int64_t>(n > 0 ? n : 1, kTile);
  return detail::Carver::need<Word>(static_cast<size_t>(tiles) + 1);  // counter + one per tile
}

template <typename T>
void scan_v6_decoupled_lookback(const T* x, T* y, int64_t n, bool exclusive, void* ws,
                                size_t ws_bytes, cudaStream_t stream) {
  detail::check_n(n, kMaxN, "scan_v6_decoupled_lookback");
  if (n == 0) return;
  const int64_t tiles = gpu100::ceil_div(n, kTile);
  detail::Carver carver(ws, ws_bytes, "scan_v6_decoupled_lookback");
  Word* words = carver.take<Word>(static_cast<size_t>(tiles) + 1);
  // Word 0 is the tile counter, words 1 .. tiles the status of each tile: all kInvalid / 0 again
  // before every launch (a few MB at most, one memset node).
  CUDA_CHECK(cudaMemsetAsync(words, 0, (static_cast<size_t>(tiles) + 1) * sizeof(Word), stream));
  const bool vector_ok = detail::aligned16(x) && detail::aligned16(y);
  v6_kernel<T><<<static_cast<unsigned>(tiles), kThreads, 0, stream>>>(x, y, n, exclusive, vector_ok,
                                                                      words, words + 1);
  CUDA_CHECK_LAST();
}

template void scan_v6_decoupled_lookback<float>(const float*, float*, int64_t, bool, void*, size_t,
                                                cudaStream_t);
template void scan_v6_decoupled_lookback<int32_t>(const int32_t*, int32_t*, int64_t, bool, void*,
                                                  size_t, cudaStream_t);

}  // namespace day06
