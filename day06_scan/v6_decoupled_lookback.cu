// day06 scan v6: single-pass scan with decoupled look-back (Merrill and Garland, "Single-pass
// Parallel Prefix Scan with Decoupled Look-back", NVIDIA 2016; CUB's DeviceScan works this way).
#include <cuda_runtime.h>

#include "common/arch.hpp"
#include "common/cuda_check.hpp"
#include "common/mbarrier.cuh"
#include "common/occupancy.hpp"
#include "scan.cuh"
#include "scan_device.cuh"

namespace day06 {

namespace {

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

// The tile. Its first kRegPart elements travel through registers, the other
// kThreads * kStageItems through shared memory, both in "warp-striped" order: warp w owns a run of
// 32 * items consecutive elements, in chunks of 128; in chunk k, lane l owns the four elements 4l
// .. 4l + 3, so every 16-byte access of a warp covers 512 contiguous bytes (16 consecutive elements
// per thread would spread one instruction over 2 KiB).
constexpr int kThreads = 256;                 // the data warps
constexpr int kDataWarps = kThreads / 32;     // 8
constexpr int kBlockThreads = kThreads + 32;  // and one look-back warp
constexpr int kRegItems = 32;                 // per thread, in registers: eight 16-byte loads
constexpr int64_t kRegPart = int64_t(kThreads) * kRegItems;  // 8192 elements
// Per thread in shared memory (one bulk copy per tile): 72 for large n (tiles of 26624 elements,
// 104 KiB), 0 for small n (tiles of 8192, registers only: see the launcher).
constexpr int kStageItemsLarge = 72;
template <int kStageItems>
constexpr int64_t kTile = kRegPart + int64_t(kThreads) * kStageItems;
template <int kStageItems>
constexpr uint32_t kStageBytes = uint32_t(kThreads) * kStageItems * 4;  // T is 4 bytes

// One chunk of 128 of the warp-striped scan. The lane's four values (a, b, c, d) become their
// running sums within the lane; the lane totals take a 5-step shuffle scan. Returns what comes
// before the lane's four within the warp's run, and adds the chunk's total to `running`.
template <typename T>
__device__ __forceinline__ T scan_chunk(T a, T& b, T& c, T& d, T& running) {
  const int lane = threadIdx.x & 31;
  b += a;
  c += b;
  d += c;
  const T inclusive = detail::warp_inclusive_scan(d);
  T before = __shfl_up_sync(detail::kFullMask, inclusive, 1);
  if (lane == 0) before = T(0);
  const T base = running + before;
  running += __shfl_sync(detail::kFullMask, inclusive, 31);
  return base;
}

// The register part: the warp's 32 * kRegItems elements from `first`, loaded, then scanned
// chunk by chunk: the four items of a lane in registers, the lane totals by a 5-step shuffle
// scan, `running` carrying the warp's total from one chunk to the next. Each item ends as its
// prefix within the warp (inclusive, or exclusive: the prefix of the element before, so no
// subtraction and no extra fp32 rounding). Returns the warp's total.
template <typename T>
__device__ __forceinline__ T load_scan_registers(const T* __restrict__ x, int64_t first, int64_t n,
                                                 bool full, bool exclusive, T (&items)[kRegItems]) {
  const int lane = threadIdx.x & 31;
  using V = typename detail::Vec4<T>::type;
  if (full) {
    const V* p = reinterpret_cast<const V*>(x + first) + lane;
#pragma unroll
    for (int k = 0; k < kRegItems / 4; ++k) {
      const V v = p[32 * k];
      items[4 * k] = v.x;
      items[4 * k + 1] = v.y;
      items[4 * k + 2] = v.z;
      items[4 * k + 3] = v.w;
    }
  } else {
#pragma unroll
    for (int k = 0; k < kRegItems / 4; ++k) {
      const int64_t e = first + 128 * k + 4 * lane;
#pragma unroll
      for (int j = 0; j < 4; ++j) items[4 * k + j] = e + j < n ? x[e + j] : T(0);
    }
  }
  T running = T(0);
#pragma unroll
  for (int k = 0; k < kRegItems / 4; ++k) {
    const T a = items[4 * k];
    T b = items[4 * k + 1], c = items[4 * k + 2], d = items[4 * k + 3];
    const T base = scan_chunk(a, b, c, d, running);
    items[4 * k] = exclusive ? base : base + a;
    items[4 * k + 1] = base + (exclusive ? a : b);
    items[4 * k + 2] = base + (exclusive ? b : c);
    items[4 * k + 3] = base + (exclusive ? c : d);
  }
  return running;
}

// Writes four outputs from `e` on: one 16-byte store for a full tile, else each one below n.
template <typename T>
__device__ __forceinline__ void store4(T* y, int64_t e, int64_t n, bool full, T o0, T o1, T o2,
                                       T o3) {
  if (full) {
    typename detail::Vec4<T>::type v;
    v.x = o0;
    v.y = o1;
    v.z = o2;
    v.w = o3;
    *reinterpret_cast<typename detail::Vec4<T>::type*>(y + e) = v;
  } else {
    const T o[4] = {o0, o1, o2, o3};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      if (e + j < n) y[e + j] = o[j];
    }
  }
}

// The shared-memory part, pass 1: the sum of the warp's 32 * kStageItems staged elements, in
// lane 0. Each lane reads back exactly the 16-byte vectors it would have written itself.
template <int kStageItems, typename T>
__device__ __forceinline__ T sum_stage(const T* stage) {
  const int lane = threadIdx.x & 31;
  const auto* p = reinterpret_cast<const typename detail::Vec4<T>::type*>(stage) + lane;
  T sum = T(0);
#pragma unroll 6
  for (int k = 0; k < kStageItems / 4; ++k) {
    const auto v = p[32 * k];
    sum += (v.x + v.y) + (v.z + v.w);
  }
  return detail::warp_reduce(sum);
}

// Pass 2, once the carry is known: the same chunked scan as the register part, each chunk written
// out as soon as it is scanned. `running` starts at what comes before the warp's run.
template <int kStageItems, typename T>
__device__ __forceinline__ void scan_stage_store(const T* stage, T* y, int64_t first, int64_t n,
                                                 bool full, bool exclusive, T running) {
  const int lane = threadIdx.x & 31;
  const auto* p = reinterpret_cast<const typename detail::Vec4<T>::type*>(stage) + lane;
#pragma unroll 3
  for (int k = 0; k < kStageItems / 4; ++k) {
    const auto v = p[32 * k];
    const T a = v.x;
    T b = v.y, c = v.z, d = v.w;
    const T base = scan_chunk(a, b, c, d, running);
    const int64_t e = first + 128 * k + 4 * lane;
    if (exclusive) {
      store4(y, e, n, full, base, base + a, base + b, base + c);
    } else {
      store4(y, e, n, full, base + a, base + b, base + c, base + d);
    }
  }
}

// v6: changed from v5: one pass. Each block takes the next tile index from a global counter,
// reads its tile once, publishes the tile's sum (kAggregate) as soon as it has it, learns the sum
// of everything before it by looking back over its predecessors' status words, publishes
// carry + sum (kInclusive) and writes the tile once: 2n moves instead of v5's 3n.
// What makes it fast is bytes held per SM (measured, README): a tile's data waits on chip from
// its load until its carry arrives, and only the bytes of tiles not yet waiting keep the memory
// busy. So the tile lives in both on-chip stores: a third in registers (16-byte loads) and two
// thirds in shared memory, filled by one cp.async.bulk copy (the copy engine needs no registers),
// 312 KiB per SM at 3 blocks; and a ninth warp does the look-back while the tile is still
// loading, so the wait overlaps the load instead of following it. Forward progress: tile ids are
// handed out in the order blocks start running, so a block only ever waits on tiles whose blocks
// already run (and never wait on it): no deadlock, whatever order the hardware schedules blocks
// in. (blockIdx.x would not give that guarantee.) For small n the launcher instantiates it with
// kStageItems = 0: 8192-element tiles in registers only, three times as many blocks.
template <typename T, int kStageItems>
__global__ void __launch_bounds__(kBlockThreads, 3)
    v6_kernel(const T* x, T* y, int64_t n, bool exclusive, bool vector_ok, Word* counter,
              Word* status) {
  static_assert(sizeof(T) == 4, "the tile constants assume 4-byte elements");
  // The copy engine stages full, aligned tiles where the code is built for sm_90 or newer; below
  // that (no cp.async.bulk) the threads stage every tile themselves, as they do the last one.
  constexpr bool kBulk = kStageItems > 0 && gpu100::mbar::kAvailable;
  extern __shared__ __align__(128) unsigned char stage_raw[];
  T* stage = reinterpret_cast<T*>(stage_raw);
  __shared__ __align__(8) uint64_t staged;  // the bulk copy's mbarrier
  __shared__ int64_t tile_smem;
  __shared__ T warp_prefix[2 * kDataWarps];  // the register runs, then the shared-memory runs
  __shared__ T carry_smem, aggregate_smem;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;

  if (threadIdx.x == 0) {
    const int64_t t = static_cast<int64_t>(atomicAdd(counter, Word(1)));
    tile_smem = t;
    if (kBulk && vector_ok && (t + 1) * kTile<kStageItems> <= n) {
      // a full, aligned tile: the copy engine stages it
      gpu100::mbar::init(&staged, 1);
      gpu100::mbar::fence_init();
      gpu100::mbar::expect_tx(&staged, kStageBytes<kStageItems>);
      gpu100::mbar::bulk_load(stage, x + t * kTile<kStageItems> + kRegPart,
                              kStageBytes<kStageItems>, &staged);
    }
  }
  __syncthreads();  // every thread knows the tile; the mbarrier is initialised
  const int64_t tile = tile_smem, base = tile * kTile<kStageItems>;
  const bool full = vector_ok && base + kTile<kStageItems> <= n;

  T items[kRegItems];
  const int64_t reg_first = base + int64_t(warp) * 32 * kRegItems;
  T* my_stage = stage + warp * 32 * kStageItems;
  const int64_t stage_first = base + kRegPart + int64_t(warp) * 32 * kStageItems;
  if (warp == kDataWarps) {  // the look-back warp: starts while the data is still in flight
    const T carry = tile > 0 ? look_back<T>(status, tile) : T(0);
    if (lane == 0) carry_smem = carry;
  } else {  // the data warps
    const T reg_total = load_scan_registers(x, reg_first, n, full, exclusive, items);
    if (kStageItems == 0) {
      // no shared-memory part
    } else if (kBulk && full) {
      gpu100::mbar::wait(&staged, 0);
    } else {  // the last tile, a misaligned pointer or no bulk copy: the threads stage it
      for (int k = 0; k < kStageItems / 4; ++k) {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const int64_t e = stage_first + 128 * k + 4 * lane + j;
          my_stage[128 * k + 4 * lane + j] = e < n ? x[e] : T(0);
        }
      }
    }
    const T stage_total = sum_stage<kStageItems>(my_stage);

    // The 16 run totals in element order, scanned by warp 0: each run's prefix within the tile
    // and the tile's sum, published at once (tile 0's sum is already inclusive).
    if (lane == 0) {
      warp_prefix[warp] = reg_total;
      warp_prefix[kDataWarps + warp] = stage_total;
    }
    asm volatile("bar.sync 1, %0;" ::"n"(kThreads) : "memory");  // the data warps only
    if (warp == 0) {
      const T v = detail::warp_inclusive_scan(lane < 2 * kDataWarps ? warp_prefix[lane] : T(0));
      const T aggregate = __shfl_sync(detail::kFullMask, v, 2 * kDataWarps - 1);
      T before = __shfl_up_sync(detail::kFullMask, v, 1);
      if (lane == 0) {
        before = T(0);
        publish(status + tile, pack(tile == 0 ? kInclusive : kAggregate, aggregate));
        aggregate_smem = aggregate;
      }
      if (lane < 2 * kDataWarps) warp_prefix[lane] = before;
    }
  }
  __syncthreads();  // the carry and the run prefixes are in shared memory
  if (warp == kDataWarps) return;
  const T carry = carry_smem;
  // The same thread published the aggregate, so the inclusive word can only come after it.
  if (threadIdx.x == 0 && tile > 0)
    publish(status + tile, pack(kInclusive, carry + aggregate_smem));

