// day07 CPU tests: the references against hand-worked rows and finite differences, the naive
// variance formula failing where Welford holds, the checks, the strategy by D, the registry and
// the rejection of bad shapes (no GPU needed).
#include <cmath>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <vector>

#include "common/catch.hpp"
#include "common/random.hpp"
#include "layernorm.cuh"

using Catch::Approx;

TEST_CASE("layernorm_forward_cpu on hand-worked rows", "[cpu]") {
  // Row 0: 1 2 3 4 -> mean 2.5, var (2.25 + 0.25 + 0.25 + 2.25) / 4 = 1.25.
  // Row 1: constant 2 -> var 0, rstd = 1 / sqrt(eps), y = beta.
  const std::vector<float> x = {1, 2, 3, 4, 2, 2, 2, 2};
  const std::vector<float> gamma = {1, 2, 1, 0.5f}, beta = {0, 1, -1, 0.25f};
  const double eps = 1e-5;
  std::vector<double> y(8), mean(2), rstd(2);
  day07::layernorm_forward_cpu(x.data(), gamma.data(), beta.data(), y.data(), mean.data(),
                               rstd.data(), 2, 4, eps);
  const double r0 = 1.0 / std::sqrt(1.25 + eps);
  CHECK(mean[0] == 2.5);
  CHECK(rstd[0] == Approx(r0).epsilon(1e-15));
  CHECK(y[0] == Approx(-1.5 * r0).epsilon(1e-15));
  CHECK(y[1] == Approx(-0.5 * r0 * 2 + 1).epsilon(1e-15));
  CHECK(y[2] == Approx(0.5 * r0 - 1).epsilon(1e-15));
  CHECK(y[3] == Approx(1.5 * r0 * 0.5 + 0.25).epsilon(1e-15));
  CHECK(mean[1] == 2.0);
  CHECK(rstd[1] == Approx(1.0 / std::sqrt(eps)).epsilon(1e-15));
  for (int i = 0; i < 4; ++i) CHECK(y[4 + i] == beta[i]);
}

TEST_CASE("rmsnorm_cpu on a hand-worked row", "[cpu]") {
  // 3 4 -> mean of squares 12.5, rstd = 1 / sqrt(12.5) (eps 0).
  const std::vector<float> x = {3, 4}, gamma = {1, 2};
  std::vector<double> y(2), rstd(1);
  day07::rmsnorm_cpu(x.data(), gamma.data(), y.data(), rstd.data(), 1, 2, 0.0);
  CHECK(rstd[0] == Approx(1.0 / std::sqrt(12.5)).epsilon(1e-15));
  CHECK(y[0] == Approx(3.0 / std::sqrt(12.5)).epsilon(1e-15));
  CHECK(y[1] == Approx(8.0 / std::sqrt(12.5)).epsilon(1e-15));
}

namespace {

// L = sum w * y(x, gamma, beta), in double: its gradient is the backward with dy = w.
double loss(const std::vector<float>& x, const std::vector<float>& gamma,
            const std::vector<float>& beta, const std::vector<float>& w, int64_t rows,
            int64_t dim) {
  std::vector<double> y(x.size());
  day07::layernorm_forward_cpu(x.data(), gamma.data(), beta.data(), y.data(), nullptr, nullptr,
                               rows, dim, 1e-5);
  double l = 0;
  for (size_t i = 0; i < y.size(); ++i) l += w[i] * y[i];
  return l;
}

// Central difference in element i of v (a float input): the step actually taken is measured
// (x + h rounds in fp32), so the quotient uses the true step.
double numeric_grad(std::vector<float>& v, size_t i, const std::function<double()>& f) {
  const float saved = v[i];
  const double h = 1.0 / 4096;
  v[i] = static_cast<float>(saved + h);
  const double up = f(), x_up = v[i];
  v[i] = static_cast<float>(saved - h);
  const double down = f(), x_down = v[i];
  v[i] = saved;
  return (up - down) / (x_up - x_down);
}

}  // namespace

TEST_CASE("layernorm_backward_cpu matches finite differences", "[cpu]") {
  const int64_t rows = 2, dim = 5;
  std::vector<float> x = gpu100::random_vector<float>(rows * dim, 11);
  std::vector<float> gamma = gpu100::random_vector<float>(dim, 12, 0.5, 1.5);
  std::vector<float> beta = gpu100::random_vector<float>(dim, 13);
  const std::vector<float> w = gpu100::random_vector<float>(rows * dim, 14);
  std::vector<double> dx(rows * dim), dg(dim), db(dim);
  day07::layernorm_backward_cpu(w.data(), x.data(), gamma.data(), 1e-5, rows, dim, dx.data(),
                                dg.data(), db.data(), nullptr, nullptr);
  const auto f = [&] { return loss(x, gamma, beta, w, rows, dim); };
  for (size_t i = 0; i < x.size(); ++i) {
    INFO("dx " << i);
    CHECK(dx[i] == Approx(numeric_grad(x, i, f)).margin(1e-6));
  }
  for (size_t i = 0; i < gamma.size(); ++i) {
    INFO("dgamma / dbeta " << i);
    CHECK(dg[i] == Approx(numeric_grad(gamma, i, f)).margin(1e-6));
    CHECK(db[i] == Approx(numeric_grad(beta, i, f)).margin(1e-6));
  }
}

