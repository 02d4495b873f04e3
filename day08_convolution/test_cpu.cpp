// day08 CPU tests: the references against values worked out by hand, the shape arithmetic, the
// argument checks (every launcher rejects a bad shape before any CUDA call) and the registries.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/catch.hpp"
#include "common/half.hpp"
#include "common/random.hpp"
#include "conv_day.hpp"
#include "tile_walk.hpp"

TEST_CASE("conv1d_cpu matches hand-computed values with zero padding", "[cpu]") {
  const std::vector<float> x = {1, 2, 3, 4, 5};
  const std::vector<float> mask = {1, 10, 100};  // y[i] = x[i-1] + 10 x[i] + 100 x[i+1]
  std::vector<double> y(5);
  day08::conv1d_cpu(x.data(), mask.data(), 5, 3, y.data());
  REQUIRE(y == std::vector<double>{210, 321, 432, 543, 54});
}

TEST_CASE("filter2d_cpu_row matches hand-computed values", "[cpu]") {
  // 3 x 3 image 1..9, mask with a single 1 at the top-left tap: y[i][j] = x[i-1][j-1].
  const std::vector<float> x = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  std::vector<float> mask(9, 0.f);
  mask[0] = 1.f;
  std::vector<double> row(3);
  day08::filter2d_cpu_row(x.data(), 3, 3, mask.data(), 3, 0, row.data());
  REQUIRE(row == std::vector<double>{0, 0, 0});
  day08::filter2d_cpu_row(x.data(), 3, 3, mask.data(), 3, 2, row.data());
  REQUIRE(row == std::vector<double>{0, 4, 5});
  // All-ones mask: the 3 x 3 box sum (centre 45, corner 1+2+4+5 = 12).
  std::fill(mask.begin(), mask.end(), 1.f);
  day08::filter2d_cpu_row(x.data(), 3, 3, mask.data(), 3, 1, row.data());
  REQUIRE(row == std::vector<double>{27, 45, 33});
  day08::filter2d_cpu_row(x.data(), 3, 3, mask.data(), 3, 0, row.data());
  REQUIRE(row[0] == 12);
}

TEST_CASE("ConvShape output size follows the formula", "[cpu]") {
  day08::ConvShape s;
  s.h = 56, s.w = 56, s.r = 3, s.s = 3, s.pad = 1;
  REQUIRE(s.p() == 56);
  REQUIRE(s.q() == 56);
  s.stride = 2;
  REQUIRE(s.p() == 28);
  s.h = 7, s.w = 9, s.r = 5, s.s = 3, s.stride = 2, s.pad = 2, s.dilation = 1;
  REQUIRE(s.p() == (7 + 4 - 4 - 1) / 2 + 1);
  REQUIRE(s.q() == (9 + 4 - 2 - 1) / 2 + 1);
  s.dilation = 2;  // dilated 5-tap filter spans 9 rows
  REQUIRE(s.p() == (7 + 4 - 8 - 1) / 2 + 1);
}

TEST_CASE("conv2d_cpu matches a hand-computed layer", "[cpu]") {
  // N=1, C=2, 3x3 input, K=2, 2x2 filters, stride 1, pad 0 -> 2x2 output; bias {1, -1}.
  day08::ConvShape s;
  s.n = 1, s.c = 2, s.h = 3, s.w = 3, s.k = 2, s.r = 2, s.s = 2;
  const std::vector<float> x = {1, 2, 3, 4, 5, 6, 7, 8, 9,   // channel 0
                                1, 1, 1, 1, 1, 1, 1, 1, 1};  // channel 1
  const std::vector<float> w = {1, 0, 0, 0, 0, 0, 0, 1,      // filter 0: x0[p][q] + x1[p+1][q+1]
                                0, 1, 1, 0, 2, 0, 0, 0};  // filter 1: x0[p][q+1] + x0[p+1][q] + 2
  const std::vector<float> bias = {1, -1};
  std::vector<double> y(8);
  day08::conv2d_cpu(s, x.data(), w.data(), bias.data(), y.data());
  REQUIRE(y == std::vector<double>{3, 4, 6, 7, 7, 9, 13, 15});
  // With padding 1 the corner output (0, 0) of filter 0 sees x0[-1][-1] = 0 and x1[0][0] = 1.
  s.pad = 1;
  REQUIRE(day08::conv2d_cpu_at(s, x.data(), w.data(), nullptr, 0, 0, 0, 0) == 1.0);
  // Stride 2, dilation 2: output (0, 0) of filter 0 = x0[0][0] + x1[2][2] (pad 0).
  s.pad = 0, s.stride = 2, s.dilation = 2;
  REQUIRE(s.p() == 1);
  REQUIRE(day08::conv2d_cpu_at(s, x.data(), w.data(), nullptr, 0, 0, 0, 0) == 2.0);
}

