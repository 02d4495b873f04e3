// day03 GPU tests: every variant and every type at awkward sizes with fresh seeded random inputs
// and the outputs poisoned first; misaligned pointers; in place; the fused SiLU against the
// unfused chains and the CPU; the diffusion step's two variants at every type against the CPU;
// the stream pipeline and the column copies; bad sizes and arguments.
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <vector>

#include "common/catch.hpp"
#include "common/compare.hpp"
#include "common/cuda_check.hpp"
#include "common/device_buffer.hpp"
#include "common/random.hpp"
#include "common/tags.hpp"
#include "test_suite.hpp"  // day02's checks of a C = A + B launcher
#include "vector_add_variants.cuh"

namespace {

// 1; 3 and 5 (n % 4 != 0, fewer than one float4 or one fp16 pack); 31 (< a warp); 255 (< a
// block); 1000; 4097 (one past a v4 fp32 tile of 4096); 2^20 + 3 (many tiles, a tail of 3).
const std::vector<int64_t> kSizes = {1, 3, 5, 31, 255, 1000, 4097, (1 << 20) + 3};

// After every launch: the launch itself, then the kernel's execution.
void sync_check() {
  CUDA_CHECK(cudaPeekAtLastError());
  CUDA_CHECK(cudaDeviceSynchronize());
}

// Runs add_v4_ilp<T> (or, for fp32, `launch`) on inputs of n + offset elements at the given
// element offsets of a, b and c, and compares exactly with add_cpu.
template <typename T, typename Launch>
void check_add(int64_t n, uint64_t seed, int off_a, int off_b, int off_c, Launch launch) {
  const std::vector<T> a = day03::random_input<T>(n + off_a, seed);
  const std::vector<T> b = day03::random_input<T>(n + off_b, seed + 1);
  std::vector<T> ref(n);
  day03::add_cpu(a.data() + off_a, b.data() + off_b, ref.data(), n);
  gpu100::DeviceBuffer<T> d_a(n + off_a), d_b(n + off_b), d_c(n + off_c);
  d_a.upload(a);
  d_b.upload(b);
  d_c.poison();
  launch(d_a.data() + off_a, d_b.data() + off_b, d_c.data() + off_c, n);
  sync_check();
  std::vector<T> got(n);
  CUDA_CHECK(cudaMemcpy(got.data(), d_c.data() + off_c, n * sizeof(T), cudaMemcpyDeviceToHost));
  // Exact for every type (see add_cpu): any difference is a bug.
  const gpu100::CompareResult cmp = gpu100::compare(ref, got, 0.0, 0.0);
  INFO(cmp.summary());
  REQUIRE(cmp.ok);
}

}  // namespace

TEST_CASE("every fp32 variant matches the CPU exactly at awkward sizes", "[gpu]") {
  GPU100_REQUIRE_GPU();
  uint64_t seed = 3000;
  for (const auto& v : day03::variants()) {
    if (gpu100::has_tag(v.tags, "mine")) continue;  // checked by its own test cases
    for (int64_t n : gpu100::test_sizes(kSizes)) {
      INFO("variant " << v.name << ", n = " << n);
      seed += 2;
      check_add<float>(n, seed, 0, 0, 0, [&](const float* a, const float* b, float* c, int64_t m) {
        v.launch(a, b, c, m, nullptr);
      });
    }
  }
}

TEST_CASE("v4_ilp matches the CPU exactly for every type at awkward sizes", "[gpu]") {
  GPU100_REQUIRE_GPU();
  uint64_t seed = 4000;
  day03::for_each_type([&](auto tag) {
    using T = typename decltype(tag)::type;
    for (int64_t n : gpu100::test_sizes(kSizes)) {
      INFO("type " << day03::precision_name<T>() << ", n = " << n);
      seed += 2;
      check_add<T>(n, seed, 0, 0, 0, [](const T* a, const T* b, T* c, int64_t m) {
        day03::add_v4_ilp<T>(a, b, c, m, nullptr);
      });
    }
  });
}

