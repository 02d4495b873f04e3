// day06 GPU tests: every reduction and every scan, fp32 and int32, inclusive and exclusive, at
// awkward sizes with fresh seeded inputs and the outputs poisoned first; v6 under many waiting
// tiles and repeated runs; in place; bad sizes.
#include <algorithm>
#include <stdexcept>
#include <vector>

#include "common/tags.hpp"
#include "test_suite.hpp"

using day06_tests::input;
using day06_tests::kSizes;
using day06_tests::sync_check;

namespace {

// The sizes a scan variant accepts: the list up to its maximum, and the maximum itself.
std::vector<int64_t> sizes_for(const day06::ScanVariant& v) {
  std::vector<int64_t> out;
  for (int64_t n : gpu100::test_sizes(kSizes)) {
    if (n <= v.max_n) out.push_back(n);
  }
  if (v.max_n < day06::kMaxN) out.push_back(v.max_n);
  return out;
}

template <typename T>
std::vector<T> run_scan(const day06::ScanVariant& v, const std::vector<T>& x, bool exclusive,
                        bool in_place) {
  const int64_t n = static_cast<int64_t>(x.size());
  const size_t ws_bytes = v.workspace_bytes(n);
  gpu100::DeviceBuffer<T> d_x(n), d_y(n);
  gpu100::DeviceBuffer<char> ws(std::max<size_t>(ws_bytes, 1));
  d_x.upload(x);
  d_y.poison();
  T* out = in_place ? d_x.data() : d_y.data();
  day06::launcher<T>(v)(d_x.data(), out, n, exclusive, ws.data(), ws_bytes, nullptr);
  sync_check();
  return in_place ? d_x.download() : d_y.download();
}

template <typename T>
void check_all_scans(bool exclusive, uint64_t seed) {
  for (const auto& v : day06::scan_variants()) {
    for (int64_t n : sizes_for(v)) {
      INFO(v.name << " " << day06::precision_name<T>() << (exclusive ? " exclusive" : "")
                  << ", n = " << n);
      const std::vector<T> x = input<T>(n, ++seed);
      const gpu100::CompareResult cmp =
          day06::check_scan(x, run_scan(v, x, exclusive, false), exclusive);
      INFO(cmp.summary());
      REQUIRE(cmp.ok);
    }
  }
}

template <typename T>
void check_all_reductions(uint64_t seed) {
  for (const auto& v : day06::reduce_variants()) {
    if (!gpu100::has_tag(v.tags, "mine")) day06_tests::check_reduction<T>(v, seed += 1000);
  }
}

}  // namespace

TEST_CASE("every reduction matches the CPU at awkward sizes in fp32", "[gpu]") {
  GPU100_REQUIRE_GPU();
  check_all_reductions<float>(100);
}

TEST_CASE("every reduction matches the CPU exactly at awkward sizes in int32", "[gpu]") {
  GPU100_REQUIRE_GPU();
  check_all_reductions<int32_t>(200);
}

TEST_CASE("every reduction writes 0 for n = 0 and rejects a negative n", "[gpu]") {
  GPU100_REQUIRE_GPU();
  for (const auto& v : day06::reduce_variants()) {
    if (!gpu100::has_tag(v.tags, "mine")) day06_tests::check_reduction_bad_sizes(v);
  }
}

TEST_CASE("every inclusive scan matches the CPU in fp32", "[gpu]") {
  GPU100_REQUIRE_GPU();
  check_all_scans<float>(false, 1000);
}

TEST_CASE("every inclusive scan matches the CPU exactly in int32", "[gpu]") {
  GPU100_REQUIRE_GPU();
  check_all_scans<int32_t>(false, 2000);
}

TEST_CASE("every exclusive scan matches the CPU in fp32 and int32", "[gpu]") {
  GPU100_REQUIRE_GPU();
  check_all_scans<float>(true, 3000);
  check_all_scans<int32_t>(true, 4000);
}

TEST_CASE("the scans work in place", "[gpu]") {
  GPU100_REQUIRE_GPU();
  uint64_t seed = 5000;
  for (const auto& v : day06::scan_variants()) {
    if (v.is_library) continue;
    for (int64_t n : gpu100::test_sizes({5, 1000, 65541, 1000003})) {
      if (n > v.max_n) continue;
      INFO(v.name << ", n = " << n);
      const std::vector<int32_t> x = input<int32_t>(n, ++seed);
      REQUIRE(day06::check_scan(x, run_scan(v, x, false, true), false).ok);
    }
  }
}

TEST_CASE("v6 is correct when many tiles wait on their predecessors", "[gpu]") {
  GPU100_REQUIRE_GPU();
  const day06::ScanVariant* v = day06::find_scan_variant("v6_decoupled_lookback");
  REQUIRE(v != nullptr);
  // 2^26 + 5 elements: 2521 tiles of 26624, far more than fit on the GPU at once (3 per SM), so
  // most look-backs find aggregates and walk several windows back.
  for (int64_t n : gpu100::test_sizes({(int64_t(1) << 26) + 5})) {
    const std::vector<int32_t> xi = input<int32_t>(n, 6001);
    REQUIRE(day06::check_scan(xi, run_scan(*v, xi, false, false), false).ok);
    const std::vector<float> xf = input<float>(n, 6002);
    const gpu100::CompareResult cmp = day06::check_scan(xf, run_scan(*v, xf, true, false), true);
    INFO(cmp.summary());
    REQUIRE(cmp.ok);
  }
}

