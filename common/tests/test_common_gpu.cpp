// GPU tests of common/: device buffers, poisoning, error checks, timing and the ceiling.
#include <chrono>
#include <cmath>
#include <thread>
#include <vector>

#include "common/catch.hpp"
#include "common/cuda_check.hpp"
#include "common/device_buffer.hpp"
#include "common/device_info.hpp"
#include "common/device_random.hpp"
#include "common/errors.hpp"
#include "common/half.hpp"
#include "common/occupancy.hpp"
#include "common/random.hpp"
#include "common/timer.hpp"

TEST_CASE("device: summary of the current GPU", "[gpu]") {
  GPU100_REQUIRE_GPU();
  auto d = gpu100::query_device();
  CHECK_FALSE(d.name.empty());
  CHECK(d.sm_count > 0);
  CHECK(d.l2_bytes > 0);
  CHECK(d.global_mem_bytes > 0);
  CHECK(d.cc_major >= 7);
  CHECK(d.one_line().find(d.name) != std::string::npos);
}

TEST_CASE("arch: the probe reports code the build holds and the GPU can run", "[gpu]") {
  GPU100_REQUIRE_GPU();
  const auto d = gpu100::query_device();
  const gpu100::RunningCode& code = gpu100::running_code();
  INFO("build " << gpu100::build_architectures() << ", running " << code.label());
  const gpu100::BuiltArchs built = gpu100::parse_architectures(gpu100::build_architectures());
  CHECK(code.arch >= 750);
  CHECK(code.arch <= 100 * d.cc_major + 10 * d.cc_minor);      // never newer than the GPU
  if (built.max_arch > 0) CHECK(code.arch <= built.max_arch);  // and something the build holds
  CHECK(d.one_line().find(code.label()) != std::string::npos);
  // The decision follows the running code, not the GPU's compute capability.
  CHECK(gpu100::build_has(gpu100::ArchNeed::kSm80) == (code.arch >= 800));
  CHECK(gpu100::build_has(gpu100::ArchNeed::kSm90) == (code.arch >= 900));
  CHECK(gpu100::build_has(gpu100::ArchNeed::kSm90a) == code.sm90a);
  if (!code.sm90a) {
    CHECK_THROWS_AS(gpu100::require_build(gpu100::ArchNeed::kSm90a, "x"), gpu100::ArchUnavailable);
  }
}

TEST_CASE("DeviceBuffer: upload, download, poison, move", "[gpu]") {
  GPU100_REQUIRE_GPU();
  const auto host = gpu100::random_vector<float>(1031, 1);
  gpu100::DeviceBuffer<float> d(host.size());
  d.upload(host);
  CHECK(d.download() == host);
  d.poison();
  for (float x : d.download()) REQUIRE(std::isnan(x));

  gpu100::DeviceBuffer<float> moved = std::move(d);
  CHECK(moved.size() == host.size());
  CHECK(d.size() == 0);
  CHECK(d.data() == nullptr);
  CHECK_THROWS_AS(moved.upload(std::vector<float>(host.size() + 1)), std::out_of_range);

  gpu100::PinnedBuffer<int> pinned(16);
  pinned[15] = 7;
  CHECK(pinned[15] == 7);
}

TEST_CASE("fill_uniform_device writes random_vector's values, never zero", "[gpu]") {
  GPU100_REQUIRE_GPU();
  for (size_t n : {size_t(1), size_t(1031), size_t(300001)}) {
    INFO("n = " << n);
    const auto host = gpu100::random_vector<float>(n, 77);
    gpu100::DeviceBuffer<float> d(n + 1);
    d.poison();
    gpu100::fill_uniform_device(d.data(), n, 77);
    CUDA_CHECK(cudaDeviceSynchronize());
    const std::vector<float> got = d.download();
    for (size_t i = 0; i < n; ++i) REQUIRE(got[i] == host[i]);
    REQUIRE(std::isnan(got[n]));  // nothing past n
    gpu100::DeviceBuffer<__nv_bfloat16> h(n);
    h.poison();
    gpu100::fill_uniform_device(h.data(), n, 77);
    CUDA_CHECK(cudaDeviceSynchronize());
    const std::vector<__nv_bfloat16> got16 = h.download();
    for (size_t i = 0; i < n; ++i) {
      REQUIRE(__bfloat162float(got16[i]) == __bfloat162float(__float2bfloat16(host[i])));
      REQUIRE(__bfloat162float(got16[i]) != 0.f);
    }
  }
}

