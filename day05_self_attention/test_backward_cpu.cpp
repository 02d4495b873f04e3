// day05 CPU tests of the backward pass's reference: the gradients against central finite
// differences of an independent double-precision forward, hand-worked cases, the identities the
// math gives (the rows of dS sum to zero; a causal key hears only the rows after it) and the FLOP
// convention (no GPU needed).
#include <cmath>
#include <stdexcept>
#include <vector>

#include "attention.hpp"
#include "attention_backward.hpp"
#include "common/catch.hpp"
#include "common/random.hpp"

using Catch::Approx;

namespace {

// The loss L = sum of dO o O, with O computed here in double by the textbook formula, written
// apart from the reference so that a mistake in one is not repeated in the other. dL/dX is then
// exactly what attention_backward_cpu returns for X = Q, K, V.
double loss(const day05::AttentionShape& s, const std::vector<double>& q,
            const std::vector<double>& k, const std::vector<double>& v,
            const std::vector<float>& dout) {
  const int n = s.s, d = s.d;
  const double c = 1.0 / std::sqrt(double(d));
  double total = 0;
  for (int64_t bh = 0; bh < s.heads(); ++bh) {
    const size_t base = size_t(bh) * n * d;
    for (int i = 0; i < n; ++i) {
      const int keys = s.causal ? i + 1 : n;
      std::vector<double> w(static_cast<size_t>(keys));
      double z = 0;
      for (int j = 0; j < keys; ++j) {
        double dot = 0;
        for (int e = 0; e < d; ++e) dot += q[base + i * d + e] * k[base + j * d + e];
        w[j] = std::exp(c * dot);  // small inputs: no overflow without the max
        z += w[j];
      }
      for (int e = 0; e < d; ++e) {
        double o = 0;
        for (int j = 0; j < keys; ++j) o += w[j] / z * v[base + j * d + e];
        total += double(dout[base + i * d + e]) * o;
      }
    }
  }
  return total;
}

// Every element of Q, K and V: the reference's gradient against (L(x + h) - L(x - h)) / 2h.
void check_against_finite_differences(const day05::AttentionShape& s, uint64_t seed) {
  const size_t n = static_cast<size_t>(s.elements());
  const auto q = gpu100::random_vector<float>(n, seed);
  const auto k = gpu100::random_vector<float>(n, seed + 1);
  const auto v = gpu100::random_vector<float>(n, seed + 2);
  const auto dout = gpu100::random_vector<float>(n, seed + 3);
  const auto r = day05::attention_backward_cpu(s, q, k, v, dout);
  std::vector<double> qd(q.begin(), q.end()), kd(k.begin(), k.end()), vd(v.begin(), v.end());
  const double h = 1e-5;
  int checked = 0;
  for (int which = 0; which < 3; ++which) {
    std::vector<double>& x = which == 0 ? qd : which == 1 ? kd : vd;
    const std::vector<double>& grad = which == 0 ? r.dq : which == 1 ? r.dk : r.dv;
    for (size_t e = 0; e < n; ++e) {
      const double keep = x[e];
      x[e] = keep + h;
      const double up = loss(s, qd, kd, vd, dout);
      x[e] = keep - h;
      const double down = loss(s, qd, kd, vd, dout);
      x[e] = keep;
      const double fd = (up - down) / (2 * h);
      // Central differences err by O(h^2) plus the loss's rounding over h: about 1e-9 here.
      INFO("tensor "
           << "QKV"[which] << ", element " << e);
      CHECK(grad[e] == Approx(fd).margin(1e-7).epsilon(1e-6));
      ++checked;
    }
  }
  CHECK(checked == int(3 * n));
}
}  // namespace

TEST_CASE("backward reference: dQ, dK and dV match finite differences of the loss", "[cpu]") {
  SECTION("one head, S = 5, D = 4") {
    check_against_finite_differences(day05::AttentionShape{1, 1, 5, 4}, 11);
  }
  SECTION("causal") {
    check_against_finite_differences(day05::AttentionShape{1, 1, 5, 4, true}, 12);
  }
  SECTION("two batches, two heads, odd S = 7, D = 6, causal") {
    check_against_finite_differences(day05::AttentionShape{2, 2, 7, 6, true}, 13);
  }
  SECTION("S = 1") {
    check_against_finite_differences(day05::AttentionShape{1, 2, 1, 8}, 14);
  }
}