TEST_CASE("the 16-byte variants are correct with misaligned pointers", "[gpu]") {
  GPU100_REQUIRE_GPU();
  // (offset of a, offset of b, offset of c) in elements: one pointer off, all three off by the
  // same amount, all three off differently.
  const int offsets[][3] = {{1, 0, 0}, {0, 0, 3}, {1, 1, 1}, {1, 2, 3}};
  const std::vector<int64_t> sizes = gpu100::test_sizes({5, 1000, 4097, 65541});
  uint64_t seed = 5000;
  for (const char* name : {"v3_float4", "v4_ilp"}) {
    const day03::Variant* v = day03::find_variant(name);
    REQUIRE(v != nullptr);
    for (const auto& off : offsets) {
      for (int64_t n : sizes) {
        INFO(name << ", offsets " << off[0] << "," << off[1] << "," << off[2] << ", n = " << n);
        seed += 2;
        check_add<float>(n, seed, off[0], off[1], off[2],
                         [&](const float* a, const float* b, float* c, int64_t m) {
                           v->launch(a, b, c, m, nullptr);
                         });
      }
    }
  }
  day03::for_each_type([&](auto tag) {
    using T = typename decltype(tag)::type;
    for (int64_t n : sizes) {
      INFO("v4_ilp " << day03::precision_name<T>() << " at a + 1, n = " << n);
      seed += 2;
      check_add<T>(n, seed, 1, 0, 0, [](const T* a, const T* b, T* c, int64_t m) {
        day03::add_v4_ilp<T>(a, b, c, m, nullptr);
      });
    }
  });
}

TEST_CASE("every fp32 variant works in place (C is A)", "[gpu]") {
  GPU100_REQUIRE_GPU();
  for (const auto& v : day03::variants()) {
    if (gpu100::has_tag(v.tags, "mine")) continue;  // checked by its own test cases
    day02_tests::check_in_place(v);
  }
}

TEST_CASE("n = 0 launches nothing and a negative n is rejected", "[gpu]") {
  GPU100_REQUIRE_GPU();
  gpu100::DeviceBuffer<float> d(4);
  d.poison();
  float* p = d.data();
  for (const auto& v : day03::variants()) {
    if (gpu100::has_tag(v.tags, "mine")) continue;  // checked by its own test cases
    INFO("variant " << v.name);
    v.launch(p, p, p, 0, nullptr);
    CHECK_THROWS_AS(v.launch(p, p, p, -5, nullptr), std::invalid_argument);
  }
  for (const auto& v : day03::silu_variants()) {
    INFO("variant " << v.name);
    v.launch(p, p, p, p, p, p, 0, nullptr);
    CHECK_THROWS_AS(v.launch(p, p, p, p, p, p, -5, nullptr), std::invalid_argument);
  }
  CHECK_THROWS_AS(day03::silu_unfused3(p, p, p, p, nullptr, nullptr, 4, nullptr),
                  std::invalid_argument);
  gpu100::DeviceBuffer<double> dd(4);
  CHECK_THROWS_AS(day03::add_v4_ilp<double>(dd.data(), dd.data(), dd.data(), -1, nullptr),
                  std::invalid_argument);
  CHECK_THROWS_AS(day03::add_serial(p, p, p, p, p, p, -1, nullptr), std::invalid_argument);
  day03::StreamPipeline pipeline(2);
  CHECK_THROWS_AS(pipeline.run(p, p, p, p, p, p, -1, 4), std::invalid_argument);
  CHECK_THROWS_AS(pipeline.run(p, p, p, p, p, p, 4, 0), std::invalid_argument);
  CHECK_THROWS_AS(day03::StreamPipeline(0), std::invalid_argument);
  sync_check();
  for (float x : d.download()) CHECK(std::isnan(x));  // untouched
}