TEST_CASE("v6 is correct with either tile size, at sizes the sanitizers run", "[gpu]") {
  GPU100_REQUIRE_GPU();
  // The big tiles (26624 elements: 8192 through registers, 18432 staged in shared memory by a
  // bulk copy) are what v6 picks above ~5.3 M elements; here both sizes are forced at small n:
  // part of a tile, whole tiles plus a partial one, and many tiles.
  uint64_t seed = 6300;
  for (int64_t n : gpu100::test_sizes({1000, 2 * 26624 + 777, 40 * 26624 + 3})) {
    for (day06::V6Tiles tiles : {day06::V6Tiles::kSmall, day06::V6Tiles::kBig}) {
      for (bool exclusive : {false, true}) {
        INFO("n = " << n << (tiles == day06::V6Tiles::kBig ? " big" : " small") << " tiles"
                    << (exclusive ? ", exclusive" : ""));
        const std::vector<int32_t> xi = input<int32_t>(n, ++seed);
        const std::vector<float> xf = input<float>(n, ++seed);
        const size_t ws_bytes = day06::scan_v6_workspace_bytes(n);
        gpu100::DeviceBuffer<char> ws(ws_bytes);
        gpu100::DeviceBuffer<int32_t> d_xi(n), d_yi(n);
        gpu100::DeviceBuffer<float> d_xf(n), d_yf(n);
        d_xi.upload(xi);
        d_xf.upload(xf);
        d_yi.poison();
        d_yf.poison();
        day06::scan_v6_tiles(d_xi.data(), d_yi.data(), n, exclusive, tiles, ws.data(), ws_bytes,
                             nullptr);
        sync_check();
        REQUIRE(day06::check_scan(xi, d_yi.download(), exclusive).ok);
        day06::scan_v6_tiles(d_xf.data(), d_yf.data(), n, exclusive, tiles, ws.data(), ws_bytes,
                             nullptr);
        sync_check();
        const gpu100::CompareResult cmp = day06::check_scan(xf, d_yf.download(), exclusive);
        INFO(cmp.summary());
        REQUIRE(cmp.ok);
      }
    }
  }
}

TEST_CASE("v6 is correct when the pointers are not 16-byte aligned", "[gpu]") {
  GPU100_REQUIRE_GPU();
  const day06::ScanVariant* v = day06::find_scan_variant("v6_decoupled_lookback");
  REQUIRE(v != nullptr);
  // One element past an aligned allocation: no 16-byte loads, stores or bulk copies; every tile
  // takes the path the last tile of an aligned run takes (small tiles, then big ones).
  uint64_t seed = 6500;
  for (int64_t n : gpu100::test_sizes({26625, (int64_t(1) << 23) + 5})) {
    for (bool exclusive : {false, true}) {
      INFO("n = " << n << (exclusive ? " exclusive" : ""));
      const std::vector<int32_t> x = input<int32_t>(n, ++seed);
      const size_t ws_bytes = v->workspace_bytes(n);
      gpu100::DeviceBuffer<int32_t> d_x(n + 1), d_y(n + 1);
      gpu100::DeviceBuffer<char> ws(ws_bytes);
      CUDA_CHECK(cudaMemcpy(d_x.data() + 1, x.data(), static_cast<size_t>(n) * sizeof(int32_t),
                            cudaMemcpyHostToDevice));
      d_y.poison();
      v->int32(d_x.data() + 1, d_y.data() + 1, n, exclusive, ws.data(), ws_bytes, nullptr);
      sync_check();
      const std::vector<int32_t> all = d_y.download();
      const std::vector<int32_t> y(all.begin() + 1, all.end());
      REQUIRE(day06::check_scan(x, y, exclusive).ok);
    }
  }
}

TEST_CASE("v6 gives identical int32 results over repeated runs", "[gpu]") {
  GPU100_REQUIRE_GPU();
  const day06::ScanVariant* v = day06::find_scan_variant("v6_decoupled_lookback");
  REQUIRE(v != nullptr);
  const int64_t n = gpu100::test_sizes({int64_t(1) << 22}).empty() ? 65537 : (int64_t(1) << 22) + 9;
  const std::vector<int32_t> x = input<int32_t>(n, 7001);
  std::vector<int32_t> ref(static_cast<size_t>(n));
  day06::scan_cpu(x.data(), ref.data(), n, false);
  const size_t ws_bytes = v->workspace_bytes(n);
  gpu100::DeviceBuffer<int32_t> d_x(n), d_y(n);
  gpu100::DeviceBuffer<char> ws(ws_bytes);
  d_x.upload(x);
  for (int run = 0; run < 25; ++run) {
    INFO("run " << run);
    d_y.poison();
    v->int32(d_x.data(), d_y.data(), n, false, ws.data(), ws_bytes, nullptr);
    sync_check();
    REQUIRE(d_y.download() == ref);
  }
}

TEST_CASE("bad sizes are rejected with invalid_argument", "[gpu]") {
  GPU100_REQUIRE_GPU();
  gpu100::DeviceBuffer<float> d(8);
  for (const auto& v : day06::scan_variants()) {
    INFO(v.name);
    CHECK_THROWS_AS(v.fp32(d.data(), d.data(), -1, false, nullptr, 0, nullptr),
                    std::invalid_argument);
    if (v.max_n < day06::kMaxN) {
      CHECK_THROWS_AS(v.fp32(d.data(), d.data(), v.max_n + 1, false, nullptr, 0, nullptr),
                      std::invalid_argument);
    }
  }
  // A workspace that is too small is rejected too.
  const day06::ScanVariant* v6 = day06::find_scan_variant("v6_decoupled_lookback");
  CHECK_THROWS_AS(v6->fp32(d.data(), d.data(), 8, false, nullptr, 0, nullptr),
                  std::invalid_argument);
  // n == 0 launches nothing.
  for (const auto& v : day06::scan_variants())
    v.fp32(d.data(), d.data(), 0, false, nullptr, 0, nullptr);
  sync_check();
}
