// capstone GPU tests of the multi-GPU paths (net_parallel.hpp, ranks.hpp): MC-ResNet18 with its
// batch split over every GPU (unequal shares; NCCL with one rank on a one-GPU machine) and with
// its trunks on two GPUs, against the double CPU reference at every image, outputs poisoned
// first; and the ranks' failure paths: an exception inside a group and a rank that never answers
// both stop every rank with one message instead of hanging.
#include <algorithm>
#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "common/catch.hpp"
#include "common/compare.hpp"
#include "common/cuda_check.hpp"
#include "common/device_buffer.hpp"
#include "common/errors.hpp"
#include "common/random.hpp"
#include "net_parallel.hpp"
#include "ranks.hpp"
#include "resnet.hpp"

namespace {

using namespace capstone;
using namespace capstone::multi;

constexpr auto kBf16 = gpu100::Precision::kBf16;

std::vector<std::vector<float>> random_batch(int n, int h, int w, uint64_t seed) {
  std::vector<std::vector<float>> out;
  for (int c : resnet::trunk_channels(resnet::Model::kMcResNet18)) {
    out.push_back(gpu100::random_vector<float>(size_t(n) * c * h * w, seed++));
  }
  return out;
}

// The batch on GPU 0, as the binary has it.
struct Gpu0Batch {
  std::vector<gpu100::DeviceBuffer<float>> d;
  std::vector<const float*> ptrs;
  explicit Gpu0Batch(const std::vector<std::vector<float>>& x) {
    CUDA_CHECK(cudaSetDevice(0));
    for (const auto& v : x) {
      d.emplace_back(v.size());
      d.back().upload(v);
      ptrs.push_back(d.back().data());
    }
  }
};

void require_matches(const std::vector<float>& ref, const std::vector<float>& got) {
  REQUIRE(std::all_of(got.begin(), got.end(), [](float v) { return std::isfinite(v); }));
  const auto cmp = gpu100::compare(ref, got, 1e30, 0);  // rel L2, the network's rule
  INFO(cmp.summary());
  REQUIRE(cmp.rel_l2 <= resnet::logits_tolerance(kBf16));
}

}  // namespace

TEST_CASE("multi-GPU: the batch split over every GPU matches the CPU at every image", "[gpu]") {
  GPU100_REQUIRE_BUILD(resnet::net_needs(kBf16), "the bf16 network");
  const int gpus = visible_gpus();
  const resnet::NetWeights wts = resnet::random_net_weights(resnet::Model::kMcResNet18, 11);
  const int h = 33, w = 47;
  Ranks ranks(gpus);
  // Shares that are unequal (2 * gpus + 1 images) and one image per GPU.
  for (int n : {2 * gpus + 1, gpus}) {
    INFO(n << " images over " << gpus << " GPUs");
    const auto x = random_batch(n, h, w, 1100 + n);
    const std::vector<float> ref = resnet::net_forward_cpu(wts, x, n, h, w);
    const Gpu0Batch in(x);
    BatchParallel bp(ranks, wts, kBf16);
    bp.prepare(in.ptrs, n, h, w);
    gpu100::DeviceBuffer<float> logits(size_t(n) * wts.classes);
    for (int rep = 0; rep < 2; ++rep) {  // the graphs' capture, then their replay
      logits.poison();
      bp.forward(logits.data());
      ranks.wait("the test's forward");
      require_matches(ref, logits.download());
    }
  }
}

TEST_CASE("multi-GPU: the batch is refused when a GPU would get no image", "[gpu]") {
  GPU100_REQUIRE_BUILD(resnet::net_needs(kBf16), "the bf16 network");
  if (visible_gpus() < 2) GPU100_SKIP("needs 2 GPUs, this machine has 1");
  const resnet::NetWeights wts = resnet::random_net_weights(resnet::Model::kMcResNet18, 12);
  Ranks ranks(2);
  const Gpu0Batch in(random_batch(1, 16, 16, 1200));
  BatchParallel bp(ranks, wts, kBf16);
  CHECK_THROWS_AS(bp.prepare(in.ptrs, 1, 16, 16), gpu100::UsageError);
}

