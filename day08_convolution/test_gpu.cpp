// day08 GPU tests: every 1D, 2D and Conv2d variant against the CPU reference (double) at awkward
// sizes (not tile multiples; C = 1 and 3; K = 1 and 5; stride 2; padding 0 and 2; R = S = 1, 3, 5;
// dilation), fresh seeded inputs, outputs poisoned with NaN before each launch; conv2d_forward by
// name ("best_fp32" included); the bf16 NHWC variants (v6, v9, v10, v12, cudnn_bf16_nhwc) against
// the CPU on their bf16-rounded inputs at awkward shapes with C % 8 == 0, and their refusals; the
// fp32 NHWC variant (v11, TF32) at awkward shapes with C % 4 == 0, and its refusals; and, with
// cuDNN, every variant against cuDNN at the benchmark shapes ([timing]: too slow for the sanitizer
// runs).
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "common/catch.hpp"
#include "common/compare.hpp"
#include "common/cuda_check.hpp"
#include "common/device_buffer.hpp"
#include "common/half.hpp"
#include "common/random.hpp"
#include "common/tags.hpp"
#include "conv_day.hpp"
#include "conv_layer.hpp"
#include "test_suite.hpp"

using day08_tests::awkward_shapes;
using day08_tests::make;
using day08_tests::sync_check;

namespace {

struct LayerData {
  std::vector<float> x, w, bias;
  gpu100::DeviceBuffer<float> d_x, d_w, d_b, d_y;
  LayerData(const day08::ConvShape& s, uint64_t seed)
      : x(gpu100::random_vector<float>(size_t(s.n) * s.c * s.h * s.w, seed)),
        w(gpu100::random_vector<float>(size_t(s.k) * s.c * s.r * s.s, seed + 1)),
        bias(gpu100::random_vector<float>(size_t(s.k), seed + 2)),
        d_x(x.size()),
        d_w(w.size()),
        d_b(bias.size()),
        d_y(size_t(s.n) * s.k * s.p() * s.q()) {
    d_x.upload(x);
    d_w.upload(w);
    d_b.upload(bias);
  }
  std::vector<float> run(const std::string& name, const day08::ConvShape& s, bool with_bias) {
    d_y.poison();
    day08::conv2d_forward(name, s, d_x.data(), d_w.data(), with_bias ? d_b.data() : nullptr,
                          d_y.data());
    sync_check();
    return d_y.download();
  }
};

// The bf16 NHWC variants' data: x and w converted once (NHWC, KRSC bf16), and the same values
// rounded back to fp32 NCHW / KCRS for the CPU reference.
struct Bf16Data {
  std::vector<float> x_r, w_r, bias;
  gpu100::DeviceBuffer<__nv_bfloat16> d_x, d_w, d_y16;
  gpu100::DeviceBuffer<float> d_b, d_y;
  Bf16Data(const day08::ConvShape& s, uint64_t seed)
      : bias(gpu100::random_vector<float>(size_t(s.k), seed + 2)),
        d_x(size_t(s.n) * s.c * s.h * s.w),
        d_w(size_t(s.k) * s.c * s.r * s.s),
        d_y16(size_t(s.n) * s.k * s.p() * s.q()),
        d_b(bias.size()),
        d_y(size_t(s.n) * s.k * s.p() * s.q()) {
    const auto x = gpu100::random_vector<float>(d_x.size(), seed);
    const auto w = gpu100::random_vector<float>(d_w.size(), seed + 1);
    x_r = gpu100::round_trip<__nv_bfloat16>(x);
    w_r = gpu100::round_trip<__nv_bfloat16>(w);
    d_x.upload(day08::to_nhwc_bf16(s, x));
    d_w.upload(day08::to_krsc_bf16(s, w));
    d_b.upload(bias);
  }
  // The variant's output as fp32 NKPQ (cuDNN's bf16 NPQK converted back).
  std::vector<float> run(const day08::Conv2dVariant& v, const day08::ConvShape& s, bool with_bias) {
    d_y.poison();
    d_y16.poison();
    void* y = v.y_bf16_npqk ? static_cast<void*>(d_y16.data()) : d_y.data();
    v.launch_bf16_nhwc(s, d_x.data(), d_w.data(), with_bias ? d_b.data() : nullptr, y, nullptr);
    sync_check();
    return v.y_bf16_npqk ? day08::npqk_to_nkpq(s, d_y16.download()) : d_y.download();
  }
  std::vector<double> reference(const day08::ConvShape& s, bool with_bias) const {
    std::vector<double> ref(d_y.size());
    day08::conv2d_cpu(s, x_r.data(), w_r.data(), with_bias ? bias.data() : nullptr, ref.data());
    return ref;
  }
};

// The fp32 NHWC variant's data (v11): LayerData's values, with x and w converted once (NHWC,
// KRSC fp32, values unchanged) on the device.
struct F32NhwcData : LayerData {
  F32NhwcData(const day08::ConvShape& s, uint64_t seed) : LayerData(s, seed) {
    d_x.upload(day08::to_nhwc_f32(s, x));
    d_w.upload(day08::to_krsc_f32(s, w));
  }
  std::vector<float> run(const day08::Conv2dVariant& v, const day08::ConvShape& s, bool with_bias) {
    d_y.poison();
    v.launch_f32_nhwc(s, d_x.data(), d_w.data(), with_bias ? d_b.data() : nullptr, d_y.data(),
                      nullptr);
    sync_check();
    return v.y_f32_npqk ? day08::npqk_to_nkpq(s, d_y.download()) : d_y.download();
  }
  std::vector<double> reference(const day08::ConvShape& s, bool with_bias) const {
    std::vector<double> ref(d_y.size());
    day08::conv2d_cpu(s, x.data(), w.data(), with_bias ? bias.data() : nullptr, ref.data());
    return ref;
  }
};

constexpr const char* kV12 = "v12_halo_wgmma_bf16_nhwc";
constexpr const char* kV13 = "v13_halo_wgmma_tf32_nhwc";

const day08::Conv2dVariant& variant(const char* name) {
  const day08::Conv2dVariant* v = day08::find_conv2d_variant(name);
  if (v == nullptr) throw std::logic_error(std::string("no variant ") + name);
  return *v;
}

}  // namespace

TEST_CASE("conv1d variants match the CPU at awkward sizes and mask widths", "[gpu]") {
  GPU100_REQUIRE_GPU();
  uint64_t seed = 100;
  for (int64_t n : gpu100::test_sizes({1, 7, 1023, 1024, 1025, 4099, 100003, (1 << 20) + 3})) {
    for (int mw : {1, 3, 7, 31, 1025}) {
      const auto x = gpu100::random_vector<float>(size_t(n), ++seed);
      const auto mask = gpu100::random_vector<float>(size_t(mw), ++seed);
      std::vector<double> ref(static_cast<size_t>(n));
      day08::conv1d_cpu(x.data(), mask.data(), n, mw, ref.data());
      gpu100::DeviceBuffer<float> d_x(x.size()), d_m(mask.size()), d_y(x.size());
      d_x.upload(x);
      d_m.upload(mask);
      const day08::Tolerance tol = day08::filter_tolerance(mw);
      for (const auto& v : day08::conv1d_variants()) {
        INFO(v.name << ", n = " << n << ", mask " << mw);
        d_y.poison();
        v.launch(d_x.data(), d_m.data(), n, mw, d_y.data(), nullptr);
        sync_check();
        const auto cmp = gpu100::compare(ref, d_y.download(), tol.abs_tol, tol.rel_tol);
        INFO(cmp.summary());
        REQUIRE(cmp.ok);
      }
    }
  }
}