  const T reg_base = carry + warp_prefix[warp];
#pragma unroll
  for (int k = 0; k < kRegItems / 4; ++k) {
    store4(y, reg_first + 128 * k + 4 * lane, n, full, reg_base + items[4 * k],
           reg_base + items[4 * k + 1], reg_base + items[4 * k + 2], reg_base + items[4 * k + 3]);
  }
  scan_stage_store<kStageItems>(my_stage, y, stage_first, n, full, exclusive,
                                carry + warp_prefix[kDataWarps + warp]);
}

}  // namespace

// Enough status words for either tile size (the small tiles need more).
size_t scan_v6_workspace_bytes(int64_t n) {
  const int64_t tiles = gpu100::ceil_div<int64_t>(n > 0 ? n : 1, kTile<0>);
  return detail::Carver::need<Word>(static_cast<size_t>(tiles) + 1);  // counter + one per tile
}

namespace {

template <typename T, int kStageItems>
void launch_v6(const T* x, T* y, int64_t n, bool exclusive, Word* words, cudaStream_t stream) {
  const int64_t tiles = gpu100::ceil_div(n, kTile<kStageItems>);
  // Word 0 is the tile counter, words 1 .. tiles the status of each tile: all kInvalid / 0 again
  // before every launch (a few MB at most, one memset node).
  CUDA_CHECK(cudaMemsetAsync(words, 0, (static_cast<size_t>(tiles) + 1) * sizeof(Word), stream));
  const bool vector_ok = detail::aligned16(x) && detail::aligned16(y);
  if constexpr (kStageItems > 0) {
    // 72 KiB of dynamic shared memory is above the 48 KiB a kernel gets without asking (once per
    // GPU: the attribute belongs to each GPU's copy of the kernel).
    static gpu100::PerDevice<bool> opted_in;  // per GPU: set on each it runs on
    opted_in.get([] {
      CUDA_CHECK(cudaFuncSetAttribute(v6_kernel<T, kStageItems>,
                                      cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(kStageBytes<kStageItems>)));
      return true;
    });
  }
  v6_kernel<T, kStageItems>
      <<<static_cast<unsigned>(tiles), kBlockThreads, kStageBytes<kStageItems>, stream>>>(
          x, y, n, exclusive, vector_ok, words, words + 1);
  CUDA_CHECK_LAST();
}

}  // namespace

