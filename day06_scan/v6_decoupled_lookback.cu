// day06 scan v6: single-pass scan with decoupled look-back (Merrill and Garland, "Single-pass
// Parallel Prefix Scan with Decoupled Look-back", NVIDIA 2016; CUB's DeviceScan works this way).
#include <cuda_runtime.h>

#include "common/cuda_check.hpp"
#include "scan.cuh"
#include "scan_device.cuh"

namespace day06 {

namespace {

constexpr int kThreads = 256;
constexpr int kItems = 16;                             // per thread: four 16-byte loads in flight
constexpr int64_t kTile = int64_t(kThreads) * kItems;  // 4096 elements

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
// with one st.release.gpu and read with ld.acquire.gpu: PTX makes such an access single-copy
// atomic, so a reader sees either the old word or the new one, never a mix, and the value needs
// no fence of its own. Release/acquire (gpu scope) also keeps the loads out of the non-coherent
// L1 (a plain load could spin forever on a cached kInvalid) and orders the word after everything
// the publishing thread did before it; nothing else is communicated through the flags.
__device__ __forceinline__ void publish(Word* p, Word w) {
  asm volatile("st.release.gpu.u64 [%0], %1;" ::"l"(p), "l"(w) : "memory");
}
__device__ __forceinline__ Word read_status(const Word* p) {
  Word w;
  asm volatile("ld.acquire.gpu.u64 %0, [%1];" : "=l"(w) : "l"(p) : "memory");
  return w;
}

// Warp 0 of tile `tile` (> 0): the sum of every tile before it. Lane i inspects tile
// `end - i`, so 32 predecessors at a time. The warp waits until none of the 32 is kInvalid; then
// the closest one marked kInclusive (the lowest lane in the ballot) ends the walk: the sum of
// lanes 0 .. that lane is added in. If all 32 are aggregates their sum is added and the window
// moves 32 tiles back. Tiles before 0 count as kInclusive with value 0, so tile 0 always ends it.
template <typename T>
__device__ T look_back(const Word* status, int64_t tile) {
  const int lane = threadIdx.x & 31;
  T carry = T(0);
  for (int64_t end = tile - 1;; end -= 32) {
    const int64_t pred = end - lane;
    Word w;
    do {
      w = pred >= 0 ? read_status(status + pred) : pack(kInclusive, T(0));
    } while (__any_sync(detail::kFullMask, status_of(w) == kInvalid));
    const unsigned inclusive = __ballot_sync(detail::kFullMask, status_of(w) == kInclusive);
    const int stop = inclusive != 0 ? __ffs(inclusive) - 1 : 31;
    T window = detail::warp_reduce(lane <= stop ? value_of<T>(w) : T(0));
    window = __shfl_sync(detail::kFullMask, window, 0);
    carry = window + carry;  // the window lies before what was added so far
    if (inclusive != 0) return carry;
  }
}

// v6: changed from v5: one pass. Each block takes the next tile index from a global counter,
// loads its 4096 elements once (four 16-byte loads per thread), scans them in registers and
// shuffles (v3's block scan), publishes its tile sum (kAggregate) at once, then warp 0 looks back
// over the predecessors' words for its carry-in, publishes carry + sum (kInclusive) and the block
// writes its outputs. x is read once and y written once: 2n moves.
// Forward progress: tile ids are handed out in the order blocks start running, so a block only
// ever waits on tiles whose blocks already run (and never wait on it): no deadlock, whatever
// order the hardware schedules blocks in. (blockIdx.x would not give that guarantee.)
template <typename T>
__global__ void __launch_bounds__(kThreads) v6_kernel(const T* x, T* y, int64_t n, bool exclusive,
                                                      bool vector_ok, Word* counter, Word* status) {
  __shared__ T warp_sums[kThreads / 32];
  __shared__ int64_t tile_smem;
  __shared__ T carry_smem;
  if (threadIdx.x == 0) tile_smem = static_cast<int64_t>(atomicAdd(counter, Word(1)));
  __syncthreads();  // every thread knows the tile
  const int64_t tile = tile_smem;
  const int64_t base = tile * kTile;

  T items[kItems];
  detail::load_items(x, base, n, vector_ok, items);
  const T thread_total = detail::thread_inclusive_scan(items);
  T aggregate;
  const T prefix = detail::block_exclusive_scan<T, kThreads>(thread_total, warp_sums, aggregate);

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
  detail::finish_items(items, carry_smem + prefix, exclusive);
  detail::store_items(y, base, n, vector_ok, items);
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
