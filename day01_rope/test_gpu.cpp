// day01 GPU tests: every variant against the fp64 CPU reference at awkward shapes, both pairings,
// with fresh seeded random inputs and the outputs poisoned with NaN before each launch; in place;
// misaligned pointers (the 16-byte variants must fall back); bad shapes rejected.
#include <cmath>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include "common/tags.hpp"
#include "test_suite.hpp"

using namespace day01_tests;

TEST_CASE("every variant matches the fp64 reference at awkward shapes", "[gpu]") {
  GPU100_REQUIRE_GPU();
  uint64_t seed = 1000;
  for (const auto& v : day01::variants()) {
    if (gpu100::has_tag(v.tags, "mine")) continue;  // checked by its own test cases
    check_all_shapes(v, seed += 100);
  }
}

TEST_CASE("every variant works in place (q_out == q, k_out == k)", "[gpu]") {
  GPU100_REQUIRE_GPU();
  const std::vector<Shape> shapes = {{2, 7, 3, 1, 6, 4093}, {1, 7, 3, 1, 128, 5}};
  for (const auto& v : day01::variants()) {
    if (gpu100::has_tag(v.tags, "mine")) continue;  // checked by its own test cases
    for (RopeStyle style : {RopeStyle::kInterleaved, RopeStyle::kHalfSplit}) {
      for (const Shape& s : shapes) {
        const RopeParams p = to_params(s, style);
        INFO("variant " << v.name << ", " << day01::style_name(style) << ", D=" << p.dim);
        check_variant(v, p, 77, Mode::kInPlace);
      }
    }
  }
}

TEST_CASE("pointers that are not 16-byte aligned take the fallback path", "[gpu]") {
  GPU100_REQUIRE_GPU();
  const std::vector<Shape> shapes = {{1, 7, 3, 1, 64, 0}, {2, 5, 1, 2, 128, 4093}};
  for (const auto& v : day01::variants()) {
    if (gpu100::has_tag(v.tags, "mine")) continue;  // checked by its own test cases
    for (RopeStyle style : {RopeStyle::kInterleaved, RopeStyle::kHalfSplit}) {
      for (const Shape& s : shapes) {
        const RopeParams p = to_params(s, style);
        INFO("variant " << v.name << ", " << day01::style_name(style) << ", D=" << p.dim);
        check_variant(v, p, 99, Mode::kMisaligned);
      }
    }
  }
}

TEST_CASE("bad shapes and a table that does not fit are rejected before any launch", "[gpu]") {
  GPU100_REQUIRE_GPU();
  RopeParams good;
  good.batch = 1, good.seq = 4, good.q_heads = 2, good.kv_heads = 1, good.dim = 8;
  const day01::RopeTable table(good);
  gpu100::DeviceBuffer<float> f(64);
  gpu100::DeviceBuffer<__nv_bfloat16> h(64);
  f.poison();
  h.poison();

  std::vector<RopeParams> bad(6, good);
  bad[0].dim = 7;
  bad[1].dim = 0;
  bad[2].seq = 0;
  bad[3].q_heads = -1;
  bad[4].pos_offset = -1;
  bad[5].batch = 0;
  RopeParams beyond_table = good;
  beyond_table.pos_offset = 1;  // needs position 4; the table stops at 3
  RopeParams other_dim = good;
  other_dim.dim = 4;  // the table was built for D = 8

  for (const auto& v : day01::variants()) {
    if (gpu100::has_tag(v.tags, "mine")) continue;  // checked by its own test cases
    INFO("variant " << v.name);
    std::vector<RopeParams> rejected = bad;
    if (!v.fp32_angles) {  // v1 computes its own angles and never reads the table
      rejected.push_back(beyond_table);
      rejected.push_back(other_dim);
    }
    for (const RopeParams& p : rejected) {
      INFO("B=" << p.batch << " S=" << p.seq << " Hq=" << p.q_heads << " D=" << p.dim
                << " pos0=" << p.pos_offset);
      if (v.precision == day01::Precision::kFp32) {
        CHECK_THROWS_AS(v.launch_fp32(f.data(), f.data(), f.data(), f.data(), p, table, nullptr),
                        std::invalid_argument);
      } else {
        CHECK_THROWS_AS(v.launch_bf16(h.data(), h.data(), h.data(), h.data(), p, table, nullptr),
                        std::invalid_argument);
      }
    }
  }
  CUDA_CHECK(cudaDeviceSynchronize());
  for (float x : f.download()) CHECK(std::isnan(x));  // untouched
  for (float x : gpu100::convert_to_float(h.download())) CHECK(std::isnan(x));
  CHECK(cudaGetLastError() == cudaSuccess);
}