template <typename T>
void scan_v6_tiles(const T* x, T* y, int64_t n, bool exclusive, V6Tiles tiles, void* ws,
                   size_t ws_bytes, cudaStream_t stream) {
  detail::check_n(n, kMaxN, "scan_v6_decoupled_lookback");
  if (n == 0) return;
  detail::Carver carver(ws, ws_bytes, "scan_v6_decoupled_lookback");
  Word* words = carver.take<Word>(static_cast<size_t>(gpu100::ceil_div(n, kTile<0>)) + 1);
  if (tiles == V6Tiles::kByN && !gpu100::build_has(gpu100::ArchNeed::kSm90)) {
    // Code built below sm_90 has no bulk copy to fill the big tiles' shared-memory part: the
    // register tiles, which need none, are the faster choice there.
    tiles = V6Tiles::kSmall;
  } else if (tiles == V6Tiles::kByN) {
    // Big tiles pay once there are at least half as many as block slots (3 per SM); with fewer,
    // a tile's latency, not the bytes held per SM, sets the time, and the 8192-element tiles give
    // 3x as many blocks (measured: the README's sweep).
    const int64_t slots = int64_t(3) * detail::sm_count();
    tiles =
        2 * gpu100::ceil_div(n, kTile<kStageItemsLarge>) >= slots ? V6Tiles::kBig : V6Tiles::kSmall;
  }
  if (tiles == V6Tiles::kBig) {
    launch_v6<T, kStageItemsLarge>(x, y, n, exclusive, words, stream);
  } else {
    launch_v6<T, 0>(x, y, n, exclusive, words, stream);
  }
}

std::string scan_v6_build_note() {
  if (gpu100::build_has(gpu100::ArchNeed::kSm90)) return "";
  return "register tiles only: this build runs no sm_90 code (no cp.async.bulk for the big tiles)";
}

template <typename T>
void scan_v6_decoupled_lookback(const T* x, T* y, int64_t n, bool exclusive, void* ws,
                                size_t ws_bytes, cudaStream_t stream) {
  scan_v6_tiles(x, y, n, exclusive, V6Tiles::kByN, ws, ws_bytes, stream);
}

template void scan_v6_tiles<float>(const float*, float*, int64_t, bool, V6Tiles, void*, size_t,
                                   cudaStream_t);
template void scan_v6_tiles<int32_t>(const int32_t*, int32_t*, int64_t, bool, V6Tiles, void*,
                                     size_t, cudaStream_t);
template void scan_v6_decoupled_lookback<float>(const float*, float*, int64_t, bool, void*, size_t,
                                                cudaStream_t);
template void scan_v6_decoupled_lookback<int32_t>(const int32_t*, int32_t*, int64_t, bool, void*,
                                                  size_t, cudaStream_t);

}  // namespace day06
