// day04 GPU tests: every GEMM variant and every transpose variant against the CPU reference at
// awkward shapes (1, primes, non-multiples of every tile size), fresh seeded random inputs,
// outputs poisoned with NaN first.
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/cublas_check.hpp"
#include "common/errors.hpp"
#include "common/tags.hpp"
#include "test_suite.hpp"
#include "transpose.hpp"

using day04_tests::check_fp8_variant;
using day04_tests::check_variant;
using day04_tests::kShapes;

TEST_CASE("every GEMM variant matches the CPU at awkward shapes (beta = 0, C poisoned)", "[gpu]") {
  GPU100_REQUIRE_GPU();
  uint64_t seed = 10;
  for (const auto& v : day04::gemm_variants()) {
    if (gpu100::has_tag(v.tags, "mine")) continue;  // checked by its own test cases
    if (v.fp8 != nullptr) continue;                 // FP8: its own test cases below
    if (gpu100::lacks_code(v)) continue;
    for (const auto& s : kShapes) {
      // Under compute-sanitizer (GPU100_TEST_MAX_N set) only the shapes with few outputs run.
      if (gpu100::test_sizes({int64_t(s.m) * s.n}).empty()) continue;
      check_variant(v, s, 1.0f, 0.0f, seed += 3);
    }
  }
}

TEST_CASE("every GEMM variant applies alpha and beta", "[gpu]") {
  GPU100_REQUIRE_GPU();
  uint64_t seed = 1000;
  for (const auto& v : day04::gemm_variants()) {
    if (gpu100::has_tag(v.tags, "mine")) continue;  // checked by its own test cases
    if (v.fp8 != nullptr) continue;                 // FP8 has no alpha or beta: C is written
    if (gpu100::lacks_code(v)) continue;
    check_variant(v, {77, 45, 61}, 1.5f, -0.75f, seed += 3);
    check_variant(v, {128, 256, 40}, -2.0f, 0.5f, seed += 3);
  }
}

// One variant at each shape in turn, once per case (alpha, beta, calls: see check_variant), on
// fresh seeds; the row note (which path the shape took) is printed with any failure. Shapes too
// large for this machine's test size cap are left out.
struct GemmCase {
  float alpha, beta;
  int calls;
};
static void check_shapes(const char* name, const std::vector<day04::GemmShape>& shapes,
                         const std::vector<GemmCase>& cases, uint64_t seed) {
  const auto* v = day04::find_gemm_variant(name);
  REQUIRE(v != nullptr);
  for (const auto& s : shapes) {
    if (gpu100::test_sizes({int64_t(s.m) * s.n}).empty()) continue;
    INFO(v->row_note(s));
    for (const GemmCase& c : cases) check_variant(*v, s, c.alpha, c.beta, seed += 3, c.calls);
  }
}

TEST_CASE("v22 split-K: shapes whose tile pairs leave clusters idle, the slices added into C",
          "[gpu]") {
  GPU100_REQUIRE_BUILD(gpu100::ArchNeed::kSm90a, "v22_wgmma_splitk_bf16");
  // 4 x 2 pairs with 64 k-tiles; 1 x 4 pairs, the last tile 232 columns wide; 2 x 2 pairs with
  // K = 1000 (16 k-tiles, the last one short); 1024^3 (16 pairs, 16 k-tiles); one tile row.
  // Three calls on one C must still hold one product (each call zeroes C before adding into it).
  check_shapes(
      "v22_wgmma_splitk_bf16",
      {{1000, 512, 4096}, {256, 1000, 2048}, {300, 264, 1000}, {1024, 1024, 1024}, {77, 256, 520}},
      {{1.0f, 0.0f, 1}, {-0.5f, 0.0f, 3}}, 5000);
}

