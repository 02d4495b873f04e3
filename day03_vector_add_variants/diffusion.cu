// day03 diffusion: one denoising step of a diffusion sampler with temporal blending, elementwise
// over a frame, in fp32, fp16 and bf16 storage (fp32 math):
//   x0 = (x_t - sqrt(1 - abar) eps) / sqrt(abar),   out = clamp(w x0 + (1 - w) prev, -1, 1).
// diffusion_chain: what an eager framework launches for that expression, one kernel per operation
//   (mul, sub, div, mul, mul, add, clamp), each writing its result to memory as T: 16 arrays moved.
// diffusion_fused: what changed: one kernel, x0 and the blend kept in registers, the scalars
//   folded on the host. Why it is faster: it moves the 4 compulsory arrays instead of 16, so at a
//   bandwidth-bound size it can be about 16 / 4 = 4x faster (the chain's extra launches may add a
//   few percent), not more. What it costs: one kernel written for one expression instead of seven
//   generic ones, and roundings of its own (it does not match the chain bit for bit; both are
//   checked against the CPU).
// Both run one kernel template with v4_ilp's access pattern (16-byte packs, kUnroll of them per
// input in flight per thread, a scalar tail, the scalar path when a pointer is not 16-byte
// aligned), so, as in silu.cu, the two differ in the bytes they move and nothing else.
#include <cmath>

#include "common/cuda_check.hpp"
#include "elementwise.cuh"
#include "vector_add_variants.cuh"