TEST_CASE("2D filter variants match the CPU at awkward image sizes, masks 1 3 5 7", "[gpu]") {
  GPU100_REQUIRE_GPU();
  struct Img {
    int h, w;
  };
  // 65x132 and 129x388: w % 4 == 0 (the float4 / cp.async paths of f5 and f6) with partial
  // tiles on the right and bottom edges (f5's 128 x 32 tiles, f6's 128 x 128); the odd widths
  // take the scalar paths.
  const std::vector<Img> all = {{1, 1},    {7, 5},     {33, 65},   {67, 129},   {130, 257},
                                {65, 132}, {129, 388}, {200, 301}, {1000, 1001}};
  uint64_t seed = 500;
  for (const Img im : all) {
    if (gpu100::test_sizes({int64_t(im.h) * im.w}).empty()) continue;
    const auto x = gpu100::random_vector<float>(size_t(im.h) * im.w, ++seed);
    gpu100::DeviceBuffer<float> d_x(x.size()), d_y(x.size()), d_m(49);
    d_x.upload(x);
    for (int mw : {1, 3, 5, 7}) {
      const auto mask = gpu100::random_vector<float>(size_t(mw) * mw, ++seed);
      d_m.upload(mask);
      std::vector<double> ref(x.size());
      for (int row = 0; row < im.h; ++row) {
        day08::filter2d_cpu_row(x.data(), im.h, im.w, mask.data(), mw, row,
                                ref.data() + size_t(row) * im.w);
      }
      const day08::Tolerance tol = day08::filter_tolerance(mw * mw);
      for (const auto& v : day08::filter2d_variants()) {
        INFO(v.name << ", " << im.h << "x" << im.w << ", mask " << mw);
        d_y.poison();
        v.launch(d_x.data(), d_m.data(), im.h, im.w, mw, d_y.data(), nullptr);
        sync_check();
        const auto cmp = gpu100::compare(ref, d_y.download(), tol.abs_tol, tol.rel_tol);
        INFO(cmp.summary());
        REQUIRE(cmp.ok);
      }
    }
  }
}

TEST_CASE("the 2D filters' three row paths: aligned, shifted and unaligned pointers", "[gpu]") {
  GPU100_REQUIRE_GPU();
  // f5 (and f6, which runs f5 for these) picks its path from w and the pointers: w % 4 == 0 with
  // 16-byte aligned images (float4 rows), any other w with aligned images (rows shifted into place
  // around aligned float4s: every shift 0-3 occurs, as each row starts (row * w) % 4 elements into
  // a float4), or images that are not 16-byte aligned (4-byte accesses). The same image through
  // the shifted and the unaligned path gives the same bits; both against the CPU. The shifted
  // path's tiles start every 124 columns (they overlap by 4): 37 x 1027 and 5 x 4097, several
  // tiles per row and a partial last one; 3 x 130, 2 x 125 and 4 x 249: a second or third tile of
  // 6, 1 and 1 columns; 9 x 258: w % 4 == 2.
  struct Img {
    int h, w;
  };
  uint64_t seed = 640;
  for (const Img im :
       {Img{37, 1027}, Img{5, 4097}, Img{3, 130}, Img{2, 125}, Img{4, 249}, Img{9, 258}}) {
    const size_t n = size_t(im.h) * im.w;
    const auto x = gpu100::random_vector<float>(n, ++seed);
    gpu100::DeviceBuffer<float> d_x(n + 4), d_y(n + 4), d_m(49);
    for (int mw : {1, 3, 7}) {
      const auto mask = gpu100::random_vector<float>(size_t(mw) * mw, ++seed);
      d_m.upload(mask);
      std::vector<double> ref(n);
      for (int row = 0; row < im.h; ++row) {
        day08::filter2d_cpu_row(x.data(), im.h, im.w, mask.data(), mw, row,
                                ref.data() + size_t(row) * im.w);
      }
      const day08::Tolerance tol = day08::filter_tolerance(mw * mw);
      for (const auto& v : day08::filter2d_variants()) {
        std::vector<float> outs[2];
        for (int offset : {0, 1}) {  // 1: x and y are 4 bytes past a 16-byte boundary
          INFO(v.name << ", " << im.h << "x" << im.w << ", mask " << mw << ", offset " << offset);
          d_y.poison();
          CUDA_CHECK(
              cudaMemcpy(d_x.data() + offset, x.data(), n * sizeof(float), cudaMemcpyHostToDevice));
          v.launch(d_x.data() + offset, d_m.data(), im.h, im.w, mw, d_y.data() + offset, nullptr);
          sync_check();
          const auto all = d_y.download();
          outs[offset].assign(all.begin() + offset, all.begin() + offset + long(n));
          const auto cmp = gpu100::compare(ref, outs[offset], tol.abs_tol, tol.rel_tol);
          INFO(cmp.summary());
          REQUIRE(cmp.ok);
          // Nothing is written outside the image.
          if (offset == 1) CHECK(std::isnan(all[0]));
          CHECK(std::isnan(all[offset + n]));
        }
        if (std::string(v.name) == "f5_register_tiled" || std::string(v.name) == "f6_pipelined") {
          const auto same = gpu100::compare_exact(outs[0], outs[1]);
          INFO(v.name << " shifted vs unaligned: " << same.summary());
          CHECK(same.ok);
        }
      }
    }
  }
}

TEST_CASE("f6_pipelined equals f5 bit for bit when its blocks loop over several tiles", "[gpu]") {
  GPU100_REQUIRE_GPU();
  // f6 runs f5's per-tile code in persistent blocks (one per SM on an H100: its two 128-row input
  // windows take 139-146 KB of shared memory). Both images have more 128 x 128 tiles than an
  // H100 has SMs, so blocks compute several tiles and swap and reuse their buffers: the
  // double-buffer protocol is exercised. 3 x 23300 (183 tiles of 3 rows, every row in the
  // zero-filled halo's reach; 69900 outputs) stays under the sanitizer runs' size cap, so
  // racecheck and synccheck see the buffer swaps; 2049 x 4100 (561 tiles, partial edge tiles) is
  // the large case. The same FMAs in the same order: identical outputs; the small image is also
  // checked against the CPU.
  const day08::Filter2dVariant *f5 = nullptr, *f6 = nullptr;
  for (const auto& v : day08::filter2d_variants()) {
    if (std::string(v.name) == "f5_register_tiled") f5 = &v;
    if (std::string(v.name) == "f6_pipelined") f6 = &v;
  }
  REQUIRE(f5 != nullptr);
  REQUIRE(f6 != nullptr);
  struct Img {
    int h, w;
  };
  uint64_t seed = 770;
  for (const Img im : {Img{3, 23300}, Img{2049, 4100}}) {
    if (gpu100::test_sizes({int64_t(im.h) * im.w}).empty()) continue;
    const auto x = gpu100::random_vector<float>(size_t(im.h) * im.w, ++seed);
    gpu100::DeviceBuffer<float> d_x(x.size()), d_y(x.size()), d_m(49);
    d_x.upload(x);
    for (int mw : {1, 3, 5, 7}) {
      INFO(im.h << "x" << im.w << ", mask " << mw);
      const auto mask = gpu100::random_vector<float>(size_t(mw) * mw, ++seed);
      d_m.upload(mask);
      d_y.poison();
      f5->launch(d_x.data(), d_m.data(), im.h, im.w, mw, d_y.data(), nullptr);
      sync_check();
      const auto ref = d_y.download();
      d_y.poison();
      f6->launch(d_x.data(), d_m.data(), im.h, im.w, mw, d_y.data(), nullptr);
      sync_check();
      const auto got = d_y.download();
      const auto cmp = gpu100::compare_exact(ref, got);
      INFO(cmp.summary());
      REQUIRE(cmp.ok);
      if (im.h * int64_t(im.w) <= 100000) {
        std::vector<double> cpu(x.size());
        for (int row = 0; row < im.h; ++row) {
          day08::filter2d_cpu_row(x.data(), im.h, im.w, mask.data(), mw, row,
                                  cpu.data() + size_t(row) * im.w);
        }
        const day08::Tolerance tol = day08::filter_tolerance(mw * mw);
        const auto vs_cpu = gpu100::compare(cpu, got, tol.abs_tol, tol.rel_tol);
        INFO(vs_cpu.summary());
        REQUIRE(vs_cpu.ok);
      }
    }
  }
}