TEST_CASE("the naive E[x^2] - E[x]^2 loses a large-mean row; Welford keeps it", "[cpu]") {
  // x = 1e4 + noise in (-1, 1): the variance is about 1/3 while E[x^2] is 1e8, whose fp32
  // spacing is 8: the naive formula subtracts two numbers of 1e8 that agree in every digit it
  // kept. Welford only subtracts the running mean.
  const int64_t n = 4096;
  std::vector<float> x = gpu100::random_vector<float>(n, 21, -1.0, 1.0);
  for (auto& v : x) v += 1e4f;
  double mean = 0;
  for (float v : x) mean += v;
  mean /= n;
  double var = 0;
  for (float v : x) var += (v - mean) * (v - mean);
  var /= n;
  const double naive = day07::variance_naive_fp32(x.data(), n);
  const double welford = day07::variance_welford_fp32(x.data(), n);
  INFO("exact " << var << ", naive fp32 " << naive << ", Welford fp32 " << welford);
  CHECK(std::fabs(naive - var) / var > 0.5);
  CHECK(std::fabs(welford - var) / var < 1e-3);
  // With the mean near 0 both are fine: the failure is the cancellation, not fp32 itself.
  const std::vector<float> centred = gpu100::random_vector<float>(n, 22);
  double m0 = 0, v0 = 0;
  for (float v : centred) m0 += v;
  m0 /= n;
  for (float v : centred) v0 += (v - m0) * (v - m0);
  v0 /= n;
  CHECK(std::fabs(day07::variance_naive_fp32(centred.data(), n) - v0) / v0 < 1e-4);
}

TEST_CASE("the checks: tolerances, NaN, the parameter-gradient bound", "[cpu]") {
  const std::vector<double> ref = {1.0, -2.0};
  CHECK(gpu100::compare(ref, std::vector<float>{1.00005f, -2.0001f}, day07::kFp32Y.abs_tol,
                        day07::kFp32Y.rel_tol)
            .ok);
  CHECK_FALSE(gpu100::compare(ref, std::vector<float>{1.001f, -2.0f}, day07::kFp32Y.abs_tol,
                              day07::kFp32Y.rel_tol)
                  .ok);
  CHECK(gpu100::compare(ref, std::vector<float>{1.003f, -2.0f}, day07::kBf16Y.abs_tol,
                        day07::kBf16Y.rel_tol)
            .ok);
  CHECK_FALSE(gpu100::compare(ref, std::vector<float>{1.0f, std::nanf("")}, 1.0, 1.0).ok);
  // Parameter gradients: bound 1e-4 * sum |term| + 1e-6.
  const std::vector<double> g = {10.0, 0.0}, abs_sum = {100.0, 50.0};
  CHECK(day07::check_param_grad(g, abs_sum, std::vector<float>{10.009f, 0.004f}).ok);
  CHECK_FALSE(day07::check_param_grad(g, abs_sum, std::vector<float>{10.02f, 0.0f}).ok);
  CHECK_FALSE(day07::check_param_grad(g, abs_sum, std::vector<float>{10.0f, std::nanf("")}).ok);
  CHECK_FALSE(day07::check_param_grad(g, abs_sum, std::vector<float>{10.0f}).ok);
}

TEST_CASE("the strategy by D", "[cpu]") {
  CHECK(day07::register_group_size(1) == 32);
  CHECK(day07::register_group_size(768) == 32);
  CHECK(day07::register_group_size(1024) == 32);
  CHECK(day07::register_group_size(1025) == 128);
  CHECK(day07::register_group_size(4096) == 128);
  CHECK(day07::register_group_size(16384) == 512);
  CHECK(day07::register_group_size(16385) == 0);
  CHECK(day07::backward_group_size(512) == 32);
  CHECK(day07::backward_group_size(768) == 64);
  CHECK(day07::backward_group_size(4096) == 256);
  CHECK(day07::backward_group_size(8192) == 512);
  CHECK(day07::backward_group_size(8193) == 0);
  CHECK_THAT(day07::register_strategy(4096, 4, true),
             Catch::Matchers::StartsWith("128 threads per row"));
  CHECK_THAT(day07::register_strategy(4096, 4, true),
             Catch::Matchers::EndsWith("16-byte vectors (4 per access)"));
  CHECK_THAT(day07::register_strategy(1001, 4, true), Catch::Matchers::EndsWith("scalar accesses"));
  CHECK_THAT(day07::register_strategy(768, 2, false), Catch::Matchers::EndsWith("scalar accesses"));
  CHECK_THAT(day07::register_strategy(20000, 4, true), Catch::Matchers::StartsWith("looped"));
}

