// fill_uniform_device (common/device_random.hpp): one thread per element, grid-stride.
#include <algorithm>

#include "common/cuda_check.hpp"
#include "common/device_random.hpp"
#include "common/random.hpp"

namespace gpu100 {

namespace {

template <typename T>
__global__ void fill_uniform_kernel(T* data, size_t n, uint64_t seed) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    data[i] = static_cast<T>(static_cast<float>(uniform_at(seed, i, -1.0, 1.0)));
  }
}

template <typename T>
void fill(T* data, size_t n, uint64_t seed, cudaStream_t stream) {
  if (n == 0) return;
  constexpr int kThreads = 256;
  const size_t blocks = std::min<size_t>((n + kThreads - 1) / kThreads, size_t(1) << 16);
  fill_uniform_kernel<<<unsigned(blocks), kThreads, 0, stream>>>(data, n, seed);
  CUDA_CHECK_LAST();
}

}  // namespace

void fill_uniform_device(float* data, size_t n, uint64_t seed, cudaStream_t stream) {
  fill(data, n, seed, stream);
}
void fill_uniform_device(__nv_bfloat16* data, size_t n, uint64_t seed, cudaStream_t stream) {
  fill(data, n, seed, stream);
}

}  // namespace gpu100
