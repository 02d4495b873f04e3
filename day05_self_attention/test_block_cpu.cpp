// day05 CPU tests of the attention block (block.hpp): the shape checks, the double reference (the
// projection, RoPE undone by day01's inverse rotation, the attention of a single key) and the
// checks' allowances. No GPU needed.
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "block.hpp"
#include "common/catch.hpp"
#include "common/random.hpp"

namespace {

using day01::RopeStyle;
using day05::BlockShape;

BlockShape small_shape(int s, RopeStyle style) {
  BlockShape x;
  x.b = 2, x.s = s, x.d_model = 40, x.h = 2, x.d = 64, x.causal = true, x.style = style;
  return x;
}

}  // namespace

TEST_CASE("the block's shape checks refuse bad sizes with one line", "[cpu]") {
  BlockShape ok = small_shape(5, RopeStyle::kHalfSplit);
  REQUIRE_NOTHROW(day05::check_block_shape(ok));
  for (auto edit : {+[](BlockShape& s) { s.b = 0; }, +[](BlockShape& s) { s.s = -3; },
                    +[](BlockShape& s) { s.d_model = 0; }, +[](BlockShape& s) { s.h = 0; },
                    +[](BlockShape& s) { s.d = 96; }, +[](BlockShape& s) { s.d = 0; },
                    +[](BlockShape& s) { s.rope_base = -1; },
                    +[](BlockShape& s) { s.b = 1 << 16, s.s = 1 << 20; }}) {
    BlockShape bad = ok;
    edit(bad);
    CHECK_THROWS_AS(day05::check_block_shape(bad), std::invalid_argument);
  }
  CHECK(day05::qkv_rope_wgmma_refusal(ok).empty());
  BlockShape odd = ok;
  odd.d_model = 100;
  CHECK_FALSE(day05::qkv_rope_wgmma_refusal(odd).empty());
  CHECK(day05::block_label(ok) == "B=2 S=5 d_model=40 H=2 D=64 causal half_dim-split");
  CHECK(day05::qkv_flops(ok) == 2.0 * 10 * 40 * 3 * 128);
}

TEST_CASE("the block's CPU projection: V is X W_v, and Q, K rotate back to X W_q, X W_k", "[cpu]") {
  for (RopeStyle style : {RopeStyle::kHalfSplit, RopeStyle::kInterleaved}) {
    const BlockShape s = small_shape(7, style);
    const auto in = day05::make_block_inputs(s, 3);
    const size_t n = size_t(3 * s.hd()), hd = size_t(s.hd());
    for (int64_t row : {int64_t(0), int64_t(6), int64_t(9)}) {
      std::vector<double> p, abs_p, qkv;
      day05::qkv_row_cpu(s, in, row, p, abs_p, qkv);
      REQUIRE(p.size() == n);
      for (size_t c = 0; c < n; c += 17) {  // the projection, summed here independently
        double dot = 0;
        for (int k = 0; k < s.d_model; ++k) {
          dot += double(in.x[size_t(row) * s.d_model + k]) * double(in.w_qkv[size_t(k) * n + c]);
        }
        CHECK(std::fabs(p[c] - dot) <= 1e-12);
        CHECK(abs_p[c] >= std::fabs(p[c]));
      }
      for (size_t c = 2 * hd; c < n; ++c) CHECK(qkv[c] == p[c]);  // V is not rotated
      // Rotating Q and K back by the position recovers the projection.
      day01::RopeParams rp = s.rope();
      rp.batch = rp.seq = 1;
      rp.pos_offset = row % s.s;
      std::vector<double> back(2 * hd);
      day01::rope_cpu<double>(qkv.data(), qkv.data() + hd, back.data(), back.data() + hd, rp, true);
      for (size_t c = 0; c < 2 * hd; ++c) CHECK(std::fabs(back[c] - p[c]) <= 1e-12);
      if (row % s.s != 0) CHECK(qkv[0] != p[0]);  // position > 0 does rotate
    }
  }
}