TEST_CASE("the registry lists every variant once", "[cpu]") {
  const auto& list = day07::variants();
  REQUIRE_FALSE(list.empty());
  CHECK(std::strcmp(list.front().name, "v1_thread_per_row") == 0);
  for (size_t i = 0; i < list.size(); ++i) {
    for (size_t j = i + 1; j < list.size(); ++j) CHECK(std::strcmp(list[i].name, list[j].name));
    if (list[i].op == day07::Op::kLayerNorm) {
      CHECK((list[i].ln_fp32 != nullptr) == list[i].has_fp32);
      CHECK((list[i].ln_bf16 != nullptr) == list[i].has_bf16);
    }
  }
  CHECK(day07::find_variant("v6_bf16")->has_bf16);
  CHECK_FALSE(day07::find_variant("v6_bf16")->has_fp32);
  CHECK(day07::find_variant("v2_block_tree")->naive_variance);
  CHECK(day07::find_variant("v3_warp_shuffle")->naive_variance);
  CHECK_FALSE(day07::find_variant("v4_welford")->naive_variance);
  CHECK(day07::find_variant("backward_fused")->op == day07::Op::kBackward);
  CHECK(day07::find_variant("v99") == nullptr);
}

TEST_CASE("bad shapes are rejected before any CUDA call", "[cpu]") {
  CHECK_THROWS_AS(day07::validate_shape(0, 8), std::invalid_argument);
  CHECK_THROWS_AS(day07::validate_shape(-1, 8), std::invalid_argument);
  CHECK_THROWS_AS(day07::validate_shape(4, 0), std::invalid_argument);
  CHECK_THROWS_AS(day07::validate_shape(4, day07::kMaxDim + 1), std::invalid_argument);
  CHECK_THROWS_AS(day07::validate_shape(int64_t(1) << 30, 4), std::invalid_argument);
  CHECK_NOTHROW(day07::validate_shape(int64_t(1) << 15, 4096));
  std::vector<double> y(8);
  const std::vector<float> f(8, 1.0f);
  CHECK_THROWS_AS(day07::layernorm_forward_cpu(f.data(), f.data(), f.data(), y.data(), nullptr,
                                               nullptr, 0, 8, 1e-5),
                  std::invalid_argument);
  // The launchers validate first, so these throw without touching the GPU (null pointers).
  for (const auto& v : day07::variants()) {
    INFO(v.name);
    if (v.ln_fp32 != nullptr) {
      CHECK_THROWS_AS(
          v.ln_fp32(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, 0, 8, 1e-5f, nullptr),
          std::invalid_argument);
      CHECK_THROWS_AS(v.ln_fp32(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, 4,
                                day07::kMaxDim + 1, 1e-5f, nullptr),
                      std::invalid_argument);
    }
    if (v.ln_bf16 != nullptr) {
      CHECK_THROWS_AS(
          v.ln_bf16(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, 3, -1, 1e-5f, nullptr),
          std::invalid_argument);
    }
  }
  CHECK_THROWS_AS(
      day07::rmsnorm_rows<float>(nullptr, nullptr, nullptr, nullptr, 0, 8, 1e-5f, nullptr),
      std::invalid_argument);
  CHECK_THROWS_AS(day07::rmsnorm_vector<float>(nullptr, nullptr, nullptr, nullptr, 0, 1e-5f,
                                               nullptr, 0, nullptr),
                  std::invalid_argument);
  CHECK_THROWS_AS(day07::rmsnorm_vector<float>(nullptr, nullptr, nullptr, nullptr, 100, 1e-5f,
                                               nullptr, 4, nullptr),
                  std::invalid_argument);
  CHECK_THROWS_AS(
      day07::layernorm_backward<float>(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                                       nullptr, nullptr, 4, 0, nullptr, 0, nullptr),
      std::invalid_argument);
  // A workspace smaller than layernorm_backward_workspace_bytes is refused.
  CHECK(day07::layernorm_backward_workspace_bytes(4, 8) == 2 * 4 * 8 * sizeof(float));
  CHECK(day07::layernorm_backward_workspace_bytes(100000, 8) ==
        2 * day07::kBwdMaxParts * 8 * sizeof(float));
  CHECK_THROWS_AS(
      day07::layernorm_backward<day07::bf16>(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                                             nullptr, nullptr, 4, 8, nullptr, 16, nullptr),
      std::invalid_argument);
}
