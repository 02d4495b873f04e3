// day07: the CPU references (double), the checks, the strategy description and the registry.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/learner.hpp"
#include "layernorm.cuh"

namespace day07 {

void validate_shape(int64_t rows, int64_t dim) {
  if (rows < 1) throw std::invalid_argument(fmt::format("rows = {} must be at least 1", rows));
  if (rows > std::numeric_limits<int32_t>::max()) {
    throw std::invalid_argument(fmt::format("rows = {} must be below 2^31", rows));
  }
  if (dim < 1 || dim > kMaxDim) {
    throw std::invalid_argument(fmt::format("dim = {} must be in [1, {}]", dim, kMaxDim));
  }
  if (rows * dim > kMaxElements) {
    throw std::invalid_argument(
        fmt::format("rows x dim = {} x {} is more than 2^31 elements", rows, dim));
  }
}

// ---- CPU references ----

void layernorm_forward_cpu(const float* x, const float* gamma, const float* beta, double* y,
                           double* mean, double* rstd, int64_t rows, int64_t dim, double eps) {
  validate_shape(rows, dim);
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    double sum = 0;
    for (int64_t i = 0; i < dim; ++i) sum += xr[i];
    const double m = sum / double(dim);
    double sq = 0;
    for (int64_t i = 0; i < dim; ++i) sq += (xr[i] - m) * (xr[i] - m);
    const double rs = 1.0 / std::sqrt(sq / double(dim) + eps);
    double* yr = y + r * dim;
    for (int64_t i = 0; i < dim; ++i) yr[i] = (xr[i] - m) * rs * gamma[i] + beta[i];
    if (mean != nullptr) mean[r] = m;
    if (rstd != nullptr) rstd[r] = rs;
  }
}

void rmsnorm_cpu(const float* x, const float* gamma, double* y, double* rstd, int64_t rows,
                 int64_t dim, double eps) {
  if (rows < 1 || dim < 1 || rows * dim > kMaxElements) {
    throw std::invalid_argument(fmt::format("rmsnorm_cpu: bad shape {} x {}", rows, dim));
  }
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    double sq = 0;
    for (int64_t i = 0; i < dim; ++i) sq += double(xr[i]) * xr[i];
    const double rs = 1.0 / std::sqrt(sq / double(dim) + eps);
    double* yr = y + r * dim;
    for (int64_t i = 0; i < dim; ++i) yr[i] = xr[i] * rs * gamma[i];
    if (rstd != nullptr) rstd[r] = rs;
  }
}

void layernorm_backward_cpu(const float* dy, const float* x, const float* gamma, double eps,
                            int64_t rows, int64_t dim, double* dx, double* dgamma, double* dbeta,
                            double* dgamma_abs, double* dbeta_abs) {
  validate_shape(rows, dim);
  std::fill(dgamma, dgamma + dim, 0.0);
  std::fill(dbeta, dbeta + dim, 0.0);
  if (dgamma_abs != nullptr) std::fill(dgamma_abs, dgamma_abs + dim, 0.0);
  if (dbeta_abs != nullptr) std::fill(dbeta_abs, dbeta_abs + dim, 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    const float* dyr = dy + r * dim;
    double sum = 0;
    for (int64_t i = 0; i < dim; ++i) sum += xr[i];
    const double m = sum / double(dim);
    double sq = 0;
    for (int64_t i = 0; i < dim; ++i) sq += (xr[i] - m) * (xr[i] - m);
    const double rs = 1.0 / std::sqrt(sq / double(dim) + eps);
    double sum_g = 0, sum_gx = 0;
    for (int64_t i = 0; i < dim; ++i) {
      const double xh = (xr[i] - m) * rs;
      const double g = double(dyr[i]) * gamma[i];
      sum_g += g;
      sum_gx += g * xh;
    }
    const double mean_g = sum_g / double(dim), mean_gx = sum_gx / double(dim);
    double* dxr = dx + r * dim;
    for (int64_t i = 0; i < dim; ++i) {
      const double xh = (xr[i] - m) * rs;
      const double g = double(dyr[i]) * gamma[i];
      dxr[i] = rs * (g - mean_g - xh * mean_gx);
      dgamma[i] += dyr[i] * xh;
      dbeta[i] += dyr[i];
      if (dgamma_abs != nullptr) dgamma_abs[i] += std::fabs(dyr[i] * xh);
      if (dbeta_abs != nullptr) dbeta_abs[i] += std::fabs(dyr[i]);
    }
  }
}

float variance_naive_fp32(const float* x, int64_t n) {
  float sum = 0.f, sq = 0.f;
  for (int64_t i = 0; i < n; ++i) {
    sum += x[i];
    sq += x[i] * x[i];
  }
  const float mean = sum / static_cast<float>(n);
  return std::max(sq / static_cast<float>(n) - mean * mean, 0.f);
}

