#pragma once
// day07's GPU checks of a LayerNorm forward: the day's tests run them on every variant of the
// registry, and the test cases generated for a learner's variant (mine_test.cpp.in) on that one.
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/catch.hpp"
#include "common/compare.hpp"
#include "common/cuda_check.hpp"
#include "common/device_buffer.hpp"
#include "common/half.hpp"
#include "common/random.hpp"
#include "layernorm.cuh"

namespace day07_tests {

using day07::bf16;
using day07::make_problem;
using day07::Problem;
using day07::storage;

inline const std::vector<int64_t> kRows = {1, 3, 1000};
inline const std::vector<int64_t> kDims = {1, 7, 768, 1000, 4096, 16384};
constexpr float kEps = 1e-5f;

inline void sync_check() {
  CUDA_CHECK(cudaPeekAtLastError());
  CUDA_CHECK(cudaDeviceSynchronize());
}

// Whether rows x dim is small enough for this run ($GPU100_TEST_MAX_N under the sanitizer).
inline bool keep(int64_t rows, int64_t dim) {
  return !gpu100::test_sizes({rows * dim}).empty();
}

// A device copy of v starting `offset` elements into its buffer (offset 1: not 16-byte aligned).
template <typename T>
struct Placed {
  gpu100::DeviceBuffer<T> buf;
  int64_t offset;
  T* ptr() { return buf.data() + offset; }
};

template <typename T>
Placed<T> place(const std::vector<float>& v, int64_t offset) {
  Placed<T> d{gpu100::DeviceBuffer<T>(v.size() + offset), offset};
  d.buf.poison();
  const std::vector<T> h = storage<T>(v);
  CUDA_CHECK(cudaMemcpy(d.ptr(), h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
  return d;
}

template <typename T>
std::vector<T> fetch(Placed<T>& d, size_t count) {
  std::vector<T> h(count);
  CUDA_CHECK(cudaMemcpy(h.data(), d.ptr(), count * sizeof(T), cudaMemcpyDeviceToHost));
  return h;
}

template <typename T>
day07::Tolerance out_tol() {
  return std::is_same_v<T, float> ? day07::kFp32Y : day07::kBf16Y;
}

// Runs a LayerNorm forward and checks y, mean and rstd against the CPU.
template <typename T>
gpu100::CompareResult check_layernorm(day07::LayerNormFn<T> fn, const Problem<T>& p,
                                      int64_t offset = 0) {
  const int64_t n = p.rows * p.dim;
  auto x = place<T>(p.x, offset), g = place<T>(p.gamma, offset), b = place<T>(p.beta, offset);
  auto y = place<T>(std::vector<float>(n), offset);
  y.buf.poison();
  gpu100::DeviceBuffer<float> mean(p.rows), rstd(p.rows);
  mean.poison();
  rstd.poison();
  fn(x.ptr(), g.ptr(), b.ptr(), y.ptr(), mean.data(), rstd.data(), p.rows, p.dim, kEps, nullptr);
  sync_check();
  std::vector<double> ry(n), rm(p.rows), rr(p.rows);
  day07::layernorm_forward_cpu(p.x.data(), p.gamma.data(), p.beta.data(), ry.data(), rm.data(),
                               rr.data(), p.rows, p.dim, kEps);
  const auto tol = out_tol<T>();
  return gpu100::worst_of(
      {gpu100::compare(ry, fetch(y, n), tol.abs_tol, tol.rel_tol),
       gpu100::compare(rm, mean.download(), day07::kStats.abs_tol, day07::kStats.rel_tol),
       gpu100::compare(rr, rstd.download(), day07::kStats.abs_tol, day07::kStats.rel_tol)});
}

inline const day07::Variant& variant(const std::string& name) {
  const day07::Variant* v = day07::find_variant(name);
  if (v == nullptr) throw std::logic_error("no variant " + name);
  return *v;
}

// An fp32 LayerNorm at every awkward shape: y, mean and rstd against the double CPU reference.
inline void check_shapes(const day07::Variant& v, uint64_t seed) {
  for (int64_t rows : kRows) {
    for (int64_t dim : kDims) {
      if (!keep(rows, dim)) continue;
      INFO(v.name << " fp32, " << rows << " x " << dim);
      const gpu100::CompareResult cmp =
          check_layernorm(v.ln_fp32, make_problem<float>(rows, dim, ++seed));
      INFO(cmp.summary());
      REQUIRE(cmp.ok);
    }
  }
}

}  // namespace day07_tests