TEST_CASE("Conv2d variants match the CPU at awkward shapes, with and without bias", "[gpu]") {
  GPU100_REQUIRE_GPU();
  uint64_t seed = 900;
  int case_no = 0;
  for (const auto& s : awkward_shapes()) {
    LayerData data(s, seed += 3);
    const bool with_bias = (case_no++ % 2) == 0;
    std::vector<double> ref(data.d_y.size());
    day08::conv2d_cpu(s, data.x.data(), data.w.data(), with_bias ? data.bias.data() : nullptr,
                      ref.data());
    std::vector<std::string> names;
    for (const auto& v : day08::conv2d_variants()) {
      if (gpu100::has_tag(v.tags, "mine")) continue;  // checked by its own test cases
      if (v.is_library && (!day08::have_cudnn() || gpu100::sanitizer_run())) continue;
      if (v.takes_nhwc()) continue;  // the NHWC tests below
      if (gpu100::lacks_code(v)) continue;
      names.emplace_back(v.name);
    }
    names.emplace_back("best_fp32");
    for (const auto& name : names) {
      const day08::Conv2dVariant* v = day08::find_conv2d_variant(name);
      INFO(name << " at " << day08::to_string(s) << (with_bias ? " +bias" : ""));
      if (v->refusal != nullptr && !v->refusal(s, with_bias).empty()) {
        // A variant that does not run this shape says so and launches nothing.
        data.d_y.poison();
        REQUIRE_THROWS_AS(
            v->launch(s, data.d_x.data(), data.d_w.data(), nullptr, data.d_y.data(), nullptr),
            std::invalid_argument);
        continue;
      }
      const std::vector<float> got = data.run(name, s, with_bias);
      // (The cuDNN rows' tol_scale allows for the Winograd or FFT algorithm Find may pick.)
      day08::Tolerance tol = day08::conv2d_tolerance(s, *v);
      if (name == "cudnn_fp32" &&
          day08::cudnn_choice(s, day08::ConvPrecision::kFp32).find("default math") !=
              std::string::npos) {
        // Where no FMA-math algorithm runs the shape, the fp32 row takes a default-math one (its
        // note says so), which cuDNN may run in TF32: TF32's tolerance there.
        const day08::Tolerance t32 = day08::conv2d_tolerance(s, day08::ConvPrecision::kTf32);
        tol = {t32.abs_tol * v->tol_scale, t32.rel_tol * v->tol_scale};
      }
      const auto cmp = gpu100::compare(ref, got, tol.abs_tol, tol.rel_tol);
      INFO((v->is_library ? "cuDNN chose " + day08::cudnn_choice(s, v->precision) : ""));
      INFO(cmp.summary());
      REQUIRE(cmp.ok);
    }
  }
}

TEST_CASE("Conv2d variants are deterministic across repeated calls", "[gpu]") {
  GPU100_REQUIRE_GPU();
  const day08::ConvShape s = make(2, 5, 33, 35, 67, 3, 3, 2, 1);
  LayerData data(s, 4242);
  for (const auto& v : day08::conv2d_variants()) {
    if (v.is_library || v.takes_nhwc()) continue;
    if (v.refusal != nullptr && !v.refusal(s, true).empty()) continue;  // v7: the shape below
    if (gpu100::lacks_code(v)) continue;
    INFO(v.name);
    const auto first = data.run(v.name, s, true);
    const auto again = data.run(v.name, s, true);
    REQUIRE(gpu100::compare_exact(first, again).ok);
  }
  // v7, v8 and v14 (3x3, stride 1 only) at a shape of the same kind.
  const day08::ConvShape s1 = make(2, 5, 33, 35, 67, 3, 3, 1, 1);
  LayerData d1(s1, 4244);
  for (const char* name :
       {"v7_winograd", "v8_winograd_tf32", "v14_winograd_f4", "v16_winograd_f4_gemm"}) {
    if (gpu100::lacks_code(variant(name))) continue;
    INFO(name);
    const auto first = d1.run(name, s1, true);
    const auto again = d1.run(name, s1, true);
    REQUIRE(gpu100::compare_exact(first, again).ok);
  }
  // The bf16 NHWC variants (v6, v9, v10) at a C % 8 == 0 shape of the same kind, and v12 (stride
  // 1, K <= 64 only) at a stride-1 one.
  const day08::ConvShape s16 = make(2, 24, 33, 35, 67, 3, 3, 2, 1);
  const day08::ConvShape s16_1 = make(2, 24, 33, 35, 62, 3, 3, 1, 1);
  for (const day08::ConvShape& sb : {s16, s16_1}) {
    Bf16Data d16(sb, 4343);
    for (const auto& v : day08::conv2d_variants()) {
      if (v.is_library || !v.takes_bf16_nhwc() || gpu100::lacks_code(v)) continue;
      if (v.refusal != nullptr && !v.refusal(sb, true).empty()) continue;
      INFO(v.name << " at " << day08::to_string(sb));
      const auto first = d16.run(v, sb, true);
      const auto again = d16.run(v, sb, true);
      REQUIRE(gpu100::compare_exact(first, again).ok);
    }
  }
  // The fp32 NHWC variants (v11, and v13 where it takes the shape) at the same shape.
  F32NhwcData d32(s16, 4344);
  for (const auto& v : day08::conv2d_variants()) {
    if (v.is_library || !v.takes_f32_nhwc() || gpu100::lacks_code(v)) continue;
    if (!v.refusal(s16, true).empty()) continue;
    INFO(v.name);
    const auto first = d32.run(v, s16, true);
    const auto again = d32.run(v, s16, true);
    REQUIRE(gpu100::compare_exact(first, again).ok);
  }
}

TEST_CASE("v15 equals v4 bit for bit, on 64- and 128-filter tiles", "[gpu]") {
  GPU100_REQUIRE_GPU();
  if (gpu100::lacks_code(variant("v15_implicit_gemm_crsk"))) return;
  // The same FMAs in the same order (only the filters' layout and the tile's width differ), so
  // the same bits: the awkward shapes, and K past one and two 128-filter tiles at stride 2.
  std::vector<day08::ConvShape> shapes = awkward_shapes();
  shapes.push_back(make(2, 13, 21, 19, 130, 3, 3, 2, 1));
  shapes.push_back(make(1, 32, 9, 11, 257, 1, 1, 2, 0));
  uint64_t seed = 5150;
  for (const auto& s : shapes) {
    INFO(day08::to_string(s));
    LayerData data(s, seed += 7);
    const auto v4 = data.run("v4_implicit_gemm", s, true);
    const auto v15 = data.run("v15_implicit_gemm_crsk", s, true);
    REQUIRE(gpu100::compare_exact(v4, v15).ok);
  }
}

TEST_CASE("v16 equals v14 bit for bit (the same transforms and sums, in three kernels)", "[gpu]") {
  GPU100_REQUIRE_GPU();
  // The 3x3 stride-1 awkward shapes, C and K past v14's chunk and block and the batched GEMM's
  // 128 x 128 tile, tiles past a multiple of 4, padding 0 and 2.
  std::vector<day08::ConvShape> shapes;
  for (const auto& s : awkward_shapes()) {
    if (day08::v16_refusal(s, true).empty()) shapes.push_back(s);
  }
  shapes.push_back(make(2, 130, 11, 14, 131, 3, 3, 1, 1));
  shapes.push_back(make(3, 9, 17, 13, 40, 3, 3, 1, 0));
  shapes.push_back(make(1, 33, 10, 9, 7, 3, 3, 1, 2));
  uint64_t seed = 6160;
  for (const auto& s : shapes) {
    if (!gpu100::test_sizes({int64_t(s.n) * s.k * s.p() * s.q()}).empty()) {
      INFO(day08::to_string(s));
      LayerData data(s, seed += 7);
      const auto v14 = data.run("v14_winograd_f4", s, true);
      const auto v16 = data.run("v16_winograd_f4_gemm", s, true);
      REQUIRE(gpu100::compare_exact(v14, v16).ok);
    }
  }
}

