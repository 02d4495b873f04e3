// day01 CPU tests: the fp64 reference against rotations worked out by hand, its invariants (norm,
// inverse, relative position), the table, the registry, and bad shapes.
#include <cmath>
#include <limits>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/catch.hpp"
#include "common/random.hpp"
#include "rope.cuh"

namespace {

using day01::RopeParams;
using day01::RopeStyle;

RopeParams make_params(int64_t b, int64_t s, int64_t hq, int64_t hkv, int64_t d, int64_t pos0,
                       RopeStyle style, double base = 10000.0) {
  RopeParams p;
  p.batch = b;
  p.seq = s;
  p.q_heads = hq;
  p.kv_heads = hkv;
  p.dim = d;
  p.pos_offset = pos0;
  p.style = style;
  p.base = base;
  return p;
}

// Runs the reference on Q only (K is a single zero-free pair set of the same shape).
std::vector<double> rope_q(const std::vector<double>& q, const RopeParams& p,
                           bool inverse = false) {
  std::vector<double> k(p.k_elems(), 0.5), q_out(q.size()), k_out(k.size());
  day01::rope_cpu(q.data(), k.data(), q_out.data(), k_out.data(), p, inverse);
  return q_out;
}

}  // namespace

TEST_CASE("rope_cpu: (1, 0) and (0, 1) at D = 2 rotate by m * theta_0 = m radians", "[cpu]") {
  for (RopeStyle style : {RopeStyle::kInterleaved, RopeStyle::kHalfSplit}) {
    // S = 3 tokens at positions 0, 1, 2; theta_0 = base^0 = 1 whatever the base.
    const RopeParams p = make_params(1, 3, 1, 1, 2, 0, style);
    const std::vector<double> q = {1, 0, 1, 0, 0, 1};
    const std::vector<double> out = rope_q(q, p);
    CHECK(out[0] == 1.0);  // m = 0: unchanged
    CHECK(out[1] == 0.0);
    CHECK(out[2] == Catch::Approx(std::cos(1.0)).margin(1e-15));  // m = 1: (cos 1, sin 1)
    CHECK(out[3] == Catch::Approx(std::sin(1.0)).margin(1e-15));
    CHECK(out[4] ==
          Catch::Approx(-std::sin(2.0)).margin(1e-15));  // m = 2: (0, 1) -> (-sin 2, cos 2)
    CHECK(out[5] == Catch::Approx(std::cos(2.0)).margin(1e-15));
  }
}

TEST_CASE("rope_cpu: theta_i = base^(-2i/D) and the two pairings, D = 4", "[cpu]") {
  // base 100, D = 4: theta_0 = 1, theta_1 = 100^(-1/2) = 0.1. Position m = 2 (pos_offset 2, s 0).
  const std::vector<double> x = {1, 2, 3, 4};
  const double c0 = std::cos(2.0), s0 = std::sin(2.0), c1 = std::cos(0.2), s1 = std::sin(0.2);
  SECTION("interleaved: pairs (x0, x1) by 2 rad, (x2, x3) by 0.2 rad") {
    const auto out = rope_q(x, make_params(1, 1, 1, 1, 4, 2, RopeStyle::kInterleaved, 100.0));
    CHECK(out[0] == Catch::Approx(1 * c0 - 2 * s0).margin(1e-14));
    CHECK(out[1] == Catch::Approx(1 * s0 + 2 * c0).margin(1e-14));
    CHECK(out[2] == Catch::Approx(3 * c1 - 4 * s1).margin(1e-14));
    CHECK(out[3] == Catch::Approx(3 * s1 + 4 * c1).margin(1e-14));
  }
  SECTION("half_dim-split: pairs (x0, x2) by 2 rad, (x1, x3) by 0.2 rad") {
    const auto out = rope_q(x, make_params(1, 1, 1, 1, 4, 2, RopeStyle::kHalfSplit, 100.0));
    CHECK(out[0] == Catch::Approx(1 * c0 - 3 * s0).margin(1e-14));
    CHECK(out[2] == Catch::Approx(1 * s0 + 3 * c0).margin(1e-14));
    CHECK(out[1] == Catch::Approx(2 * c1 - 4 * s1).margin(1e-14));
    CHECK(out[3] == Catch::Approx(2 * s1 + 4 * c1).margin(1e-14));
  }
}

