// day03 silu: y = silu(a + b * c), fused into one kernel, against the chains of separate kernels
// a framework would launch for it. Every kernel here uses v4's access pattern (four float4 per
// thread per input, loaded before use), so the comparison is about bytes moved, nothing else.
#include "common/cuda_check.hpp"
#include "elementwise.cuh"
#include "vector_add_variants.cuh"

namespace day03 {

namespace {

using detail::kThreads;
using detail::kUnroll;

// silu(x) = x / (1 + e^-x), with expf: the accurate exponential (2 ulp). __expf would be a few
// instructions cheaper and less accurate; the kernels are memory-bound, so the cost is hidden.
__device__ float silu(float x) {
  return x / (1.0f + expf(-x));
}

// The operations, one functor each. __fmul_rn / __fadd_rn forbid the compiler to contract
// b * c + a into one FMA, so the fused kernel rounds exactly as the separate kernels do.
struct MulOp {
  __device__ float operator()(float x, float y, float) const { return __fmul_rn(x, y); }
};
struct AddOp {
  __device__ float operator()(float x, float y, float) const { return __fadd_rn(x, y); }
};
struct SiluOp {
  __device__ float operator()(float x, float, float) const { return silu(x); }
};
struct SigmoidOp {
  __device__ float operator()(float x, float, float) const { return 1.0f / (1.0f + expf(-x)); }
};
struct FusedOp {  // a + b * c, then silu, with the intermediate kept in a register
  __device__ float operator()(float a, float b, float c) const {
    return silu(__fadd_rn(a, __fmul_rn(b, c)));
  }
};

// y[i] = op(x0[i], x1[i], x2[i]) for the first kInputs inputs (the others are not read).
// Mapping as v4_ilp: block k owns packs [1024 k, 1024 (k + 1)), thread t takes pack
// 1024 k + 256 u + t in step u; all loads are issued before the first op; then a scalar tail.
template <int kInputs, typename Op>
__global__ void map_kernel(const float* __restrict__ x0, const float* __restrict__ x1,
                           const float* __restrict__ x2, float* y, int64_t n, int64_t num_vec,
                           Op op) {
  const int64_t tile = static_cast<int64_t>(blockIdx.x) * (kThreads * kUnroll);
  float4 r0[kUnroll], r1[kUnroll], r2[kUnroll];
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    const int64_t p = tile + u * kThreads + threadIdx.x;
    r1[u] = r2[u] = make_float4(0.f, 0.f, 0.f, 0.f);
    if (p < num_vec) {
      r0[u] = reinterpret_cast<const float4*>(x0)[p];
      if constexpr (kInputs >= 2) r1[u] = reinterpret_cast<const float4*>(x1)[p];
      if constexpr (kInputs >= 3) r2[u] = reinterpret_cast<const float4*>(x2)[p];
    }
  }
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    const int64_t p = tile + u * kThreads + threadIdx.x;
    if (p < num_vec) {
      reinterpret_cast<float4*>(y)[p] =
          make_float4(op(r0[u].x, r1[u].x, r2[u].x), op(r0[u].y, r1[u].y, r2[u].y),
                      op(r0[u].z, r1[u].z, r2[u].z), op(r0[u].w, r1[u].w, r2[u].w));
    }
  }
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = 4 * num_vec + static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    float v1 = 0.0f, v2 = 0.0f;
    if constexpr (kInputs >= 2) v1 = x1[i];
    if constexpr (kInputs >= 3) v2 = x2[i];
    y[i] = op(x0[i], v1, v2);
  }
}

template <int kInputs, typename Op>
void launch_map(const float* x0, const float* x1, const float* x2, float* y, int64_t n,
                cudaStream_t stream, Op op) {
  // Unused inputs are nullptr, which counts as aligned.
  const bool vec = detail::aligned16(x0) && detail::aligned16(x1) && detail::aligned16(x2) &&
                   detail::aligned16(y);
  const int64_t num_vec = vec ? n / 4 : 0;
  const int64_t tiles = gpu100::ceil_div<int64_t>(num_vec, kUnroll * kThreads);
  const unsigned blocks = detail::blocks_for(std::max(tiles * kThreads, n - 4 * num_vec));
  map_kernel<kInputs, Op><<<blocks, kThreads, 0, stream>>>(x0, x1, x2, y, n, num_vec, op);
  CUDA_CHECK_LAST();
}

void check_scratch(const float* t, const float* u, int64_t n, const char* who) {
  if (n > 0 && (t == nullptr || u == nullptr)) {
    throw std::invalid_argument(std::string(who) + ": needs two scratch arrays of n floats");
  }
}

}  // namespace

void silu_fused(const float* a, const float* b, const float* c, float* y, float* /*t*/,
                float* /*u*/, int64_t n, cudaStream_t stream) {
  detail::check_size(n, "silu_fused");
  if (n == 0) return;
  launch_map<3>(a, b, c, y, n, stream, FusedOp{});
}

void silu_unfused3(const float* a, const float* b, const float* c, float* y, float* t, float* u,
                   int64_t n, cudaStream_t stream) {
  detail::check_size(n, "silu_unfused3");
  check_scratch(t, u, n, "silu_unfused3");
  if (n == 0) return;
  launch_map<2>(b, c, nullptr, t, n, stream, MulOp{});         // t = b * c   reads 2, writes 1
  launch_map<2>(a, t, nullptr, u, n, stream, AddOp{});         // u = a + t   reads 2, writes 1
  launch_map<1>(u, nullptr, nullptr, y, n, stream, SiluOp{});  // y = silu(u) reads 1, writes 1
}

void silu_eager4(const float* a, const float* b, const float* c, float* y, float* t, float* u,
                 int64_t n, cudaStream_t stream) {
  detail::check_size(n, "silu_eager4");
  check_scratch(t, u, n, "silu_eager4");
  if (n == 0) return;
  launch_map<2>(b, c, nullptr, t, n, stream, MulOp{});            // t = b * c
  launch_map<2>(a, t, nullptr, u, n, stream, AddOp{});            // u = a + t
  launch_map<1>(u, nullptr, nullptr, t, n, stream, SigmoidOp{});  // t = sigmoid(u), t reused
  launch_map<2>(u, t, nullptr, y, n, stream, MulOp{});            // y = u * sigmoid(u)
}

}  // namespace day03
