// day03 v4_ilp: several independent 16-byte packs per thread, loaded before any is used. The one
// template of the day: fp32, fp16, bf16, fp64 and int32 all run this kernel.
#include "common/cuda_check.hpp"
#include "elementwise.cuh"
#include "vector_add_variants.cuh"

namespace day03 {

namespace {

// v4: v3 keeps one 16-byte load per input in flight per thread; v4 issues kUnroll = 4 of them
// per input (128 bytes per thread) before the first add, so the memory system sees 4x more
// independent requests per thread: the instruction-level parallelism that hides DRAM latency
// when occupancy alone does not (Volkov, "Better performance at lower occupancy", GTC 2010).
// Mapping: block k owns the tile of kThreads * kUnroll packs starting at pack k * 1024; in step u
// thread t takes pack tile + u * kThreads + t, so each of the four loads is coalesced across the
// warp. The scalar tail (n % elements-per-pack, or everything when a pointer is misaligned) is one
// element per thread, as in v3.
template <typename T>
__global__ void add_v4_ilp_kernel(const T* __restrict__ a, const T* __restrict__ b, T* c, int64_t n,
                                  int64_t num_packs) {
  using Op = detail::AddOp<T>;
  using Pack = detail::Pack16<typename Op::Word>;
  constexpr int64_t kPerPack = Pack::kWords * Op::kPerWord;  // elements per 16 bytes
  const Pack* pa = reinterpret_cast<const Pack*>(a);
  const Pack* pb = reinterpret_cast<const Pack*>(b);
  Pack* pc = reinterpret_cast<Pack*>(c);

  const int64_t tile = static_cast<int64_t>(blockIdx.x) * (detail::kThreads * detail::kUnroll);
  Pack ra[detail::kUnroll], rb[detail::kUnroll];
#pragma unroll
  for (int u = 0; u < detail::kUnroll; ++u) {  // all loads first ...
    const int64_t p = tile + u * detail::kThreads + threadIdx.x;
    if (p < num_packs) {
      ra[u] = detail::load16(pa + p);
      rb[u] = detail::load16(pb + p);
    }
  }
#pragma unroll
  for (int u = 0; u < detail::kUnroll; ++u) {  // ... then the adds and the stores
    const int64_t p = tile + u * detail::kThreads + threadIdx.x;
    if (p < num_packs) {
      Pack rc;
#pragma unroll
      for (int k = 0; k < Pack::kWords; ++k) rc.w[k] = Op::add(ra[u].w[k], rb[u].w[k]);
      detail::store16(pc + p, rc);
    }
  }

  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i =
           num_packs * kPerPack + static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < n; i += stride) {
    c[i] = Op::add1(a[i], b[i]);
  }
}

}  // namespace

template <typename T>
void add_v4_ilp(const T* a, const T* b, T* c, int64_t n, cudaStream_t stream) {
  detail::check_size(n, "add_v4_ilp");
  if (n == 0) return;
  constexpr int64_t kPerPack = 16 / sizeof(T);
  const bool vec = detail::aligned16(a) && detail::aligned16(b) && detail::aligned16(c);
  const int64_t num_packs = vec ? n / kPerPack : 0;
  const int64_t tail = n - num_packs * kPerPack;
  // One block per tile of packs, or one thread per tail element if there are more of those.
  const int64_t tiles = gpu100::ceil_div<int64_t>(num_packs, detail::kUnroll * detail::kThreads);
  const unsigned blocks = detail::blocks_for(std::max(tiles * detail::kThreads, tail));
  add_v4_ilp_kernel<T><<<blocks, detail::kThreads, 0, stream>>>(a, b, c, n, num_packs);
  CUDA_CHECK_LAST();
}

// Only the types the day uses (each instantiation is a kernel to compile).
template void add_v4_ilp<float>(const float*, const float*, float*, int64_t, cudaStream_t);
template void add_v4_ilp<__half>(const __half*, const __half*, __half*, int64_t, cudaStream_t);
template void add_v4_ilp<__nv_bfloat16>(const __nv_bfloat16*, const __nv_bfloat16*, __nv_bfloat16*,
                                        int64_t, cudaStream_t);
template void add_v4_ilp<double>(const double*, const double*, double*, int64_t, cudaStream_t);
template void add_v4_ilp<int32_t>(const int32_t*, const int32_t*, int32_t*, int64_t, cudaStream_t);

}  // namespace day03