float variance_welford_fp32(const float* x, int64_t n) {
  float count = 0.f, mean = 0.f, m2 = 0.f;
  for (int64_t i = 0; i < n; ++i) {
    count += 1.f;
    const float delta = x[i] - mean;
    mean += delta / count;
    m2 += delta * (x[i] - mean);
  }
  return m2 / count;
}

// ---- checks ----

gpu100::CompareResult check_param_grad(const std::vector<double>& ref,
                                       const std::vector<double>& abs_sum,
                                       const std::vector<float>& got) {
  gpu100::CompareResult r;
  r.count = ref.size();
  if (got.size() != ref.size() || abs_sum.size() != ref.size()) {
    r.ok = false;
    r.num_bad = 1;
    r.first_bad = 0;
    r.max_abs = r.max_rel = r.rel_l2 = std::numeric_limits<double>::infinity();
    return r;
  }
  double err2 = 0, ref2 = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    // The allowance scales with the column's sum_r |term| (the quantity the bound uses).
    gpu100::record(r, i, ref[i], got[i], kParamGradTol * abs_sum[i] + 1e-6);
    const double d = std::isfinite(got[i]) ? double(got[i]) - ref[i] : 0.0;
    err2 += d * d;
    ref2 += ref[i] * ref[i];
  }
  r.rel_l2 = ref2 > 0 ? std::sqrt(err2 / ref2) : std::sqrt(err2);
  if (r.max_abs == std::numeric_limits<double>::infinity()) r.rel_l2 = r.max_abs;
  return r;
}

std::string register_strategy(int64_t dim, int elem_bytes, bool aligned) {
  const int width = 16 / elem_bytes;
  const bool vec = aligned && dim % width == 0;
  const std::string access =
      vec ? fmt::format("16-byte vectors ({} per access)", width) : std::string("scalar accesses");
  switch (register_group_size(dim)) {
    case 32:
      return "one warp per row (4 rows per block), row in registers, " + access;
    case 128:
      return "128 threads per row, row in registers, " + access;
    case 512:
      return "512 threads per row, row in registers, " + access;
    default:
      return "looped block of 512 per row (row too long for registers), " + access;
  }
}

// ---- the registry ----

namespace {
struct LearnerTag;  // this registry's list of learner entries (common/learner.hpp)
}

void add_learner_variant(const Variant& v) {
  gpu100::learner_entries<Variant, LearnerTag>().push_back(v);
}

const std::vector<Variant>& variants() {
  static const std::vector<Variant> list = gpu100::with_learner<Variant>(
      {
          {"v1_thread_per_row",
           "one thread per row, two passes (mean, then variance) and a third for y; uncoalesced",
           Op::kLayerNorm, false, true, false, layernorm_v1_thread_per_row, nullptr},
          {"v2_block_tree",
           "one block of 256 per row, coalesced, shared-memory tree of sum x and sum x^2 "
           "(naive E[x^2] - E[x]^2)",
           Op::kLayerNorm, true, true, false, layernorm_v2_block_tree, nullptr},
          {"v3_warp_shuffle",
           "one warp per row, shuffle reductions, no barrier (naive E[x^2] - E[x]^2)",
           Op::kLayerNorm, true, true, false, layernorm_v3_warp_shuffle, nullptr},
          {"v4_welford",
           "v3 with Welford's single-pass statistics merged by Chan's formula (stable)",
           Op::kLayerNorm, false, true, false, layernorm_v4_welford, nullptr},
          {"v5_registers",
           "row held in registers, x read once, 16-byte loads and stores, exact two-pass "
           "statistics; warp / 128 / 512 threads per row by D",
           Op::kLayerNorm, false, true, false, layernorm_v5_registers, nullptr, true},
          {"v6_bf16", "v5 with bf16 x, gamma, beta and y (fp32 math, fp32 mean and rstd)",
           Op::kLayerNorm, false, false, true, nullptr, layernorm_v6_bf16, true},
          {"rmsnorm_rows", "RMSNorm, rows x D: v5's kernel without the mean (fp32 and bf16)",
           Op::kRmsNormRows, false, true, true, nullptr, nullptr},
          {"rmsnorm_vector",
           "RMSNorm of one vector of rows x D elements over many blocks: partial sums of squares, "
           "then scale (x read twice)",
           Op::kRmsNormVector, false, true, false, nullptr, nullptr},
          {"backward_fused",
           "LayerNorm backward: dx with x and dy in registers, per-block dgamma / dbeta partials "
           "in "
           "registers, then a column reduction (no atomics)",
           Op::kBackward, false, true, true, nullptr, nullptr},
      },
      gpu100::learner_entries<Variant, LearnerTag>());
  return list;
}

const Variant* find_variant(const std::string& name) {
  for (const auto& v : variants()) {
    if (name == v.name) return &v;
  }
  return nullptr;
}

}  // namespace day07