TEST_CASE("backward reference: hand-worked cases", "[cpu]") {
  SECTION("S = 1: P = 1, so dV = dO and dQ = dK = 0") {
    const auto s = day05::AttentionShape{1, 1, 1, 4};
    const std::vector<float> q = {0.5f, -1, 2, 0.25f}, k = {1, 1, -1, 0.5f}, v = {3, -2, 1, 4};
    const std::vector<float> dout = {0.1f, 0.2f, -0.3f, 0.4f};
    const auto r = day05::attention_backward_cpu(s, q, k, v, dout);
    for (int e = 0; e < 4; ++e) {
      CHECK(r.dv[e] == Approx(dout[e]));
      CHECK(r.dq[e] == Approx(0).margin(1e-15));
      CHECK(r.dk[e] == Approx(0).margin(1e-15));
      CHECK(r.o[e] == Approx(v[e]));
    }
    // D = dO . O = 0.3 - 0.4 - 0.3 + 1.6.
    CHECK(r.delta[0] == Approx(1.2));
  }
  SECTION("Q = 0: uniform attention, dV_j = the mean of dO over the rows") {
    const auto s = day05::AttentionShape{1, 1, 3, 2};
    const std::vector<float> q(6, 0.0f), k = {1, 2, 3, 4, 5, 6}, v = {1, 0, 0, 1, 1, 1};
    const std::vector<float> dout = {1, 2, 3, 4, 5, 6};
    const auto r = day05::attention_backward_cpu(s, q, k, v, dout);
    for (int j = 0; j < 3; ++j) {
      CHECK(r.dv[j * 2 + 0] == Approx(3.0));  // (1 + 3 + 5) / 3
      CHECK(r.dv[j * 2 + 1] == Approx(4.0));  // (2 + 4 + 6) / 3
    }
    // O = the mean of V's rows = (2/3, 2/3) in every row; lse = log 3.
    CHECK(r.o[0] == Approx(2.0 / 3));
    CHECK(r.lse[2] == Approx(std::log(3.0)));
  }
}

TEST_CASE("backward reference: the identities of the math", "[cpu]") {
  const auto s = day05::AttentionShape{2, 3, 37, 16};
  const size_t n = static_cast<size_t>(s.elements());
  const auto q = gpu100::random_vector<float>(n, 21);
  const auto k = gpu100::random_vector<float>(n, 22);
  const auto v = gpu100::random_vector<float>(n, 23);
  auto dout = gpu100::random_vector<float>(n, 24);
  for (bool causal : {false, true}) {
    auto sc = s;
    sc.causal = causal;
    const auto r = day05::attention_backward_cpu(sc, q, k, v, dout);
    // O and the log-sum-exp are the forward reference's.
    const auto fwd = day05::attention_cpu(sc, q, k, v);
    for (size_t e = 0; e < n; ++e) REQUIRE(r.o[e] == Approx(fwd.o[e]).margin(1e-13));
    for (size_t i = 0; i < r.lse.size(); ++i) REQUIRE(r.lse[i] == Approx(fwd.lse[i]));
    for (int64_t bh = 0; bh < sc.heads(); ++bh) {
      const size_t base = size_t(bh) * sc.s * sc.d;
      for (int e = 0; e < sc.d; ++e) {
        // Each row of dS sums to zero (softmax's outputs sum to one), so the keys' gradients do:
        // sum_j dK_j = c sum_i (sum_j dS_ij) Q_i = 0.
        double sum = 0, scale = 0;
        for (int j = 0; j < sc.s; ++j) {
          sum += r.dk[base + j * sc.d + e];
          scale += r.abs_dk[base + j * sc.d + e];
        }
        CHECK(std::fabs(sum) <= 1e-12 * scale);
      }
      // D_i = dO_i . O_i.
      for (int i = 0; i < sc.s; ++i) {
        double dot = 0;
        for (int e = 0; e < sc.d; ++e) {
          dot += double(dout[base + i * sc.d + e]) * r.o[base + i * sc.d + e];
        }
        CHECK(r.delta[bh * sc.s + i] == Approx(dot).margin(1e-13));
      }
    }
    // The scales bound the gradients: |dX| <= abs_dX.
    for (size_t e = 0; e < n; ++e) {
      REQUIRE(std::fabs(r.dq[e]) <= r.abs_dq[e] * (1 + 1e-12));
      REQUIRE(std::fabs(r.dk[e]) <= r.abs_dk[e] * (1 + 1e-12));
      REQUIRE(std::fabs(r.dv[e]) <= r.abs_dv[e] * (1 + 1e-12));
    }
  }
  SECTION("causal: the last key hears only the last query row") {
    auto sc = s;
    sc.causal = true;
    const auto before = day05::attention_backward_cpu(sc, q, k, v, dout);
    auto changed = dout;
    for (int64_t bh = 0; bh < sc.heads(); ++bh) {
      for (int i = 0; i + 1 < sc.s; ++i) {
        for (int e = 0; e < sc.d; ++e) changed[(size_t(bh) * sc.s + i) * sc.d + e] *= -3.0f;
      }
    }
    const auto after = day05::attention_backward_cpu(sc, q, k, v, changed);
    for (int64_t bh = 0; bh < sc.heads(); ++bh) {
      const size_t last = (size_t(bh) * sc.s + sc.s - 1) * sc.d;
      for (int e = 0; e < sc.d; ++e) {
        CHECK(after.dk[last + e] == before.dk[last + e]);
        CHECK(after.dv[last + e] == before.dv[last + e]);
      }
      // ...while the first key hears every row, so its dV moved.
      CHECK(after.dv[size_t(bh) * sc.s * sc.d] != before.dv[size_t(bh) * sc.s * sc.d]);
    }
  }
}

