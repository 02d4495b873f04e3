// capstone GPU tests of the all-reduce lesson (allreduce.hpp): every variant, in fp32 and bf16, at
// awkward element counts (1, 7, 1000003, fewer elements than ranks, chunks that do not divide
// into whole slices) on every visible GPU, and on two GPUs with slices so small that each chunk
// has hundreds; each time on fresh seeded inputs with every output poisoned (NaN) first, and
// every element of every rank checked against the host's sum (SumReference, whose allowance
// allreduce.hpp derives). On a one-GPU machine the rings and NCCL are a copy of in to out, which
// is still checked. ring_p2p on GPUs without peer access between neighbours is reported as not
// run here, never as a failure.
#include <cmath>
#include <cstdint>
#include <iostream>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "allreduce.hpp"
#include "common/catch.hpp"
#include "common/compare.hpp"
#include "common/cuda_check.hpp"
#include "common/device_buffer.hpp"
#include "ranks.hpp"
#include "sizes.hpp"

namespace {

namespace multi = capstone::multi;
using multi::DType;

constexpr int64_t kDefaultSlice = int64_t(64) << 20;    // the binary's default, --slice-mib 64
constexpr int64_t kOddSlice = (int64_t(64) << 10) + 4;  // 65540 B: slices of unequal lengths

// Runs variant `v` `calls` times back to back (no wait between the calls: AllReduce orders them
// itself) on fresh inputs, every output poisoned first, then checks every element of every rank.
// Returns false, having said so, when the variant cannot run on these ranks.
bool check_variant(multi::Ranks& ranks, const multi::AllReduceVariant& v, DType dtype,
                   int64_t count, int64_t slice_bytes, uint64_t seed, int calls = 1) {
  const int n = ranks.size();
  multi::AllReduce allreduce(ranks, dtype, count, slice_bytes);
  const std::string why = allreduce.unavailable(v.algorithm);
  if (!why.empty()) {
    std::cout << "not run here: " << v.name << ": " << why << std::endl;
    return false;
  }
  const size_t bytes = size_t(count) * multi::dtype_bytes(dtype);
  std::vector<gpu100::DeviceBuffer<char>> in(n), out(n);
  std::vector<const void*> in_ptr(n);
  std::vector<void*> out_ptr(n);
  for (int r = 0; r < n; ++r) {
    ranks.on(r, [&] {
      in[r] = gpu100::DeviceBuffer<char>(bytes);
      out[r] = gpu100::DeviceBuffer<char>(bytes);
      multi::fill_input(in[r].data(), dtype, count, multi::input_seed(seed, r), ranks.stream(r));
      out[r].poison(ranks.stream(r));
    });
    in_ptr[r] = in[r].data();
    out_ptr[r] = out[r].data();
  }
  ranks.wait("the test's inputs");
  multi::SumReference reference(dtype, n, count);
  for (int r = 0; r < n; ++r) {
    ranks.on(r, [&] { reference.add(multi::download_floats(in[r].data(), dtype, count)); });
  }

  ranks.fork();
  for (int c = 0; c < calls; ++c) allreduce.run(v.algorithm, in_ptr, out_ptr);
  ranks.join();
  ranks.wait(v.name);
  for (int r = 0; r < n; ++r) {
    gpu100::CompareResult cmp;
    ranks.on(r,
             [&] { cmp = reference.check(multi::download_floats(out[r].data(), dtype, count)); });
    INFO(v.name << " " << multi::dtype_name(dtype) << ", " << count << " elements on " << n
                << " ranks, " << allreduce.slices() << " slices per chunk, " << calls
                << " calls: rank " << r << ": " << cmp.summary());
    REQUIRE(cmp.ok);
  }
  return true;
}

// The test's element counts: 1, 7, 1000003, and fewer elements than ranks when there are 2 or
// more (some chunks then hold nothing), within $GPU100_TEST_MAX_N.
std::vector<int64_t> awkward_counts(int ranks) {
  std::vector<int64_t> counts = {1, 7, 1000003};
  if (ranks > 2) counts.push_back(ranks - 1);
  return gpu100::test_sizes(counts);
}

}  // namespace