TEST_CASE("multi-GPU: the trunks on two GPUs match the CPU at every image", "[gpu]") {
  GPU100_REQUIRE_BUILD(resnet::net_needs(kBf16), "the bf16 network");
  if (visible_gpus() < 2) GPU100_SKIP("needs 2 GPUs, this machine has 1");
  const resnet::NetWeights wts = resnet::random_net_weights(resnet::Model::kMcResNet18, 13);
  Ranks ranks(2);
  for (const auto& [n, h, w] : {std::tuple{1, 37, 53}, std::tuple{3, 29, 31}}) {
    INFO("N " << n << ", " << h << " x " << w);
    const auto x = random_batch(n, h, w, 1300 + n);
    const std::vector<float> ref = resnet::net_forward_cpu(wts, x, n, h, w);
    const Gpu0Batch in(x);
    TrunkParallel tp(ranks, wts, kBf16);
    tp.prepare(in.ptrs, n, h, w);
    gpu100::DeviceBuffer<float> logits(size_t(n) * wts.classes);
    for (int rep = 0; rep < 2; ++rep) {
      logits.poison();
      tp.forward(logits.data());
      ranks.wait("the test's forward");
      require_matches(ref, logits.download());
    }
  }
  // ResNet-18 has one trunk: nothing to split.
  CHECK_THROWS_AS(
      TrunkParallel(ranks, resnet::random_net_weights(resnet::Model::kResNet18, 1), kBf16),
      gpu100::UsageError);
}

TEST_CASE("multi-GPU: more GPUs than the machine has is one line, before any NCCL call", "[gpu]") {
  GPU100_REQUIRE_GPU();
  try {
    Ranks ranks(visible_gpus() + 1);
    FAIL("no refusal");
  } catch (const gpu100::UsageError& e) {
    CHECK(std::string(e.what()).find("this machine has") != std::string::npos);
  }
}

TEST_CASE("multi-GPU: an exception inside a group aborts every communicator", "[gpu]") {
  GPU100_REQUIRE_GPU();
  Ranks ranks(visible_gpus());
  CHECK_THROWS_WITH(ranks.group([] { throw std::runtime_error("rank 0 failed"); }),
                    "rank 0 failed");
  CHECK(ranks.aborted());
  // No later collective is issued on an aborted communicator.
  CHECK_THROWS_AS(ranks.group([] {}), NcclError);
}

TEST_CASE("multi-GPU: a rank that never answers ends in one line after the timeout, not a hang",
          "[gpu]") {
  GPU100_REQUIRE_GPU();
  if (visible_gpus() < 2) GPU100_SKIP("needs 2 GPUs, this machine has 1");
  Ranks ranks(2, /*timeout_s=*/5);
  gpu100::DeviceBuffer<float> buf[2];
  for (int r = 0; r < 2; ++r) ranks.on(r, [&] { buf[r] = gpu100::DeviceBuffer<float>(1024); });
  // One matched exchange first, so the connection between the ranks exists.
  ranks.group([&] {
    NCCL_CHECK(ncclSend(buf[1].data(), 1024, ncclFloat, 0, ranks.comm(1), ranks.stream(1)));
    NCCL_CHECK(ncclRecv(buf[0].data(), 1024, ncclFloat, 1, ranks.comm(0), ranks.stream(0)));
  });
  ranks.wait("the matched exchange");
  // Rank 0 waits for a message rank 1 never sends, as it would for a rank that died.
  ranks.group([&] {
    NCCL_CHECK(ncclRecv(buf[0].data(), 1024, ncclFloat, 1, ranks.comm(0), ranks.stream(0)));
  });
  try {
    ranks.wait("the unmatched receive");
    FAIL("no timeout");
  } catch (const NcclError& e) {
    INFO(e.what());
    CHECK(std::string(e.what()).find("not done after") != std::string::npos);
  }
  CHECK(ranks.aborted());
  for (int r = 0; r < 2; ++r) ranks.on(r, [&] { buf[r] = gpu100::DeviceBuffer<float>(); });
}
