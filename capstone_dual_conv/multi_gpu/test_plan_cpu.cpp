// capstone CPU tests of the multi-GPU arithmetic (multi_gpu/plan.hpp), built with or without NCCL:
// the batch split, the --gpus check, the bus-bandwidth factor, and the ring's schedule replayed on
// plain arrays (every chunk reduced once by every rank, then gathered everywhere).
#include <cstdint>
#include <numeric>
#include <stdexcept>
#include <vector>

#include "common/catch.hpp"
#include "plan.hpp"
#include "sizes.hpp"

namespace {

using namespace capstone::multi;

TEST_CASE("multi-GPU: a batch splits into contiguous shares as even as they can be",
          "[multi_gpu]") {
  const std::vector<Share> s = split_batch(33, 2);
  REQUIRE(s.size() == 2);
  CHECK(s[0].first == 0);
  CHECK(s[0].count == 17);
  CHECK(s[1].first == 17);
  CHECK(s[1].count == 16);
  for (int gpus : {1, 2, 3, 4, 7, 8}) {
    for (int n : {gpus, gpus + 1, 33, 512, 1001}) {
      if (n < gpus) continue;
      const std::vector<Share> p = split_batch(n, gpus);
      REQUIRE(int(p.size()) == gpus);
      int next = 0;
      for (const Share& sh : p) {
        CHECK(sh.first == next);
        CHECK(sh.count >= n / gpus);
        CHECK(sh.count <= n / gpus + 1);
        next += sh.count;
      }
      CHECK(next == n);
    }
  }
  CHECK_THROWS_AS(split_batch(1, 2), std::invalid_argument);
  CHECK_THROWS_AS(split_batch(8, 0), std::invalid_argument);
}

TEST_CASE("multi-GPU: --gpus is refused outside 1 .. the GPUs the machine has", "[multi_gpu]") {
  CHECK_NOTHROW(check_gpu_count(1, 1));
  CHECK_NOTHROW(check_gpu_count(2, 8));
  CHECK_THROWS_AS(check_gpu_count(0, 2), std::invalid_argument);
  CHECK_THROWS_AS(check_gpu_count(-1, 2), std::invalid_argument);
  CHECK_THROWS_AS(check_gpu_count(3, 2), std::invalid_argument);
  CHECK_THROWS_AS(check_gpu_count(1, 0), std::invalid_argument);  // no GPU at all
}

TEST_CASE("multi-GPU: bus bandwidth is the algorithm bandwidth times 2(n-1)/n", "[multi_gpu]") {
  CHECK(allreduce_bus_factor(1) == 0.0);
  CHECK(allreduce_bus_factor(2) == 1.0);
  CHECK(allreduce_bus_factor(4) == Catch::Approx(1.5));
  CHECK(allreduce_bus_factor(8) == Catch::Approx(1.75));
  // 1 GB in 10 ms: 100 GB/s for the caller; over 8 ranks each link carried 175 GB/s.
  CHECK(algorithm_gbps(1e9, 10) == Catch::Approx(100));
  CHECK(bus_gbps(1e9, 10, 8) == Catch::Approx(175));
  CHECK(algorithm_gbps(1e9, 0) == 0.0);
}

TEST_CASE("multi-GPU: chunks cover a buffer exactly, the first count % n one longer",
          "[multi_gpu]") {
  CHECK(chunk_begin(10, 3, 0) == 0);
  CHECK(chunk_begin(10, 3, 1) == 4);
  CHECK(chunk_begin(10, 3, 2) == 7);
  CHECK(chunk_begin(10, 3, 3) == 10);
  for (int64_t count : {int64_t(1), int64_t(7), int64_t(1000003)}) {
    for (int n : {1, 2, 3, 8}) {
      CHECK(chunk_begin(count, n, 0) == 0);
      CHECK(chunk_begin(count, n, n) == count);
      for (int c = 0; c < n; ++c) CHECK(chunk_begin(count, n, c + 1) >= chunk_begin(count, n, c));
    }
  }
}

// Replays the ring on integer arrays: rank r starts with value (r + 1) * 1000 + e at element e.
// After the reduce-scatter rank r must hold the full sum of chunk (r + 1) mod n, and after the
// all-gather every rank every chunk's sum, with each rank's input counted exactly once.
TEST_CASE("multi-GPU: the ring's schedule reduces every chunk once per rank, then gathers it",
          "[multi_gpu]") {
  for (int n : {1, 2, 3, 4, 5, 8}) {
    const int64_t count = 3 * n + 2;  // chunks of unequal length
    std::vector<std::vector<int64_t>> buf(n, std::vector<int64_t>(count));
    std::vector<int64_t> sum(count, 0);
    for (int r = 0; r < n; ++r) {
      for (int64_t e = 0; e < count; ++e) {
        buf[r][e] = (r + 1) * 1000 + e;
        sum[e] += buf[r][e];
      }
    }
    auto chunk = [&](int c) {
      return std::pair{chunk_begin(count, n, c), chunk_begin(count, n, c + 1)};
    };
    for (int step = 0; step + 1 < n; ++step) {
      std::vector<std::vector<int64_t>> before = buf;  // every rank's step reads the last step's
      for (int r = 0; r < n; ++r) {
        const int left = (r + n - 1) % n, c = ring_reduce_chunk(r, step, n);
        // What rank r reads from its left neighbour was reduced there at the previous step.
        if (step > 0) CHECK(ring_reduce_chunk(left, step - 1, n) == c);
        for (auto [b, e] = chunk(c); b < e; ++b) buf[r][b] += before[left][b];
      }
    }
    for (int r = 0; r < n; ++r) {
      for (auto [b, e] = chunk((r + 1) % n); b < e; ++b) CHECK(buf[r][b] == sum[b]);
    }
    for (int step = 0; step + 1 < n; ++step) {
      std::vector<std::vector<int64_t>> before = buf;
      for (int r = 0; r < n; ++r) {
        const int left = (r + n - 1) % n, c = ring_gather_chunk(r, step, n);
        for (auto [b, e] = chunk(c); b < e; ++b) buf[r][b] = before[left][b];
      }
    }
    for (int r = 0; r < n; ++r) CHECK(buf[r] == sum);
  }
}

}  // namespace

