// day05 CPU tests: the reference against hand-worked values, the README's online-softmax example,
// the tolerance rule, shape checks, workspaces, refusals and the registry (no GPU needed).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "attention.hpp"
#include "causal_order.hpp"
#include "common/catch.hpp"

using Catch::Approx;

namespace {
day05::AttentionShape shape(int b, int h, int s, int d, bool causal = false) {
  day05::AttentionShape x;
  x.b = b, x.h = h, x.s = s, x.d = d, x.causal = causal;
  return x;
}
}  // namespace

TEST_CASE("the CPU reference on hand-worked rows", "[cpu]") {
  // D = 2, S = 2, one head. q0 = (1, 0), q1 = (0, 0); k0 = (2, 0), k1 = (0, 0); V = [[1, 2], [3,
  // 4]]. Row 0: scores (2, 0) / sqrt(2); p0 = 1 / (1 + e^-sqrt(2)).
  const std::vector<float> q = {1, 0, 0, 0}, k = {2, 0, 0, 0}, v = {1, 2, 3, 4};
  const auto r = day05::attention_cpu(shape(1, 1, 2, 2), q, k, v);
  const double p0 = 1.0 / (1.0 + std::exp(-std::sqrt(2.0)));
  CHECK(r.o[0] == Approx(p0 * 1 + (1 - p0) * 3));
  CHECK(r.o[1] == Approx(p0 * 2 + (1 - p0) * 4));
  CHECK(r.abs_o[0] == Approx(r.o[0]));  // V > 0: sum p |v| = sum p v
  CHECK(r.lse[0] == Approx(std::log(std::exp(std::sqrt(2.0)) + 1.0)));
  // Row 1: q = 0, all scores 0: the plain mean of V, lse = log 2.
  CHECK(r.o[2] == Approx(2.0));
  CHECK(r.o[3] == Approx(3.0));
  CHECK(r.lse[1] == Approx(std::log(2.0)));
  // Causal: row 0 sees key 0 only (O = v0, lse = its score); row 1 unchanged.
  const auto c = day05::attention_cpu(shape(1, 1, 2, 2, true), q, k, v);
  CHECK(c.o[0] == Approx(1.0));
  CHECK(c.o[1] == Approx(2.0));
  CHECK(c.lse[0] == Approx(std::sqrt(2.0)));
  CHECK(c.o[2] == Approx(2.0));
  // S = 1: O is V whatever the scores.
  const std::vector<float> q1 = {0.5f, -0.25f}, k1 = {-1, 1}, v1 = {7, -3};
  const auto one = day05::attention_cpu(shape(1, 1, 1, 2), q1, k1, v1);
  CHECK(one.o[0] == Approx(7.0));
  CHECK(one.o[1] == Approx(-3.0));
  CHECK(one.abs_o[1] == Approx(3.0));
  CHECK_THROWS_AS(day05::attention_cpu(shape(1, 1, 3, 2), q1, k1, v1), std::invalid_argument);
}

TEST_CASE("the README's two-tile online softmax example", "[cpu]") {
  // Scores (1, 3 | 2, 5) in two tiles of two keys, values (10, 20 | 30, 40), natural exp.
  const double s[4] = {1, 3, 2, 5}, v[4] = {10, 20, 30, 40};
  // Tile 1.
  double m = std::fmax(s[0], s[1]);
  double l = std::exp(s[0] - m) + std::exp(s[1] - m);
  double o = std::exp(s[0] - m) * v[0] + std::exp(s[1] - m) * v[1];
  CHECK(m == 3.0);
  CHECK(l == Approx(1.135335).epsilon(1e-6));
  CHECK(o == Approx(21.353353).epsilon(1e-6));
  // Tile 2: the max moves from 3 to 5, the old sum and accumulator are rescaled by e^(3 - 5).
  const double m_new = std::fmax(m, std::fmax(s[2], s[3]));
  const double alpha = std::exp(m - m_new);
  l = l * alpha + std::exp(s[2] - m_new) + std::exp(s[3] - m_new);
  o = o * alpha + std::exp(s[2] - m_new) * v[2] + std::exp(s[3] - m_new) * v[3];
  CHECK(alpha == Approx(0.135335).epsilon(1e-5));
  CHECK(l == Approx(1.203438).epsilon(1e-6));
  CHECK(o == Approx(44.383474).epsilon(1e-6));
  CHECK(o / l == Approx(36.880566).epsilon(1e-6));
  CHECK(m_new + std::log(l) == Approx(5.185182).epsilon(1e-6));
  // The same as the one-pass softmax over all four keys.
  double z = 0, w = 0;
  for (int j = 0; j < 4; ++j) {
    z += std::exp(s[j] - 5.0);
    w += std::exp(s[j] - 5.0) * v[j];
  }
  CHECK(o / l == Approx(w / z).epsilon(1e-12));
}

