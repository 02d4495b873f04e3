#pragma once
// day05's GPU checks of one variant: the day's tests run them on every variant of the registry,
// and the test cases generated for a learner's variant (mine_test.cpp.in) on that one.
#include <algorithm>
#include <stdexcept>
#include <vector>

#include "attention.hpp"
#include "common/catch.hpp"
#include "common/cuda_check.hpp"
#include "common/device_buffer.hpp"
#include "common/half.hpp"
#include "common/random.hpp"

namespace day05_tests {

using bf16 = __nv_bfloat16;

inline day05::AttentionShape shape(int b, int h, int s, int d, bool causal) {
  day05::AttentionShape x;
  x.b = b, x.h = h, x.s = s, x.d = d, x.causal = causal;
  return x;
}

struct Output {
  std::vector<float> o, lse;
};

// Runs one variant on fresh device copies of q, k, v placed `offset` elements into their buffers
// (offset 1: tensors that are not 16-byte aligned).
inline Output run_variant(const day05::AttentionVariant& var, const day05::AttentionShape& s,
                          const std::vector<float>& q, const std::vector<float>& k,
                          const std::vector<float>& v, size_t offset = 0) {
  const size_t n = q.size();
  const size_t ws_bytes = var.workspace_bytes(s);
  gpu100::DeviceBuffer<char> ws(std::max<size_t>(ws_bytes, 256));
  ws.poison();
  Output out;
  if (var.precision == day05::Precision::kFp32) {
    gpu100::DeviceBuffer<float> dq(n + offset), dk(n + offset), dv(n + offset), dout(n + offset);
    dq.poison(), dk.poison(), dv.poison(), dout.poison();
    CUDA_CHECK(cudaMemcpy(dq.data() + offset, q.data(), n * 4, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(dk.data() + offset, k.data(), n * 4, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(dv.data() + offset, v.data(), n * 4, cudaMemcpyHostToDevice));
    var.fp32(s, dq.data() + offset, dk.data() + offset, dv.data() + offset, dout.data() + offset,
             ws.data(), ws_bytes, nullptr);
    CUDA_CHECK(cudaPeekAtLastError());
    CUDA_CHECK(cudaDeviceSynchronize());
    out.o.resize(n);
    CUDA_CHECK(cudaMemcpy(out.o.data(), dout.data() + offset, n * 4, cudaMemcpyDeviceToHost));
  } else {
    gpu100::DeviceBuffer<bf16> dq(n), dk(n), dv(n), dout(n);
    dq.upload(gpu100::convert_from_float<bf16>(q));
    dk.upload(gpu100::convert_from_float<bf16>(k));
    dv.upload(gpu100::convert_from_float<bf16>(v));
    dout.poison();
    var.bf16(s, dq.data(), dk.data(), dv.data(), dout.data(), ws.data(), ws_bytes, nullptr);
    CUDA_CHECK(cudaPeekAtLastError());
    CUDA_CHECK(cudaDeviceSynchronize());
    out.o = gpu100::convert_to_float(dout.download());
  }
  if (var.is_flash) {
    out.lse.resize(static_cast<size_t>(s.rows()));
    CUDA_CHECK(cudaMemcpy(out.lse.data(), ws.data(), out.lse.size() * 4, cudaMemcpyDeviceToHost));
  }
  return out;
}

// Checks one variant at one shape against the CPU reference (on rounded inputs for bf16).
inline void check_variant(const day05::AttentionVariant& var, const day05::AttentionShape& s,
                          uint64_t seed, size_t offset = 0) {
  INFO(var.name << " at " << day05::shape_label(s) << (offset ? " (unaligned)" : ""));
  const size_t n = static_cast<size_t>(s.elements());
  auto q = gpu100::random_vector<float>(n, seed);
  auto k = gpu100::random_vector<float>(n, seed + 1);
  auto v = gpu100::random_vector<float>(n, seed + 2);
  const Output got = run_variant(var, s, q, k, v, offset);
  if (var.precision == day05::Precision::kBf16) {
    q = gpu100::round_trip<bf16>(q);
    k = gpu100::round_trip<bf16>(k);
    v = gpu100::round_trip<bf16>(v);
  }
  const day05::Reference ref = day05::attention_cpu(s, q, k, v);
  const double tol = day05::tolerance(var.precision);
  const auto cmp = day05::check_output(ref.o, ref.abs_o, got.o, tol);
  INFO("O: " << cmp.summary());
  REQUIRE(cmp.ok);
  if (var.is_flash) {
    const auto lcmp = day05::check_lse(ref.lse, got.lse, tol);
    INFO("log-sum-exp: " << lcmp.summary());
    REQUIRE(lcmp.ok);
  }
}

// The small-shape matrix for one variant. Shapes are capped by GPU100_TEST_MAX_N
// (counted in elements of Q), so the compute-sanitizer runs keep the small ones.
inline void check_matrix(const char* name, uint64_t seed) {
  const day05::AttentionVariant* var = day05::find_variant(name);
  REQUIRE(var != nullptr);
  for (int d : {64, 128})
    for (int s : {1, 17, 64, 100, 257})
      for (int h : {1, 3})
        for (int b : {1, 2})
          for (bool causal : {false, true}) {
            const auto sh = shape(b, h, s, d, causal);
            if (gpu100::test_sizes({sh.elements()}).empty()) continue;
            check_variant(*var, sh, seed += 3);
          }
}

}  // namespace day05_tests
