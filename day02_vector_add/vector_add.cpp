// day02_vector_add: the CPU reference and the registry of variants.
#include <stdexcept>
#include <string>

#include "common/learner.hpp"
#include "vector_add.cuh"

namespace day02 {

void vector_add_cpu(const float* a, const float* b, float* c, int64_t n) {
  if (n < 0) throw std::invalid_argument("vector_add_cpu: n must be >= 0");
  for (int64_t i = 0; i < n; ++i) c[i] = a[i] + b[i];
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
          {"v1_naive", "one thread per element, 256-thread blocks", vector_add_v1, false},
          {"cub_transform", "library: cub::DeviceTransform::Transform", vector_add_cub, true},
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

}  // namespace day02