TEST_CASE("silu: fused equals the 3-kernel chain bit for bit, and every chain matches the CPU",
          "[gpu]") {
  GPU100_REQUIRE_GPU();
  uint64_t seed = 6000;
  for (int64_t n : gpu100::test_sizes(kSizes)) {
    seed += 3;
    const auto a = gpu100::random_vector<float>(n, seed);
    const auto b = gpu100::random_vector<float>(n, seed + 1);
    const auto c = gpu100::random_vector<float>(n, seed + 2);
    std::vector<float> ref(n);
    day03::silu_fused_cpu(a.data(), b.data(), c.data(), ref.data(), n);
    gpu100::DeviceBuffer<float> d_a(n), d_b(n), d_c(n), d_y(n), d_t(n), d_u(n);
    d_a.upload(a);
    d_b.upload(b);
    d_c.upload(c);
    std::vector<float> fused;
    for (const auto& v : day03::silu_variants()) {
      INFO(v.name << ", n = " << n);
      d_y.poison();
      d_t.poison();
      d_u.poison();
      v.launch(d_a.data(), d_b.data(), d_c.data(), d_y.data(), d_t.data(), d_u.data(), n, nullptr);
      sync_check();
      const std::vector<float> got = d_y.download();
      const auto cmp = gpu100::compare(ref, got, day03::kSiluAbsTol, day03::kSiluRelTol);
      INFO("vs CPU: " << cmp.summary());
      REQUIRE(cmp.ok);
      if (v.kernels == 1) fused = got;
      if (v.kernels == 3) {  // same roundings in the same order: identical
        const auto same = gpu100::compare(fused, got, 0.0, 0.0);
        INFO("fused vs unfused3: " << same.summary());
        REQUIRE(same.ok);
      }
    }
  }
}

TEST_CASE("silu_fused with misaligned pointers takes the scalar path and stays correct", "[gpu]") {
  GPU100_REQUIRE_GPU();
  for (int64_t n : gpu100::test_sizes({5, 4097, 65541})) {
    INFO("n = " << n);
    const auto a = gpu100::random_vector<float>(n + 1, 71);
    const auto b = gpu100::random_vector<float>(n, 72);
    const auto c = gpu100::random_vector<float>(n, 73);
    std::vector<float> ref(n);
    day03::silu_fused_cpu(a.data() + 1, b.data(), c.data(), ref.data(), n);
    gpu100::DeviceBuffer<float> d_a(n + 1), d_b(n), d_c(n), d_y(n);
    d_a.upload(a);
    d_b.upload(b);
    d_c.upload(c);
    d_y.poison();
    day03::silu_fused(d_a.data() + 1, d_b.data(), d_c.data(), d_y.data(), nullptr, nullptr, n,
                      nullptr);
    sync_check();
    const auto cmp = gpu100::compare(ref, d_y.download(), day03::kSiluAbsTol, day03::kSiluRelTol);
    INFO(cmp.summary());
    REQUIRE(cmp.ok);
  }
}

TEST_CASE("the stream pipeline and the serial trip match the CPU, any n and chunk count", "[gpu]") {
  GPU100_REQUIRE_GPU();
  uint64_t seed = 7000;
  for (int64_t n : gpu100::test_sizes({1, 1000, 65539, 1000003})) {
    seed += 2;
    const auto a = gpu100::random_vector<float>(n, seed);
    const auto b = gpu100::random_vector<float>(n, seed + 1);
    std::vector<float> ref(n);
    day03::add_cpu(a.data(), b.data(), ref.data(), n);
    gpu100::PinnedBuffer<float> h_a(n), h_b(n), h_c(n);
    std::memcpy(h_a.data(), a.data(), n * sizeof(float));
    std::memcpy(h_b.data(), b.data(), n * sizeof(float));
    gpu100::DeviceBuffer<float> d_a(n), d_b(n), d_c(n);
    auto check_host = [&](const char* what) {
      const std::vector<float> got(h_c.data(), h_c.data() + n);
      const auto cmp = gpu100::compare(ref, got, 0.0, 0.0);
      INFO(what << ", n = " << n << ": " << cmp.summary());
      REQUIRE(cmp.ok);
    };

    std::memset(h_c.data(), 0xFF, n * sizeof(float));
    d_c.poison();
    sync_check();
    day03::add_serial(h_a.data(), h_b.data(), h_c.data(), d_a.data(), d_b.data(), d_c.data(), n,
                      nullptr);
    check_host("serial");

    for (int k : {1, 2, 3, 8}) {
      day03::StreamPipeline pipeline(k);
      for (int chunks : {1, 7, 16}) {
        INFO("streams " << k << ", chunks " << chunks);
        std::memset(h_c.data(), 0xFF, n * sizeof(float));
        d_c.poison();
        sync_check();
        pipeline.run(h_a.data(), h_b.data(), h_c.data(), d_a.data(), d_b.data(), d_c.data(), n,
                     chunks);
        CUDA_CHECK(cudaPeekAtLastError());
        check_host("pipeline");  // run() returned after every stream finished
      }
    }
  }
}

