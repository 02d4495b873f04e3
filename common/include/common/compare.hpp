#pragma once
// Compares a GPU result with a reference, element by element, in double precision.
//
// Every check in the repository has one shape: each element i has an allowance (the error its
// rule permits) and passes when |got_i - ref_i| <= allowance_i. compare() uses the llm.c /
// numpy.isclose rule, allowance = abs_tol + rel_tol * |ref|; a day whose bound depends on more
// than the element (day05's sum_j p_j |v_j|, day06's prefix of |x|) passes its own allowance to
// record(). The result's err_over_tol is the largest |got - ref| / allowance: the check passes
// when it is <= 1, whatever the day. NaN never passes: a NaN in `got` (an element the kernel
// never wrote, since outputs are poisoned with NaN) fails even where the allowance is infinite.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

namespace gpu100 {

struct CompareResult {
  size_t count = 0;
  size_t num_bad = 0;
  int64_t first_bad = -1;  // index of the first failing element, -1 if none
  double max_abs = 0;      // max |got - ref|; +inf when got holds a NaN or an inf where ref doesn't
  double max_rel = 0;      // max |got - ref| / |ref| (over elements with ref != 0)
  double rel_l2 = 0;       // ||got - ref||_2 / ||ref||_2
  double err_over_tol = 0;  // max |got - ref| / allowance: <= 1 when every element passes
  double ref_at_first_bad = 0, got_at_first_bad = 0;
  bool ok = true;

  std::string summary() const;  // one line, for test failure messages
};

// Records one element: its error |got - ref| against `allowance`, the error its rule permits.
// Updates every field but rel_l2 (see compare()) and count.
inline void record(CompareResult& r, size_t i, double ref, double got, double allowance) {
  const double inf = std::numeric_limits<double>::infinity();
  const double diff = std::isfinite(got) && std::isfinite(ref) ? std::fabs(got - ref) : inf;
  const bool good = diff <= allowance;
  if (diff > r.max_abs) r.max_abs = diff;
  if (ref != 0) r.max_rel = std::fmax(r.max_rel, diff / std::fabs(ref));
  r.err_over_tol = std::fmax(r.err_over_tol, allowance > 0 ? diff / allowance : (good ? 0 : inf));
  if (!good) {
    if (r.first_bad < 0) {
      r.first_bad = static_cast<int64_t>(i);
      r.ref_at_first_bad = ref;
      r.got_at_first_bad = got;
    }
    ++r.num_bad;
    r.ok = false;
  }
}

// The check of several outputs as one: ok when every part is ok, the counts added, the largest
// errors, and the first failing part's first bad element.
CompareResult worst_of(const std::vector<CompareResult>& parts);

// Conversion to double. Arithmetic types convert directly; __half and __nv_bfloat16 (and any
// other type with a conversion to float) go through float.
template <typename T>
inline double to_double(T x) {
  if constexpr (std::is_arithmetic_v<T>) {
    return static_cast<double>(x);
  } else {
    return static_cast<double>(static_cast<float>(x));
  }
}

template <typename Ref, typename Got>
CompareResult compare(const Ref* ref, const Got* got, size_t n, double abs_tol, double rel_tol) {
  CompareResult r;
  r.count = n;
  double err2 = 0, ref2 = 0;
  for (size_t i = 0; i < n; ++i) {
    const double a = to_double(ref[i]);
    const double b = to_double(got[i]);
    if (std::isfinite(a) && std::isfinite(b)) {
      record(r, i, a, b, abs_tol + rel_tol * std::fabs(a));
      err2 += (b - a) * (b - a);
      ref2 += a * a;
    } else if ((std::isnan(a) && std::isnan(b)) || (std::isinf(a) && a == b)) {
      continue;  // a NaN or an inf of the reference, matched
    } else {
      record(r, i, a, b, 0.0);  // any other NaN or inf fails
      r.max_rel = std::numeric_limits<double>::infinity();
    }
  }
  const double inf = std::numeric_limits<double>::infinity();
  r.rel_l2 = r.max_abs == inf ? inf : (ref2 > 0 ? std::sqrt(err2 / ref2) : std::sqrt(err2));
  return r;
}

template <typename RefVec, typename GotVec>
CompareResult compare(const RefVec& ref, const GotVec& got, double abs_tol, double rel_tol) {
  if (ref.size() != got.size()) {
    CompareResult r;
    r.ok = false;
    r.count = ref.size();
    r.first_bad = static_cast<int64_t>(std::min(ref.size(), got.size()));
    r.num_bad = 1;
    r.max_abs = r.max_rel = r.rel_l2 = r.err_over_tol = std::numeric_limits<double>::infinity();
    return r;
  }
  return compare(ref.data(), got.data(), ref.size(), abs_tol, rel_tol);
}

// Exact comparison (tolerance 0), for integer results and correctly rounded fp adds. Identical
// bytes are checked first, which is much faster at 2^28 elements; any difference goes through
// compare() for the numbers and the summary (so -0 and +0 still count as equal).
template <typename Vec>
CompareResult compare_exact(const Vec& ref, const Vec& got) {
  if (ref.size() == got.size() &&
      std::memcmp(ref.data(), got.data(), ref.size() * sizeof(ref[0])) == 0) {
    CompareResult same;
    same.count = ref.size();
    return same;
  }
  return compare(ref, got, 0.0, 0.0);
}

}  // namespace gpu100
