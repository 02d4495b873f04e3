// day06 scan v4: hierarchical scan for any n (PMPP section 11.5): scan the tiles, scan the tile
// sums (recursively), add each tile's offset back.
#include "common/cuda_check.hpp"
#include "scan.cuh"
#include "scan_device.cuh"

namespace day06 {

namespace {

constexpr int kThreads = 256;
constexpr int kItems = 8;
constexpr int64_t kTile = int64_t(kThreads) * kItems;  // 2048 elements

// Kernel 1: block b scans tile b (elements b * 2048 ...) on its own, v3's way (thread t owns 8
// consecutive elements, two 16-byte loads), writes the tile's local scan to y and its total to
// tile_sums[b] (when tile_sums is not null).
template <typename T>
__global__ void __launch_bounds__(kThreads)
    v4_scan_tiles(const T* x, T* y, T* tile_sums, int64_t n, bool exclusive, bool vector_ok) {
  __shared__ T warp_sums[kThreads / 32];
  const int64_t base = static_cast<int64_t>(blockIdx.x) * kTile;
  T items[kItems];
  detail::load_items(x, base, n, vector_ok, items);
  const T thread_total = detail::thread_inclusive_scan(items);
  T tile_total;
  const T prefix = detail::block_exclusive_scan<T, kThreads>(thread_total, warp_sums, tile_total);
  detail::finish_items(items, prefix, exclusive);
  detail::store_items(y, base, n, vector_ok, items);
  if (tile_sums != nullptr && threadIdx.x == 0) tile_sums[blockIdx.x] = tile_total;
}

// Kernel 3: block b adds offsets[b + 1] (the exclusive scan of the tile sums: everything before
// tile b + 1) to every element of tile b + 1. Tile 0 needs nothing. It reads and writes y again:
// the price of the three-kernel scheme.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    v4_add_offsets(T* y, const T* offsets, int64_t n, bool vector_ok) {
  const int64_t tile = static_cast<int64_t>(blockIdx.x) + 1;
  const int64_t base = tile * kTile;
  const T offset = offsets[tile];
  T items[kItems];
  detail::load_items(y, base, n, vector_ok, items);
#pragma unroll
  for (int j = 0; j < kItems; ++j) items[j] = offset + items[j];
  detail::store_items(y, base, n, vector_ok, items);
}

}  // namespace

namespace detail {

template <typename T>
void hierarchical_scan(const T* x, T* y, int64_t n, bool exclusive, Carver& carver,
                       cudaStream_t stream) {
  const bool vector_ok = aligned16(x) && aligned16(y);
  const int64_t tiles = gpu100::ceil_div(n, kTile);
  if (tiles == 1) {
    v4_scan_tiles<T><<<1, kThreads, 0, stream>>>(x, y, nullptr, n, exclusive, vector_ok);
    CUDA_CHECK_LAST();
    return;
  }
  T* sums = carver.take<T>(static_cast<size_t>(tiles));
  v4_scan_tiles<T>
      <<<static_cast<unsigned>(tiles), kThreads, 0, stream>>>(x, y, sums, n, exclusive, vector_ok);
  CUDA_CHECK_LAST();
  // The tile sums, scanned in place into the offsets of the tiles (exclusive): 1/2048 of the data,
  // so one more level covers 2048^2 = 4M elements and a third 2^33.
  hierarchical_scan(sums, sums, tiles, true, carver, stream);
  v4_add_offsets<T>
      <<<static_cast<unsigned>(tiles - 1), kThreads, 0, stream>>>(y, sums, n, vector_ok);
  CUDA_CHECK_LAST();
}

size_t hierarchical_workspace_bytes(int64_t n) {
  size_t bytes = 0;
  for (int64_t tiles = gpu100::ceil_div(n, kTile); tiles > 1;
       tiles = gpu100::ceil_div(tiles, kTile)) {
    bytes += Carver::need<int32_t>(static_cast<size_t>(tiles));  // 4-byte elements
  }
  return bytes;
}

template void hierarchical_scan<float>(const float*, float*, int64_t, bool, Carver&, cudaStream_t);
template void hierarchical_scan<int32_t>(const int32_t*, int32_t*, int64_t, bool, Carver&,
                                         cudaStream_t);

}  // namespace detail

size_t scan_v4_workspace_bytes(int64_t n) {
  return detail::hierarchical_workspace_bytes(n);
}

// v4: any n. Changed from v3: a grid of tiles instead of one block; 3 kernels per level (scan
// tiles, scan the tile sums recursively, add the offsets back). Each element is read twice and
// written twice (about 4n moves, see the README), so it tops out near half the copy ceiling.
template <typename T>
void scan_v4_hierarchical(const T* x, T* y, int64_t n, bool exclusive, void* ws, size_t ws_bytes,
                          cudaStream_t stream) {
  detail::check_n(n, kMaxN, "scan_v4_hierarchical");
  if (n == 0) return;
  detail::Carver carver(ws, ws_bytes, "scan_v4_hierarchical");
  detail::hierarchical_scan(x, y, n, exclusive, carver, stream);
}

template void scan_v4_hierarchical<float>(const float*, float*, int64_t, bool, void*, size_t,
                                          cudaStream_t);
template void scan_v4_hierarchical<int32_t>(const int32_t*, int32_t*, int64_t, bool, void*, size_t,
                                            cudaStream_t);

}  // namespace day06