TEST_CASE("allreduce: every variant sums fp32 and bf16 on every visible GPU at awkward counts",
          "[gpu][multi_gpu]") {
  GPU100_REQUIRE_GPU();
  multi::Ranks ranks(multi::visible_gpus());
  uint64_t seed = 7000;
  for (const auto& v : multi::allreduce_variants()) {
    for (DType dtype : {DType::kFp32, DType::kBf16}) {
      for (int64_t count : awkward_counts(ranks.size())) {
        // The default slices (one per chunk here), and 65540-byte ones: 1000003 elements then cut
        // into slices of unequal lengths that start at every offset from a 16-byte boundary.
        for (int64_t slice : {kDefaultSlice, kOddSlice}) {
          check_variant(ranks, v, dtype, count, slice, ++seed);
        }
      }
    }
  }
}

TEST_CASE("allreduce: on two GPUs with tiny slices (hundreds per chunk) every variant still sums",
          "[gpu][multi_gpu]") {
  GPU100_REQUIRE_GPU();
  const int visible = multi::visible_gpus();
  if (visible < 2) GPU100_SKIP("needs 2 GPUs, this machine has 1");
  multi::Ranks ranks(2);
  uint64_t seed = 8000;
  for (const auto& v : multi::allreduce_variants()) {
    for (DType dtype : {DType::kFp32, DType::kBf16}) {
      for (int64_t count : gpu100::test_sizes({1, 7, 1000003})) {
        // 4100-byte slices: 1000003 fp32 elements make chunks of 2 MB, 488 slices each.
        check_variant(ranks, v, dtype, count, 4100, ++seed);
      }
    }
  }
}

TEST_CASE("allreduce: back-to-back calls of one AllReduce need no wait between them",
          "[gpu][multi_gpu]") {
  GPU100_REQUIRE_GPU();
  // Each call's first step must wait for the right neighbour's last reads of the previous call;
  // three calls in a row, with small slices so that many steps are in flight at once.
  multi::Ranks ranks(multi::visible_gpus());
  uint64_t seed = 9000;
  for (const auto& v : multi::allreduce_variants()) {
    for (DType dtype : {DType::kFp32, DType::kBf16}) {
      for (int64_t count : gpu100::test_sizes({1000003})) {
        check_variant(ranks, v, dtype, count, int64_t(16) << 10, ++seed, 3);
      }
    }
  }
}

TEST_CASE("allreduce: the check fails a poisoned element and a sum off by more than allowed",
          "[gpu][multi_gpu]") {
  GPU100_REQUIRE_GPU();
  for (DType dtype : {DType::kFp32, DType::kBf16}) {
    // Two ranks of three elements: sums 0.75, -0.5 and 1.5 (exact in both types).
    multi::SumReference reference(dtype, 2, 3);
    reference.add({0.5f, -0.25f, 1.0f});
    reference.add({0.25f, -0.25f, 0.5f});
    CHECK(reference.check({0.75f, -0.5f, 1.5f}).ok);
    const double allowed = reference.allowance_factor() * 1.5;  // element 2: S = 1.5
    CHECK(reference.check({0.75f, -0.5f, float(1.5 + 0.5 * allowed)}).ok);
    CHECK_FALSE(reference.check({0.75f, -0.5f, float(1.5 + 4 * allowed)}).ok);
    const gpu100::CompareResult nan =
        reference.check({0.75f, std::numeric_limits<float>::quiet_NaN(), 1.5f});
    CHECK_FALSE(nan.ok);
    CHECK(nan.first_bad == 1);
    CHECK_FALSE(reference.check({0.75f, -0.5f}).ok);  // a short output
  }
  // One rank: the all-reduce is a copy, and nothing but the input itself passes.
  multi::SumReference one(DType::kFp32, 1, 1);
  one.add({0.3f});
  CHECK(one.allowance_factor() == 0.0);
  CHECK(one.check({0.3f}).ok);
  CHECK_FALSE(one.check({std::nextafter(0.3f, 1.0f)}).ok);
}

TEST_CASE("allreduce: bad shapes and pointer lists are refused", "[gpu][multi_gpu]") {
  GPU100_REQUIRE_GPU();
  multi::Ranks ranks(1);
  CHECK_THROWS_AS(multi::AllReduce(ranks, DType::kFp32, 0, 1 << 20), std::invalid_argument);
  CHECK_THROWS_AS(multi::AllReduce(ranks, DType::kFp32, 16, 0), std::invalid_argument);
  multi::AllReduce allreduce(ranks, DType::kBf16, 16, 1 << 20);
  CHECK(allreduce.unavailable(multi::Algorithm::kRingP2p).empty());  // one rank reads only itself
  CHECK_THROWS_AS(allreduce.run(multi::Algorithm::kRingCopyReduce, {}, {}), std::invalid_argument);
}