namespace {

// v6's awkward shapes: C = 8, 16, 24, 40, 64 (the 16-byte path needs C % 8 == 0; 24 and 40 put
// (r, s) boundaries inside a 32-wide slab), H and W not tile multiples, K = 1, 5, 67, 70, stride
// 2, padding 0 and 2, R = S = 1, 3, 5, R != S, dilation 2, a single output pixel. Then v10's
// (a slab is one tap x 64 channels, its A tile walked by the TMA across rows and images): C = 72
// (a tap's second slab mostly zero-filled) with K = 130 (a partial 128-filter tile), C = 128 at
// stride 2, C = 64 with padding 0 and K = 66, the 1x1 stride-2 shortcut; R != S above checks the
// window corners' order (h and w differ there).
std::vector<day08::ConvShape> bf16_shapes() {
  const std::vector<day08::ConvShape> all = {
      make(1, 8, 7, 9, 1, 3, 3, 1, 1),        // C = 8, K = 1
      make(2, 16, 19, 23, 5, 3, 3, 1, 0),     // C = 16, K = 5, padding 0
      make(3, 8, 17, 31, 5, 5, 5, 2, 2),      // 5x5, stride 2, padding 2
      make(1, 24, 13, 11, 70, 1, 1, 1, 0),    // 1x1 (GEMM_K = 24 < one slab), K = 70
      make(2, 8, 33, 35, 67, 3, 3, 2, 1),     // stride 2, K = 67
      make(1, 16, 20, 21, 8, 3, 3, 1, 2, 2),  // dilation 2
      make(3, 64, 14, 14, 64, 3, 3, 1, 1),    // C = 64 (the ResNet layer's), M = 588
      make(2, 40, 15, 12, 9, 3, 5, 1, 2),     // R != S, C = 40
      make(1, 8, 5, 5, 1, 5, 5, 1, 0),        // a single output pixel
      make(2, 16, 130, 3, 3, 3, 3, 1, 1),     // tall and narrow: blocks span several rows
      make(1, 72, 11, 13, 130, 3, 3, 1, 1),   // C = 72, K = 130
      make(2, 128, 9, 7, 128, 3, 3, 2, 1),    // C = 128, stride 2
      make(1, 64, 13, 17, 66, 3, 3, 1, 0),    // padding 0, K = 66
      make(3, 64, 10, 9, 64, 1, 1, 2, 0),     // the 1x1 stride-2 shortcut
  };
  std::vector<day08::ConvShape> kept;
  for (const auto& s : all) {
    const int64_t outputs = int64_t(s.n) * s.k * s.p() * s.q();
    if (!gpu100::test_sizes({outputs}).empty()) kept.push_back(s);
  }
  return kept;
}

}  // namespace

TEST_CASE("bf16 NHWC variants match the CPU on bf16-rounded inputs at awkward shapes", "[gpu]") {
  GPU100_REQUIRE_GPU();
  uint64_t seed = 1300;
  int case_no = 0;
  for (const auto& s : bf16_shapes()) {
    Bf16Data data(s, seed += 3);
    const bool with_bias = (case_no++ % 2) == 0;
    for (const auto& v : day08::conv2d_variants()) {
      if (!v.takes_bf16_nhwc()) continue;
      if (v.is_library && (!day08::have_cudnn() || gpu100::sanitizer_run())) continue;
      if (gpu100::lacks_code(v)) continue;
      const auto runs = [&](bool b) { return v.refusal == nullptr || v.refusal(s, b).empty(); };
      // v12 takes only the layers whose filters it keeps in shared memory (its own test below);
      // every other bf16 variant takes every shape here.
      if (std::string(v.name) == kV12 && !runs(false)) continue;
      const bool bias = with_bias && runs(true);  // cuDNN bf16: no bias
      INFO(v.name << " at " << day08::to_string(s) << (bias ? " +bias" : ""));
      REQUIRE(runs(bias));
      const day08::Tolerance tol = day08::conv2d_tolerance(s, v);
      const auto cmp =
          gpu100::compare(data.reference(s, bias), data.run(v, s, bias), tol.abs_tol, tol.rel_tol);
      INFO(cmp.summary());
      REQUIRE(cmp.ok);
    }
  }
}

// v12's and v13's layers (3x3, stride 1, C and K <= 64) against the CPU on fresh inputs, with and
// without bias in turn: Data is the variant's operands (Bf16Data for v12, F32NhwcData for v13).
template <class Data>
void check_halo_shapes(const char* name, const std::vector<day08::ConvShape>& shapes,
                       uint64_t seed) {
  const auto& v = variant(name);
  bool with_bias = false;
  for (const auto& s : shapes) {
    REQUIRE(v.refusal(s, true).empty());
    Data data(s, seed += 3);
    with_bias = !with_bias;
    INFO(v.name << " at " << day08::to_string(s) << (with_bias ? " +bias" : ""));
    const day08::Tolerance tol = day08::conv2d_tolerance(s, v);
    const auto cmp = gpu100::compare(data.reference(s, with_bias), data.run(v, s, with_bias),
                                     tol.abs_tol, tol.rel_tol);
    INFO(cmp.summary());
    REQUIRE(cmp.ok);
  }
}

// The layers v12 and v13 do not keep in shared memory (5x5, stride 2, dilation 2, C over 64, C not
// a multiple of c_multiple, K over 64) are refused before any launch, in every build: the refusal
// is non-empty, `launch` (the variant's entry point on `data`'s buffers) throws
// std::invalid_argument, and the poisoned output stays untouched.
template <class Data, class Launch>
void check_halo_refusals(const char* name, int c_multiple, Data& data, const day08::ConvShape& ok,
                         Launch launch) {
  const auto& v = variant(name);
  std::vector<day08::ConvShape> refused(6, ok);
  refused[0].r = refused[0].s = 5, refused[0].pad = 2;  // 5x5
  refused[1].stride = 2;                                // stride 2
  refused[2].dilation = 2, refused[2].pad = 2;          // dilation 2
  refused[3].c = 64 + c_multiple;                       // C > 64
  refused[4].c = 64 - c_multiple / 2;                   // C not a multiple of c_multiple
  refused[5].k = 66;                                    // K > 64
  data.d_y.poison();
  for (const auto& s : refused) {
    INFO(day08::to_string(s));
    CHECK_FALSE(v.refusal(s, false).empty());
    // The buffers are large enough for ok; these shapes are refused before any launch.
    CHECK_THROWS_AS(launch(s), std::invalid_argument);
  }
  sync_check();
  for (float y : data.d_y.download()) REQUIRE(std::isnan(y));
}

TEST_CASE("v12 (resident filters, TMA halo) matches the CPU at awkward shapes of its layers",
          "[gpu]") {
  GPU100_REQUIRE_GPU();
  GPU100_REQUIRE_BUILD(variant(kV12).needs, kV12);
  // 3x3 at stride 1 only, C % 8 == 0 and <= 64, K <= 64: H and W not multiples of the 8 x 8 tile,
  // C = 8, 24, 40 (chunks of zeros in the halo and filters), K = 1 and odd, padding 0 and 2, a
  // single output pixel, and 1440 tiles (several rounds per warpgroup, each halo stage refilled).
  check_halo_shapes<Bf16Data>(kV12,
                              {
                                  make(2, 64, 21, 19, 64, 3, 3, 1, 1),   // the ResNet layer's C, K
                                  make(1, 8, 7, 9, 1, 3, 3, 1, 1),       // C = 8, K = 1
                                  make(3, 24, 17, 9, 10, 3, 3, 1, 0),    // padding 0, C = 24
                                  make(1, 40, 5, 3, 63, 3, 3, 1, 2),     // padding 2, K = 63
                                  make(1, 16, 3, 3, 8, 3, 3, 1, 0),      // a single output pixel
                                  make(10, 16, 96, 96, 16, 3, 3, 1, 1),  // 1440 tiles
                              },
                              1700);
}

TEST_CASE("v12 refuses the layers it does not keep in shared memory, launching nothing", "[gpu]") {
  GPU100_REQUIRE_GPU();
  const day08::ConvShape ok = make(1, 64, 9, 10, 64, 3, 3, 1, 1);
  Bf16Data data(ok, 1800);
  check_halo_refusals(kV12, 8, data, ok, [&](const day08::ConvShape& s) {
    day08::conv2d_v12_halo_wgmma_bf16_nhwc(s, data.d_x.data(), data.d_w.data(), nullptr,
                                           data.d_y.data(), nullptr);
  });
}