TEST_CASE("check_conv_args rejects bad shapes", "[cpu]") {
  day08::ConvShape good;
  good.n = 2, good.c = 3, good.h = 8, good.w = 8, good.k = 4, good.pad = 1;
  REQUIRE_NOTHROW(day08::check_conv_args(good));
  auto bad = [&](auto edit) {
    day08::ConvShape s = good;
    edit(s);
    return s;
  };
  const std::vector<day08::ConvShape> cases = {
      bad([](auto& s) { s.n = 0; }),
      bad([](auto& s) { s.c = -1; }),
      bad([](auto& s) { s.h = 0; }),
      bad([](auto& s) { s.k = 0; }),
      bad([](auto& s) { s.r = 0; }),
      bad([](auto& s) { s.stride = 0; }),
      bad([](auto& s) { s.dilation = 0; }),
      bad([](auto& s) { s.pad = -1; }),
      bad([](auto& s) { s.r = 11; }),                                    // empty output: 8 + 2 < 11
      bad([](auto& s) { s.n = 1 << 14, s.c = 1 << 10, s.h = 1 << 8; }),  // x past 2^31
  };
  for (const auto& s : cases) {
    INFO(day08::to_string(s));
    CHECK_THROWS_AS(day08::check_conv_args(s), std::invalid_argument);
    // Every launcher checks first, so no CUDA call (and no GPU) is needed to see the error.
    for (const auto& v : day08::conv2d_variants()) {
      if (v.is_library && !day08::have_cudnn()) continue;
      INFO(v.name);
      if (v.takes_bf16_nhwc()) {
        CHECK_THROWS_AS(v.launch_bf16_nhwc(s, nullptr, nullptr, nullptr, nullptr, nullptr),
                        std::invalid_argument);
      } else if (v.takes_f32_nhwc()) {
        CHECK_THROWS_AS(v.launch_f32_nhwc(s, nullptr, nullptr, nullptr, nullptr, nullptr),
                        std::invalid_argument);
      } else {
        CHECK_THROWS_AS(v.launch(s, nullptr, nullptr, nullptr, nullptr, nullptr),
                        std::invalid_argument);
      }
    }
  }
}

TEST_CASE("1D and 2D launchers reject bad sizes and masks before any CUDA call", "[cpu]") {
  for (const auto& v : day08::conv1d_variants()) {
    INFO(v.name);
    CHECK_THROWS_AS(v.launch(nullptr, nullptr, 0, 3, nullptr, nullptr), std::invalid_argument);
    CHECK_THROWS_AS(v.launch(nullptr, nullptr, 10, 4, nullptr, nullptr), std::invalid_argument);
    CHECK_THROWS_AS(v.launch(nullptr, nullptr, 10, day08::kMaxMask1d + 2, nullptr, nullptr),
                    std::invalid_argument);
  }
  for (const auto& v : day08::filter2d_variants()) {
    INFO(v.name);
    CHECK_THROWS_AS(v.launch(nullptr, nullptr, 0, 8, 3, nullptr, nullptr), std::invalid_argument);
    CHECK_THROWS_AS(v.launch(nullptr, nullptr, 8, 8, 4, nullptr, nullptr), std::invalid_argument);
    CHECK_THROWS_AS(v.launch(nullptr, nullptr, 8, 8, 9, nullptr, nullptr), std::invalid_argument);
    CHECK_THROWS_AS(v.launch(nullptr, nullptr, 1 << 16, 1 << 16, 3, nullptr, nullptr),
                    std::invalid_argument);
  }
}