namespace day03 {

namespace {

using detail::kThreads;
using detail::kUnroll;

// Storage to fp32 (exact) and back (round to nearest even).
__device__ __forceinline__ float to_f32(float v) {
  return v;
}
__device__ __forceinline__ float to_f32(__half v) {
  return __half2float(v);
}
__device__ __forceinline__ float to_f32(__nv_bfloat16 v) {
  return __bfloat162float(v);
}
template <typename T>
__device__ __forceinline__ T from_f32(float v) {
  if constexpr (std::is_same_v<T, __half>) {
    return __float2half_rn(v);
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __float2bfloat16_rn(v);
  } else {
    return v;
  }
}

// clamp(v, -1, 1) that lets a NaN through, as torch.clamp does (fminf / fmaxf would turn it into
// -1 or 1): a NaN that a kernel of the chain left in a scratch array reaches the output and fails
// the check instead of hiding behind the clamp.
__device__ __forceinline__ float clamp1(float v) {
  return v < -1.0f ? -1.0f : (v > 1.0f ? 1.0f : v);
}

// The chain's operations, one functor each (the unused arguments are 0).
struct ScaleOp {  // k * x, k a scalar
  float k;
  __device__ float operator()(float x, float, float) const { return k * x; }
};
struct SubOp {
  __device__ float operator()(float x, float y, float) const { return x - y; }
};
struct DivOp {  // x / d: the IEEE division (nvcc's default -prec-div=true)
  float d;
  __device__ float operator()(float x, float, float) const { return x / d; }
};
struct AddOp {
  __device__ float operator()(float x, float y, float) const { return x + y; }
};
struct ClampOp {
  __device__ float operator()(float x, float, float) const { return clamp1(x); }
};

// The whole step. a = 1 / sqrt(abar), b = sqrt(1 - abar) / sqrt(abar), w and c = 1 - w are
// computed on the host in double and rounded once to fp32, so each element costs two multiplies
// and a subtract (the compiler may contract them into FMAs) instead of a division, and the
// square roots are taken once per call, not once per element.
struct StepOp {
  float a, b, w, c;
  __device__ float operator()(float x_t, float eps, float prev) const {
    const float x0 = a * x_t - b * eps;
    return clamp1(w * x0 + c * prev);
  }
};

// y[i] = op(x0[i], x1[i], x2[i]) in fp32, stored as T, for the first kInputs inputs (the others
// are not read; op gets 0 for them). A pack is 16 bytes: 4 floats or 8 halves. Mapping as in
// v4_ilp: block k owns packs [1024 k, 1024 (k + 1)), and in step u thread t takes pack
// 1024 k + 256 u + t, so each load instruction is coalesced across the warp; all kInputs x kUnroll
// loads are issued before the first op (up to 192 bytes in flight per thread). Then the scalar
// tail, one element per thread: the last n % 4 (fp32) or n % 8 (16-bit) elements, or all of them
// when the host found a misaligned pointer and passed num_packs = 0.
template <typename T, int kInputs, typename Op>
__global__ void step_map_kernel(const T* __restrict__ x0, const T* __restrict__ x1,
                                const T* __restrict__ x2, T* y, int64_t n, int64_t num_packs,
                                Op op) {
  using Pack = detail::Pack16<T>;
  constexpr int kPerPack = Pack::kWords;
  const Pack* p0 = reinterpret_cast<const Pack*>(x0);
  const Pack* p1 = reinterpret_cast<const Pack*>(x1);
  const Pack* p2 = reinterpret_cast<const Pack*>(x2);
  const int64_t tile = static_cast<int64_t>(blockIdx.x) * (kThreads * kUnroll);
  Pack r0[kUnroll], r1[kUnroll], r2[kUnroll];
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {  // every load first ...
    const int64_t p = tile + u * kThreads + threadIdx.x;
    if (p < num_packs) {
      r0[u] = detail::load16(p0 + p);
      if constexpr (kInputs >= 2) r1[u] = detail::load16(p1 + p);
      if constexpr (kInputs >= 3) r2[u] = detail::load16(p2 + p);
    }
  }
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {  // ... then the math and the stores
    const int64_t p = tile + u * kThreads + threadIdx.x;
    if (p < num_packs) {
      Pack out;
#pragma unroll
      for (int k = 0; k < kPerPack; ++k) {
        float v1 = 0.0f, v2 = 0.0f;
        if constexpr (kInputs >= 2) v1 = to_f32(r1[u].w[k]);
        if constexpr (kInputs >= 3) v2 = to_f32(r2[u].w[k]);
        out.w[k] = from_f32<T>(op(to_f32(r0[u].w[k]), v1, v2));
      }
      detail::store16(reinterpret_cast<Pack*>(y) + p, out);
    }
  }
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i =
           num_packs * kPerPack + static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < n; i += stride) {
    float v1 = 0.0f, v2 = 0.0f;
    if constexpr (kInputs >= 2) v1 = to_f32(x1[i]);
    if constexpr (kInputs >= 3) v2 = to_f32(x2[i]);
    y[i] = from_f32<T>(op(to_f32(x0[i]), v1, v2));
  }
}

template <typename T, int kInputs, typename Op>
void launch_step_map(const T* x0, const T* x1, const T* x2, T* y, int64_t n, cudaStream_t stream,
                     Op op) {
  constexpr int64_t kPerPack = 16 / sizeof(T);
  // The unused inputs are nullptr, which counts as aligned.
  const bool vec = detail::aligned16(x0) && detail::aligned16(x1) && detail::aligned16(x2) &&
                   detail::aligned16(y);
  const int64_t num_packs = vec ? n / kPerPack : 0;
  const int64_t tiles = gpu100::ceil_div<int64_t>(num_packs, kUnroll * kThreads);
  // One block per tile of packs, or one thread per tail element if there are more of those.
  const unsigned blocks = detail::blocks_for(std::max(tiles * kThreads, n - num_packs * kPerPack));
  step_map_kernel<T, kInputs, Op><<<blocks, kThreads, 0, stream>>>(x0, x1, x2, y, n, num_packs, op);
  CUDA_CHECK_LAST();
}

}  // namespace