TEST_CASE("v9 with C = 4 and an even S (two taps per 16-byte copy) matches the CPU", "[gpu]") {
  GPU100_REQUIRE_GPU();
  // The stem as the network runs it (7x8, stride 2, pad 3, odd H, even W), odd W, K = 5 and 70,
  // 1x2 filters, dilation 2, a single output pixel.
  const std::vector<day08::ConvShape> shapes = {
      make(2, 4, 23, 30, 64, 7, 8, 2, 3),   make(1, 4, 9, 11, 5, 3, 2, 1, 1),
      make(3, 4, 17, 16, 70, 5, 4, 2, 2),   make(2, 4, 8, 9, 8, 1, 2, 1, 0),
      make(1, 4, 12, 13, 6, 3, 4, 1, 3, 2), make(1, 4, 7, 8, 3, 7, 8, 1, 0)};
  const auto& v9 = variant("v9_implicit_gemm_wgmma_bf16_nhwc");
  const auto& v6 = variant("v6_implicit_gemm_bf16_nhwc");
  uint64_t seed = 1400;
  for (const auto& s : shapes) {
    INFO(day08::to_string(s));
    REQUIRE(v9.refusal(s, true).empty());
    REQUIRE_FALSE(v6.refusal(s, false).empty());  // v6 copies 16 bytes of one tap
    if (gpu100::lacks_code(v9)) continue;
    Bf16Data data(s, seed += 3);
    for (bool bias : {false, true}) {
      const day08::Tolerance tol = day08::conv2d_tolerance(s, v9);
      const auto cmp =
          gpu100::compare(data.reference(s, bias), data.run(v9, s, bias), tol.abs_tol, tol.rel_tol);
      INFO((bias ? "+bias: " : "") << cmp.summary());
      REQUIRE(cmp.ok);
    }
  }
  // C = 4 with an odd S is refused.
  REQUIRE_FALSE(v9.refusal(make(1, 4, 9, 9, 8, 3, 3, 1, 1), false).empty());
}

TEST_CASE(
    "v6, v9, v10 and v12 reject C not a multiple of 8 and unaligned x or w, launching nothing",
    "[gpu]") {
  GPU100_REQUIRE_GPU();
  const day08::ConvShape s = make(1, 16, 9, 10, 5, 3, 3, 1, 1);
  Bf16Data data(s, 1500);
  using Launch = void (*)(const day08::ConvShape&, const __nv_bfloat16*, const __nv_bfloat16*,
                          const float*, float*, cudaStream_t);
  struct Case {
    const char* name;
    Launch launch;
  };
  for (const Case c :
       {Case{"v6_implicit_gemm_bf16_nhwc", day08::conv2d_v6_implicit_gemm_bf16_nhwc},
        Case{"v9_implicit_gemm_wgmma_bf16_nhwc", day08::conv2d_v9_implicit_gemm_wgmma_bf16_nhwc},
        Case{"v10_tma_im2col_wgmma_bf16_nhwc", day08::conv2d_v10_tma_im2col_wgmma_bf16_nhwc},
        Case{"v12_halo_wgmma_bf16_nhwc", day08::conv2d_v12_halo_wgmma_bf16_nhwc}}) {
    INFO(c.name);
    data.d_y.poison();
    // 2 bytes past the buffer's start: not 16-byte aligned. (These are refused before the
    // variant asks for its build, so they throw std::invalid_argument in every build.)
    CHECK_THROWS_AS(
        c.launch(s, data.d_x.data() + 1, data.d_w.data(), nullptr, data.d_y.data(), nullptr),
        std::invalid_argument);
    CHECK_THROWS_AS(
        c.launch(s, data.d_x.data(), data.d_w.data() + 1, nullptr, data.d_y.data(), nullptr),
        std::invalid_argument);
    day08::ConvShape c12 = s;
    c12.c = 12;  // the buffers are large enough; the shape is refused before any launch
    CHECK_THROWS_AS(
        c.launch(c12, data.d_x.data(), data.d_w.data(), nullptr, data.d_y.data(), nullptr),
        std::invalid_argument);
    sync_check();
    // Nothing ran: the output is still all poison.
    for (float v : data.d_y.download()) REQUIRE(std::isnan(v));
    // And the aligned call works (where this build has the variant's code).
    const auto& v = variant(c.name);
    if (gpu100::lacks_code(v)) continue;
    const day08::Tolerance tol = day08::conv2d_tolerance(s, v.precision);
    REQUIRE(
        gpu100::compare(data.reference(s, false), data.run(v, s, false), tol.abs_tol, tol.rel_tol)
            .ok);
  }
}

TEST_CASE("v11 (fp32 NHWC as TF32) matches the CPU at awkward shapes", "[gpu]") {
  GPU100_REQUIRE_GPU();
  // v10's shapes (C % 8 == 0), then C = 4 and 12 (16-byte rows; a slab of 32 channels mostly
  // zero-filled), C = 36 (a tap's second slab holds 4 channels) with K = 130, C = 32 with a single
  // output pixel, and C = 96 at stride 2 with R != S.
  std::vector<day08::ConvShape> shapes = bf16_shapes();
  for (const auto& s : {make(2, 4, 15, 17, 9, 3, 3, 1, 1), make(1, 12, 21, 19, 70, 5, 5, 2, 2),
                        make(1, 36, 11, 13, 130, 3, 3, 1, 1), make(1, 32, 5, 5, 3, 5, 5, 1, 0),
                        make(2, 96, 9, 12, 66, 3, 5, 2, 2)}) {
    if (!gpu100::test_sizes({int64_t(s.n) * s.k * s.p() * s.q()}).empty()) shapes.push_back(s);
  }
  uint64_t seed = 1600;
  int case_no = 0;
  for (const auto& v : day08::conv2d_variants()) {
    if (!v.takes_f32_nhwc() || gpu100::lacks_code(v)) continue;
    if (v.is_library && (!day08::have_cudnn() || gpu100::sanitizer_run())) continue;
    for (const auto& s : shapes) {
      // v13 takes only the layers whose filters it keeps in shared memory (its own test below).
      if (std::string(v.name) == kV13 && !v.refusal(s, false).empty()) continue;
      F32NhwcData data(s, seed += 3);
      const bool with_bias = (case_no++ % 2) == 0;
      INFO(v.name << " at " << day08::to_string(s) << (with_bias ? " +bias" : ""));
      REQUIRE((v.refusal == nullptr || v.refusal(s, with_bias).empty()));
      const day08::Tolerance tol = day08::conv2d_tolerance(s, v);
      const auto cmp = gpu100::compare(data.reference(s, with_bias), data.run(v, s, with_bias),
                                       tol.abs_tol, tol.rel_tol);
      INFO(cmp.summary());
      REQUIRE(cmp.ok);
    }
  }
}

TEST_CASE("v13 (TF32, resident filters, TMA halo) matches the CPU at awkward shapes of its layers",
          "[gpu]") {
  GPU100_REQUIRE_GPU();
  GPU100_REQUIRE_BUILD(variant(kV13).needs, kV13);
  // 3x3 at stride 1 only, C % 4 == 0 and <= 64, K <= 64: H and W not multiples of the 8 x 8 tile,
  // C = 4, 12 (the second 32-channel half all zeros), 36 (a chunk past C inside the second half),
  // K = 1 and odd, padding 0 and 2, a single output pixel, and 1440 tiles (several rounds per
  // warpgroup, each halo stage refilled after its epilogue).
  check_halo_shapes<F32NhwcData>(kV13,
                                 {
                                     make(2, 64, 21, 19, 64, 3, 3, 1, 1),   // the ResNet layer's
                                     make(1, 4, 7, 9, 1, 3, 3, 1, 1),       // C = 4, K = 1
                                     make(3, 12, 17, 9, 10, 3, 3, 1, 0),    // padding 0, C = 12
                                     make(1, 36, 5, 3, 63, 3, 3, 1, 2),     // padding 2, C = 36
                                     make(1, 16, 3, 3, 8, 3, 3, 1, 0),      // one output pixel
                                     make(10, 16, 96, 96, 16, 3, 3, 1, 1),  // 1440 tiles
                                 },
                                 1750);
}

