// capstone GPU tests of the library network (resnet_cudnn.hpp): its logits against the CPU
// reference in fp32, tf32 and bf16 for MC-ResNet18 and ResNet-18 at an odd size and a square one,
// logits poisoned with NaN first; a second plan at the same shape changes nothing; a batch that
// cannot fit is refused before anything is allocated; bad calls are rejected; the arena grows
// only. Skipped without cuDNN, and under the sanitizers (library code, and cudnnFind is slow
// there).
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "common/catch.hpp"
#include "common/compare.hpp"
#include "common/cuda_check.hpp"
#include "common/device_buffer.hpp"
#include "common/errors.hpp"
#include "common/precision.hpp"
#include "common/random.hpp"
#include "dual_conv.hpp"  // capstone::cudnn_available, capstone::NotAvailable
#include "resnet.hpp"
#include "resnet_arena.hpp"
#include "resnet_cudnn.hpp"

namespace {

using namespace capstone::resnet;
using gpu100::Precision;

void sync_check() {
  CUDA_CHECK(cudaPeekAtLastError());
  CUDA_CHECK(cudaDeviceSynchronize());
}

// True (after saying why) when this run cannot test the library network.
bool skip_library() {
  if (!capstone::cudnn_available()) {
    CHECK_THROWS_AS(CudnnNet(random_net_weights(Model::kResNet18, 1), Precision::kFp32),
                    capstone::NotAvailable);
    WARN("skipped: cuDNN not found");
    return true;
  }
  if (gpu100::sanitizer_run()) {
    WARN("skipped under the sanitizers: the network is cuDNN's and cuBLAS's code");
    return true;
  }
  return false;
}

// One network at one shape in every precision against net_forward_cpu.
void check_against_cpu(Model model, int n, int h, int w, uint64_t seed) {
  const NetWeights wts = random_net_weights(model, seed);
  std::vector<std::vector<float>> inputs;
  std::vector<gpu100::DeviceBuffer<float>> d_inputs;
  std::vector<const float*> ptrs;
  for (int c : trunk_channels(model)) {
    inputs.push_back(gpu100::random_vector<float>(size_t(n) * c * h * w, ++seed));
    d_inputs.emplace_back(inputs.back().size());
    d_inputs.back().upload(inputs.back());
  }
  for (const auto& d : d_inputs) ptrs.push_back(d.data());
  const std::vector<float> ref = net_forward_cpu(wts, inputs, n, h, w);
  gpu100::DeviceBuffer<float> d_logits(ref.size());
  for (Precision p : {Precision::kFp32, Precision::kTf32, Precision::kBf16}) {
    INFO(to_string(model) << " N " << n << ", " << h << " x " << w << ", " << to_string(p));
    CudnnNet net(wts, p);
    REQUIRE(net.classes() == wts.classes);
    net.plan(n, h, w);
    INFO(net.describe());
    for (int run = 0; run < 2; ++run) {
      if (run == 1) {
        // Planning again at the same shape does nothing: the same arena, logits as good.
        const size_t bytes = net.arena_bytes();
        net.plan(n, h, w);
        REQUIRE(net.arena_bytes() == bytes);
      }
      d_logits.poison();
      net.forward(ptrs, d_logits.data());
      sync_check();
      // compare()'s rel_l2 is infinite when a logit is NaN (one never written) or inf.
      const gpu100::CompareResult cmp = gpu100::compare(ref, d_logits.download(), 0.0, 0.0);
      INFO("run " << run << ": " << cmp.summary());
      REQUIRE(cmp.rel_l2 <= logits_tolerance(p));
    }
  }
}

}  // namespace

TEST_CASE("resnet: cudnn mc_resnet18 logits match the CPU in fp32, tf32 and bf16", "[gpu]") {
  GPU100_REQUIRE_GPU();
  if (skip_library()) return;
  uint64_t seed = 700;
  for (const auto& [n, h, w] : {std::tuple{1, 33, 47}, std::tuple{3, 64, 64}}) {
    if (gpu100::test_sizes({int64_t(n) * 64 * h * w}).empty()) continue;
    check_against_cpu(Model::kMcResNet18, n, h, w, seed += 10);
  }
}

TEST_CASE("resnet: cudnn resnet18 logits match the CPU in fp32, tf32 and bf16", "[gpu]") {
  GPU100_REQUIRE_GPU();
  if (skip_library()) return;
  check_against_cpu(Model::kResNet18, 2, 64, 64, 800);
}

TEST_CASE("resnet: cudnn refuses a batch that cannot fit, before allocating", "[gpu]") {
  GPU100_REQUIRE_GPU();
  if (skip_library()) return;
  CudnnNet net(random_net_weights(Model::kMcResNet18, 9), Precision::kFp32);
  // 2^20 images at 416 x 544: about 15 TB of activations.
  try {
    net.plan(1 << 20, 416, 544);
    FAIL("plan() accepted N = 2^20 at 416 x 544");
  } catch (const gpu100::UsageError& e) {
    INFO(e.what());
    CHECK(std::string(e.what()).find("N=1048576 at 416x544 needs") != std::string::npos);
  }
  CHECK(net.arena_bytes() == 0);
  // The object is still usable.
  net.plan(1, 16, 16);
  CHECK(net.arena_bytes() > 0);
}

TEST_CASE("resnet: cudnn rejects bad calls", "[gpu]") {
  GPU100_REQUIRE_GPU();
  if (skip_library()) return;
  const NetWeights wts = random_net_weights(Model::kMcResNet18, 11);
  NetWeights wrong = wts;
  wrong.fc_b.pop_back();
  CHECK_THROWS_AS(CudnnNet(wrong, Precision::kFp32), std::invalid_argument);
  CudnnNet net(wts, Precision::kBf16);
  gpu100::DeviceBuffer<float> x(3 * 16 * 16), logits(size_t(net.classes()));
  CHECK_THROWS_AS(net.forward({x.data(), x.data()}, logits.data()), gpu100::UsageError);
  CHECK_THROWS_AS(net.plan(0, 16, 16), gpu100::UsageError);
  CHECK_THROWS_AS(net.plan(1, 16, -1), gpu100::UsageError);
  net.plan(1, 16, 16);
  CHECK_THROWS_AS(net.forward({x.data()}, logits.data()), std::invalid_argument);
  CHECK_THROWS_AS(net.forward({x.data(), nullptr}, logits.data()), std::invalid_argument);
  CHECK_THROWS_AS(net.forward({x.data(), x.data()}, nullptr), std::invalid_argument);
  sync_check();
}

TEST_CASE("resnet: cudnn arena allocates only when it grows", "[gpu]") {
  GPU100_REQUIRE_GPU();
  Arena arena;
  CHECK(arena.bytes() == 0);
  arena.reserve(1000);
  REQUIRE(arena.bytes() == 1000);
  char* const first = arena.at<char>(0);
  arena.reserve(600);  // smaller: the same buffer
  CHECK(arena.bytes() == 1000);
  CHECK(arena.at<char>(0) == first);
  CHECK(arena.at<char>(256) == first + 256);
  CHECK_THROWS_AS(arena.at<char>(1001), std::out_of_range);
  arena.reserve(5000);
  CHECK(arena.bytes() == 5000);
  CUDA_CHECK(cudaMemset(arena.at<char>(0), 0, arena.bytes()));  // the new buffer is usable
  sync_check();
}
