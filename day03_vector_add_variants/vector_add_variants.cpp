// day03_vector_add_variants: the CPU references and the registries.
#include "vector_add_variants.cuh"
#include "common/learner.hpp"

#include <cmath>
#include <stdexcept>
#include <string>

namespace day03 {

template <typename T>
void add_cpu(const T* a, const T* b, T* c, int64_t n) {
  if (n < 0) throw std::invalid_argument("add_cpu: n must be >= 0, got " + std::to_string(n));
  for (int64_t i = 0; i < n; ++i) {
    if constexpr (std::is_arithmetic_v<T>) {
      c[i] = a[i] + b[i];
    } else {  // fp16, bf16: exact float sum, rounded once to T (round to nearest even)
      c[i] = static_cast<T>(static_cast<float>(a[i]) + static_cast<float>(b[i]));
    }
  }
}

template void add_cpu<float>(const float*, const float*, float*, int64_t);
template void add_cpu<__half>(const __half*, const __half*, __half*, int64_t);
template void add_cpu<__nv_bfloat16>(const __nv_bfloat16*, const __nv_bfloat16*, __nv_bfloat16*,
                                     int64_t);
template void add_cpu<double>(const double*, const double*, double*, int64_t);
template void add_cpu<int32_t>(const int32_t*, const int32_t*, int32_t*, int64_t);

float silu_cpu(float x) {
  return x / (1.0f + std::exp(-x));
}

void silu_fused_cpu(const float* a, const float* b, const float* c, float* y, int64_t n) {
  if (n < 0)
    throw std::invalid_argument("silu_fused_cpu: n must be >= 0, got " + std::to_string(n));
  for (int64_t i = 0; i < n; ++i) {
    const float t = b[i] * c[i];  // rounded to fp32, as the GPU kernels do (no FMA)
    const float u = a[i] + t;
    y[i] = silu_cpu(u);
  }
}

namespace {
struct LearnerTag;  // this registry's list of learner entries (common/learner.hpp)
}

void add_learner_variant(const Variant& v) {
  gpu100::learner_entries<Variant, LearnerTag>().push_back(v);
}

const std::vector<Variant>& variants() {
  static const std::vector<Variant> kVariants = gpu100::with_learner<Variant>(
      {
          {"v1_naive", "day02's kernel: one thread per element, ceil(n / 256) blocks",
           day02::vector_add_v1, false, "sweep"},
          {"v2_grid_stride",
           "grid of SMs x resident blocks, each thread loops with the grid's stride",
           add_v2_grid_stride, false},
          {"v3_float4",
           "one float4 (16-byte load/store) per thread, scalar tail, misaligned fallback",
           add_v3_float4, false},
          {"v4_ilp", "4 float4 per thread per input, all loaded before use (the type template)",
           add_v4_ilp<float>, false, "sweep types"},
          {"v5_smem_staged", "anti-pattern: A and B through shared memory and a barrier, no reuse",
           add_v5_smem_staged, false},
          {"cub_transform", "library: day02's cub::DeviceTransform::Transform",
           day02::vector_add_cub, true, "sweep"},
      },
      gpu100::learner_entries<Variant, LearnerTag>());
  return kVariants;
}

const Variant* find_variant(const std::string& name) {
  for (const auto& v : variants()) {
    if (name == v.name) return &v;
  }
  return nullptr;
}

const std::vector<SiluVariant>& silu_variants() {
  static const std::vector<SiluVariant> kSilu = {
      {"silu_fused", "one kernel: y = silu(a + b * c), u kept in a register", 1, 4, silu_fused},
      {"silu_unfused3", "three kernels: t = b * c; u = a + t; y = silu(u)", 3, 8, silu_unfused3},
      {"silu_eager4", "four kernels, silu written as x * sigmoid(x): mul, add, sigmoid, mul", 4, 11,
       silu_eager4},
  };
  return kSilu;
}

}  // namespace day03