TEST_CASE("v24 narrow tiles: small shapes in 128 x 64 tiles, tails of M, N and K", "[gpu]") {
  GPU100_REQUIRE_BUILD(gpu100::ArchNeed::kSm90a, "v24_wgmma_narrow_bf16");
  // 1024^3 (64 pairs of narrow tiles); 300 x 200 x 1000 (tails of M, of N in the last 64 columns,
  // and of K in the last k-tile); 77 x 8 x 520 (one pair, 8 columns); 640 x 1000 x 1000 (5 tile
  // rows: the last pair's second tile empty; 16 tile columns, the last 40 wide); 256 x 392 x 648
  // (7 tile columns, the last 8 wide, and a last k-tile of 8); 1280 x 2048 x 256 and 4096 x 4096
  // x 256 run v22's wide tiles (too many narrow pairs for one round). Three calls on one C;
  // beta != 0, which v22 sends on to v17.
  check_shapes("v24_wgmma_narrow_bf16",
               {{1024, 1024, 1024},
                {300, 200, 1000},
                {77, 8, 520},
                {640, 1000, 1000},
                {256, 392, 648},
                {1280, 2048, 256},
                {4096, 4096, 256}},
               {{1.0f, 0.0f, 1}, {-0.5f, 0.0f, 3}, {0.5f, 2.0f, 1}}, 9000);
}

TEST_CASE("v25 medium tiles: shapes in 128 x 128 tiles, tails of M, N and K", "[gpu]") {
  GPU100_REQUIRE_BUILD(gpu100::ArchNeed::kSm90a, "v25_wgmma_medium_bf16");
  // On a GPU of 66 clusters: 512 x 4096 x 256 (64 medium pairs, K too short for slices); 200 x
  // 6000 x 520 (one pair row, its second tile 72 rows; 47 tile columns, the last 112 wide; a last
  // k-tile of 8); 300 x 3000 x 520 (3 tile rows: the last pair's second tile empty); 77 x 8 x 520
  // (one pair, 8 columns). 1024^3 runs v24's narrow tiles, 4096 x 4096 x 256 v21's wide ones, and
  // 256 x 2048 x 4096 v22's slices. Three calls on one C; beta != 0, which v22 sends on to v17.
  check_shapes("v25_wgmma_medium_bf16",
               {{512, 4096, 256},
                {200, 6000, 520},
                {300, 3000, 520},
                {77, 8, 520},
                {1024, 1024, 1024},
                {4096, 4096, 256},
                {256, 2048, 4096}},
               {{1.0f, 0.0f, 1}, {-0.5f, 0.0f, 3}, {0.5f, 2.0f, 1}}, 11000);
}

TEST_CASE("v23 (TF32, no transpose): odd k-tile counts, tails of M and N, several tiles per CTA",
          "[gpu]") {
  GPU100_REQUIRE_BUILD(gpu100::ArchNeed::kSm90a, "v23_wgmma_rs_tf32");
  // K = 96 and 272: 3 and 9 k-tiles of 32, so the kernel runs one more, past K, filled with
  // zeros; N = 388 and 260: a last 128-column tile of B 4 columns wide; M = 300: a last tile of
  // A 44 rows deep; 4096 x 2048 x 64: 128 tile pairs, more than an H100's 66 clusters, so each
  // CTA runs several (the persistent loop and the alternating fragment sets across tiles).
  // beta == 0 runs the staged epilogue, beta != 0 the register one.
  check_shapes("v23_wgmma_rs_tf32",
               {{300, 388, 96}, {129, 260, 272}, {1, 4, 4}, {4096, 2048, 64}, {257, 132, 1000}},
               {{1.0f, 0.0f, 1}, {-0.5f, 0.25f, 1}}, 7000);
}

TEST_CASE("every v8 tile configuration is correct, and the autotuner picks one", "[gpu]") {
  GPU100_REQUIRE_GPU();
  uint64_t seed = 2000;
  for (const auto& cfg : day04::sgemm_v8_configs()) {
    day04::GemmVariant v{cfg.name, "", day04::Precision::kFp32, cfg.launch, nullptr, false, ""};
    check_variant(v, {199, 131, 75}, 1.f, 0.f, seed += 3);  // scalar path
    check_variant(v, {300, 260, 96}, 1.f, 0.f, seed += 3);  // float4 path, partial tiles
  }
  const day04::GemmShape s{300, 260, 96};
  CHECK(day04::sgemm_autotuned_choice(s).empty());
  check_variant(*day04::find_gemm_variant("v8_autotuned"), s, 1.f, 0.f, seed += 3);
  CHECK_FALSE(day04::sgemm_autotuned_choice(s).empty());
}