TEST_CASE("v13 refuses the layers it does not keep in shared memory, launching nothing", "[gpu]") {
  GPU100_REQUIRE_GPU();
  const day08::ConvShape ok = make(1, 64, 9, 10, 64, 3, 3, 1, 1);
  F32NhwcData data(ok, 1850);
  const auto launch = [&](const day08::ConvShape& s, int x_off, int w_off) {
    day08::conv2d_v13_halo_wgmma_tf32_nhwc(s, data.d_x.data() + x_off, data.d_w.data() + w_off,
                                           nullptr, data.d_y.data(), nullptr);
  };
  check_halo_refusals(kV13, 4, data, ok, [&](const day08::ConvShape& s) { launch(s, 0, 0); });
  // 4 bytes past the buffers' start: not 16-byte aligned.
  CHECK_THROWS_AS(launch(ok, 1, 0), std::invalid_argument);
  CHECK_THROWS_AS(launch(ok, 0, 1), std::invalid_argument);
  sync_check();
  for (float y : data.d_y.download()) REQUIRE(std::isnan(y));
}

// v10 and v11 (where this build has their code) against the CPU at each shape, on fresh inputs,
// with and without bias in turn; with `repeat`, a second call must give the same bits.
void check_v10_v11(const std::vector<day08::ConvShape>& shapes, uint64_t seed, bool repeat) {
  int case_no = 0;
  for (const auto& s : shapes) {
    for (const char* name : {"v10_tma_im2col_wgmma_bf16_nhwc", "v11_tma_im2col_wgmma_tf32_nhwc"}) {
      const auto& v = variant(name);
      if (gpu100::lacks_code(v)) continue;
      const bool with_bias = (case_no++ % 2) == 0;
      INFO(name << " at " << day08::to_string(s) << (with_bias ? " +bias" : ""));
      std::vector<double> ref;
      std::vector<float> first, again;
      const auto go = [&](auto& data) {
        ref = data.reference(s, with_bias);
        first = data.run(v, s, with_bias);
        if (repeat) again = data.run(v, s, with_bias);
      };
      if (v.takes_bf16_nhwc()) {
        Bf16Data data(s, seed += 3);
        go(data);
      } else {
        F32NhwcData data(s, seed += 3);
        go(data);
      }
      const day08::Tolerance tol = day08::conv2d_tolerance(s, v);
      const auto cmp = gpu100::compare(ref, first, tol.abs_tol, tol.rel_tol);
      INFO(cmp.summary());
      REQUIRE(cmp.ok);
      if (repeat) REQUIRE(gpu100::compare_exact(first, again).ok);
    }
  }
}

TEST_CASE("v10 and v11 split-K: deep layers with few tiles match the CPU, bit for bit each call",
          "[gpu]") {
  GPU100_REQUIRE_GPU();
  // Few output tiles and many slabs: each tile's slabs are cut into ranges whose partial sums
  // are added by the block that brings the last one (tma_im2col_conv.cuh). 512 -> 512 at 7 x 7
  // (one 128-pixel tile per 128 filters: 4 tiles, 72 bf16 or 144 TF32 slabs each), 256 -> 130
  // at 9 x 11 with stride 2 (a partial filter tile), and N = 2 at 5 x 5 (one tile over both
  // images). The sums are added in split order, so repeated calls give the same bits.
  check_v10_v11({make(1, 512, 7, 7, 512, 3, 3, 1, 1), make(1, 256, 9, 11, 130, 3, 3, 2, 1),
                 make(2, 128, 5, 5, 64, 3, 3, 1, 1)},
                1800, true);
}

TEST_CASE("v10 and v11 with 256-filter tiles: K a multiple of 256 over many pixels matches the CPU",
          "[gpu]") {
  GPU100_REQUIRE_GPU();
  // K % 256 == 0 and more than 66 tiles of 128 pixels (half of an H100's 132 blocks), so the
  // launcher takes the m64n256 tiles (tma_im2col_conv.cuh): odd H and W, C not a multiple of 64
  // (the last slab of each tap partly zero-filled), two filter tiles at K = 512, and stride 2 with
  // padding 0. The last pixel tile is partial in every shape.
  check_v10_v11({make(3, 24, 57, 57, 256, 3, 3, 1, 1), make(2, 40, 61, 71, 512, 3, 3, 1, 1),
                 make(4, 16, 97, 93, 256, 3, 3, 2, 0)},
                1900, false);
}

