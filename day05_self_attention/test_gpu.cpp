// day05 GPU tests: every variant against the double CPU reference at small awkward shapes
// (S = 1, 17, 64, 100, 257; H = 1, 3; B = 1, 2; causal and not; D = 64 and 128), the flash
// variants' log-sum-exp, many tiles, other head dimensions, unaligned tensors for v3, and the
// refusals. Outputs and workspaces are poisoned with NaN before each launch.
// Tolerances (README): |got - ref| <= tol * sum_j p_j |v_j|, tol = 2e-5 for fp32, 1e-2 for bf16
// (v4 is compared with the reference on its bf16-rounded inputs).
#include <algorithm>
#include <stdexcept>
#include <vector>

#include "attention.hpp"
#include "common/catch.hpp"
#include "common/cuda_check.hpp"
#include "common/device_buffer.hpp"
#include "common/half.hpp"
#include "common/random.hpp"

namespace {

using bf16 = __nv_bfloat16;

day05::AttentionShape shape(int b, int h, int s, int d, bool causal) {
  day05::AttentionShape x;
  x.b = b, x.h = h, x.s = s, x.d = d, x.causal = causal;
  return x;
}

struct Output {
  std::vector<float> o, lse;
};

// Runs one variant on fresh device copies of q, k, v placed `offset` elements into their buffers
// (offset 1: tensors that are not 16-byte aligned).
Output run_variant(const day05::AttentionVariant& var, const day05::AttentionShape& s,
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
void check_variant(const day05::AttentionVariant& var, const day05::AttentionShape& s,
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
void check_matrix(const char* name, uint64_t seed) {
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

}  // namespace

TEST_CASE("v1_naive matches the CPU at every small shape", "[gpu]") {
  GPU100_REQUIRE_GPU();
  check_matrix("v1_naive", 100);
}

TEST_CASE("v2_cublas matches the CPU at every small shape", "[gpu]") {
  GPU100_REQUIRE_GPU();
  check_matrix("v2_cublas", 200);
}

TEST_CASE("v3_flash_fp32 matches the CPU at every small shape", "[gpu]") {
  GPU100_REQUIRE_GPU();
  check_matrix("v3_flash_fp32", 300);
}

TEST_CASE("v4_flash_bf16 matches the CPU at every small shape", "[gpu]") {
  GPU100_REQUIRE_BUILD(day05::find_variant("v4_flash_bf16")->needs, "v4_flash_bf16");
  check_matrix("v4_flash_bf16", 400);
}

TEST_CASE("v5_flash_wgmma matches the CPU at every small shape", "[gpu]") {
  GPU100_REQUIRE_BUILD(day05::find_variant("v5_flash_wgmma")->needs, "v5_flash_wgmma");
  check_matrix("v5_flash_wgmma", 450);
}

TEST_CASE("the flash variants across many tiles and ragged tails", "[gpu]") {
  GPU100_REQUIRE_GPU();
  // S = 777 and 1031: 7-17 K/V tiles, 7-17 query tiles, partial last tiles of both (v5: more
  // tiles than its K/V ring has stages, so every stage is refilled). S = 1024: whole tiles only, so
  // v4's unmasked loop runs to the end (non-causal) or up to each block's diagonal (causal).
  uint64_t seed = 500;
  for (const char* name : {"v3_flash_fp32", "v4_flash_bf16", "v5_flash_wgmma"}) {
    if (gpu100::lacks_code(*day05::find_variant(name))) continue;
    for (int s : {777, 1024, 1031})
      for (int d : {64, 128})
        for (bool causal : {false, true}) {
          const auto sh = shape(1, 2, s, d, causal);
          if (gpu100::test_sizes({sh.elements()}).empty()) continue;
          check_variant(*day05::find_variant(name), sh, seed += 3);
        }
  }
}

TEST_CASE("the fp32 variants at other head dimensions", "[gpu]") {
  GPU100_REQUIRE_GPU();
  uint64_t seed = 600;
  for (const char* name : {"v1_naive", "v2_cublas", "v3_flash_fp32"}) {
    for (int d : {2, 40, 96, 130, 200, 256})
      for (bool causal : {false, true}) {
        check_variant(*day05::find_variant(name), shape(1, 2, 129, d, causal), seed += 3);
      }
  }
}

TEST_CASE("v3 and the GEMM paths take tensors that are not 16-byte aligned", "[gpu]") {
  GPU100_REQUIRE_GPU();
  uint64_t seed = 700;
  for (const char* name : {"v1_naive", "v2_cublas", "v3_flash_fp32"}) {
    for (bool causal : {false, true}) {
      check_variant(*day05::find_variant(name), shape(2, 1, 70, 64, causal), seed += 3, 1);
    }
  }
}

TEST_CASE("v4 and v5 refuse head dimensions other than 64 and 128 before any launch", "[gpu]") {
  GPU100_REQUIRE_GPU();
  for (const char* name : {"v4_flash_bf16", "v5_flash_wgmma"}) {
    const auto* var = day05::find_variant(name);
    REQUIRE(var != nullptr);
    const auto sh = shape(1, 1, 32, 96, false);
    gpu100::DeviceBuffer<bf16> t(static_cast<size_t>(sh.elements()));
    gpu100::DeviceBuffer<float> ws(static_cast<size_t>(sh.rows()));
    CHECK_THROWS_AS(
        var->bf16(sh, t.data(), t.data(), t.data(), t.data(), ws.data(), ws.bytes(), nullptr),
        std::invalid_argument);
    // A misaligned tensor is refused too (16-byte cp.async and TMA).
    const auto ok = shape(1, 1, 32, 64, false);
    gpu100::DeviceBuffer<bf16> u(static_cast<size_t>(ok.elements()) + 8);
    CHECK_THROWS_AS(
        var->bf16(ok, u.data() + 1, u.data(), u.data(), u.data(), ws.data(), ws.bytes(), nullptr),
        std::invalid_argument);
  }
  CUDA_CHECK(cudaDeviceSynchronize());
}

TEST_CASE("variants this build lacks for this GPU are reported as skipped", "[gpu]") {
  GPU100_REQUIRE_GPU();
  GPU100_SKIP_LACKED(day05::attention_variants());
}