TEST_CASE("the registries: unique names, best_fp32 resolves, unknown names throw", "[cpu]") {
  std::set<std::string> names;
  for (const auto& v : day08::conv1d_variants()) REQUIRE(names.insert(v.name).second);
  for (const auto& v : day08::filter2d_variants()) REQUIRE(names.insert(v.name).second);
  for (const auto& v : day08::conv2d_variants()) REQUIRE(names.insert(v.name).second);
  const day08::Conv2dVariant* best = day08::find_conv2d_variant("best_fp32");
  REQUIRE(best != nullptr);
  REQUIRE(std::string(best->name) == day08::kBestFp32);
  REQUIRE(best->precision == day08::ConvPrecision::kFp32);
  REQUIRE_FALSE(best->is_library);
  const auto listed = day08::conv2d_variant_names();
  REQUIRE(std::find(listed.begin(), listed.end(), "best_fp32") != listed.end());
  REQUIRE(std::find(listed.begin(), listed.end(), "v5_implicit_gemm_tf32") != listed.end());
  REQUIRE(day08::find_conv2d_variant("v99") == nullptr);
  day08::ConvShape s;
  CHECK_THROWS_AS(day08::conv2d_forward("v99", s, nullptr, nullptr, nullptr, nullptr),
                  std::invalid_argument);
  // The bf16 NHWC variants: registered with their launcher and library row, but not callable
  // through the fp32 conv2d_forward (and not listed as its names).
  const day08::Conv2dVariant* v6 = day08::find_conv2d_variant("v6_implicit_gemm_bf16_nhwc");
  REQUIRE(v6 != nullptr);
  REQUIRE(v6->precision == day08::ConvPrecision::kBf16);
  REQUIRE(v6->takes_bf16_nhwc());
  REQUIRE_FALSE(v6->y_bf16_npqk);
  REQUIRE(std::string(v6->library) == "cudnn_bf16_nhwc");
  const day08::Conv2dVariant* lib = day08::find_conv2d_variant(v6->library);
  REQUIRE(lib != nullptr);
  REQUIRE(lib->is_library);
  REQUIRE(lib->takes_bf16_nhwc());
  REQUIRE(lib->y_bf16_npqk);
  REQUIRE(std::find(listed.begin(), listed.end(), v6->name) == listed.end());
  CHECK_THROWS_AS(day08::conv2d_forward(v6->name, s, nullptr, nullptr, nullptr, nullptr),
                  std::invalid_argument);
  // The fp32 NHWC variant (v11) likewise, compared with cuDNN's TF32 row on the same layouts.
  const day08::Conv2dVariant* v11 = day08::find_conv2d_variant("v11_tma_im2col_wgmma_tf32_nhwc");
  REQUIRE(v11 != nullptr);
  REQUIRE(v11->precision == day08::ConvPrecision::kTf32);
  REQUIRE(v11->takes_f32_nhwc());
  REQUIRE_FALSE(v11->takes_bf16_nhwc());
  REQUIRE_FALSE(v11->y_f32_npqk);
  REQUIRE(std::string(v11->library) == "cudnn_tf32_nhwc");
  const day08::Conv2dVariant* lib32 = day08::find_conv2d_variant(v11->library);
  REQUIRE(lib32 != nullptr);
  REQUIRE(lib32->is_library);
  REQUIRE(lib32->precision == day08::ConvPrecision::kTf32);
  REQUIRE(lib32->takes_f32_nhwc());
  REQUIRE(lib32->y_f32_npqk);
  REQUIRE(std::find(listed.begin(), listed.end(), v11->name) == listed.end());
  CHECK_THROWS_AS(day08::conv2d_forward(v11->name, s, nullptr, nullptr, nullptr, nullptr),
                  std::invalid_argument);
}

TEST_CASE("the fp32 NHWC layout conversions move channels innermost, values unchanged", "[cpu]") {
  day08::ConvShape s;
  s.n = 1, s.c = 2, s.h = 1, s.w = 3, s.k = 2, s.r = 1, s.s = 2;
  const std::vector<float> x = {1, 2, 3, 4, 5, 1.00390625f};
  REQUIRE(day08::to_nhwc_f32(s, x) == std::vector<float>{1, 4, 2, 5, 3, 1.00390625f});
  const std::vector<float> w = {1, 2, 3, 4, 5, 6, 7, 1.005859375f};
  REQUIRE(day08::to_krsc_f32(s, w) == std::vector<float>{1, 3, 2, 4, 5, 7, 6, 1.005859375f});
  s.r = 1, s.s = 1;
  REQUIRE(day08::npqk_to_nkpq(s, std::vector<float>{10, 20, 11, 21, 12, 22}) ==
          std::vector<float>{10, 11, 12, 20, 21, 22});
  CHECK_THROWS_AS(day08::to_krsc_f32(s, w), std::invalid_argument);  // 8 values, not 4
}