TEST_CASE("CUDA_CHECK throws with the call's text, and an impossible allocation is an error",
          "[gpu]") {
  GPU100_REQUIRE_GPU();
  try {
    CUDA_CHECK(cudaSetDevice(-1));
    FAIL("CUDA_CHECK did not throw");
  } catch (const gpu100::CudaError& e) {
    const std::string msg = e.what();
    CHECK(msg.find("cudaSetDevice(-1)") != std::string::npos);
    CHECK(msg.find("test_common_gpu.cpp") != std::string::npos);
  }
  try {
    gpu100::DeviceBuffer<char> huge(size_t(1) << 50);  // 1 PiB
    FAIL("allocation of 1 PiB succeeded");
  } catch (const gpu100::CudaError& e) {
    CHECK(e.code() == cudaErrorMemoryAllocation);
  }
  CHECK(cudaGetLastError() == cudaSuccess);  // the failure did not stick
  CHECK_THROWS_AS(gpu100::require_device_memory(size_t(1) << 50, "test"), gpu100::UsageError);
}

TEST_CASE("GpuTimer and the copy ceiling give sane numbers", "[gpu][timing]") {
  GPU100_REQUIRE_GPU();
  gpu100::DeviceBuffer<char> a(size_t(64) << 20), b(size_t(64) << 20);
  gpu100::GpuTimer timer;
  gpu100::TimingOptions options;
  options.warmup = 2;
  options.iters = 5;
  auto t = timer.time(
      [&] { CUDA_CHECK(cudaMemcpyAsync(b.data(), a.data(), a.bytes(), cudaMemcpyDeviceToDevice)); },
      options);
  CHECK(t.samples_ms.size() == 5);
  CHECK(t.min_ms > 0);
  CHECK(t.median_ms >= t.min_ms);
  const double gbps = gpu100::measure_copy_ceiling_gbps(size_t(256) << 20, 5);
  CHECK(gbps > 50);      // any GPU of the last decade
  CHECK(gbps < 100000);  // and no GPU at all reaches 100 TB/s
}

TEST_CASE("GpuTimer's hold keeps the host's time before a launch out of the timed span",
          "[gpu][timing]") {
  GPU100_REQUIRE_GPU();
  gpu100::DeviceBuffer<char> buf(4096);
  gpu100::GpuTimer timer;
  // The timed call spends 10 ms on the host before it queues a tiny memset, as a library call
  // spends its set-up time before its kernel. The margins (half of it either way) leave room for
  // other processes sharing the GPU (ctest -j), whose kernels can delay when an event is stamped.
  const auto late_launch = [&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    CUDA_CHECK(cudaMemsetAsync(buf.data(), 1, buf.bytes()));
  };
  gpu100::TimingOptions options;
  options.warmup = 1;
  options.iters = 3;
  options.flush_l2 = false;
  // Without a hold the start event is taken on an idle GPU, which then waits for the host.
  options.hold_us = 0;
  CHECK(timer.time(late_launch, options).min_ms >= 5.0);
  // Held 50 ms, the GPU is still spinning when the memset is queued: only the memset is timed.
  options.hold_us = 50000;
  CHECK(timer.time(late_launch, options).median_ms < 5.0);
}

TEST_CASE("PerDevice works a value out once on each GPU and keeps it for that GPU", "[gpu]") {
  GPU100_REQUIRE_GPU();
  int devices = 0, current = 0;
  CUDA_CHECK(cudaGetDeviceCount(&devices));
  CUDA_CHECK(cudaGetDevice(&current));
  gpu100::PerDevice<int> value;
  int made = 0;
  // Twice over every GPU: the first pass makes one value per GPU (its own number), the second
  // finds each GPU's value again without making it.
  for (int pass = 0; pass < 2; ++pass) {
    for (int d = 0; d < devices; ++d) {
      CUDA_CHECK(cudaSetDevice(d));
      CHECK(value.get([&] {
        ++made;
        return 100 + d;
      }) == 100 + d);
    }
  }
  CUDA_CHECK(cudaSetDevice(current));
  CHECK(made == devices);
}
