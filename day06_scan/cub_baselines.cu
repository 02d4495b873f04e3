// day06 library rows: CUB's DeviceReduce::Sum and DeviceScan::InclusiveSum / ExclusiveSum (from
// the CUDA toolkit's CCCL). The temp storage is the caller's workspace, sized once by the
// *_workspace_bytes functions (CUB's own size query), so nothing is allocated per call.
#include <cub/device/device_reduce.cuh>
#include <cub/device/device_scan.cuh>

#include <algorithm>

#include "common/cuda_check.hpp"
#include "scan.cuh"
#include "scan_device.cuh"

namespace day06 {

size_t reduce_cub_workspace_bytes(int64_t n) {
  const int m = static_cast<int>(std::min(std::max<int64_t>(n, 1), kMaxN));
  size_t f = 0, i = 0;
  CUDA_CHECK(cub::DeviceReduce::Sum(nullptr, f, static_cast<const float*>(nullptr),
                                    static_cast<float*>(nullptr), m));
  CUDA_CHECK(cub::DeviceReduce::Sum(nullptr, i, static_cast<const int32_t*>(nullptr),
                                    static_cast<int32_t*>(nullptr), m));
  return std::max(f, i);
}

size_t scan_cub_workspace_bytes(int64_t n) {
  const int m = static_cast<int>(std::min(std::max<int64_t>(n, 1), kMaxN));
  size_t sizes[4] = {0, 0, 0, 0};
  CUDA_CHECK(cub::DeviceScan::InclusiveSum(nullptr, sizes[0], static_cast<const float*>(nullptr),
                                           static_cast<float*>(nullptr), m));
  CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, sizes[1], static_cast<const float*>(nullptr),
                                           static_cast<float*>(nullptr), m));
  CUDA_CHECK(cub::DeviceScan::InclusiveSum(nullptr, sizes[2], static_cast<const int32_t*>(nullptr),
                                           static_cast<int32_t*>(nullptr), m));
  CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, sizes[3], static_cast<const int32_t*>(nullptr),
                                           static_cast<int32_t*>(nullptr), m));
  return *std::max_element(sizes, sizes + 4);
}

template <typename T>
void reduce_cub(const T* x, T* out, int64_t n, void* ws, size_t ws_bytes, cudaStream_t stream) {
  detail::check_n(n, kMaxN, "reduce_cub");
  if (n == 0) {
    CUDA_CHECK(cudaMemsetAsync(out, 0, sizeof(T), stream));
    return;
  }
  size_t bytes = ws_bytes;
  CUDA_CHECK(cub::DeviceReduce::Sum(ws, bytes, x, out, static_cast<int>(n), stream));
  CUDA_CHECK_LAST();
}

template <typename T>
void scan_cub(const T* x, T* y, int64_t n, bool exclusive, void* ws, size_t ws_bytes,
              cudaStream_t stream) {
  detail::check_n(n, kMaxN, "scan_cub");
  if (n == 0) return;
  size_t bytes = ws_bytes;
  if (exclusive) {
    CUDA_CHECK(cub::DeviceScan::ExclusiveSum(ws, bytes, x, y, static_cast<int>(n), stream));
  } else {
    CUDA_CHECK(cub::DeviceScan::InclusiveSum(ws, bytes, x, y, static_cast<int>(n), stream));
  }
  CUDA_CHECK_LAST();
}

template void reduce_cub<float>(const float*, float*, int64_t, void*, size_t, cudaStream_t);
template void reduce_cub<int32_t>(const int32_t*, int32_t*, int64_t, void*, size_t, cudaStream_t);
template void scan_cub<float>(const float*, float*, int64_t, bool, void*, size_t, cudaStream_t);
template void scan_cub<int32_t>(const int32_t*, int32_t*, int64_t, bool, void*, size_t,
                                cudaStream_t);

}  // namespace day06