TEST_CASE("check_output measures the error against sum p |v|", "[cpu]") {
  const std::vector<double> ref = {1.0, -0.5, 0.0}, scale = {1.0, 0.5, 0.25};
  CHECK(day05::check_output(ref, scale, {1.0f, -0.5f, 0.0f}, 1e-5).ok);
  // 1e-5 off at scale 0.25: 4e-5 relative, over 2e-5.
  const auto bad = day05::check_output(ref, scale, {1.0f, -0.5f, 1e-5f}, day05::kFp32Tol);
  CHECK_FALSE(bad.ok);
  CHECK(bad.first_bad == 2);
  CHECK(day05::check_output(ref, scale, {1.0f, -0.5f, 1e-5f}, day05::kBf16Tol).ok);
  CHECK_FALSE(day05::check_output(ref, scale, {std::nanf(""), -0.5f, 0.0f}, 1.0).ok);
  CHECK_FALSE(day05::check_output(ref, scale, {1.0f, -0.5f}, 1.0).ok);
  CHECK(day05::check_lse({8.0, 0.5}, {8.0001f, 0.50001f}, 2e-5).ok);
  CHECK_FALSE(day05::check_lse({8.0}, {8.001f}, 2e-5).ok);
}

TEST_CASE("bad shapes are rejected before any CUDA call", "[cpu]") {
  CHECK_NOTHROW(day05::check_shape(shape(1, 1, 1, 2)));
  CHECK_NOTHROW(day05::check_shape(shape(2, 3, 257, 256)));
  CHECK_THROWS_AS(day05::check_shape(shape(0, 1, 1, 64)), std::invalid_argument);
  CHECK_THROWS_AS(day05::check_shape(shape(1, -1, 1, 64)), std::invalid_argument);
  CHECK_THROWS_AS(day05::check_shape(shape(1, 1, 0, 64)), std::invalid_argument);
  CHECK_THROWS_AS(day05::check_shape(shape(1, 1, 4, 63)), std::invalid_argument);
  CHECK_THROWS_AS(day05::check_shape(shape(1, 1, 4, 258)), std::invalid_argument);
  CHECK_THROWS_AS(day05::check_shape(shape(1, 1, 4, 0)), std::invalid_argument);
  CHECK_THROWS_AS(day05::check_shape(shape(1, 1, int(day05::kMaxS) + 1, 64)),
                  std::invalid_argument);
  CHECK_THROWS_AS(day05::check_shape(shape(1024, 1024, 65536, 128)), std::invalid_argument);
  // Every launcher checks the shape and its workspace first (null pointers never reach CUDA).
  const auto bad = shape(1, 1, 0, 64);
  float dummy[4];
  for (const auto& v : day05::attention_variants()) {
    INFO(v.name);
    if (v.fp32 != nullptr) {
      CHECK_THROWS_AS(v.fp32(bad, dummy, dummy, dummy, dummy, dummy, 16, nullptr),
                      std::invalid_argument);
      // A valid shape with a workspace that is too small.
      CHECK_THROWS_AS(v.fp32(shape(1, 1, 64, 64), dummy, dummy, dummy, dummy, dummy, 4, nullptr),
                      std::invalid_argument);
    } else {
      auto* p = reinterpret_cast<__nv_bfloat16*>(dummy);
      CHECK_THROWS_AS(v.bf16(bad, p, p, p, p, dummy, 16, nullptr), std::invalid_argument);
      CHECK_THROWS_AS(v.bf16(shape(1, 1, 64, 64), p, p, p, p, dummy, 4, nullptr),
                      std::invalid_argument);
    }
  }
}

