// capstone CPU tests of the activation arena's planner (resnet_arena.hpp): placements worked out
// by hand, alignment, bad lifetimes, the validity check itself, and seeded random tensor sets
// against the two bounds every plan must meet (the peak of the live bytes below, the sum of the
// aligned sizes above).
#include <algorithm>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <vector>

#include "common/catch.hpp"
#include "resnet_arena.hpp"

namespace {

using capstone::resnet::arena_plan_valid;
using capstone::resnet::ArenaPlan;
using capstone::resnet::ArenaTensor;
using capstone::resnet::kArenaAlign;
using capstone::resnet::plan_arena;

// The most bytes live at any one step.
size_t peak_live_bytes(const std::vector<ArenaTensor>& tensors) {
  int last_step = 0;
  for (const ArenaTensor& t : tensors) last_step = std::max(last_step, t.last);
  size_t peak = 0;
  for (int step = 0; step <= last_step; ++step) {
    size_t live = 0;
    for (const ArenaTensor& t : tensors) {
      if (t.first <= step && step <= t.last) live += t.bytes;
    }
    peak = std::max(peak, live);
  }
  return peak;
}

size_t aligned_sum(const std::vector<ArenaTensor>& tensors) {
  size_t sum = 0;
  for (const ArenaTensor& t : tensors)
    sum += (t.bytes + kArenaAlign - 1) / kArenaAlign * kArenaAlign;
  return sum;
}

}  // namespace

TEST_CASE("resnet: arena chain a -> b -> c puts c where a was", "[cpu]") {
  // a is read by the step that writes b, b by the step that writes c: a and c never meet.
  const std::vector<ArenaTensor> t = {{1000, 0, 1}, {1000, 1, 2}, {1000, 2, 3}};
  const ArenaPlan p = plan_arena(t);
  // Equal sizes keep the input order: a at 0, b after a (1000 rounded up to 1024), c back at 0.
  REQUIRE(p.offsets == std::vector<size_t>{0, 1024, 0});
  CHECK(p.bytes == 2024);
  CHECK(arena_plan_valid(t, p));
}

TEST_CASE("resnet: arena tensors with disjoint lifetimes share offset 0", "[cpu]") {
  const std::vector<ArenaTensor> t = {{300, 0, 0}, {5000, 1, 1}, {70, 2, 4}, {5000, 5, 5}};
  const ArenaPlan p = plan_arena(t);
  REQUIRE(p.offsets == std::vector<size_t>{0, 0, 0, 0});
  CHECK(p.bytes == 5000);  // the largest tensor
  CHECK(arena_plan_valid(t, p));
}

TEST_CASE("resnet: arena tensors that are all live at once take their sum", "[cpu]") {
  const std::vector<ArenaTensor> t = {{256, 0, 5}, {768, 2, 3}, {512, 3, 9}};
  const ArenaPlan p = plan_arena(t);
  // Largest first: 768 at 0, 512 at 768, 256 at 1280.
  REQUIRE(p.offsets == std::vector<size_t>{1280, 0, 768});
  CHECK(p.bytes == 1536);
  CHECK(arena_plan_valid(t, p));
}

TEST_CASE("resnet: arena offsets are aligned and a gap between tensors is reused", "[cpu]") {
  // Odd sizes: every offset still a multiple of 256.
  const std::vector<ArenaTensor> odd = {{1, 0, 2}, {3, 0, 2}, {300, 0, 2}};
  const ArenaPlan p = plan_arena(odd);
  REQUIRE(p.offsets == std::vector<size_t>{768, 512, 0});
  CHECK(p.bytes == 769);
  for (size_t off : p.offsets) CHECK(off % kArenaAlign == 0);
  // a, b, c (equal sizes, input order) stack up at 0, 1024, 2048; d (step 2-3, smaller, so placed
  // last) meets a and c but not b, and takes the gap b left between them.
  const std::vector<ArenaTensor> gap = {{1024, 0, 4}, {1024, 0, 1}, {1024, 0, 4}, {1000, 2, 3}};
  const ArenaPlan g = plan_arena(gap);
  REQUIRE(g.offsets == std::vector<size_t>{0, 1024, 2048, 1024});
  CHECK(g.bytes == 3072);
  CHECK(arena_plan_valid(gap, g));
}

TEST_CASE("resnet: arena edge cases: nothing, empty tensors, a bad lifetime", "[cpu]") {
  const ArenaPlan none = plan_arena({});
  CHECK(none.offsets.empty());
  CHECK(none.bytes == 0);
  const std::vector<ArenaTensor> empty = {{0, 0, 3}, {512, 0, 3}, {0, 1, 1}};
  const ArenaPlan e = plan_arena(empty);
  CHECK(e.offsets == std::vector<size_t>{0, 0, 0});
  CHECK(e.bytes == 512);
  CHECK(arena_plan_valid(empty, e));
  CHECK_THROWS_AS(plan_arena({{64, 0, 1}, {64, 3, 2}}), std::invalid_argument);
}

TEST_CASE("resnet: arena validity check rejects overlaps, misalignment and short plans", "[cpu]") {
  const std::vector<ArenaTensor> t = {{1000, 0, 1}, {1000, 1, 2}, {1000, 2, 3}};
  const ArenaPlan good = plan_arena(t);
  REQUIRE(arena_plan_valid(t, good));
  ArenaPlan overlap = good;
  overlap.offsets[1] = 768;  // aligned, but inside a, which is live with b at step 1
  CHECK_FALSE(arena_plan_valid(t, overlap));
  ArenaPlan misaligned = good;
  misaligned.offsets[1] = 1100;
  misaligned.bytes = 2100;
  CHECK_FALSE(arena_plan_valid(t, misaligned));
  ArenaPlan short_plan = good;
  short_plan.bytes = 2000;  // b ends at 2024
  CHECK_FALSE(arena_plan_valid(t, short_plan));
  ArenaPlan missing = good;
  missing.offsets.pop_back();
  CHECK_FALSE(arena_plan_valid(t, missing));
}

TEST_CASE("resnet: arena random tensor sets give valid plans between the peak and the sum",
          "[cpu]") {
  std::mt19937_64 rng(20261);
  for (int trial = 0; trial < 300; ++trial) {
    const int count = int(rng() % 40), steps = 1 + int(rng() % 30);
    std::vector<ArenaTensor> t(static_cast<size_t>(count));
    for (ArenaTensor& a : t) {
      // Mostly small tensors, some empty, some large: the sizes of a network's activations.
      const int kind = int(rng() % 8);
      a.bytes = kind == 0 ? 0 : kind < 6 ? size_t(rng() % 5000) : size_t(rng() % 3000000);
      a.first = int(rng() % uint64_t(steps));
      a.last = a.first + int(rng() % uint64_t(steps - a.first));
    }
    INFO("trial " << trial << ", " << count << " tensors over " << steps << " steps");
    const ArenaPlan p = plan_arena(t);
    REQUIRE(arena_plan_valid(t, p));
    REQUIRE(p.bytes >= peak_live_bytes(t));
    REQUIRE(p.bytes <= aligned_sum(t));
  }
}