TEST_CASE("rope_cpu: position is pos_offset + s, the same for every batch and head", "[cpu]") {
  // B = 2, S = 2, H = 2, D = 2, pos_offset 5: token s has position 5 + s in both batches.
  const RopeParams p = make_params(2, 2, 2, 1, 2, 5, RopeStyle::kInterleaved);
  const std::vector<double> q(p.q_elems(), 0.0);
  std::vector<double> x = q;
  for (size_t j = 0; j < x.size(); j += 2) x[j] = 1.0;  // every pair is (1, 0)
  const auto out = rope_q(x, p);
  for (int64_t b = 0; b < 2; ++b) {
    for (int64_t s = 0; s < 2; ++s) {
      for (int64_t h = 0; h < 2; ++h) {
        const int64_t j = ((b * 2 + s) * 2 + h) * 2;
        const double m = 5.0 + double(s);
        CHECK(out[j] == Catch::Approx(std::cos(m)).margin(1e-15));
        CHECK(out[j + 1] == Catch::Approx(std::sin(m)).margin(1e-15));
      }
    }
  }
}

TEST_CASE("rope_cpu: K uses its own head count (Hq != Hkv)", "[cpu]") {
  const RopeParams p = make_params(1, 2, 3, 1, 2, 0, RopeStyle::kInterleaved);
  const std::vector<double> q(p.q_elems(), 1.0);
  const std::vector<double> k = {1, 0, 1, 0};  // [1, 2, 1, 2]: positions 0 and 1
  std::vector<double> q_out(q.size()), k_out(k.size());
  day01::rope_cpu(q.data(), k.data(), q_out.data(), k_out.data(), p);
  CHECK(k_out[0] == 1.0);
  CHECK(k_out[1] == 0.0);
  CHECK(k_out[2] == Catch::Approx(std::cos(1.0)).margin(1e-15));
  CHECK(k_out[3] == Catch::Approx(std::sin(1.0)).margin(1e-15));
  // Q token 1, head 2 (the last pair) is at position 1 too.
  CHECK(q_out[10] == Catch::Approx(std::cos(1.0) - std::sin(1.0)).margin(1e-15));
}

TEST_CASE("rope_cpu: every pair keeps its length, and the inverse rotation undoes it", "[cpu]") {
  for (RopeStyle style : {RopeStyle::kInterleaved, RopeStyle::kHalfSplit}) {
    const RopeParams p = make_params(2, 7, 3, 1, 6, 4093, style);
    const auto q = gpu100::random_vector<double>(p.q_elems(), 11);
    const auto k = gpu100::random_vector<double>(p.k_elems(), 12);
    std::vector<double> q_out(q.size()), k_out(k.size()), q_back(q.size()), k_back(k.size());
    day01::rope_cpu(q.data(), k.data(), q_out.data(), k_out.data(), p);
    day01::rope_cpu(q_out.data(), k_out.data(), q_back.data(), k_back.data(), p, /*inverse=*/true);
    const int64_t half_dim = p.dim / 2;
    for (int64_t head = 0; head < p.q_elems() / p.dim; ++head) {
      for (int64_t i = 0; i < half_dim; ++i) {
        const int64_t a = head * p.dim + (style == RopeStyle::kInterleaved ? 2 * i : i);
        const int64_t b = a + (style == RopeStyle::kInterleaved ? 1 : half_dim);
        CHECK(std::hypot(q_out[a], q_out[b]) ==
              Catch::Approx(std::hypot(q[a], q[b])).epsilon(1e-14));
      }
    }
    for (size_t j = 0; j < q.size(); ++j) CHECK(q_back[j] == Catch::Approx(q[j]).margin(1e-12));
    for (size_t j = 0; j < k.size(); ++j) CHECK(k_back[j] == Catch::Approx(k[j]).margin(1e-12));
  }
}