TEST_CASE("backward FLOPs: five GEMMs, 2.5x the forward's two", "[cpu]") {
  const auto s = day05::AttentionShape{8, 16, 2048, 128};
  CHECK(day05::attention_backward_flops(s) == 10.0 * 8 * 16 * 2048.0 * 2048.0 * 128);
  CHECK(day05::attention_backward_flops(s) == 2.5 * day05::attention_flops(s));
  const auto c = day05::AttentionShape{8, 16, 2048, 128, true};
  CHECK(day05::attention_backward_flops(c) == 0.5 * day05::attention_backward_flops(s));
}

TEST_CASE("backward reference: tensors of the wrong size and bad shapes are refused", "[cpu]") {
  const std::vector<float> four(4, 0.5f), three(3, 0.5f);
  CHECK_THROWS_AS(
      day05::attention_backward_cpu(day05::AttentionShape{1, 1, 2, 2}, four, four, four, three),
      std::invalid_argument);
  CHECK_THROWS_AS(
      day05::attention_backward_cpu(day05::AttentionShape{1, 1, 0, 2}, four, four, four, four),
      std::invalid_argument);
  CHECK_THROWS_AS(
      day05::attention_backward_cpu(day05::AttentionShape{1, 1, 1, 3}, three, three, three, three),
      std::invalid_argument);  // D odd
}

TEST_CASE("backward reference: one head writes every value of its own head, and nothing else",
          "[cpu]") {
  const auto s = day05::AttentionShape{2, 2, 13, 6, true};
  const size_t n = static_cast<size_t>(s.elements());
  const auto q = gpu100::random_vector<float>(n, 31);
  const auto k = gpu100::random_vector<float>(n, 32);
  const auto v = gpu100::random_vector<float>(n, 33);
  const auto dout = gpu100::random_vector<float>(n, 34);
  const auto all = day05::attention_backward_cpu(s, q, k, v, dout);
  // Every output poisoned with NaN, then head 2 alone computed.
  const double nan = std::nan("");
  day05::BackwardReference r;
  for (auto* t : {&r.dq, &r.dk, &r.dv, &r.abs_dq, &r.abs_dk, &r.abs_dv, &r.o}) t->assign(n, nan);
  r.lse.assign(static_cast<size_t>(s.rows()), nan);
  r.delta.assign(static_cast<size_t>(s.rows()), nan);
  const int64_t head = 2;
  day05::attention_backward_head_cpu(s, q.data(), k.data(), v.data(), dout.data(), head, r);
  const size_t per_head = size_t(s.s) * s.d;
  for (size_t e = 0; e < n; ++e) {
    const bool mine = e / per_head == size_t(head);
    const std::vector<double>* got[] = {&r.dq, &r.dk, &r.dv, &r.abs_dq, &r.abs_dk, &r.abs_dv, &r.o};
    const std::vector<double>* want[] = {&all.dq,     &all.dk,     &all.dv, &all.abs_dq,
                                         &all.abs_dk, &all.abs_dv, &all.o};
    for (int t = 0; t < 7; ++t) {
      if (mine) {
        REQUIRE((*got[t])[e] == (*want[t])[e]);  // the same arithmetic: bit for bit
      } else {
        REQUIRE(std::isnan((*got[t])[e]));
      }
    }
  }
  for (int i = 0; i < s.s; ++i) {
    CHECK(r.lse[head * s.s + i] == all.lse[head * s.s + i]);
    CHECK(r.delta[head * s.s + i] == all.delta[head * s.s + i]);
    CHECK(std::isnan(r.lse[i]));
  }
}
