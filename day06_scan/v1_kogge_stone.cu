// day06 scan v1: Kogge-Stone (Hillis-Steele), one block. PMPP section 11.2.
#include "common/cuda_check.hpp"
#include "scan.cuh"
#include "scan_device.cuh"

namespace day06 {

namespace {

// v1: thread t owns element t (one block of up to 1024 threads, so n <= 1024: larger n is
// rejected; v3's warp scans are the block-level step the any-N scans use instead). At step k
// (offset 1, 2, 4, ...) every thread t >= offset adds the value `offset` to its left: after
// log2(n) steps s[t] holds x[0] + ... + x[t]. Simple and shallow, but it does n log2 n adds
// against the n - 1 of a sequential scan, and needs two barriers per step: the reads of a step
// must all finish before any thread overwrites what its right neighbours still have to read.
template <typename T>
__global__ void v1_kernel(const T* x, T* y, int n, bool exclusive) {
  __shared__ T s[kV1MaxN];
  const int t = threadIdx.x;
  s[t] = t < n ? x[t] : T(0);
  __syncthreads();  // the block's elements are loaded
  for (int offset = 1; offset < static_cast<int>(blockDim.x); offset *= 2) {
    const T left = t >= offset ? s[t - offset] : T(0);
    __syncthreads();  // every read of this step is done before any write
    s[t] += left;
    __syncthreads();  // every write is done before the next step reads
  }
  if (t < n) y[t] = exclusive ? (t == 0 ? T(0) : s[t - 1]) : s[t];
}

}  // namespace

template <typename T>
void scan_v1_kogge_stone(const T* x, T* y, int64_t n, bool exclusive, void*, size_t,
                         cudaStream_t stream) {
  detail::check_n(n, kV1MaxN, "scan_v1_kogge_stone");
  if (n == 0) return;
  const int threads = static_cast<int>(gpu100::round_up<int64_t>(n, 32));
  v1_kernel<T><<<1, threads, 0, stream>>>(x, y, static_cast<int>(n), exclusive);
  CUDA_CHECK_LAST();
}

template void scan_v1_kogge_stone<float>(const float*, float*, int64_t, bool, void*, size_t,
                                         cudaStream_t);
template void scan_v1_kogge_stone<int32_t>(const int32_t*, int32_t*, int64_t, bool, void*, size_t,
                                           cudaStream_t);

}  // namespace day06