TEST_CASE("the bf16 NHWC layout conversions move channels innermost and round to nearest",
          "[cpu]") {
  day08::ConvShape s;
  s.n = 1, s.c = 2, s.h = 1, s.w = 3, s.k = 2, s.r = 1, s.s = 2;
  // x NCHW: channel 0 = 1 2 3, channel 1 = 4 5 (1 + 2^-8) -> NHWC 1 4 2 5 3 1: 1 + 2^-8 is a
  // tie between 1 and 1 + 2^-7 and rounds to even (1); 1 + 3 * 2^-9 (in w) rounds up to 1 + 2^-7.
  const std::vector<float> x = {1, 2, 3, 4, 5, 1.00390625f};
  const auto xh = day08::to_nhwc_bf16(s, x);
  const std::vector<float> want_x = {1, 4, 2, 5, 3, 1};
  REQUIRE(gpu100::convert_to_float(xh) == want_x);
  // w KCRS [2][2][1][2] -> KRSC: filter 0 = c0 (1, 2), c1 (3, 4) -> 1 3 2 4.
  const std::vector<float> w = {1, 2, 3, 4, 5, 6, 7, 1.005859375f};
  const auto wh = day08::to_krsc_bf16(s, w);
  const std::vector<float> want_w = {1, 3, 2, 4, 5, 7, 6, 1.0078125f};
  REQUIRE(gpu100::convert_to_float(wh) == want_w);
  // y NPQK -> NKPQ: a 1 x 3 output (1 x 1 filters), K = 2: a0 b0 a1 b1 a2 b2 -> a0 a1 a2 b0 b1 b2.
  s.r = 1, s.s = 1;
  const auto y = gpu100::convert_from_float<__nv_bfloat16>({10, 20, 11, 21, 12, 22});
  REQUIRE(day08::npqk_to_nkpq(s, y) == std::vector<float>{10, 11, 12, 20, 21, 22});
  CHECK_THROWS_AS(day08::to_krsc_bf16(s, w), std::invalid_argument);  // 8 values, not 4
  // Padded to 3 channels: every pixel (and filter tap) gets a zero third channel.
  s.r = 1, s.s = 2;
  const std::vector<float> want_x3 = {1, 4, 0, 2, 5, 0, 3, 1, 0};
  REQUIRE(gpu100::convert_to_float(day08::to_nhwc_bf16(s, x, 3)) == want_x3);
  const std::vector<float> want_w3 = {1, 3, 0, 2, 4, 0, 5, 7, 0, 6, 1.0078125f, 0};
  REQUIRE(gpu100::convert_to_float(day08::to_krsc_bf16(s, w, 3)) == want_w3);
  CHECK_THROWS_AS(day08::to_nhwc_bf16(s, x, 1), std::invalid_argument);  // c_pad < C
}

TEST_CASE("v6 refuses C not a multiple of 8 and unaligned pointers before any CUDA call", "[cpu]") {
  day08::ConvShape s;
  s.n = 2, s.c = 3, s.h = 9, s.w = 11, s.k = 5, s.pad = 1;
  REQUIRE_FALSE(day08::v6_refusal(s, false).empty());
  CHECK_THROWS_AS(
      day08::conv2d_v6_implicit_gemm_bf16_nhwc(s, nullptr, nullptr, nullptr, nullptr, nullptr),
      std::invalid_argument);
  s.c = 8;
  REQUIRE(day08::v6_refusal(s, true).empty());
  // 16-byte cp.async: x or w 2 bytes past a 16-byte boundary is refused (no pointer is read).
  const auto* aligned = reinterpret_cast<const __nv_bfloat16*>(uintptr_t(4096));
  const auto* odd = reinterpret_cast<const __nv_bfloat16*>(uintptr_t(4096 + 2));
  CHECK_THROWS_AS(
      day08::conv2d_v6_implicit_gemm_bf16_nhwc(s, odd, aligned, nullptr, nullptr, nullptr),
      std::invalid_argument);
  CHECK_THROWS_AS(
      day08::conv2d_v6_implicit_gemm_bf16_nhwc(s, aligned, odd, nullptr, nullptr, nullptr),
      std::invalid_argument);
  // The cuDNN bf16 row has no bias add: refused, with or without cuDNN in the build.
  REQUIRE_FALSE(day08::cudnn_bf16_refusal(s, true).empty());
  REQUIRE(day08::cudnn_bf16_refusal(s, false).empty());
  const float* some_bias = reinterpret_cast<const float*>(uintptr_t(4096));
  CHECK_THROWS_AS(day08::conv2d_cudnn_bf16_nhwc(s, aligned, aligned, some_bias, nullptr, nullptr),
                  std::invalid_argument);
}

