// day06 scan v3: a block scan built from warp-shuffle scans, one block.
#include "common/cuda_check.hpp"
#include "scan.cuh"
#include "scan_device.cuh"

namespace day06 {

namespace {

constexpr int kThreads = 1024;
constexpr int kItems = static_cast<int>(kV3MaxN) / kThreads;  // 4

// v3: thread t owns elements 4t .. 4t + 3 (one 16-byte load when aligned). Changed from v2: no
// shared-memory tree. Each thread scans its 4 elements in registers, the warps scan the thread
// totals with 5 __shfl_up_sync steps, warp 0 scans the 32 warp totals the same way, and each
// thread adds its prefix: 2 barriers in all instead of v2's 22, and 4x the elements per block.
// This block step (detail::block_exclusive_scan) is the one v4..v6 use on their tiles.
template <typename T>
__global__ void v3_kernel(const T* x, T* y, int64_t n, bool exclusive, bool vector_ok) {
  __shared__ T warp_sums[kThreads / 32];
  T items[kItems];
  detail::load_items(x, 0, n, vector_ok, items);
  const T thread_total = detail::thread_inclusive_scan(items);
  T block_total;
  const T prefix = detail::block_exclusive_scan<T, kThreads>(thread_total, warp_sums, block_total);
  detail::finish_items(items, prefix, exclusive);
  detail::store_items(y, 0, n, vector_ok, items);
}

}  // namespace

template <typename T>
void scan_v3_warp_shuffle(const T* x, T* y, int64_t n, bool exclusive, void*, size_t,
                          cudaStream_t stream) {
  detail::check_n(n, kV3MaxN, "scan_v3_warp_shuffle");
  if (n == 0) return;
  const bool vector_ok = detail::aligned16(x) && detail::aligned16(y);
  v3_kernel<T><<<1, kThreads, 0, stream>>>(x, y, n, exclusive, vector_ok);
  CUDA_CHECK_LAST();
}

template void scan_v3_warp_shuffle<float>(const float*, float*, int64_t, bool, void*, size_t,
                                          cudaStream_t);
template void scan_v3_warp_shuffle<int32_t>(const int32_t*, int32_t*, int64_t, bool, void*, size_t,
                                            cudaStream_t);

}  // namespace day06