TEST_CASE("rope_cpu: q . k depends only on the distance between their positions", "[cpu]") {
  // The property RoPE is built for: <rope(q, m), rope(k, n)> is a function of m - n. Shifting
  // both positions by 4093 (pos_offset) leaves every query-key dot product unchanged.
  for (RopeStyle style : {RopeStyle::kInterleaved, RopeStyle::kHalfSplit}) {
    const int64_t d = 64, s = 5;
    const auto q = gpu100::random_vector<double>(s * d, 21);
    const auto k = gpu100::random_vector<double>(s * d, 22);
    std::vector<double> q0(q.size()), k0(k.size()), q1(q.size()), k1(k.size());
    day01::rope_cpu(q.data(), k.data(), q0.data(), k0.data(), make_params(1, s, 1, 1, d, 0, style));
    day01::rope_cpu(q.data(), k.data(), q1.data(), k1.data(),
                    make_params(1, s, 1, 1, d, 4093, style));
    for (int64_t m = 0; m < s; ++m) {
      for (int64_t n = 0; n < s; ++n) {
        double dot0 = 0, dot1 = 0;
        for (int64_t j = 0; j < d; ++j) {
          dot0 += q0[m * d + j] * k0[n * d + j];
          dot1 += q1[m * d + j] * k1[n * d + j];
        }
        CHECK(dot1 == Catch::Approx(dot0).margin(1e-10));
      }
    }
  }
}

TEST_CASE("rope_cpu: float and bf16 inputs are read exactly", "[cpu]") {
  const RopeParams p = make_params(1, 3, 2, 1, 4, 1, RopeStyle::kInterleaved);
  const auto qf = gpu100::random_vector<float>(p.q_elems(), 5);
  const auto kf = gpu100::random_vector<float>(p.k_elems(), 6);
  const std::vector<double> qd(qf.begin(), qf.end()), kd(kf.begin(), kf.end());
  std::vector<double> a(qf.size()), b(kf.size()), c(qf.size()), d(kf.size());
  day01::rope_cpu(qf.data(), kf.data(), a.data(), b.data(), p);
  day01::rope_cpu(qd.data(), kd.data(), c.data(), d.data(), p);
  CHECK(a == c);
  CHECK(b == d);
  std::vector<__nv_bfloat16> qb(qf.size()), kb(kf.size());
  std::vector<double> qr(qf.size()), kr(kf.size());
  for (size_t j = 0; j < qf.size(); ++j)
    qb[j] = __float2bfloat16_rn(qf[j]), qr[j] = __bfloat162float(qb[j]);
  for (size_t j = 0; j < kf.size(); ++j)
    kb[j] = __float2bfloat16_rn(kf[j]), kr[j] = __bfloat162float(kb[j]);
  day01::rope_cpu(qb.data(), kb.data(), a.data(), b.data(), p);
  day01::rope_cpu(qr.data(), kr.data(), c.data(), d.data(), p);
  CHECK(a == c);
  CHECK(b == d);
}

TEST_CASE("rope_table_cpu: entry (m, i) is (cos, sin)(m theta_i) rounded to fp32", "[cpu]") {
  const auto t = day01::rope_table_cpu(4, 4, 100.0);  // theta = {1, 0.1}
  REQUIRE(t.size() == 8);
  CHECK(t[0].x == 1.0f);
  CHECK(t[0].y == 0.0f);
  CHECK(t[3 * 2 + 0].x == static_cast<float>(std::cos(3.0)));
  CHECK(t[3 * 2 + 0].y == static_cast<float>(std::sin(3.0)));
  CHECK(t[3 * 2 + 1].x == static_cast<float>(std::cos(3 * std::pow(100.0, -0.5))));
  CHECK(t[3 * 2 + 1].y == static_cast<float>(std::sin(3 * std::pow(100.0, -0.5))));
  CHECK_THROWS_AS(day01::rope_table_cpu(4, 3, 100.0), std::invalid_argument);
  CHECK_THROWS_AS(day01::rope_table_cpu(0, 4, 100.0), std::invalid_argument);
}

