// day06 scan v5: reduce-then-scan. Pass 1 reduces each tile to its sum, the tile sums are
// scanned (v4's hierarchy, on 1/4096 of the data), pass 2 scans each tile starting from its
// prefix. Each element is read twice and written once.
#include <algorithm>

#include "common/cuda_check.hpp"
#include "scan.cuh"
#include "scan_device.cuh"

namespace day06 {

namespace {

constexpr int kThreads = 256;
constexpr int kItems = 16;
constexpr int64_t kTile = int64_t(kThreads) * kItems;  // 4096 elements

// Pass 1: block b sums tile b (thread t sums its 16 consecutive elements, then block_reduce).
template <typename T>
__global__ void __launch_bounds__(kThreads)
    v5_reduce_tiles(const T* __restrict__ x, T* __restrict__ tile_sums, int64_t n, bool vector_ok) {
  __shared__ T warp_sums[kThreads / 32];
  T items[kItems];
  detail::load_items(x, static_cast<int64_t>(blockIdx.x) * kTile, n, vector_ok, items);
  const T thread_total = detail::thread_inclusive_scan(items);
  const T total = detail::block_reduce<T, kThreads>(thread_total, warp_sums);
  if (threadIdx.x == 0) tile_sums[blockIdx.x] = total;
}

// Pass 2: block b scans tile b like v4's first kernel, but starts from offsets[b] (the scanned
// tile sums), so the output is final: no third pass over y.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    v5_scan_tiles(const T* x, T* y, const T* offsets, int64_t n, bool exclusive, bool vector_ok) {
  __shared__ T warp_sums[kThreads / 32];
  const int64_t base = static_cast<int64_t>(blockIdx.x) * kTile;
  T items[kItems];
  detail::load_items(x, base, n, vector_ok, items);
  const T thread_total = detail::thread_inclusive_scan(items);
  T tile_total;
  const T prefix = detail::block_exclusive_scan<T, kThreads>(thread_total, warp_sums, tile_total);
  const T carry = offsets != nullptr ? offsets[blockIdx.x] : T(0);
  detail::finish_items(items, carry + prefix, exclusive);
  detail::store_items(y, base, n, vector_ok, items);
}

}  // namespace

size_t scan_v5_workspace_bytes(int64_t n) {
  const int64_t tiles = gpu100::ceil_div<int64_t>(std::max<int64_t>(n, 1), kTile);
  return detail::Carver::need<int32_t>(static_cast<size_t>(tiles)) +
         detail::hierarchical_workspace_bytes(tiles);
}

// v5: changed from v4: the first pass only reads (one sum per tile), and the last pass writes the
// final values, so y is written once and never read back: about 3n moves instead of 4n.
template <typename T>
void scan_v5_reduce_then_scan(const T* x, T* y, int64_t n, bool exclusive, void* ws,
                              size_t ws_bytes, cudaStream_t stream) {
  detail::check_n(n, kMaxN, "scan_v5_reduce_then_scan");
  if (n == 0) return;
  const bool vector_ok = detail::aligned16(x) && detail::aligned16(y);
  const int64_t tiles = gpu100::ceil_div(n, kTile);
  if (tiles == 1) {
    v5_scan_tiles<T><<<1, kThreads, 0, stream>>>(x, y, nullptr, n, exclusive, vector_ok);
    CUDA_CHECK_LAST();
    return;
  }
  detail::Carver carver(ws, ws_bytes, "scan_v5_reduce_then_scan");
  T* sums = carver.take<T>(static_cast<size_t>(tiles));
  const unsigned grid = static_cast<unsigned>(tiles);
  v5_reduce_tiles<T><<<grid, kThreads, 0, stream>>>(x, sums, n, vector_ok);
  CUDA_CHECK_LAST();
  detail::hierarchical_scan(sums, sums, tiles, true, carver, stream);  // in place, exclusive
  v5_scan_tiles<T><<<grid, kThreads, 0, stream>>>(x, y, sums, n, exclusive, vector_ok);
  CUDA_CHECK_LAST();
}

template void scan_v5_reduce_then_scan<float>(const float*, float*, int64_t, bool, void*, size_t,
                                              cudaStream_t);
template void scan_v5_reduce_then_scan<int32_t>(const int32_t*, int32_t*, int64_t, bool, void*,
                                                size_t, cudaStream_t);

}  // namespace day06
