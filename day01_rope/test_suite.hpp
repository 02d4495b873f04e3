#pragma once
// day01's GPU checks of one variant: the day's tests run them on every variant of the registry,
// and the test cases generated for a learner's variant (mine_test.cpp.in) on that one.
#include <cmath>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "common/catch.hpp"
#include "common/compare.hpp"
#include "common/cuda_check.hpp"
#include "common/device_buffer.hpp"
#include "common/half.hpp"
#include "common/random.hpp"
#include "rope.cuh"

namespace day01_tests {

using day01::RopeParams;
using day01::RopeStyle;

struct Shape {
  int64_t batch, seq, q_heads, kv_heads, dim, pos_offset;
};

// S = 1 (a decode step), 7, 1000; H = 1, 3 with Hq != Hkv both ways; D = 2 and 6 (no 16-byte
// path at all), 4, 8, 12, 16 (16-byte path for one pairing or one precision only), 64 and 128;
// B = 1, 2; positions from 0 and from 4093 (angles up to ~5100 rad).
inline const std::vector<Shape> kShapes = {
    {1, 1, 1, 1, 2, 0},      {1, 1, 1, 1, 2, 4093},   {2, 7, 3, 1, 2, 0},
    {1, 7, 3, 3, 6, 4093},   {2, 1000, 1, 1, 6, 0},   {2, 7, 1, 1, 4, 4093},
    {1, 7, 2, 1, 8, 0},      {1, 7, 3, 1, 12, 4093},  {2, 5, 4, 2, 16, 17},
    {2, 1, 3, 1, 64, 4093},  {1, 7, 1, 3, 64, 0},     {2, 1000, 3, 1, 64, 4093},
    {1, 7, 3, 3, 128, 4093}, {1, 1000, 3, 1, 128, 0}, {2, 1000, 1, 3, 128, 4093},
};

inline RopeParams to_params(const Shape& s, RopeStyle style) {
  RopeParams p;
  p.batch = s.batch;
  p.seq = s.seq;
  p.q_heads = s.q_heads;
  p.kv_heads = s.kv_heads;
  p.dim = s.dim;
  p.pos_offset = s.pos_offset;
  p.style = style;
  return p;
}

// The shapes small enough for this run ($GPU100_TEST_MAX_N caps Q + K elements under the
// sanitizers).
inline std::vector<Shape> test_shapes() {
  std::vector<Shape> kept;
  for (const Shape& s : kShapes) {
    const int64_t n = s.batch * s.seq * (s.q_heads + s.kv_heads) * s.dim;
    if (!gpu100::test_sizes({n}).empty()) kept.push_back(s);
  }
  return kept;
}

enum class Mode { kOutOfPlace, kInPlace, kMisaligned };

template <typename T>
void launch(const day01::Variant& v, const T* q, const T* k, T* q_out, T* k_out,
            const RopeParams& p, const day01::RopeTable& table) {
  if constexpr (std::is_same_v<T, float>) {
    v.launch_fp32(q, k, q_out, k_out, p, table, nullptr);
  } else {
    v.launch_bf16(q, k, q_out, k_out, p, table, nullptr);
  }
}

// One variant, one shape: fresh inputs from `seed`, the reference from the exact values the GPU
// reads, the outputs poisoned, one launch, every element compared with the variant's tolerance.
template <typename T>
void check_case(const day01::Variant& v, const RopeParams& p, uint64_t seed, Mode mode) {
  const int64_t nq = p.q_elems(), nk = p.k_elems();
  const auto q = gpu100::convert_from_float<T>(gpu100::random_vector<float>(nq, seed));
  const auto k = gpu100::convert_from_float<T>(gpu100::random_vector<float>(nk, seed + 1));
  std::vector<double> ref_q(nq), ref_k(nk);
  day01::rope_cpu(q.data(), k.data(), ref_q.data(), ref_k.data(), p);

  // Misaligned: every tensor starts 2 elements into its buffer (8 bytes for fp32, 4 for bf16),
  // so no 16-byte access is legal and v4 / v5 must take their fallback.
  const int64_t shift = mode == Mode::kMisaligned ? 2 : 0;
  gpu100::DeviceBuffer<T> d_q(nq + shift), d_k(nk + shift), d_q_out(nq + shift),
      d_k_out(nk + shift);
  T* q_in = d_q.data() + shift;
  T* k_in = d_k.data() + shift;
  T* q_out = mode == Mode::kInPlace ? q_in : d_q_out.data() + shift;
  T* k_out = mode == Mode::kInPlace ? k_in : d_k_out.data() + shift;
  CUDA_CHECK(cudaMemcpy(q_in, q.data(), nq * sizeof(T), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(k_in, k.data(), nk * sizeof(T), cudaMemcpyHostToDevice));
  d_q_out.poison();
  d_k_out.poison();
  const day01::RopeTable table(p);

  launch<T>(v, q_in, k_in, q_out, k_out, p, table);
  CUDA_CHECK(cudaPeekAtLastError());
  CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<T> got_q(nq), got_k(nk);
  CUDA_CHECK(cudaMemcpy(got_q.data(), q_out, nq * sizeof(T), cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpy(got_k.data(), k_out, nk * sizeof(T), cudaMemcpyDeviceToHost));

  const day01::Tolerance tol = day01::tolerance(v, p);
  const auto cq = gpu100::compare(ref_q, got_q, tol.abs_tol, tol.rel_tol);
  const auto ck = gpu100::compare(ref_k, got_k, tol.abs_tol, tol.rel_tol);
  INFO("tolerance: abs " << tol.abs_tol << " + rel " << tol.rel_tol);
  INFO("Q " << cq.summary());
  INFO("K " << ck.summary());
  REQUIRE(cq.ok);
  REQUIRE(ck.ok);
}

inline void check_variant(const day01::Variant& v, const RopeParams& p, uint64_t seed, Mode mode) {
  if (v.precision == day01::Precision::kFp32) {
    check_case<float>(v, p, seed, mode);
  } else {
    check_case<__nv_bfloat16>(v, p, seed, mode);
  }
}

inline const day01::Variant& variant(const std::string& name) {
  const day01::Variant* v = day01::find_variant(name);
  if (v == nullptr) throw std::logic_error("no variant " + name);
  return *v;
}

// Every awkward shape, both pairings, in the given mode.
inline void check_all_shapes(const day01::Variant& v, uint64_t seed) {
  for (RopeStyle style : {RopeStyle::kInterleaved, RopeStyle::kHalfSplit}) {
    for (const Shape& s : test_shapes()) {
      const RopeParams p = to_params(s, style);
      INFO("variant " << v.name << ", " << day01::style_name(style) << ", B=" << p.batch
                      << " S=" << p.seq << " Hq=" << p.q_heads << " Hkv=" << p.kv_heads
                      << " D=" << p.dim << " pos0=" << p.pos_offset);
      check_variant(v, p, seed += 2, Mode::kOutOfPlace);
    }
  }
}

// In place, then with pointers that are not 16-byte aligned.
inline void check_in_place_and_misaligned(const day01::Variant& v) {
  for (RopeStyle style : {RopeStyle::kInterleaved, RopeStyle::kHalfSplit}) {
    for (const Shape& s : {Shape{2, 7, 3, 1, 6, 4093}, Shape{1, 7, 3, 1, 128, 5}}) {
      INFO("variant " << v.name << ", in place, " << day01::style_name(style) << ", D=" << s.dim);
      check_variant(v, to_params(s, style), 77, Mode::kInPlace);
    }
    for (const Shape& s : {Shape{1, 7, 3, 1, 64, 0}, Shape{2, 5, 1, 2, 128, 4093}}) {
      INFO("variant " << v.name << ", misaligned, " << day01::style_name(style) << ", D=" << s.dim);
      check_variant(v, to_params(s, style), 99, Mode::kMisaligned);
    }
  }
}

}  // namespace day01_tests