TEST_CASE("the batched v8 kernel computes each GEMM of its batch, with A given transposed",
          "[gpu]") {
  GPU100_REQUIRE_GPU();
  // M past one 128-row tile and N past one 128-column tile, neither a multiple; ldat > M (the pad
  // columns of A^T hold values that must not reach C); three GEMMs with gaps between them.
  const day04::GemmShape s{131, 132, 19};
  const int ldat = 136, count = 3;
  day04::SgemmBatch batch;
  batch.count = count;
  batch.stride_at = int64_t(s.k) * ldat + 8;
  batch.stride_b = int64_t(s.k) * s.n + 4;
  batch.stride_c = int64_t(s.m) * s.n + 12;
  const std::vector<float> at = gpu100::random_vector<float>(size_t(batch.stride_at) * count, 71);
  const std::vector<float> b = gpu100::random_vector<float>(size_t(batch.stride_b) * count, 72);
  gpu100::DeviceBuffer<float> d_at(at.size()), d_b(b.size()), d_c(size_t(batch.stride_c) * count);
  d_at.upload(at);
  d_b.upload(b);
  d_c.poison();
  day04::sgemm_v8_batched_at(s, ldat, d_at.data(), d_b.data(), d_c.data(), batch, nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<float> c = d_c.download();
  const gpu100::Tolerance tol = day04::gemm_tolerance(day04::Precision::kFp32, s.k, 1.0);
  for (int i = 0; i < count; ++i) {
    std::vector<float> a(size_t(s.m) * s.k), ref(size_t(s.m) * s.n);
    for (int kk = 0; kk < s.k; ++kk)  // A_i from its transpose
      for (int m = 0; m < s.m; ++m)
        a[size_t(m) * s.k + kk] = at[i * batch.stride_at + kk * ldat + m];
    day04::gemm_cpu(s, 1.0, a.data(), b.data() + i * batch.stride_b, 0.0, ref.data());
    const std::vector<float> got(c.begin() + i * batch.stride_c,
                                 c.begin() + i * batch.stride_c + int64_t(s.m) * s.n);
    const auto cmp = gpu100::compare(ref, got, tol.abs_tol, tol.rel_tol);
    INFO("GEMM " << i << ": " << cmp.summary());
    REQUIRE(cmp.ok);
  }
  // N not a multiple of 4, and ldat < M, are refused before any launch.
  CHECK_THROWS_AS(day04::sgemm_v8_batched_at({131, 130, 19}, ldat, d_at.data(), d_b.data(),
                                             d_c.data(), batch, nullptr),
                  std::invalid_argument);
  CHECK_THROWS_AS(
      day04::sgemm_v8_batched_at(s, 128, d_at.data(), d_b.data(), d_c.data(), batch, nullptr),
      std::invalid_argument);
}

TEST_CASE("GEMM by name on unaligned pointers takes the unaligned paths", "[gpu]") {
  GPU100_REQUIRE_GPU();
  const day04::GemmShape s{64, 64, 64};
  const auto a = gpu100::random_vector<float>(64 * 64 + 1, 5);
  const auto b = gpu100::random_vector<float>(64 * 64 + 1, 6);
  std::vector<float> ref(64 * 64);
  day04::gemm_cpu(s, 1.0, a.data() + 1, b.data() + 1, 0.0, ref.data());
  gpu100::DeviceBuffer<float> d_a(a.size()), d_b(b.size()), d_c(64 * 64 + 1);
  d_a.upload(a);
  d_b.upload(b);
  // (v8_cp_async: A through its padded transpose, B in 4-byte copies, C element by element.)
  for (const char* name : {"v6_vectorized", "v7_warptile", "v8_double_buffered", "v8_cp_async"}) {
    INFO(name);
    d_c.poison();
    day04::gemm(name, s, 1.f, d_a.data() + 1, d_b.data() + 1, 0.f, d_c.data() + 1);
    CUDA_CHECK(cudaDeviceSynchronize());
    const auto got = d_c.download();
    const std::vector<float> out(got.begin() + 1, got.end());
    REQUIRE(gpu100::compare(ref, out, 1e-4, 1e-5).ok);
  }
}

TEST_CASE("every transpose variant is exact at awkward shapes", "[gpu]") {
  GPU100_REQUIRE_GPU();
  const std::vector<std::pair<int, int>> shapes = {{1, 1},   {1, 1000}, {1000, 1},  {33, 17},
                                                   {32, 32}, {257, 31}, {4097, 33}, {1025, 2049}};
  uint64_t seed = 300;
  for (const auto& v : day04::transpose_variants()) {
    for (auto [m, n] : shapes) {
      INFO(v.name << " " << m << " x " << n);
      const auto in = gpu100::random_vector<float>(size_t(m) * n, ++seed);
      std::vector<float> ref(in.size());
      day04::transpose_cpu(in.data(), ref.data(), m, n);
      gpu100::DeviceBuffer<float> d_in(in.size()), d_out(in.size());
      d_in.upload(in);
      d_out.poison();
      v.launch(d_in.data(), d_out.data(), m, n, nullptr);
      CUDA_CHECK(cudaPeekAtLastError());
      CUDA_CHECK(cudaDeviceSynchronize());
      REQUIRE(gpu100::compare(ref, d_out.download(), 0.0, 0.0).ok);
    }
    float x = 0;
    CHECK_THROWS_AS(v.launch(&x, &x, 0, 5, nullptr), std::invalid_argument);
  }
}

TEST_CASE("GEMM launchers reject bad shapes before launching", "[gpu]") {
  GPU100_REQUIRE_GPU();
  gpu100::DeviceBuffer<float> d(16);
  for (const auto& v : day04::gemm_variants()) {
    if (gpu100::has_tag(v.tags, "mine")) continue;  // checked by its own test cases
    if (v.fp32 == nullptr) continue;
    INFO(v.name);
    CHECK_THROWS_AS(v.fp32({0, 4, 4}, 1.f, d.data(), d.data(), 0.f, d.data(), nullptr),
                    std::invalid_argument);
  }
  CHECK(cudaGetLastError() == cudaSuccess);
}

TEST_CASE("variants this build lacks for this GPU are reported as skipped", "[gpu]") {
  GPU100_REQUIRE_GPU();
  GPU100_SKIP_LACKED(day04::gemm_variants());
}

TEST_CASE("a variant this build lacks is refused before any launch, naming the build it needs",
          "[gpu]") {
  GPU100_REQUIRE_GPU();
  gpu100::DeviceBuffer<float> d(64 * 64);
  for (const auto& v : day04::gemm_variants()) {
    if (gpu100::has_tag(v.tags, "mine")) continue;  // checked by its own test cases
    if (gpu100::build_has(v.needs) || v.fp32 == nullptr) continue;
    INFO(v.name);
    try {
      v.fp32({64, 64, 64}, 1.f, d.data(), d.data(), 0.f, d.data(), nullptr);
      FAIL("no exception");
    } catch (const gpu100::ArchUnavailable& e) {
      CHECK(std::string(e.what()).find(gpu100::needs_text(v.needs)) != std::string::npos);
    }
  }
  CHECK(cudaGetLastError() == cudaSuccess);
}

// ---- FP8 ---------------------------------------------------------------------------------------
// Whether FP8 variant v runs here; when it does not, one line in the log says why.
static bool fp8_runs(const day04::GemmVariant& v, day04::GemmShape s) {
  if (gpu100::lacks_code(v)) return false;  // reported by the "lacks" test case above
  const std::string why = v.refusal(s);
  if (!why.empty())
    WARN(v.name << " not checked at " << s.m << " x " << s.n << " x " << s.k << ": " << why);
  return why.empty();
}

// check_fp8_variant, except that a library row refused at its first launch (cuBLASLt: none of
// the heuristic's algorithms ran) warns instead of failing. Wrong numbers still fail.
static void check_fp8_or_warn(const day04::GemmVariant& v, day04::GemmShape s, uint64_t seed,
                              float range = 1.f) {
  try {
    check_fp8_variant(v, s, seed, range);
  } catch (const gpu100::LibraryError& e) {
    if (!v.is_library) throw;
    WARN(v.name << " refused at " << s.m << " x " << s.n << " x " << s.k << ": " << e.what());
  }
}

TEST_CASE("every FP8 GEMM matches the CPU at awkward shapes (C poisoned)", "[gpu][fp8]") {
  GPU100_REQUIRE_GPU();
  uint64_t seed = 4000;
  for (const auto& v : day04::gemm_variants()) {
    if (v.fp8 == nullptr) continue;
    for (const auto& s : day04_tests::kFp8Shapes) {
      if (gpu100::test_sizes({int64_t(s.m) * s.n}).empty()) continue;  // under the sanitizer
      if (!fp8_runs(v, s)) continue;
      check_fp8_or_warn(v, s, seed += 3);
    }
  }
}

// The warnings above must not hide a library row that never runs: at a shape that meets every
// documented FP8 requirement (16-byte-aligned dimensions), on a GPU with FP8 tensor cores, it runs.
TEST_CASE("the FP8 library row runs where cuBLASLt's FP8 requirements are met", "[gpu][fp8]") {
  GPU100_REQUIRE_GPU();
  const day04::GemmShape s{128, 256, 512};  // small enough for the sanitizer's runs
  int device = 0, major = 0, minor = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  if (major * 10 + minor < 89) GPU100_SKIP("no FP8 tensor cores (compute capability below 8.9)");
  for (const auto& v : day04::gemm_variants()) {
    if (v.fp8 == nullptr || !v.is_library) continue;
    INFO(v.name);
    CHECK(v.refusal(s).empty());
    check_fp8_variant(v, s, 4500);  // throws gpu100::LibraryError if no algorithm runs
    CHECK(v.refusal(s).empty());
  }
}

TEST_CASE("every FP8 GEMM applies its per-tensor scales (inputs far from 1)", "[gpu][fp8]") {
  GPU100_REQUIRE_GPU();
  uint64_t seed = 5000;
  for (const auto& v : day04::gemm_variants()) {
    if (v.fp8 == nullptr) continue;
    for (float range : {0.01f, 50.f}) {
      const day04::GemmShape s{130, 140, 272};
      if (!fp8_runs(v, s)) continue;
      check_fp8_or_warn(v, s, seed += 3, range);
    }
  }
}

TEST_CASE("an FP8 GEMM refuses K % 16 != 0, null and misaligned scales before any launch",
          "[gpu][fp8]") {
  GPU100_REQUIRE_GPU();
  gpu100::DeviceBuffer<__nv_fp8_e4m3> d_in(64 * 80);
  gpu100::DeviceBuffer<float> d_scales(8);
  gpu100::DeviceBuffer<__nv_bfloat16> d_c(64 * 64);
  for (const auto& v : day04::gemm_variants()) {
    if (v.fp8 == nullptr) continue;
    INFO(v.name);
    CHECK_THROWS_AS(v.fp8({64, 64, 72}, d_in.data(), d_in.data(), d_scales.data(),
                          d_scales.data() + 4, d_c.data(), nullptr),
                    std::invalid_argument);
    CHECK_THROWS_AS(v.fp8({64, 64, 64}, d_in.data(), d_in.data(), nullptr, d_scales.data(),
                          d_c.data(), nullptr),
                    std::invalid_argument);
    CHECK_THROWS_AS(v.fp8({64, 64, 64}, d_in.data(), d_in.data(), d_scales.data(),
                          d_scales.data() + 1, d_c.data(), nullptr),
                    std::invalid_argument);  // a scale 4 bytes past a 16-byte boundary
    CHECK_FALSE(v.refusal({64, 64, 72}).empty());
  }
  CHECK(cudaGetLastError() == cudaSuccess);
}

TEST_CASE("an FP8 variant this build lacks is refused before any launch", "[gpu][fp8]") {
  GPU100_REQUIRE_GPU();
  gpu100::DeviceBuffer<__nv_fp8_e4m3> d_in(64 * 64);
  gpu100::DeviceBuffer<float> d_scales(8);
  gpu100::DeviceBuffer<__nv_bfloat16> d_c(64 * 64);
  for (const auto& v : day04::gemm_variants()) {
    if (v.fp8 == nullptr || gpu100::build_has(v.needs)) continue;
    INFO(v.name);
    try {
      v.fp8({64, 64, 64}, d_in.data(), d_in.data(), d_scales.data(), d_scales.data() + 4,
            d_c.data(), nullptr);
      FAIL("no exception");
    } catch (const gpu100::ArchUnavailable& e) {
      CHECK(std::string(e.what()).find(gpu100::needs_text(v.needs)) != std::string::npos);
    }
  }
  CHECK(cudaGetLastError() == cudaSuccess);
}
