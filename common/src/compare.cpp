#include "common/compare.hpp"

#include <fmt/format.h>

namespace gpu100 {

std::string CompareResult::summary() const {
  if (ok) {
    return fmt::format("ok: {} elements, max abs {:.3g}, max rel {:.3g}, rel L2 {:.3g}", count,
                       max_abs, max_rel, rel_l2);
  }
  return fmt::format(
      "MISMATCH: {} of {} elements bad, first at [{}]: ref {:.9g} got {:.9g}; max abs {:.3g}, "
      "max rel {:.3g}, rel L2 {:.3g}",
      num_bad, count, first_bad, ref_at_first_bad, got_at_first_bad, max_abs, max_rel, rel_l2);
}

}  // namespace gpu100