TEST_CASE("column copy: per element and cudaMemcpy2D both copy column 0", "[gpu]") {
  GPU100_REQUIRE_GPU();
  for (int64_t m : {int64_t(1), int64_t(3), int64_t(257)}) {
    INFO("matrix " << m << " x " << m);
    gpu100::PinnedBuffer<float> host(m * m);
    gpu100::fill_uniform(host.data(), m * m, 99);
    std::vector<float> column(m);
    for (int64_t r = 0; r < m; ++r) column[r] = host[r * m];
    gpu100::DeviceBuffer<float> d_col(m);
    for (auto copy : {day03::copy_column_per_element, day03::copy_column_2d}) {
      d_col.poison();
      sync_check();
      copy(host.data(), m, m, d_col.data());
      REQUIRE(gpu100::compare(column, d_col.download(), 0.0, 0.0).ok);
    }
  }
  // Column 0 of a non-square 5 x 9 matrix.
  std::vector<float> host(5 * 9);
  for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<float>(i);
  gpu100::DeviceBuffer<float> d_col(5);
  d_col.poison();
  day03::copy_column_2d(host.data(), 5, 9, d_col.data());
  CHECK(d_col.download() == std::vector<float>{0.0f, 9.0f, 18.0f, 27.0f, 36.0f});
}

// ---- the diffusion denoising step ----
namespace {

// (abar, w): the default; a small abar (x0 up to 20, so the blend cancels and the clamp bites
// often); no noise left with the new frame only; the previous frame only.
const std::vector<day03::DiffusionStep> kSteps = {{0.5, 0.8}, {0.01, 0.35}, {1.0, 1.0}, {0.9, 0.0}};

// One case: fresh inputs, x_t, eps, prev and out used from element offsets off[0..3] of their
// buffers (1 = a pointer the 16-byte path must refuse), out, t and u poisoned with NaN, the result
// checked against diffusion_cpu with the variant's allowance. in_place: out is prev.
template <typename T>
void check_diffusion_case(const day03::DiffusionVariant<T>& v, int64_t n, uint64_t seed,
                          const day03::DiffusionStep& step, const std::array<int, 4>& off,
                          bool in_place = false) {
  std::vector<T> x = day03::random_input<T>(n + off[0], seed);
  std::vector<T> e = day03::random_input<T>(n + off[1], seed + 1);
  std::vector<T> p = day03::random_input<T>(n + off[2], seed + 2);
  gpu100::DeviceBuffer<T> d_x(n + off[0]), d_e(n + off[1]), d_p(n + off[2]), d_out(n + off[3]);
  gpu100::DeviceBuffer<T> d_t(n), d_u(n);
  d_x.upload(x);
  d_e.upload(e);
  d_p.upload(p);
  d_out.poison();
  d_t.poison();
  d_u.poison();
  x.erase(x.begin(), x.begin() + off[0]);  // the elements the launch sees
  e.erase(e.begin(), e.begin() + off[1]);
  p.erase(p.begin(), p.begin() + off[2]);
  std::vector<T> ref(n);
  day03::diffusion_cpu(x.data(), e.data(), p.data(), ref.data(), n, step);
  T* out = in_place ? d_p.data() + off[2] : d_out.data() + off[3];
  v.launch(d_x.data() + off[0], d_e.data() + off[1], d_p.data() + off[2], out, d_t.data(),
           d_u.data(), n, step, nullptr);
  sync_check();
  std::vector<T> got(n);
  CUDA_CHECK(cudaMemcpy(got.data(), out, n * sizeof(T), cudaMemcpyDeviceToHost));
  const gpu100::CompareResult cmp = day03::check_diffusion(x, e, p, ref, got, step, v.roundings);
  INFO(cmp.summary());
  REQUIRE(cmp.ok);
}

}  // namespace

