// day06 scan v2: Brent-Kung / Blelloch work-efficient scan, one block, padded shared memory.
// PMPP section 11.4; GPU Gems 3 chapter 39 (Harris, Sengupta, Owens) for the padding.
#include "common/cuda_check.hpp"
#include "scan.cuh"
#include "scan_device.cuh"

namespace day06 {

namespace {

// One padding word after every 32: element i lives at i + i / 32, so the strided accesses of the
// sweeps (stride 2, 4, ..., 1024 words) spread over the banks instead of piling onto one.
__device__ __forceinline__ int padded(int i) {
  return i + (i >> 5);
}

// v2: 1024 threads scan kV2MaxN = 2048 elements; thread t owns elements t and t + 1024.
// Changed from v1: work-efficient. The up-sweep builds a tree of partial sums in place (1024,
// 512, ..., 1 adds), the down-sweep walks back down turning it into the exclusive scan: about
// 2n adds in all instead of n log2 n, in 2 log2 n barrier-separated steps. Inclusive = exclusive
// + x (one more add per element). The padding removes most of the bank conflicts of the
// power-of-two strides; the price is the deeper sequence of barriers with few active threads.
template <typename T>
__global__ void v2_kernel(const T* x, T* y, int n, bool exclusive) {
  constexpr int kN = static_cast<int>(kV2MaxN);
  __shared__ T s[kN + kN / 32];
  const int t = threadIdx.x;
  const int a = t, b = t + kN / 2;
  const T xa = a < n ? x[a] : T(0);
  const T xb = b < n ? x[b] : T(0);
  s[padded(a)] = xa;
  s[padded(b)] = xb;
  // Up-sweep: at stride `offset`, thread t < d adds the left child into the right one.
  int offset = 1;
  for (int d = kN / 2; d > 0; d >>= 1) {
    __syncthreads();  // the previous level is complete
    if (t < d) {
      const int left = offset * (2 * t + 1) - 1, right = offset * (2 * t + 2) - 1;
      s[padded(right)] += s[padded(left)];
    }
    offset *= 2;
  }
  if (t == 0) s[padded(kN - 1)] = T(0);  // the root becomes the identity
  // Down-sweep: each node passes its value to its left child and value + left to its right one.
  for (int d = 1; d < kN; d *= 2) {
    offset >>= 1;
    __syncthreads();  // the level above is complete
    if (t < d) {
      const int left = offset * (2 * t + 1) - 1, right = offset * (2 * t + 2) - 1;
      const T l = s[padded(left)];
      s[padded(left)] = s[padded(right)];
      s[padded(right)] += l;
    }
  }
  __syncthreads();  // s holds the exclusive scan
  if (a < n) y[a] = exclusive ? s[padded(a)] : s[padded(a)] + xa;
  if (b < n) y[b] = exclusive ? s[padded(b)] : s[padded(b)] + xb;
}

}  // namespace

template <typename T>
void scan_v2_brent_kung(const T* x, T* y, int64_t n, bool exclusive, void*, size_t,
                        cudaStream_t stream) {
  detail::check_n(n, kV2MaxN, "scan_v2_brent_kung");
  if (n == 0) return;
  v2_kernel<T><<<1, kV2MaxN / 2, 0, stream>>>(x, y, static_cast<int>(n), exclusive);
  CUDA_CHECK_LAST();
}

template void scan_v2_brent_kung<float>(const float*, float*, int64_t, bool, void*, size_t,
                                        cudaStream_t);
template void scan_v2_brent_kung<int32_t>(const int32_t*, int32_t*, int64_t, bool, void*, size_t,
                                          cudaStream_t);

}  // namespace day06