// The all-reduce lesson's command line and slices (sizes.hpp).
namespace {

using capstone::multi::byte_label;
using capstone::multi::DType;
using capstone::multi::parse_byte_size;
using capstone::multi::parse_byte_sizes;
using capstone::multi::parse_dtypes;
using capstone::multi::slice_count;
using capstone::multi::slice_range;

TEST_CASE("allreduce: --sizes takes bytes with K, M or G, each a positive multiple of 4",
          "[multi_gpu]") {
  CHECK(parse_byte_size("sizes", "3000004") == 3000004);
  CHECK(parse_byte_size("sizes", "256K") == 256 * 1024);
  CHECK(parse_byte_size("sizes", "1M") == 1 << 20);
  CHECK(parse_byte_size("sizes", "4m") == 4 << 20);
  CHECK(parse_byte_size("sizes", "1G") == int64_t(1) << 30);
  CHECK(parse_byte_size("sizes", "1024G") == int64_t(1) << 40);  // the largest
  CHECK(parse_byte_sizes("sizes", "1M,3000004,1G") ==
        std::vector<int64_t>{1 << 20, 3000004, int64_t(1) << 30});
  for (const char* bad : {"0", "0M", "1001", "2", "12Q", "1MB", "M", "-4", "1.5M", " 4", "4 ",
                          "1025G", "99999999999999999999", "0x10"}) {
    INFO(bad);
    CHECK_THROWS_AS(parse_byte_size("sizes", bad), gpu100::UsageError);
  }
  CHECK_THROWS_AS(parse_byte_sizes("sizes", ""), gpu100::UsageError);
  CHECK_THROWS_AS(parse_byte_sizes("sizes", ","), gpu100::UsageError);
  CHECK_THROWS_AS(parse_byte_sizes("sizes", "1M,12Q"), gpu100::UsageError);
}

TEST_CASE("allreduce: --dtype takes fp32 and bf16 only", "[multi_gpu]") {
  CHECK(parse_dtypes("dtype", "fp32,bf16") == std::vector<DType>{DType::kFp32, DType::kBf16});
  CHECK(parse_dtypes("dtype", "bf16") == std::vector<DType>{DType::kBf16});
  CHECK(parse_dtypes("dtype", "bf16,bf16") == std::vector<DType>{DType::kBf16});
  for (const char* bad : {"fp16", "FP32", "fp32,fp16", "", "int8"}) {
    INFO(bad);
    CHECK_THROWS_AS(parse_dtypes("dtype", bad), gpu100::UsageError);
  }
}

TEST_CASE("allreduce: sizes are labelled in whole binary units, else in bytes", "[multi_gpu]") {
  CHECK(byte_label(int64_t(1) << 30) == "1 GiB");
  CHECK(byte_label(int64_t(256) << 20) == "256 MiB");
  CHECK(byte_label(int64_t(1536) << 20) == "1536 MiB");
  CHECK(byte_label(4096) == "4 KiB");
  CHECK(byte_label(3000004) == "3000004 B");
  CHECK(byte_label(12) == "12 B");
}

// Every chunk's slices tile it exactly, in order, none longer than the slice size allows, and
// the count of slices is the fewest that do so (or one per element of the longest chunk).
TEST_CASE("allreduce: slices cut every chunk exactly, none past the slice size", "[multi_gpu]") {
  CHECK(slice_count(int64_t(256) << 20, 2, 4, int64_t(8) << 20) == 64);  // 512 MiB chunks
  CHECK(slice_count(1, 8, 4, 1 << 20) == 1);
  CHECK(slice_count(7, 8, 2, 1) == 1);  // a chunk of one element: one slice
  CHECK(slice_count(1000003, 2, 4, 4100) == 488);
  CHECK_THROWS_AS(slice_count(0, 2, 4, 1 << 20), std::invalid_argument);
  CHECK_THROWS_AS(slice_count(16, 2, 4, 0), std::invalid_argument);
  CHECK_THROWS_AS(slice_count(int64_t(1) << 30, 1, 4, 4), std::invalid_argument);  // 2^30 slices
  for (int64_t count : {int64_t(1), int64_t(7), int64_t(1000003), int64_t(3000004 / 2)}) {
    for (int n : {1, 2, 3, 8}) {
      for (int64_t slice_bytes : {int64_t(4100), int64_t(65540), int64_t(8) << 20}) {
        const int s = slice_count(count, n, 2, slice_bytes);
        const int64_t longest = chunk_begin(count, n, 1) - chunk_begin(count, n, 0);
        CHECK(s >= 1);
        CHECK(s <= std::max<int64_t>(longest, 1));
        if (s > 1) CHECK((longest + s - 2) / (s - 1) * 2 > slice_bytes);  // s - 1 would not do
        for (int c = 0; c < n; ++c) {
          int64_t next = chunk_begin(count, n, c);
          for (int k = 0; k < s; ++k) {
            const auto [first, last] = slice_range(count, n, s, c, k);
            CHECK(first == next);
            CHECK(last >= first);
            CHECK((last - first) * 2 <= std::max<int64_t>(slice_bytes, 2));
            next = last;
          }
          CHECK(next == chunk_begin(count, n, c + 1));
        }
      }
    }
  }
}

}  // namespace
