// day03 v5_smem_staged: A and B staged through shared memory. An anti-pattern, kept on purpose.
#include "common/cuda_check.hpp"
#include "elementwise.cuh"
#include "vector_add_variants.cuh"

namespace day03 {

namespace {

// v5 (anti-pattern): v1's mapping (thread i owns element i), but a[i] and b[i] go global ->
// register -> shared memory, then a barrier, then shared -> register -> add -> global. Shared
// memory pays off when a block reads a loaded value many times (a GEMM tile is read BK times);
// here every byte is used once, so staging is an extra hop (a store, a load, 2 KB per block) plus
// a barrier that makes each warp wait for the block's slowest load. The barrier protects nothing
// even: each thread reads back only its own slots. Expect v1's time or a little worse, never
// better.
__global__ void add_v5_smem_staged_kernel(const float* __restrict__ a, const float* __restrict__ b,
                                          float* c, int64_t n) {
  __shared__ float sa[detail::kThreads];
  __shared__ float sb[detail::kThreads];
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) {
    sa[threadIdx.x] = a[i];
    sb[threadIdx.x] = b[i];
  }
  // Every thread of the block reaches the barrier (no early return above), also those past n.
  __syncthreads();
  if (i < n) c[i] = sa[threadIdx.x] + sb[threadIdx.x];
}

}  // namespace

void add_v5_smem_staged(const float* a, const float* b, float* c, int64_t n, cudaStream_t stream) {
  detail::check_size(n, "add_v5_smem_staged");
  if (n == 0) return;
  add_v5_smem_staged_kernel<<<detail::blocks_for(n), detail::kThreads, 0, stream>>>(a, b, c, n);
  CUDA_CHECK_LAST();
}

}  // namespace day03
