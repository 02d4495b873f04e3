// day03 diffusion step, the host side: the argument check, the CPU reference, the check with its
// tolerance, and the registry (kernels in diffusion.cu).
#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "vector_add_variants.cuh"

namespace day03 {

namespace {

// One rounding of a double to T, to nearest even.
template <typename T>
T round_once(double v) {
  if constexpr (std::is_same_v<T, __half>) {
    return __double2half(v);
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __double2bfloat16(v);
  } else {
    return static_cast<T>(v);
  }
}

// M = w (a |x_t| + b |eps|) + (1 - w) |prev| with a = 1 / sqrt(abar), b = sqrt(1 - abar) /
// sqrt(abar) taken once per call (the check runs it on every element).
struct Magnitude {
  double a, b, w;
  explicit Magnitude(const DiffusionStep& step)
      : a(1.0 / std::sqrt(step.abar)), b(std::sqrt(1.0 - step.abar) * a), w(step.w) {}
  double operator()(double x_t, double eps, double prev) const {
    return w * (a * std::fabs(x_t) + b * std::fabs(eps)) + (1.0 - w) * std::fabs(prev);
  }
};

}  // namespace

void check_diffusion_step(const DiffusionStep& step, const char* who) {
  // Written so that NaN fails: every comparison with a NaN is false.
  if (!(step.abar > 0.0 && step.abar <= 1.0)) {
    throw std::invalid_argument(fmt::format("{}: abar must be in (0, 1], got {}", who, step.abar));
  }
  if (!(step.w >= 0.0 && step.w <= 1.0)) {
    throw std::invalid_argument(fmt::format("{}: w must be in [0, 1], got {}", who, step.w));
  }
}

template <typename T>
void diffusion_cpu(const T* x_t, const T* eps, const T* prev, T* out, int64_t n,
                   const DiffusionStep& step) {
  if (n < 0) {
    throw std::invalid_argument("diffusion_cpu: n must be >= 0, got " + std::to_string(n));
  }
  check_diffusion_step(step, "diffusion_cpu");
  const double s = std::sqrt(1.0 - step.abar), r = std::sqrt(step.abar);
  for (int64_t i = 0; i < n; ++i) {
    const double x0 = (gpu100::to_double(x_t[i]) - s * gpu100::to_double(eps[i])) / r;
    const double y = step.w * x0 + (1.0 - step.w) * gpu100::to_double(prev[i]);
    out[i] = round_once<T>(y < -1.0 ? -1.0 : (y > 1.0 ? 1.0 : y));
  }
}

double diffusion_magnitude(double x_t, double eps, double prev, const DiffusionStep& step) {
  return Magnitude(step)(x_t, eps, prev);
}

template <typename T>
gpu100::CompareResult check_diffusion(const std::vector<T>& x_t, const std::vector<T>& eps,
                                      const std::vector<T>& prev, const std::vector<T>& ref,
                                      const std::vector<T>& got, const DiffusionStep& step,
                                      int roundings) {
  check_diffusion_step(step, "check_diffusion");
  const double inf = std::numeric_limits<double>::infinity();
  gpu100::CompareResult r;
  r.count = ref.size();
  if (got.size() != ref.size() || x_t.size() != ref.size() || eps.size() != ref.size() ||
      prev.size() != ref.size()) {
    r.ok = false;
    r.num_bad = 1;
    r.first_bad = 0;
    r.max_abs = r.max_rel = r.rel_l2 = r.err_over_tol = inf;
    return r;
  }
  const Magnitude magnitude(step);
  double err2 = 0, ref2 = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double want = gpu100::to_double(ref[i]), have = gpu100::to_double(got[i]);
    const double m =
        magnitude(gpu100::to_double(x_t[i]), gpu100::to_double(eps[i]), gpu100::to_double(prev[i]));
    gpu100::record(r, i, want, have, diffusion_allowance<T>(m, roundings));  // NaN fails
    if (std::isfinite(have)) {
      err2 += (have - want) * (have - want);
      ref2 += want * want;
    }
  }
  r.rel_l2 = r.max_abs == inf ? inf : (ref2 > 0 ? std::sqrt(err2 / ref2) : std::sqrt(err2));
  return r;
}

template <typename T>
const std::vector<DiffusionVariant<T>>& diffusion_variants() {
  static const std::vector<DiffusionVariant<T>> kDiffusion = {
      {"diffusion_chain",
       "7 kernels, one per operation, intermediates stored as T: mul, sub, div, mul, mul, add, "
       "clamp",
       7, 2 + 3 + 2 + 2 + 2 + 3 + 2, 6, diffusion_chain<T>},
      {"diffusion_fused",
       "one kernel: x0 and the blend in registers, coefficients folded on the host", 1, 3 + 1, 1,
       diffusion_fused<T>},
  };
  return kDiffusion;
}

template void diffusion_cpu<float>(const float*, const float*, const float*, float*, int64_t,
                                   const DiffusionStep&);
template void diffusion_cpu<__half>(const __half*, const __half*, const __half*, __half*, int64_t,
                                    const DiffusionStep&);
template void diffusion_cpu<__nv_bfloat16>(const __nv_bfloat16*, const __nv_bfloat16*,
                                           const __nv_bfloat16*, __nv_bfloat16*, int64_t,
                                           const DiffusionStep&);
template gpu100::CompareResult check_diffusion<float>(
    const std::vector<float>&, const std::vector<float>&, const std::vector<float>&,
    const std::vector<float>&, const std::vector<float>&, const DiffusionStep&, int);
template gpu100::CompareResult check_diffusion<__half>(
    const std::vector<__half>&, const std::vector<__half>&, const std::vector<__half>&,
    const std::vector<__half>&, const std::vector<__half>&, const DiffusionStep&, int);
template gpu100::CompareResult check_diffusion<__nv_bfloat16>(const std::vector<__nv_bfloat16>&,
                                                              const std::vector<__nv_bfloat16>&,
                                                              const std::vector<__nv_bfloat16>&,
                                                              const std::vector<__nv_bfloat16>&,
                                                              const std::vector<__nv_bfloat16>&,
                                                              const DiffusionStep&, int);
template const std::vector<DiffusionVariant<float>>& diffusion_variants<float>();
template const std::vector<DiffusionVariant<__half>>& diffusion_variants<__half>();
template const std::vector<DiffusionVariant<__nv_bfloat16>>& diffusion_variants<__nv_bfloat16>();

}  // namespace day03
