#pragma once
// day02_vector_add: C = A + B on fp32 vectors of any length.
//
// The host API of the day, exported by the library target day02::vector_add so that later days
// (day03's variants, the capstone's fusion ideas) call these launchers instead of copying them.
#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <vector>

namespace day02 {

// CPU reference: c[i] = a[i] + b[i] for i < n, in fp32 (the same IEEE-754 additions the GPU does,
// so the comparison is exact).
void vector_add_cpu(const float* a, const float* b, float* c, int64_t n);

// v1: one thread per element. Any n >= 0 (n == 0 launches nothing); a negative n throws
// std::invalid_argument. c may alias a or b (each element is read before it is written).
// Checks its launch (CUDA_CHECK_LAST); does not synchronise.
void vector_add_v1(const float* a, const float* b, float* c, int64_t n, cudaStream_t stream);

// The library a user would pick instead: CUB's DeviceTransform with cuda::std::plus.
void vector_add_cub(const float* a, const float* b, float* c, int64_t n, cudaStream_t stream);

// The day's registry: drives the binary's rows, the tests and the README table.
using VectorAddFn = void (*)(const float*, const float*, float*, int64_t, cudaStream_t);
struct Variant {
  const char* name;
  const char* description;
  VectorAddFn launch;
  bool is_library;
  const char* tags = "";  // for the drivers that select rows by tag (gpu100::has_tag), e.g. day03
};
const std::vector<Variant>& variants();  // the day's own, then the learner's (mine/*.cu)
const Variant* find_variant(const std::string& name);  // nullptr when unknown
// Adds a learner's variant (tagged "mine") from its file in mine/ (common/learner.hpp).
void add_learner_variant(const Variant& v);

}  // namespace day02
