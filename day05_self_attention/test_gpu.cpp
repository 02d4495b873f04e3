// day05 GPU tests: every variant against the double CPU reference at small awkward shapes
// (S = 1, 17, 64, 100, 257; H = 1, 3; B = 1, 2; causal and not; D = 64 and 128), the flash
// variants' log-sum-exp, many tiles, more query tiles than SMs (v5), other head dimensions,
// unaligned tensors for v3, and the refusals. Outputs and workspaces are poisoned with NaN before
// each launch. Tolerances (README): |got - ref| <= tol * sum_j p_j |v_j|, tol = 2e-5 for fp32, 1e-2
// for bf16 (v4 is compared with the reference on its bf16-rounded inputs).
#include <algorithm>
#include <stdexcept>
#include <vector>

#include "test_suite.hpp"

using namespace day05_tests;

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

TEST_CASE("cudnn_sdpa (cuDNN's fused attention, the bf16 library row) matches the CPU", "[gpu]") {
  GPU100_REQUIRE_BUILD(day05::find_variant("cudnn_sdpa")->needs, "cudnn_sdpa");
  if (!day05::have_cudnn_sdpa()) {
    GPU100_SKIP(
        "built without the cuDNN frontend (scripts/setup.sh fetches it where the network allows)");
  }
  if (gpu100::sanitizer_run()) GPU100_SKIP("cuDNN's kernels are not ours to sanitize");
  check_matrix("cudnn_sdpa", 470);
  // A head dimension cuDNN refuses says so before any launch.
  REQUIRE_FALSE(day05::cudnn_sdpa_refusal(shape(1, 1, 16, 60, false)).empty());
}

TEST_CASE("the flash variants across many tiles and ragged tails", "[gpu]") {
  GPU100_REQUIRE_GPU();
  // S = 777 and 1031: 7-17 K/V tiles, 7-17 query tiles, partial last tiles of both (v5: more
  // tiles than its K/V ring has stages, so every stage is refilled). S = 1024: whole tiles only, so
  // v4's unmasked loop runs to the end (non-causal) or up to each block's diagonal (causal).
  // S = 385 = 2 x 192 + 1 = 3 x 128 + 1: a last query block (and K/V tile) of one row for v5's
  // 192-row and 128-row tilings alike, whose other warpgroups hold rows past S only.
  uint64_t seed = 500;
  for (const char* name : {"v3_flash_fp32", "v4_flash_bf16", "v5_flash_wgmma"}) {
    if (gpu100::lacks_code(*day05::find_variant(name))) continue;
    for (int s : {385, 777, 1024, 1031})
      for (int d : {64, 128})
        for (bool causal : {false, true}) {
          const auto sh = shape(1, 2, s, d, causal);
          if (gpu100::test_sizes({sh.elements()}).empty()) continue;
          check_variant(*day05::find_variant(name), sh, seed += 3);
        }
  }
}

TEST_CASE("v5 with more query tiles than the GPU has SMs", "[gpu]") {
  // 300 heads x 1-2 query tiles: more than one per SM of any current GPU, so that a persistent
  // tiling's blocks each walk several (its K/V ring and Q buffers going round across them); the
  // others run them as separate blocks.
  GPU100_REQUIRE_BUILD(day05::find_variant("v5_flash_wgmma")->needs, "v5_flash_wgmma");
  uint64_t seed = 550;
  for (bool causal : {false, true}) {
    const auto sh = shape(1, 300, 129, 64, causal);
    if (gpu100::test_sizes({sh.elements()}).empty()) continue;
    check_variant(*day05::find_variant("v5_flash_wgmma"), sh, seed += 3);
  }
}

