#include "common/sample.hpp"

#include "common/random.hpp"

namespace gpu100 {

Index4 unflatten(const Dims4& d, int64_t i) {
  Index4 x;
  x.w = i % d.w;
  i /= d.w;
  x.h = i % d.h;
  i /= d.h;
  x.c = i % d.c;
  x.n = i / d.c;
  return x;
}

std::vector<int64_t> sample_points(const Dims4& d, int64_t count, uint64_t seed,
                                   int64_t full_limit) {
  const int64_t total = d.size();
  std::vector<int64_t> idx;
  if (total <= full_limit) {
    for (int64_t i = 0; i < total; ++i) idx.push_back(i);
    return idx;
  }
  auto at = [&](int64_t n, int64_t c, int64_t h, int64_t w) {
    return ((n * d.c + c) * d.h + h) * d.w + w;
  };
  for (int64_t n : {int64_t(0), d.n - 1}) {
    for (int64_t c : {int64_t(0), d.c - 1}) {
      for (int64_t w = 0; w < d.w; ++w)
        idx.push_back(at(n, c, 0, w)), idx.push_back(at(n, c, d.h - 1, w));
      for (int64_t h = 0; h < d.h; ++h)
        idx.push_back(at(n, c, h, 0)), idx.push_back(at(n, c, h, d.w - 1));
    }
  }
  for (int64_t i = 0; i < count; ++i) {
    idx.push_back(static_cast<int64_t>(splitmix64(seed * 7919 + uint64_t(i)) % uint64_t(total)));
  }
  return idx;
}

}  // namespace gpu100