TEST_CASE("FLOPs, workspaces and the S x S budget", "[cpu]") {
  CHECK(day05::attention_flops(shape(8, 16, 4096, 128)) == Approx(4.0 * 128 * 4096.0 * 4096 * 128));
  CHECK(day05::attention_flops(shape(8, 16, 4096, 128, true)) ==
        Approx(2.0 * 128 * 4096.0 * 4096 * 128));
  CHECK(day05::softmax_scale(64) == Approx(0.125));
  // The flash variants: 4 B H S bytes.
  CHECK(day05::flash_workspace_bytes(shape(8, 16, 4096, 128)) == size_t(4) * 8 * 16 * 4096);
  // v1: all the scores (2 GiB at the S = 2048 benchmark) fit the 4 GiB budget; at S = 4096
  // (8 GiB) and at B = 1, H = 8, S = 16384 (8 GiB) they do not.
  CHECK(day05::v1_refusal(shape(8, 16, 2048, 64)).empty());
  CHECK(day05::v1_workspace_bytes(shape(8, 16, 2048, 64)) ==
        size_t(8) * 16 * 2048 * 64 * 4 + size_t(8) * 16 * 2048 * 2048 * 4);
  const std::string why = day05::v1_refusal(shape(1, 8, 16384, 64));
  CHECK(why.find("8.00 GiB") != std::string::npos);
  CHECK(why.find("budget of 4.00 GiB") != std::string::npos);
  CHECK_FALSE(day05::v1_refusal(shape(8, 16, 4096, 128)).empty());
  float dummy[4];
  CHECK_THROWS_AS(day05::attention_v1_naive(shape(1, 8, 16384, 64), dummy, dummy, dummy, dummy,
                                            dummy, 16, nullptr),
                  std::invalid_argument);
  // v2: chunks of heads whose scores fit; refuses only when one head's do not (S > 32768).
  CHECK(day05::v2_heads_per_chunk(shape(8, 16, 2048, 64)) == 128);
  CHECK(day05::v2_heads_per_chunk(shape(8, 16, 4096, 128)) == 64);
  CHECK(day05::v2_heads_per_chunk(shape(1, 8, 16384, 64)) == 4);
  CHECK(day05::v2_workspace_bytes(shape(1, 8, 16384, 64)) == size_t(4) << 30);
  CHECK(day05::v2_refusal(shape(1, 1, 32768, 64)).empty());
  CHECK_FALSE(day05::v2_refusal(shape(1, 1, 32769, 64)).empty());
  // v4: D = 64 and 128 only; v3 any even D up to 256.
  CHECK(day05::v4_refusal(shape(1, 1, 10, 64)).empty());
  CHECK(day05::v4_refusal(shape(1, 1, 10, 128)).empty());
  CHECK(day05::v4_refusal(shape(1, 1, 10, 96)).find("D = 64 and D = 128") != std::string::npos);
  auto* p = reinterpret_cast<__nv_bfloat16*>(dummy);
  CHECK_THROWS_AS(
      day05::attention_v4_flash_bf16(shape(1, 1, 10, 96), p, p, p, p, dummy, 1 << 20, nullptr),
      std::invalid_argument);
  CHECK(day05::v3_refusal(shape(1, 1, 10, 256)).empty());
  CHECK(day05::v3_refusal(shape(1, 1, 10, 2)).empty());
}

TEST_CASE("v5 splits the last round of query tiles only where it would leave SMs idle", "[cpu]") {
  // B 1 H 8 S 16384 on 132 SMs: 688 items of 192 queries, 5 full rounds and 28 left, cut in 4.
  const day05::V5TailSplit big = day05::v5_tail_split(shape(1, 8, 16384, 64), 132);
  CHECK(big.blocks == 132);
  CHECK(big.items == 8 * ((16384 + big.rows - 1) / big.rows));
  if (big.rows == 192) {
    CHECK(big.split_from == 660);
    CHECK(big.splits == 4);
  }
  // B 8 H 16 S 2048 (1408 items of 192: 88 left on 132 SMs, more than half) and every causal or
  // D = 128 shape: nothing split.
  if (big.rows == 192) CHECK(day05::v5_tail_split(shape(8, 16, 2048, 64), 132).splits == 1);
  for (int sms : {1, 46, 78, 114, 132, 148, 256})
    for (int s : {1, 129, 777, 2048, 16384})
      for (int h : {1, 8, 29, 128})
        for (int d : {64, 128})
          for (bool causal : {false, true}) {
            const auto sh = shape(1, h, s, d, causal);
            const day05::V5TailSplit p = day05::v5_tail_split(sh, sms);
            INFO(day05::shape_label(sh) << " on " << sms << " SMs");
            REQUIRE(p.split_from <= p.items);
            const int64_t left = p.items - p.split_from, parts = left * p.splits;
            if (p.splits == 1) {
              CHECK(left == 0);
              continue;
            }
            CHECK((d == 64 && !causal));
            CHECK(p.split_from % p.blocks == 0);    // whole rounds before the split one
            CHECK(2 * left <= p.blocks);            // it would have left half the SMs idle
            CHECK(parts <= p.blocks);               // one part per block at most
            CHECK(p.splits <= (s + 127) / 128);     // every part has a key tile
            CHECK(day05::v5_workspace_bytes(sh) >=  // and the workspace has room for them
                  (day05::flash_workspace_bytes(sh) + 255) / 256 * 256 +
                      size_t(parts) * p.rows * (d + 1) * 4);
          }
  CHECK(day05::v5_workspace_bytes(shape(8, 16, 4096, 128)) ==
        day05::flash_workspace_bytes(shape(8, 16, 4096, 128)));
  CHECK_THROWS_AS(day05::v5_tail_split(shape(1, 1, 10, 96), 132), std::invalid_argument);
  CHECK_THROWS_AS(day05::v5_tail_split(shape(1, 1, 10, 64), 0), std::invalid_argument);
}

