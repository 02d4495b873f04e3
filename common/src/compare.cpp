#include "common/compare.hpp"

#include <fmt/format.h>

#include <cmath>

namespace gpu100 {

std::string CompareResult::summary() const {
  if (ok) {
    return fmt::format("ok: {} elements, max abs {:.3g}, err/tol {:.3g}, rel L2 {:.3g}", count,
                       max_abs, err_over_tol, rel_l2);
  }
  return fmt::format(
      "MISMATCH: {} of {} elements bad, first at [{}]: ref {:.9g} got {:.9g}; max abs {:.3g}, "
      "err/tol {:.3g}, rel L2 {:.3g}",
      num_bad, count, first_bad, ref_at_first_bad, got_at_first_bad, max_abs, err_over_tol, rel_l2);
}

CompareResult worst_of(const std::vector<CompareResult>& parts) {
  CompareResult out;
  for (const auto& p : parts) {
    if (!p.ok && out.ok) {  // the first failing part's first bad element
      out.first_bad = p.first_bad;
      out.ref_at_first_bad = p.ref_at_first_bad;
      out.got_at_first_bad = p.got_at_first_bad;
      out.ok = false;
    }
    out.count += p.count;
    out.num_bad += p.num_bad;
    out.max_abs = std::fmax(out.max_abs, p.max_abs);
    out.max_rel = std::fmax(out.max_rel, p.max_rel);
    out.rel_l2 = std::fmax(out.rel_l2, p.rel_l2);
    out.err_over_tol = std::fmax(out.err_over_tol, p.err_over_tol);
  }
  return out;
}

}  // namespace gpu100