template <typename T>
void diffusion_chain(const T* x_t, const T* eps, const T* prev, T* out, T* t, T* u, int64_t n,
                     DiffusionStep step, cudaStream_t stream) {
  detail::check_size(n, "diffusion_chain");
  check_diffusion_step(step, "diffusion_chain");
  if (n > 0 && (t == nullptr || u == nullptr)) {
    throw std::invalid_argument("diffusion_chain: needs two scratch arrays of n elements");
  }
  if (n == 0) return;
  // The scalars as an eager framework passes them: computed in double on the host (Python's
  // math.sqrt), used in the kernels' fp32 math.
  const float s = static_cast<float>(std::sqrt(1.0 - step.abar));
  const float r = static_cast<float>(std::sqrt(step.abar));
  const float w = static_cast<float>(step.w), c = static_cast<float>(1.0 - step.w);
  // No launch writes an array it reads (out serves as the third scratch array), so __restrict__
  // holds for every one of them.            arrays read + written
  launch_step_map<T, 1>(eps, nullptr, nullptr, t, n, stream, ScaleOp{s});   // t = s eps      1 + 1
  launch_step_map<T, 2>(x_t, t, nullptr, u, n, stream, SubOp{});            // u = x_t - t    2 + 1
  launch_step_map<T, 1>(u, nullptr, nullptr, t, n, stream, DivOp{r});       // t = u / r (x0) 1 + 1
  launch_step_map<T, 1>(prev, nullptr, nullptr, u, n, stream, ScaleOp{c});  // u = c prev     1 + 1
  launch_step_map<T, 1>(t, nullptr, nullptr, out, n, stream, ScaleOp{w});   // out = w x0     1 + 1
  launch_step_map<T, 2>(out, u, nullptr, t, n, stream, AddOp{});            // t = out + u    2 + 1
  launch_step_map<T, 1>(t, nullptr, nullptr, out, n, stream, ClampOp{});    // out = clamp(t) 1 + 1
}

template <typename T>
void diffusion_fused(const T* x_t, const T* eps, const T* prev, T* out, T* /*t*/, T* /*u*/,
                     int64_t n, DiffusionStep step, cudaStream_t stream) {
  detail::check_size(n, "diffusion_fused");
  check_diffusion_step(step, "diffusion_fused");
  if (n == 0) return;
  const double r = std::sqrt(step.abar);  // > 0: abar is in (0, 1]
  const StepOp op{static_cast<float>(1.0 / r), static_cast<float>(std::sqrt(1.0 - step.abar) / r),
                  static_cast<float>(step.w), static_cast<float>(1.0 - step.w)};
  launch_step_map<T, 3>(x_t, eps, prev, out, n, stream, op);  // reads 3 arrays, writes 1
}

// Only the storage types of the step (each type is six kernels to compile).
template void diffusion_chain<float>(const float*, const float*, const float*, float*, float*,
                                     float*, int64_t, DiffusionStep, cudaStream_t);
template void diffusion_fused<float>(const float*, const float*, const float*, float*, float*,
                                     float*, int64_t, DiffusionStep, cudaStream_t);
template void diffusion_chain<__half>(const __half*, const __half*, const __half*, __half*, __half*,
                                      __half*, int64_t, DiffusionStep, cudaStream_t);
template void diffusion_fused<__half>(const __half*, const __half*, const __half*, __half*, __half*,
                                      __half*, int64_t, DiffusionStep, cudaStream_t);
template void diffusion_chain<__nv_bfloat16>(const __nv_bfloat16*, const __nv_bfloat16*,
                                             const __nv_bfloat16*, __nv_bfloat16*, __nv_bfloat16*,
                                             __nv_bfloat16*, int64_t, DiffusionStep, cudaStream_t);
template void diffusion_fused<__nv_bfloat16>(const __nv_bfloat16*, const __nv_bfloat16*,
                                             const __nv_bfloat16*, __nv_bfloat16*, __nv_bfloat16*,
                                             __nv_bfloat16*, int64_t, DiffusionStep, cudaStream_t);

}  // namespace day03