TEST_CASE("the registry lists the variants with v2 and cudnn_sdpa as the library rows", "[cpu]") {
  const auto& vs = day05::attention_variants();
  // Every build names v5, whether or not it holds its sm_90a code (then it is refused at launch).
  REQUIRE(vs.size() >= 5);
  CHECK(day05::find_variant("v5_flash_wgmma") == &vs[4]);
  CHECK(vs[4].is_flash);
  CHECK(vs[4].bf16 != nullptr);
  CHECK(vs[4].needs == gpu100::ArchNeed::kSm90a);
  CHECK(vs[3].needs == gpu100::ArchNeed::kSm80);
  CHECK(std::strcmp(vs[0].name, "v1_naive") == 0);
  CHECK(vs[1].is_library);
  CHECK(vs[2].is_flash);
  CHECK(vs[3].is_flash);
  CHECK(vs[3].precision == day05::Precision::kBf16);
  CHECK(vs[3].bf16 != nullptr);
  for (int i = 0; i < 3; ++i) CHECK(vs[i].fp32 != nullptr);
  CHECK(day05::find_variant("v4_flash_bf16") == &vs[3]);
  CHECK(day05::find_variant("v6_unknown") == nullptr);
  // cuDNN's fused attention: the bf16 rows' library (named in every build; refused with a note
  // where the cuDNN frontend is missing).
  const day05::AttentionVariant* sdpa = day05::find_variant("cudnn_sdpa");
  REQUIRE(sdpa != nullptr);
  CHECK(sdpa->is_library);
  CHECK(sdpa->is_flash);
  CHECK(sdpa->precision == day05::Precision::kBf16);
  CHECK(sdpa->bf16 != nullptr);
  if (!day05::have_cudnn_sdpa()) CHECK_FALSE(day05::cudnn_sdpa_refusal(shape(1, 1, 8, 64)).empty());
  CHECK(day05::shape_label(shape(8, 16, 2048, 64, true)) == "B=8 H=16 S=2048 D=64 causal");
}

TEST_CASE("the causal order hands out every item once, the longest of a band first", "[cpu]") {
  for (int heads : {1, 2, 3, 7, 8, 9, 128}) {
    for (int per_head : {1, 2, 16, 33}) {
      for (int band : {0, 1, 4, 8, 16, 1000}) {
        INFO("heads " << heads << ", per head " << per_head << ", band " << band);
        std::vector<int> seen(size_t(heads) * size_t(per_head), 0);
        int outside = 0;
        for (int i = 0; i < heads * per_head; ++i) {
          const day05::BandItem it = day05::band_major_item(i, heads, per_head, band);
          if (it.head < 0 || it.head >= heads || it.index < 0 || it.index >= per_head) {
            ++outside;
          } else {
            ++seen[size_t(it.head) * size_t(per_head) + size_t(it.index)];
          }
        }
        CHECK(outside == 0);
        CHECK(std::count(seen.begin(), seen.end(), 1) == heads * per_head);
      }
    }
  }
  // Head-major without a band; with a band of 4 of 6 heads: heads 0-3's first items, then their
  // second ones, ..., then heads 4-5's.
  CHECK(day05::band_major_item(5, 6, 3, 0).head == 1);
  CHECK(day05::band_major_item(5, 6, 3, 0).index == 2);
  CHECK(day05::band_major_item(3, 6, 3, 4).head == 3);
  CHECK(day05::band_major_item(3, 6, 3, 4).index == 0);
  CHECK(day05::band_major_item(4, 6, 3, 4).head == 0);
  CHECK(day05::band_major_item(4, 6, 3, 4).index == 1);
  CHECK(day05::band_major_item(12, 6, 3, 4).head == 4);
  CHECK(day05::band_major_item(13, 6, 3, 4).head == 5);
  CHECK(day05::band_major_item(14, 6, 3, 4).index == 1);
}
