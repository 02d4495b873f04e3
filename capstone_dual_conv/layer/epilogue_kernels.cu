// The separate epilogue passes of the sequential rows (what a user gets from cuDNN conv followed
// by BatchNorm and ReLU modules: each pass reads and writes the whole output again), and the
// gather of sampled output elements for the checks at large N.
#include <algorithm>

#include "common/cuda_check.hpp"
#include "common/math.hpp"
#include "kernels.cuh"

namespace capstone::detail {

namespace {

// y = alpha[k] * y + beta[k] over planes of pq elements; blockIdx.x = n * K + k (one plane), the
// block's threads walk the plane in float4 steps when pq % 4 == 0 (every plane is then aligned).
__global__ void affine_kernel(float* y, const float* __restrict__ alpha,
                              const float* __restrict__ beta, int k, int64_t pq, bool vec) {
  const int plane = blockIdx.x;
  const float a = alpha[plane % k], b = beta[plane % k];
  float* base = y + int64_t(plane) * pq;
  const int64_t stride = int64_t(gridDim.y) * blockDim.x;
  if (vec) {
    float4* b4 = reinterpret_cast<float4*>(base);
    for (int64_t i = blockIdx.y * int64_t(blockDim.x) + threadIdx.x; i < pq / 4; i += stride) {
      float4 v = b4[i];
      v.x = fmaf(v.x, a, b), v.y = fmaf(v.y, a, b), v.z = fmaf(v.z, a, b), v.w = fmaf(v.w, a, b);
      b4[i] = v;
    }
  } else {
    for (int64_t i = blockIdx.y * int64_t(blockDim.x) + threadIdx.x; i < pq; i += stride) {
      base[i] = fmaf(base[i], a, b);
    }
  }
}

// y = act(y), float4 per thread, grid-stride.
__global__ void activation_kernel(float* y, int64_t count, int act) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  const int64_t n4 = count / 4;
  float4* y4 = reinterpret_cast<float4*>(y);
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n4; i += stride) {
    float4 v = y4[i];
    v.x = activate(v.x, act), v.y = activate(v.y, act), v.z = activate(v.z, act),
    v.w = activate(v.w, act);
    y4[i] = v;
  }
  for (int64_t i = n4 * 4 + blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count;
       i += stride) {
    y[i] = activate(y[i], act);
  }
}

__global__ void gather_kernel(const void* y, bool bf16, const int64_t* __restrict__ idx, float* out,
                              int count) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= count) return;
  out[i] = bf16 ? __bfloat162float(static_cast<const __nv_bfloat16*>(y)[idx[i]])
                : static_cast<const float*>(y)[idx[i]];
}

}  // namespace

void launch_affine(float* y, const float* alpha, const float* beta, int n, int k, int64_t pq,
                   cudaStream_t stream) {
  const int64_t per_block = 256 * 4 * 4;  // 4 float4 per thread
  const int gy =
      static_cast<int>(std::min<int64_t>(gpu100::ceil_div<int64_t>(pq, per_block), 1024));
  const dim3 grid(n * k, gy);  // n * k < 2^31 (checked by check_batch)
  affine_kernel<<<grid, 256, 0, stream>>>(y, alpha, beta, k, pq, pq % 4 == 0);
  CUDA_CHECK_LAST();
}

void launch_activation(float* y, int64_t count, int act, cudaStream_t stream) {
  if (act == 0) return;
  const int64_t blocks = std::min<int64_t>(gpu100::ceil_div<int64_t>(count, 256 * 4 * 4), 132 * 32);
  activation_kernel<<<static_cast<int>(std::max<int64_t>(blocks, 1)), 256, 0, stream>>>(y, count,
                                                                                        act);
  CUDA_CHECK_LAST();
}

void launch_gather(const void* y, bool bf16, const int64_t* idx, float* out, int count,
                   cudaStream_t stream) {
  if (count <= 0) return;
  gather_kernel<<<gpu100::ceil_div(count, 256), 256, 0, stream>>>(y, bf16, idx, out, count);
  CUDA_CHECK_LAST();
}

}  // namespace capstone::detail
