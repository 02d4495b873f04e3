// dual v1: the dual-stream idea in its plainest form. One launch covers both streams: the flat
// index runs over out1's N*K*P*Q elements, then out2's, and each thread computes one output
// element from global memory (C*R*S input reads, C*R*S weight reads, both through L1/L2), applies
// the epilogue and stores once. Against two cuDNN calls it saves a launch and nothing else: every
// input element is read R*S*K times, so it is bound by the L1 traffic, not by the output bytes.
// (PMPP chapter 7's basic 2D convolution kernel, with the channel and output-channel loops added.)
#include <algorithm>

#include "common/cuda_check.hpp"
#include "common/math.hpp"
#include "kernels.cuh"

namespace capstone::detail {

namespace {

// Thread-to-data mapping: element i of the 2 * N*K*P*Q outputs (grid-stride), decomposed as
// (stream, n, k, p, q) with q fastest, so a warp reads neighbouring inputs and writes 32
// consecutive outputs.
__global__ void dual_naive_kernel(DualArgs a) {
  const int64_t per_stream = int64_t(a.n) * a.k * a.p * a.q;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < 2 * per_stream;
       i += stride) {
    const int st = i >= per_stream ? 1 : 0;
    const StreamArgs& sa = a.s[st];
    int64_t e = i - st * per_stream;
    const int q = static_cast<int>(e % a.q);
    e /= a.q;
    const int p = static_cast<int>(e % a.p);
    e /= a.p;
    const int k = static_cast<int>(e % a.k);
    const int n = static_cast<int>(e / a.k);
    float acc = 0.f;
    for (int c = 0; c < sa.c; ++c) {
      const float* plane = sa.x + (int64_t(n) * sa.c + c) * a.h * a.w;
      const float* filt = sa.w + (int64_t(k) * sa.c + c) * a.r * a.sw;
      for (int r = 0; r < a.r; ++r) {
        const int ih = p * a.stride - a.pad + r;
        if (ih < 0 || ih >= a.h) continue;
        for (int s = 0; s < a.sw; ++s) {
          const int iw = q * a.stride - a.pad + s;
          if (iw < 0 || iw >= a.w) continue;
          acc = fmaf(__ldg(plane + int64_t(ih) * a.w + iw), __ldg(filt + r * a.sw + s), acc);
        }
      }
    }
    store_one(sa.y, i - st * per_stream, epilogue(acc, sa, k, a.act), a.bf16);
  }
}

}  // namespace

void launch_dual_naive(const DualArgs& a, cudaStream_t stream) {
  const int64_t total = 2 * int64_t(a.n) * a.k * a.p * a.q;
  const int64_t blocks = std::min<int64_t>(gpu100::ceil_div<int64_t>(total, 256), int64_t(1) << 20);
  dual_naive_kernel<<<static_cast<int>(blocks), 256, 0, stream>>>(a);
  CUDA_CHECK_LAST();
}

}  // namespace capstone::detail