namespace {

// The fused layer form (y = relu(conv + bias + residual), NPQK) of v10 (bf16) and v11 (TF32)
// through their group launchers, in the given split-K mode, against the CPU: on the bf16-rounded
// inputs for v10. Residual + ReLU on every other shape (bias only on the rest); a group of two
// convolutions (their own x, w and y, one per blockIdx.z) on the shapes where `group2`; a
// second call must give the same bits (the sums are added in a fixed order).
// kHalo (TF32): v13's group launcher instead of v11's (no split-K; `mode` unused).
template <class T, bool kHalo = false>
void check_fused_split(const day08::ConvShape& s, uint64_t seed, bool residual_relu, bool group2,
                       day08::SplitKMode mode) {
  constexpr bool kBf16 = std::is_same_v<T, __nv_bfloat16>;
  static_assert(!(kBf16 && kHalo), "v13 is TF32");
  const auto& v = variant(kBf16   ? "v10_tma_im2col_wgmma_bf16_nhwc"
                          : kHalo ? kV13
                                  : "v11_tma_im2col_wgmma_tf32_nhwc");
  const size_t x_size = size_t(s.n) * s.c * s.h * s.w, w_size = size_t(s.k) * s.c * s.r * s.s;
  const size_t y_size = size_t(s.n) * s.k * s.p() * s.q();
  const int count = group2 ? 2 : 1;
  const auto bias = gpu100::random_vector<float>(size_t(s.k), seed + 2);
  gpu100::DeviceBuffer<float> d_b(bias.size());
  d_b.upload(bias);
  std::vector<std::vector<float>> x(2), w(2), res(2);  // NCHW, KCRS (rounded for bf16); res NPQK
  std::vector<gpu100::DeviceBuffer<T>> d_x, d_w, d_r, d_y;
  d_x.reserve(2), d_w.reserve(2), d_r.reserve(2), d_y.reserve(2);
  day08::ConvGroup<T> grp;
  grp.count = count;
  grp.relu = residual_relu;
  for (int i = 0; i < count; ++i) {
    x[i] = gpu100::random_vector<float>(x_size, seed + 10 * i + 3);
    w[i] = gpu100::random_vector<float>(w_size, seed + 10 * i + 4);
    res[i] = gpu100::random_vector<float>(y_size, seed + 10 * i + 5);
    d_x.emplace_back(x_size);
    d_w.emplace_back(w_size);
    d_r.emplace_back(y_size);
    d_y.emplace_back(y_size);
    if constexpr (kBf16) {
      d_x[i].upload(day08::to_nhwc_bf16(s, x[i]));
      d_w[i].upload(day08::to_krsc_bf16(s, w[i]));
      x[i] = gpu100::round_trip<__nv_bfloat16>(x[i]);
      w[i] = gpu100::round_trip<__nv_bfloat16>(w[i]);
      res[i] = gpu100::round_trip<__nv_bfloat16>(res[i]);
      d_r[i].upload(gpu100::convert_from_float<__nv_bfloat16>(res[i]));
    } else {
      d_x[i].upload(day08::to_nhwc_f32(s, x[i]));
      d_w[i].upload(day08::to_krsc_f32(s, w[i]));
      d_r[i].upload(res[i]);
    }
    grp.op[i] = {d_x[i].data(), d_w[i].data(), d_b.data(), residual_relu ? d_r[i].data() : nullptr,
                 d_y[i].data()};
  }
  const auto run = [&] {
    std::vector<std::vector<float>> y(count);
    for (int i = 0; i < count; ++i) d_y[i].poison();
    if constexpr (kBf16) {
      day08::detail::conv2d_v10_group(s, grp, nullptr, mode);
    } else if constexpr (kHalo) {
      day08::detail::conv2d_v13_group(s, grp, nullptr);
    } else {
      day08::detail::conv2d_v11_group(s, grp, nullptr, mode);
    }
    sync_check();
    for (int i = 0; i < count; ++i) y[i] = day08::npqk_to_nkpq(s, d_y[i].download());
    return y;
  };
  const auto first = run(), again = run();
  const int pq = s.p() * s.q();
  const day08::Tolerance tol = day08::conv2d_tolerance(s, v);
  for (int i = 0; i < count; ++i) {
    std::vector<double> ref(y_size);
    day08::conv2d_cpu(s, x[i].data(), w[i].data(), bias.data(), ref.data());
    for (size_t o = 0; o < y_size; ++o) {  // o: NKPQ; the residual is NPQK
      const size_t n = o / (size_t(s.k) * pq), k = o / pq % s.k, p = o % pq;
      if (residual_relu) ref[o] = std::max(0.0, ref[o] + res[i][(n * pq + p) * s.k + k]);
    }
    INFO(v.name << (mode == day08::SplitKMode::kCluster ? " cluster" : " workspace")
                << " split-K, conv " << i << " of " << count << " at " << day08::to_string(s)
                << (residual_relu ? " +residual +relu" : " +bias"));
    const auto cmp = gpu100::compare(ref, first[i], tol.abs_tol, tol.rel_tol);
    INFO(cmp.summary());
    REQUIRE(cmp.ok);
    REQUIRE(gpu100::compare_exact(first[i], again[i]).ok);
  }
}

// Small-batch shapes that v10's and v11's launcher splits (the tiles fill at most half the GPU),
// as the network's layers at N = 1: odd H and W, C = 128, 256 and 512, K = 64, 128, 130, 256 and
// 512, 3x3 at stride 1 and 2, 1x1 at stride 2, 3x1. On an H100 or H200 the cluster rule
// (tma_im2col_conv.cuh) takes, in bf16, clusters of 8 (36 or 72 slabs), 4 (18 or 24 slabs:
// C = 128 3x3, C = 512 3x1) and 2 (8 slabs: C = 512 1x1; the workspace rule leaves that one
// whole); TF32 has twice the slabs, so 8 and 4. 128- and 64-filter tiles; K = 130 through the pairs
// epilogue (K % 8 != 0). Both modes, on the same shapes.
std::vector<day08::ConvShape> small_batch_split_shapes() {
  return {make(1, 256, 15, 15, 256, 3, 3, 1, 1), make(1, 512, 7, 7, 512, 3, 3, 1, 1),
          make(1, 256, 29, 27, 512, 3, 3, 2, 1), make(1, 512, 9, 11, 128, 1, 1, 2, 0),
          make(1, 256, 9, 11, 130, 3, 3, 2, 1),  make(1, 256, 13, 11, 64, 3, 3, 1, 1),
          make(1, 128, 27, 29, 128, 3, 3, 1, 1), make(1, 512, 7, 9, 256, 3, 1, 1, 1)};
}

void check_split_mode(day08::SplitKMode mode, uint64_t seed) {
  const auto shapes = small_batch_split_shapes();
  for (size_t i = 0; i < shapes.size(); ++i) {
    check_fused_split<__nv_bfloat16>(shapes[i], seed += 20, i % 2 == 0, i % 3 == 1, mode);
    check_fused_split<float>(shapes[i], seed += 20, i % 2 == 1, i % 3 == 2, mode);
  }
  // The day's variant form (fp32 NKPQ out + bias) of v10 at two of the shapes.
  for (const auto& s : {shapes[1], shapes[4]}) {
    Bf16Data data(s, seed += 20);
    day08::ConvGroup<__nv_bfloat16, float> grp;
    grp.op[0] = {data.d_x.data(), data.d_w.data(), data.d_b.data(), nullptr, data.d_y.data()};
    data.d_y.poison();
    day08::detail::conv2d_v10_group(s, grp, nullptr, mode);
    sync_check();
    const auto& v = variant("v10_tma_im2col_wgmma_bf16_nhwc");
    const day08::Tolerance tol = day08::conv2d_tolerance(s, v);
    INFO("v10 NKPQ at " << day08::to_string(s));
    const auto cmp =
        gpu100::compare(data.reference(s, true), data.d_y.download(), tol.abs_tol, tol.rel_tol);
    INFO(cmp.summary());
    REQUIRE(cmp.ok);
  }
}

}  // namespace

TEST_CASE("v10 and v11 cluster split-K: small-batch layers match the CPU, bit for bit each call",
          "[gpu]") {
  GPU100_REQUIRE_BUILD(gpu100::ArchNeed::kSm90a, "v10's and v11's split-K");
  check_split_mode(day08::SplitKMode::kCluster, 2000);
}

TEST_CASE("v10 and v11 workspace split-K: the same layers match the CPU, bit for bit each call",
          "[gpu]") {
  GPU100_REQUIRE_BUILD(gpu100::ArchNeed::kSm90a, "v10's and v11's split-K");
  check_split_mode(day08::SplitKMode::kWorkspace, 2000);
}

TEST_CASE("v10 and v11 fused in 3 stages, two blocks per SM: C >= 128 over many pixels", "[gpu]") {
  GPU100_REQUIRE_BUILD(gpu100::ArchNeed::kSm90a, "v10's and v11's fused form");
  // The fused layer form with C >= 128 and more 128 x 128 tiles than an H100 has SMs but fewer
  // than two per block of the ping-pong tiling, so the launcher takes the 3-stage tiling
  // (tma_im2col_conv.cuh): C = 136 (its last slab partly zero-filled) with K = 192 (the second
  // filter tile half empty; 138 tiles), and stride 2 in a group of two convolutions (72 tiles
  // each); odd H and W, the last pixel tile partial in both. No split-K runs here (the tiles fill
  // the GPU), whichever mode is passed.
  const day08::ConvShape a = make(1, 136, 91, 97, 192, 3, 3, 1, 1);
  const day08::ConvShape b = make(4, 128, 97, 93, 128, 3, 3, 2, 1);
  check_fused_split<__nv_bfloat16>(a, 3100, true, false, day08::SplitKMode::kCluster);
  check_fused_split<float>(a, 3200, false, false, day08::SplitKMode::kCluster);
  check_fused_split<__nv_bfloat16>(b, 3300, false, true, day08::SplitKMode::kCluster);
  check_fused_split<float>(b, 3400, true, true, day08::SplitKMode::kCluster);
}

TEST_CASE("v10 and v11 ping-pong: two or more 128-filter tiles per block match the CPU", "[gpu]") {
  GPU100_REQUIRE_BUILD(gpu100::ArchNeed::kSm90a, "v10's and v11's ping-pong tiling");
  // Tiles of 8 slabs or more, at least two per block of one per SM on an H100 (264 for one
  // convolution, 132 each in a group of two), so the launcher takes the ping-pong tiling
  // (tma_im2col_conv.cuh), in which the two consumer warpgroups run whole tiles in turn: C = 72
  // (18 slabs, the last of each tap partly zero-filled) with K = 192 (the second filter tile half
  // empty): 270 tiles over 132 blocks, so in six blocks warpgroup 0 runs two tiles and warpgroup 1
  // one; the day's fp32 NKPQ form, then the fused form. And the network's 3x3/2 shape with C = 64
  // (9 slabs, 144 tiles each) in a group of two, fused. Then K = 256 over 272 tiles of 128 x 128,
  // where the 256-wide tiles would also run: the fused bf16 form takes the staged ping-pong tiles
  // there (on a GPU of 132 SMs, 2 waves and 8 tiles: those 8 run as 16 half tiles), TF32 the
  // 256-wide ones. Bias alone or with residual and ReLU in turn; a second call must give the same
  // bits.
  const day08::ConvShape a = make(2, 72, 97, 89, 192, 3, 3, 1, 1);
  const day08::ConvShape b = make(8, 64, 97, 93, 128, 3, 3, 2, 1);
  const day08::ConvShape c = make(2, 64, 95, 91, 256, 3, 3, 1, 1);
  check_v10_v11({a}, 4000, true);
  const auto mode = day08::SplitKMode::kCluster;
  check_fused_split<__nv_bfloat16>(a, 4100, true, false, mode);
  check_fused_split<float>(a, 4200, false, false, mode);
  check_fused_split<__nv_bfloat16>(b, 4300, false, true, mode);
  check_fused_split<float>(b, 4400, true, true, mode);
  check_fused_split<__nv_bfloat16>(c, 4450, true, false, mode);
  check_fused_split<float>(c, 4460, true, false, mode);
}