TEST_CASE("v16 and the CRSK fused form refuse what they cannot run, before any CUDA call",
          "[cpu]") {
  // A 3x3 layer whose tensors fit 32-bit indices but whose transformed input would not: 64 x 1024
  // x 128 x 128 is 2^30 values; V holds 36 x C floats a 4x4 tile, 2.25x that, over 2^31.
  day08::ConvShape s;
  s.n = 64, s.c = 1024, s.h = 128, s.w = 128, s.k = 64, s.pad = 1;
  REQUIRE_NOTHROW(day08::check_conv_args(s));
  REQUIRE_FALSE(day08::v16_refusal(s, false).empty());
  CHECK_THROWS_AS(
      day08::conv2d_v16_winograd_f4_gemm(s, nullptr, nullptr, nullptr, nullptr, nullptr),
      std::invalid_argument);
  // The same through the fused form (fake pointers: nothing is read or launched).
  const auto* p = reinterpret_cast<const float*>(uintptr_t(4096));
  auto* y = reinterpret_cast<float*>(uintptr_t(8192));
  day08::ConvGroup<float> g;
  g.op[0] = {p, p, nullptr, nullptr, y};
  CHECK_THROWS_AS(day08::conv2d_fused_winograd(s, g, nullptr, day08::WinogradForm::kF4x4Gemm),
                  std::invalid_argument);
  // Not 3x3 stride 1: refused with the reason.
  s.n = 2, s.c = 16, s.h = 9, s.w = 9, s.stride = 2;
  REQUIRE_FALSE(day08::v16_refusal(s, false).empty());
  // v15's fused form reads its CRSK filters in 16-byte copies: a misaligned pointer is refused.
  g.op[0].w = reinterpret_cast<const float*>(uintptr_t(4096 + 4));
  CHECK_THROWS_AS(day08::conv2d_fused_crsk(s, g, nullptr), std::invalid_argument);
}

TEST_CASE("FLOP and byte counts of the ResNet layer", "[cpu]") {
  day08::ConvShape s;
  s.n = 64, s.c = 64, s.h = 56, s.w = 56, s.k = 64, s.pad = 1;
  REQUIRE(day08::conv2d_flops(s) == Catch::Approx(2.0 * 64 * 64 * 56 * 56 * 64 * 9));
  REQUIRE(day08::conv2d_bytes(s, false) ==
          Catch::Approx(4.0 * (64.0 * 64 * 56 * 56 * 2 + 64 * 64 * 9)));
  // bf16 x and w, fp32 y (v6); bf16 y (cuDNN's bf16 row).
  REQUIRE(day08::conv2d_bytes_bf16(s, false, false) ==
          Catch::Approx(2.0 * (64.0 * 64 * 56 * 56 + 64 * 64 * 9) + 4.0 * 64 * 64 * 56 * 56));
  REQUIRE(day08::conv2d_bytes_bf16(s, false, true) ==
          Catch::Approx(2.0 * (64.0 * 64 * 56 * 56 * 2 + 64 * 64 * 9)));
}

TEST_CASE("the staged tiles' walk covers every tile's rows once, its halves in one last wave",
          "[cpu]") {
  // tile_walk / unit_tile (tile_walk.hpp), which v10's and v11's producer and consumers share: for
  // tile counts around whole waves of the persistent grid, each tile's 128 rows are covered once
  // (whole, or as its two halves), halves exist only where the last wave would fill at most half
  // of the grid, and then they all fit in one wave after the whole tiles.
  for (int grid : {1, 2, 3, 7, 64, 66, 131, 132}) {
    for (int tiles = 1; tiles <= 5 * grid + 3; ++tiles) {
      const day08::wgmma_conv::TileWalk w = day08::wgmma_conv::tile_walk(tiles, grid);
      std::vector<int> rows(size_t(tiles), 0);  // bit 0: rows 0-63, bit 1: rows 64-127
      bool twice = false;
      for (int unit = 0; unit < w.units; ++unit) {
        int tile = -2, part = -2;
        day08::wgmma_conv::unit_tile(w, unit, tile, part);
        REQUIRE(tile >= 0);
        REQUIRE(tile < tiles);
        REQUIRE((unit < w.whole ? part == -1 : (part == 0 || part == 1)));
        const int bits = part < 0 ? 3 : 1 << part;
        twice = twice || (rows[size_t(tile)] & bits) != 0;
        rows[size_t(tile)] |= bits;
      }
      INFO("tiles " << tiles << " on " << grid << " blocks");
      CHECK_FALSE(twice);
      CHECK(std::all_of(rows.begin(), rows.end(), [](int r) { return r == 3; }));
      const int tail = tiles % grid;
      const bool halves = tiles > grid && tail > 0 && 2 * tail <= grid;
      CHECK(w.units - w.whole == (halves ? 2 * tail : 0));
      CHECK(w.units - w.whole <= grid);
      CHECK(w.whole == (halves ? tiles - tail : tiles));
    }
  }
}
