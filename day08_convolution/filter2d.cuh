#pragma once
// day08's 2D filters, one file per variant (filter2d_f1_naive.cu ... filter2d_f6_pipelined.cu):
// what every file needs, the dispatch from a run-time mask width to the kernel template for it.
#include <type_traits>

namespace day08::filter2d_detail {

template <typename F>
inline void dispatch_width(int mask_width, F&& f) {
  switch (mask_width) {
    case 1:
      f(std::integral_constant<int, 1>{});
      break;
    case 3:
      f(std::integral_constant<int, 3>{});
      break;
    case 5:
      f(std::integral_constant<int, 5>{});
      break;
    default:
      f(std::integral_constant<int, 7>{});
      break;
  }
}

}  // namespace day08::filter2d_detail