TEST_CASE("v5 splits the last round's query tiles along the keys", "[gpu]") {
  // D = 64, not causal, S = 1000: 8 key tiles per query tile, the last one ragged (1000 = 7 x 128
  // + 104), and a last query tile of 40 rows (1000 = 5 x 192 + 40). The heads are chosen so that
  // the last round of this GPU's persistent blocks holds at most half of them: its items are cut
  // into parts of uneven length, added up by the combine kernel. Checked against the CPU, then
  // token-major O against [B, H, S, D] O bit for bit.
  const auto& var = *day05::find_variant("v5_flash_wgmma");
  GPU100_REQUIRE_BUILD(var.needs, "v5_flash_wgmma");
  int device = 0, sms = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  day05::AttentionShape sh = shape(1, 1, 1000, 64, false);
  day05::V5TailSplit plan;
  for (int h = 1; h <= 4 * sms; ++h) {
    sh.h = h;
    plan = day05::v5_tail_split(sh, sms);
    if (plan.splits > 1 && 8 % plan.splits != 0) break;
  }
  INFO(day05::shape_label(sh) << " on " << sms << " SMs: items from " << plan.split_from << " of "
                              << plan.items << " in " << plan.splits << " parts");
  REQUIRE(plan.splits > 1);
  if (gpu100::test_sizes({sh.elements()}).empty())
    GPU100_SKIP("the shape is over GPU100_TEST_MAX_N");
  check_variant(var, sh, 680);

  const size_t n = size_t(sh.elements());
  gpu100::DeviceBuffer<bf16> q(n), k(n), v(n), o(n), o_tok(n);
  q.upload(gpu100::convert_from_float<bf16>(gpu100::random_vector<float>(n, 690)));
  k.upload(gpu100::convert_from_float<bf16>(gpu100::random_vector<float>(n, 691)));
  v.upload(gpu100::convert_from_float<bf16>(gpu100::random_vector<float>(n, 692)));
  gpu100::DeviceBuffer<char> ws(day05::v5_workspace_bytes(sh));
  o.poison(), o_tok.poison();
  for (auto [out, layout] : {std::pair{o.data(), day05::OLayout::kBHSD},
                             std::pair{o_tok.data(), day05::OLayout::kBSHD}}) {
    ws.poison();
    day05::attention_v5_flash_wgmma(sh, q.data(), k.data(), v.data(), out, layout, ws.data(),
                                    ws.bytes(), nullptr);
  }
  CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<float> bhsd = gpu100::convert_to_float(o.download()),
                           bshd = gpu100::convert_to_float(o_tok.download());
  size_t bad = 0;
  for (int h = 0; h < sh.h; ++h)
    for (int i = 0; i < sh.s; ++i)
      for (int e = 0; e < sh.d; ++e) {
        if (!(bhsd[(size_t(h) * sh.s + i) * sh.d + e] == bshd[(size_t(i) * sh.h + h) * sh.d + e]))
          ++bad;
      }
  REQUIRE(bad == 0);
}

TEST_CASE("v5_flash_wgmma under the causal mask with more heads than a band", "[gpu]") {
  // At D = 128, one block per query tile, causal, v5 starts its blocks in bands of kCausalBand (8)
  // heads, the longest tiles of a band first: 19 heads (and 2 x 10) are two whole bands and a
  // partial one. D = 64 (persistent, tile-major over all heads) for comparison.
  GPU100_REQUIRE_BUILD(day05::find_variant("v5_flash_wgmma")->needs, "v5_flash_wgmma");
  uint64_t seed = 650;
  int ran = 0;
  for (const auto& sh :
       {shape(1, 19, 300, 128, true), shape(2, 10, 200, 128, true), shape(1, 19, 300, 64, true)}) {
    if (gpu100::test_sizes({sh.elements()}).empty()) continue;
    check_variant(*day05::find_variant("v5_flash_wgmma"), sh, seed += 3);
    ++ran;
  }
  // Under a small GPU100_TEST_MAX_N (the sanitizer runs) every shape is capped: say so.
  if (ran == 0) GPU100_SKIP("every shape is over GPU100_TEST_MAX_N");
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