TEST_CASE("bad shapes are rejected with std::invalid_argument", "[cpu]") {
  const RopeParams good = make_params(2, 7, 3, 1, 6, 0, RopeStyle::kInterleaved);
  REQUIRE_NOTHROW(day01::validate(good));
  std::vector<RopeParams> bad;
  auto with = [&](auto change) {
    RopeParams p = good;
    change(p);
    bad.push_back(p);
  };
  with([](RopeParams& p) { p.dim = 7; });  // odd
  with([](RopeParams& p) { p.dim = 1; });
  with([](RopeParams& p) { p.dim = 0; });
  with([](RopeParams& p) { p.dim = -2; });
  with([](RopeParams& p) { p.batch = 0; });
  with([](RopeParams& p) { p.seq = 0; });
  with([](RopeParams& p) { p.seq = -1; });
  with([](RopeParams& p) { p.q_heads = 0; });
  with([](RopeParams& p) { p.kv_heads = -3; });
  with([](RopeParams& p) { p.pos_offset = -1; });
  with([](RopeParams& p) { p.pos_offset = (int64_t(1) << 24) - 6; });  // last position 2^24
  with([](RopeParams& p) { p.base = 0; });
  with([](RopeParams& p) { p.base = std::numeric_limits<double>::quiet_NaN(); });
  with([](RopeParams& p) { p.batch = int64_t(1) << 20, p.seq = int64_t(1) << 12; });  // 2^32 rows
  with([](RopeParams& p) { p.q_heads = 65536, p.kv_heads = 1, p.dim = 512; });  // pairs per row
  std::vector<double> buf(64, 1.0);
  for (const RopeParams& p : bad) {
    INFO("B=" << p.batch << " S=" << p.seq << " Hq=" << p.q_heads << " Hkv=" << p.kv_heads
              << " D=" << p.dim << " pos0=" << p.pos_offset << " base=" << p.base);
    CHECK_THROWS_AS(day01::validate(p), std::invalid_argument);
    CHECK_THROWS_AS(day01::rope_cpu(buf.data(), buf.data(), buf.data(), buf.data(), p),
                    std::invalid_argument);
  }
  // The last allowed position is 2^24 - 1.
  RopeParams edge = good;
  edge.pos_offset = (int64_t(1) << 24) - 7;
  CHECK_NOTHROW(day01::validate(edge));
}

TEST_CASE("registry: names are unique, one launcher each, and tolerances by precision", "[cpu]") {
  const auto& vs = day01::variants();
  REQUIRE(day01::find_variant("v1_naive") != nullptr);  // contains; more may be added
  std::set<std::string> names;
  const RopeParams p = make_params(1, 1000, 1, 1, 64, 4093, RopeStyle::kInterleaved);
  for (const auto& v : vs) {
    INFO("variant " << v.name);
    CHECK(names.insert(v.name).second);
    CHECK(day01::find_variant(v.name) == &v);
    const bool fp32 = v.precision == day01::Precision::kFp32;
    CHECK((v.launch_fp32 != nullptr) == fp32);
    CHECK((v.launch_bf16 != nullptr) == !fp32);
    const day01::Tolerance tol = day01::tolerance(v, p);
    if (!fp32) {
      CHECK(tol.rel_tol <= 1.0 / 128);
    } else if (v.fp32_angles) {
      CHECK(tol.abs_tol <= 1e-2);  // 1e-5 + 1e-6 * 5092
    } else {
      CHECK(tol.abs_tol <= 1e-6);
    }
  }
  CHECK(day01::find_variant("no_such_variant") == nullptr);
}
