#pragma once
// Sampled checks: the outputs a large result is checked at when a CPU reference of every output
// would take minutes, and the GPU's values there. The drivers and the tests of days 04, 08 and the
// capstone share them.
#include <cstdint>
#include <vector>

#include "common/compare.hpp"

namespace gpu100 {

// A 4-D tensor's extents, e.g. an NCHW activation or an NKPQ convolution output.
struct Dims4 {
  int64_t n = 1, c = 1, h = 1, w = 1;
  int64_t size() const { return n * c * h * w; }
};
struct Index4 {
  int64_t n, c, h, w;
};
// The coordinates of the flat (row-major) index i.
Index4 unflatten(const Dims4& d, int64_t i);

// Every flat index when the tensor has at most `full_limit` elements. Otherwise the borders of
// four planes (the first and last n, each with the first and last c: rows 0 and H-1, columns 0
// and W-1, where padding bugs show) and then `count` pseudo-random indices drawn from `seed`.
std::vector<int64_t> sample_points(const Dims4& d, int64_t count, uint64_t seed,
                                   int64_t full_limit);

// The values of `all` at `idx`, as floats (bf16 and fp16 through float).
template <typename T>
std::vector<float> gather(const std::vector<T>& all, const std::vector<int64_t>& idx) {
  std::vector<float> out(idx.size());
  for (size_t j = 0; j < idx.size(); ++j) out[j] = static_cast<float>(to_double(all[idx[j]]));
  return out;
}

}  // namespace gpu100