TEST_CASE("v10 and v11 with more filters than the shared-memory bias holds (K > 1024)", "[gpu]") {
  GPU100_REQUIRE_BUILD(gpu100::ArchNeed::kSm90a, "v10's and v11's fused form");
  // The consumers copy the bias into shared memory for K up to 1024 filters (256 in the staged
  // ping-pong tiling); past that the epilogue reads it from global memory. Each tiling on that
  // path: cluster split-K (9 tiles of 128 filters, the last of 8), 256-wide tiles (K = 1280) and
  // ping-pong tiles (K = 1152, 288 tiles of 18 slabs); the fused form in both precisions, then the
  // day's form at the last shape.
  const auto mode = day08::SplitKMode::kCluster;
  const day08::ConvShape few = make(1, 64, 9, 11, 1032, 3, 3, 1, 1);
  const day08::ConvShape wide = make(2, 64, 33, 35, 1280, 3, 3, 1, 1);
  const day08::ConvShape pp = make(1, 64, 61, 67, 1152, 3, 3, 1, 1);
  check_fused_split<__nv_bfloat16>(few, 4500, true, false, mode);
  check_fused_split<float>(few, 4600, false, false, mode);
  check_fused_split<__nv_bfloat16>(wide, 4700, false, false, mode);
  check_fused_split<float>(wide, 4800, true, false, mode);
  check_fused_split<__nv_bfloat16>(pp, 4900, true, false, mode);
  check_fused_split<float>(pp, 5000, false, false, mode);
  check_v10_v11({pp}, 5100, false);
}

TEST_CASE("v13's fused form (bias, residual, ReLU, fp32 NPQK) matches the CPU", "[gpu]") {
  GPU100_REQUIRE_BUILD(gpu100::ArchNeed::kSm90a, "v13's fused form");
  // Its staged epilogue (K % 8 == 0): the network's first-stage layer with partial tiles, in a
  // group of two, and K = 40 (the staged threads past K store nothing); its register-pair
  // epilogue: K = 18 (K % 8 != 0). Residual and ReLU, or the bias alone, in turn.
  const auto mode = day08::SplitKMode::kCluster;
  check_fused_split<float, true>(make(3, 64, 29, 35, 64, 3, 3, 1, 1), 3500, true, true, mode);
  check_fused_split<float, true>(make(2, 64, 19, 21, 64, 3, 3, 1, 1), 3600, false, false, mode);
  check_fused_split<float, true>(make(2, 32, 17, 23, 40, 3, 3, 1, 1), 3700, true, false, mode);
  check_fused_split<float, true>(make(1, 20, 13, 11, 18, 3, 3, 1, 2), 3800, true, true, mode);
}

TEST_CASE("v11 rejects C not a multiple of 4, a stride over 8 and unaligned x or w", "[gpu]") {
  GPU100_REQUIRE_GPU();
  const day08::ConvShape s = make(1, 16, 9, 10, 5, 3, 3, 1, 1);
  F32NhwcData data(s, 1700);
  const auto& v11 = variant("v11_tma_im2col_wgmma_tf32_nhwc");
  data.d_y.poison();
  // 4 bytes past the buffer's start: not 16-byte aligned. (Refused before the variant asks for
  // its build, so these throw std::invalid_argument in every build.)
  CHECK_THROWS_AS(day08::conv2d_v11_tma_im2col_wgmma_tf32_nhwc(
                      s, data.d_x.data() + 1, data.d_w.data(), nullptr, data.d_y.data(), nullptr),
                  std::invalid_argument);
  CHECK_THROWS_AS(day08::conv2d_v11_tma_im2col_wgmma_tf32_nhwc(
                      s, data.d_x.data(), data.d_w.data() + 1, nullptr, data.d_y.data(), nullptr),
                  std::invalid_argument);
  day08::ConvShape c6 = s;
  c6.c = 6;  // the buffers are large enough; the shape is refused before any launch
  CHECK_FALSE(v11.refusal(c6, false).empty());
  CHECK_THROWS_AS(day08::conv2d_v11_tma_im2col_wgmma_tf32_nhwc(c6, data.d_x.data(), data.d_w.data(),
                                                               nullptr, data.d_y.data(), nullptr),
                  std::invalid_argument);
  day08::ConvShape s9 = s;
  s9.stride = 9;
  CHECK_FALSE(v11.refusal(s9, false).empty());
  sync_check();
  for (float v : data.d_y.download()) REQUIRE(std::isnan(v));
  if (gpu100::lacks_code(v11)) return;
  const day08::Tolerance tol = day08::conv2d_tolerance(s, v11);
  REQUIRE(
      gpu100::compare(data.reference(s, false), data.run(v11, s, false), tol.abs_tol, tol.rel_tol)
          .ok);
}

TEST_CASE("Conv2d variants match cuDNN at the benchmark shapes", "[gpu][timing]") {
  GPU100_REQUIRE_GPU();
  if (!day08::have_cudnn()) {
    WARN("cuDNN not found: comparison skipped");
    return;
  }
  const std::vector<day08::ConvShape> shapes = {make(64, 64, 56, 56, 64, 3, 3, 1, 1),
                                                make(8, 3, 416, 544, 64, 3, 3, 1, 1)};
  uint64_t seed = 7000;
  for (const auto& s : shapes) {
    // Each variant (cuDNN's rows too) against the CPU at sampled outputs and every output against
    // cuDNN fp32: the binary's check (day08::LayerCheck).
    day08::ConvLayer layer(s, seed += 3, false, true);
    const day08::LayerCheck check(layer, true, seed);
    for (const auto& v : day08::conv2d_variants()) {
      if (v.takes_bf16_nhwc() || gpu100::lacks_code(v)) continue;         // bf16: the next test
      if (v.refusal != nullptr && !v.refusal(s, true).empty()) continue;  // v11 at C = 3
      INFO(v.name << " at " << day08::to_string(s));
      layer.poison();
      layer.launch(v, true);
      sync_check();
      const auto cmp = check(v);
      INFO(cmp.summary());
      REQUIRE(cmp.ok);
    }
  }
}

TEST_CASE("v6, v9 and v10 match cuDNN bf16 NHWC at the ResNet layer", "[gpu][timing]") {
  GPU100_REQUIRE_BUILD(variant("v6_implicit_gemm_bf16_nhwc").needs, "v6_implicit_gemm_bf16_nhwc");
  if (!day08::have_cudnn()) {
    WARN("cuDNN not found: comparison skipped");
    return;
  }
  // Each against the CPU (on the same bf16-rounded inputs) at sampled outputs, then every output
  // of v6, v9 and v10 against cuDNN's (whose bf16 output rounding is in the tolerance).
  const day08::ConvShape s = make(64, 64, 56, 56, 64, 3, 3, 1, 1);
  day08::ConvLayer layer(s, 7100, true);
  const day08::LayerCheck check(layer, false, 7100);
  const auto& v6 = variant("v6_implicit_gemm_bf16_nhwc");
  std::vector<const day08::Conv2dVariant*> rows = {&variant(v6.library)};
  for (const auto& v : day08::conv2d_variants()) {
    if (!v.is_library && v.takes_bf16_nhwc() && !gpu100::lacks_code(v)) rows.push_back(&v);
  }
  for (const day08::Conv2dVariant* v : rows) {
    INFO(v->name);
    layer.poison();
    layer.launch(*v, false);
    sync_check();
    const auto cmp = check(*v);
    INFO(cmp.summary());
    REQUIRE(cmp.ok);
  }
}

TEST_CASE("Conv2d variants this build lacks for this GPU are reported as skipped", "[gpu]") {
  GPU100_REQUIRE_GPU();
  GPU100_SKIP_LACKED(day08::conv2d_variants());
}