TEST_CASE("diffusion: every variant at every type matches the CPU at awkward sizes", "[gpu]") {
  GPU100_REQUIRE_GPU();
  // 1; 3 (less than one pack); 4097 (one past a fp32 tile of 4096 elements, a tail of 1);
  // 1000003 (many tiles, a tail of 3 in fp32 and 3 in the 16-bit types).
  uint64_t seed = 8000;
  day03::for_each_diffusion_type([&](auto tag) {
    using T = typename decltype(tag)::type;
    for (const auto& v : day03::diffusion_variants<T>()) {
      for (int64_t n : gpu100::test_sizes({1, 3, 4097, 1000003})) {
        for (const auto& step : kSteps) {
          INFO(v.name << " " << day03::precision_name<T>() << ", n = " << n
                      << ", abar = " << step.abar << ", w = " << step.w);
          seed += 3;
          check_diffusion_case<T>(v, n, seed, step, {0, 0, 0, 0});
        }
      }
    }
  });
}

TEST_CASE("diffusion: pointers offset by one element take the scalar path and stay correct",
          "[gpu]") {
  GPU100_REQUIRE_GPU();
  // x_t off; out off; all four off by one element (2 or 4 bytes: no longer 16-byte aligned).
  const std::array<int, 4> offsets[] = {{1, 0, 0, 0}, {0, 0, 0, 1}, {1, 1, 1, 1}};
  uint64_t seed = 9000;
  day03::for_each_diffusion_type([&](auto tag) {
    using T = typename decltype(tag)::type;
    for (const auto& v : day03::diffusion_variants<T>()) {
      for (const auto& off : offsets) {
        for (int64_t n : gpu100::test_sizes({3, 4097, 1000003})) {
          INFO(v.name << " " << day03::precision_name<T>() << ", offsets " << off[0] << ","
                      << off[1] << "," << off[2] << "," << off[3] << ", n = " << n);
          seed += 3;
          check_diffusion_case<T>(v, n, seed, kSteps[1], off);
        }
      }
    }
  });
}

TEST_CASE("diffusion: in place, the new frame written over prev", "[gpu]") {
  GPU100_REQUIRE_GPU();
  uint64_t seed = 10000;
  day03::for_each_diffusion_type([&](auto tag) {
    using T = typename decltype(tag)::type;
    for (const auto& v : day03::diffusion_variants<T>()) {
      for (int64_t n : gpu100::test_sizes({4097, 1000003})) {
        INFO(v.name << " " << day03::precision_name<T>() << ", n = " << n);
        seed += 3;
        check_diffusion_case<T>(v, n, seed, kSteps[0], {0, 0, 0, 0}, /*in_place=*/true);
      }
    }
  });
}

TEST_CASE("diffusion: bad n, abar, w and missing scratch are rejected, and nothing is written",
          "[gpu]") {
  GPU100_REQUIRE_GPU();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  day03::for_each_diffusion_type([&](auto tag) {
    using T = typename decltype(tag)::type;
    gpu100::DeviceBuffer<T> d(4);
    d.poison();
    sync_check();
    T* q = d.data();
    for (const auto& v : day03::diffusion_variants<T>()) {
      INFO(v.name << " " << day03::precision_name<T>());
      v.launch(q, q, q, q, q, q, 0, {}, nullptr);  // n = 0: nothing to do
      CHECK_THROWS_AS(v.launch(q, q, q, q, q, q, -5, {}, nullptr), std::invalid_argument);
      for (const day03::DiffusionStep bad : std::vector<day03::DiffusionStep>{
               {0.0, 0.5}, {1.5, 0.5}, {nan, 0.5}, {0.5, -0.1}, {0.5, 1.1}, {0.5, nan}}) {
        CHECK_THROWS_AS(v.launch(q, q, q, q, q, q, 4, bad, nullptr), std::invalid_argument);
      }
    }
    CHECK_THROWS_AS(day03::diffusion_chain<T>(q, q, q, q, nullptr, q, 4, {}, nullptr),
                    std::invalid_argument);
    CHECK_THROWS_AS(day03::diffusion_chain<T>(q, q, q, q, q, nullptr, 4, {}, nullptr),
                    std::invalid_argument);
    sync_check();
    for (const T& x : d.download()) CHECK(std::isnan(gpu100::to_double(x)));  // untouched
  });
}