TEST_CASE("the block's CPU output: with one key, attention returns V and Y = V W_o", "[cpu]") {
  BlockShape s = small_shape(1, RopeStyle::kHalfSplit);
  const auto in = day05::make_block_inputs(s, 5);
  const size_t per = size_t(s.tokens() * s.hd());
  const auto q = gpu100::random_vector<float>(per, 1), k = gpu100::random_vector<float>(per, 2),
             v = gpu100::random_vector<float>(per, 3);
  for (int64_t row = 0; row < s.tokens(); ++row) {
    std::vector<double> y, y_abs;
    day05::block_row_cpu(s, in, q, k, v, row, y, y_abs);
    for (int j = 0; j < s.d_model; ++j) {
      double want = 0, want_abs = 0;
      for (int h = 0; h < s.h; ++h)
        for (int e = 0; e < s.d; ++e) {
          const double vv = v[(size_t(row) * s.h + h) * s.d + e];  // S = 1: [B, H, 1, D]
          const double w = in.w_o[(size_t(h) * s.d + e) * s.d_model + j];
          want += vv * w;
          want_abs += std::fabs(vv) * std::fabs(w);
        }
      CHECK(std::fabs(y[j] - want) <= 1e-12);
      CHECK(std::fabs(y_abs[j] - want_abs) <= 1e-12);
    }
  }
}

TEST_CASE("the block's checks pass the reference and fail a wrong value or a NaN", "[cpu]") {
  const BlockShape s = small_shape(3, RopeStyle::kInterleaved);
  const auto in = day05::make_block_inputs(s, 9);
  const size_t hd = size_t(s.hd()), per = size_t(s.tokens()) * hd;
  const int64_t row = 4;  // b = 1, position 1
  std::vector<double> p, abs_p, qkv;
  day05::qkv_row_cpu(s, in, row, p, abs_p, qkv);
  // Q, K, V holding the reference at this token ([B, H, S, D]) and zeros elsewhere.
  std::vector<float> q(per), k(per), v(per);
  auto put = [&](std::vector<float>& t, size_t off) {
    for (int h = 0; h < s.h; ++h)
      for (int e = 0; e < s.d; ++e) {
        t[((size_t(row / s.s) * s.h + h) * s.s + row % s.s) * s.d + e] =
            float(qkv[off + size_t(h) * s.d + e]);
      }
  };
  put(q, 0), put(k, hd), put(v, 2 * hd);
  gpu100::CompareResult good;
  day05::check_qkv_row(s, row, p, abs_p, qkv, q, k, v, good);
  CHECK(good.ok);
  CHECK(good.count == 3 * hd);
  const size_t at = ((size_t(1) * s.h + 1) * s.s + 1) * s.d + 5;  // K, head 1, element 5
  k[at] += 0.1f + 0.1f * std::fabs(k[at]);
  gpu100::CompareResult bad;
  day05::check_qkv_row(s, row, p, abs_p, qkv, q, k, v, bad);
  CHECK_FALSE(bad.ok);
  // The projection check and the output check, likewise.
  std::vector<float> got(p.begin(), p.end());
  gpu100::CompareResult pr;
  day05::check_projection_row(p, abs_p, got, pr);
  CHECK(pr.ok);
  got[3] = NAN;
  gpu100::CompareResult pr_bad;
  day05::check_projection_row(p, abs_p, got, pr_bad);
  CHECK_FALSE(pr_bad.ok);
  std::vector<double> y = {0.5, -0.25}, y_abs = {1.0, 1.0};
  gpu100::CompareResult yr;
  day05::check_block_row(y, y_abs, {0.505f, -0.25f}, yr);
  CHECK(yr.ok);
  gpu100::CompareResult yr_bad;
  day05::check_block_row(y, y_abs, {0.55f, -0.25f}, yr_bad);
  CHECK_FALSE(yr_bad.ok);
}
