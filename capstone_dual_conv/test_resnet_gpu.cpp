// capstone GPU tests of MC-ResNet18's layers and networks against the double CPU reference: the
// pools (fp32 NCHW, bf16 NHWC and fp32 NHWC; odd H and W, windows at the borders, one row or
// column), the fused stem (bf16 and TF32; partial tiles, one pixel, refusals), day08's fused
// convolution (bias, residual, ReLU; stride 2, 7x7, 1x1; one or two per launch; in fp32 both v4's
// kernel and the Winograd form where it applies; in TF32 v5's kernel and, where the GPU runs it,
// v11's on NHWC; in bf16 the kernel the fused form picks, v10 or v9 where the GPU runs them, and
// the ones it passes over), and the networks in every precision and trunks mode. Fresh seeded
// inputs, outputs poisoned first.
#include <algorithm>
#include <cmath>
#include <iostream>
#include <map>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "common/catch.hpp"
#include "common/compare.hpp"
#include "common/cuda_check.hpp"
#include "common/device_buffer.hpp"
#include "common/device_info.hpp"
#include "common/errors.hpp"
#include "common/half.hpp"
#include "common/random.hpp"
#include "conv.hpp"
#include "conv_day.hpp"
#include "resnet.hpp"
#include "resnet_net.hpp"
#include "resnet_stem.hpp"

namespace {

using bf16 = __nv_bfloat16;
using namespace capstone::resnet;

struct PoolCase {
  int n, c, h, w, k, s, p;
};
// The trunk's 3x3/2 pad 1 at odd and tiny sizes, a 2x2/2 unpadded pool, and a 5x5/1 pad 2; C a
// multiple of 8 (the bf16 pool's 16-byte path) and not.
const std::vector<PoolCase> kCases = {
    {1, 1, 1, 1, 3, 2, 1},
    {2, 3, 7, 9, 3, 2, 1},
    {1, 64, 209, 273, 3, 2, 1},
    {3, 33, 1, 17, 3, 2, 1},
    {2, 5, 8, 6, 2, 2, 0},
    {1, 7, 11, 13, 5, 1, 2},
    {1, 8, 1, 1, 3, 2, 1},
    {2, 16, 9, 11, 3, 2, 1},
    {3, 24, 6, 5, 2, 2, 0},
    // The last stage of MC-ResNet18 (512 channels, 13 x 17), and more images than a grid's y.
    {2, 512, 13, 17, 3, 2, 1},
    {70000, 1, 1, 2, 3, 2, 1}};

void sync_check() {
  CUDA_CHECK(cudaPeekAtLastError());
  CUDA_CHECK(cudaDeviceSynchronize());
}

constexpr gpu100::Precision kPrecisions[] = {gpu100::Precision::kFp32, gpu100::Precision::kTf32,
                                             gpu100::Precision::kBf16};

// Whether this build has the code the network (and its convolutions) needs in precision p for
// this GPU. A test leaves a precision it lacks out, with one line; the test case "the precisions
// this build lacks are reported as skipped" reports them to ctest.
bool runs_here(gpu100::Precision p) {
  if (gpu100::build_has(net_needs(p))) return true;
  std::cout << "not run here: the " << gpu100::to_string(p) << " network and its convolutions ("
            << gpu100::needs_text(net_needs(p)) << ")" << std::endl;
  return false;
}
std::vector<gpu100::Precision> precisions_here() {
  std::vector<gpu100::Precision> out;
  for (gpu100::Precision p : kPrecisions) {
    if (runs_here(p)) out.push_back(p);
  }
  return out;
}

}  // namespace

TEST_CASE("resnet: max pool matches the CPU, fp32 NCHW and bf16 NHWC", "[gpu]") {
  GPU100_REQUIRE_GPU();
  uint64_t seed = 300;
  for (const PoolCase& pc : kCases) {
    const int P = (pc.h + 2 * pc.p - pc.k) / pc.s + 1, Q = (pc.w + 2 * pc.p - pc.k) / pc.s + 1;
    const size_t in = size_t(pc.n) * pc.c * pc.h * pc.w, out = size_t(pc.n) * pc.c * P * Q;
    INFO("N " << pc.n << " C " << pc.c << " " << pc.h << " x " << pc.w << ", window " << pc.k << "/"
              << pc.s << " pad " << pc.p);
    const auto x = gpu100::random_vector<float>(in, ++seed);
    gpu100::DeviceBuffer<float> d_x(in), d_y(out);
    d_x.upload(x);
    d_y.poison();
    maxpool_nchw(d_x.data(), d_y.data(), pc.n, pc.c, pc.h, pc.w, pc.k, pc.s, pc.p, nullptr);
    sync_check();
    const auto c32 =
        gpu100::compare(maxpool_cpu(x, pc.n, pc.c, pc.h, pc.w, pc.k, pc.s, pc.p, false),
                        d_y.download(), 0.0, 0.0);  // a max is exact
    INFO("fp32 NCHW: " << c32.summary());
    REQUIRE(c32.ok);
    const auto x16 = gpu100::round_trip<bf16>(x);  // read as NHWC: any values will do
    const auto ref16 = maxpool_cpu(x16, pc.n, pc.c, pc.h, pc.w, pc.k, pc.s, pc.p, true);
    // Offset 0: the 16-byte path where C % 8 == 0; offset 1 element: the general path.
    for (int off : {0, 1}) {
      gpu100::DeviceBuffer<bf16> d_x16(in + off), d_y16(out + off);
      d_x16.poison();
      CUDA_CHECK(cudaMemcpy(d_x16.data() + off, gpu100::convert_from_float<bf16>(x16).data(),
                            in * sizeof(bf16), cudaMemcpyHostToDevice));
      d_y16.poison();
      maxpool_nhwc_bf16(d_x16.data() + off, d_y16.data() + off, pc.n, pc.c, pc.h, pc.w, pc.k, pc.s,
                        pc.p, nullptr);
      sync_check();
      const std::vector<bf16> got = d_y16.download();
      const auto c16 = gpu100::compare(
          ref16, gpu100::convert_to_float(std::vector<bf16>(got.begin() + off, got.end())), 0.0,
          0.0);
      INFO("bf16 NHWC, pointers offset by " << off << ": " << c16.summary());
      REQUIRE(c16.ok);
    }
  }
}

TEST_CASE("resnet: the bf16 input conversion (NCHW fp32 to NHWC bf16, channels and width padded)",
          "[gpu]") {
  GPU100_REQUIRE_GPU();
  // (n, c, h, w, c_pad, w_pad): the stems' 3 -> 8 and 1 -> 8, and 3 -> 4 and 1 -> 4 with an odd
  // width made even (the 8- and 4-channel paths); a second channel group (5 -> 16); no padding
  // (8 -> 8); a padding that is neither (3 -> 6: the general path); odd sizes.
  const std::vector<std::tuple<int, int, int, int, int, int>> cases = {
      {2, 3, 7, 9, 8, 9},  {3, 1, 13, 1, 8, 1}, {1, 5, 4, 3, 16, 3}, {2, 8, 5, 5, 8, 5},
      {2, 3, 5, 9, 4, 10}, {1, 1, 3, 5, 4, 6},  {2, 3, 6, 8, 4, 8},  {2, 3, 3, 7, 6, 8}};
  uint64_t seed = 500;
  for (const auto& [n, c, h, w, c_pad, w_pad] : cases) {
    INFO("N " << n << " C " << c << " " << h << " x " << w << " padded to C " << c_pad << ", W "
              << w_pad);
    const auto x = gpu100::random_vector<float>(size_t(n) * c * h * w, ++seed);
    day08::ConvShape cs;
    cs.n = n, cs.c = c, cs.h = h, cs.w = w;
    // day08's host conversion pads the channels; the columns past w are zero.
    const std::vector<float> dense = gpu100::convert_to_float(day08::to_nhwc_bf16(cs, x, c_pad));
    std::vector<float> want(size_t(n) * h * w_pad * c_pad, 0.f);
    for (size_t row = 0; row < size_t(n) * h; ++row) {
      std::copy_n(dense.begin() + row * w * c_pad, size_t(w) * c_pad,
                  want.begin() + row * w_pad * c_pad);
    }
    gpu100::DeviceBuffer<float> d_x(x.size());
    d_x.upload(x);
    gpu100::DeviceBuffer<bf16> d_y(want.size());
    d_y.poison();
    to_nhwc_bf16(d_x.data(), d_y.data(), n, c, h, w, c_pad, w_pad, nullptr);
    sync_check();
    const auto cmp = gpu100::compare(want, gpu100::convert_to_float(d_y.download()), 0.0, 0.0);
    INFO(cmp.summary());
    REQUIRE(cmp.ok);
  }
}

TEST_CASE("resnet: global average pool matches the CPU, fp32 NCHW, bf16 and fp32 NHWC", "[gpu]") {
  GPU100_REQUIRE_GPU();
  uint64_t seed = 400;
  for (const PoolCase& pc : kCases) {
    const size_t in = size_t(pc.n) * pc.c * pc.h * pc.w, out = size_t(pc.n) * pc.c;
    INFO("N " << pc.n << " C " << pc.c << " " << pc.h << " x " << pc.w);
    const auto x = gpu100::random_vector<float>(in, ++seed);
    gpu100::DeviceBuffer<float> d_x(in), d_y(out);
    d_x.upload(x);
    // fp32 sums of h * w values in [-1, 1]: far below 1e-6 + 1e-5 |ref| at these sizes. The same
    // values read as NCHW and as NHWC.
    for (bool nhwc : {false, true}) {
      d_y.poison();
      (nhwc ? global_avgpool_nhwc : global_avgpool_nchw)(d_x.data(), d_y.data(), pc.n, pc.c, pc.h,
                                                         pc.w, nullptr);
      sync_check();
      const auto c32 = gpu100::compare(global_avgpool_cpu(x, pc.n, pc.c, pc.h, pc.w, nhwc),
                                       d_y.download(), 1e-6, 1e-5);
      INFO((nhwc ? "fp32 NHWC: " : "fp32 NCHW: ") << c32.summary());
      REQUIRE(c32.ok);
    }
    const auto x16 = gpu100::round_trip<bf16>(x);
    gpu100::DeviceBuffer<bf16> d_x16(in);
    d_x16.upload(gpu100::convert_from_float<bf16>(x16));
    d_y.poison();
    global_avgpool_nhwc_bf16(d_x16.data(), d_y.data(), pc.n, pc.c, pc.h, pc.w, nullptr);
    sync_check();
    // fp32 sums of the bf16 inputs, the mean kept in fp32: as tight as the fp32 pool.
    const auto c16 = gpu100::compare(global_avgpool_cpu(x16, pc.n, pc.c, pc.h, pc.w, true),
                                     d_y.download(), 1e-6, 1e-5);
    INFO("bf16 NHWC: " << c16.summary());
    REQUIRE(c16.ok);
  }
}

TEST_CASE("resnet: the pools reject bad shapes before any launch", "[gpu]") {
  GPU100_REQUIRE_GPU();
  gpu100::DeviceBuffer<float> d(16);
  d.poison();
  CHECK_THROWS_AS(maxpool_nchw(d.data(), d.data(), 1, 1, 1, 1, 5, 1, 1, nullptr),
                  std::invalid_argument);
  CHECK_THROWS_AS(global_avgpool_nchw(d.data(), d.data(), 0, 1, 4, 4, nullptr),
                  std::invalid_argument);
  sync_check();
  for (float v : d.download()) CHECK(std::isnan(v));
}

// ---- the fused stem (resnet_stem.hpp) -----------------------------------------------------------

namespace {

// The stem, its ReLU and the pool on the CPU, in double on the values the kernel reads (input and
// filters rounded by `round`), as NHWC [n][P][Q][64].
std::vector<float> stem_pool_cpu(const FoldedConv& cv, const std::vector<float>& x, int n, int h,
                                 int w) {
  const Trunk t = resnet18_trunk(cv.spec.c_in);
  const int oh = cv.spec.out(h), ow = cv.spec.out(w);
  const std::vector<float> conv = conv_cpu(cv, x, n, h, w, nullptr, true, 1);
  const std::vector<double> pooled =
      maxpool_cpu(conv, n, 64, oh, ow, t.pool_k, t.pool_stride, t.pool_pad, false);
  day08::ConvShape ys;
  ys.n = n, ys.c = 64, ys.h = t.pool_out(oh), ys.w = t.pool_out(ow);
  return day08::to_nhwc_f32(ys, std::vector<float>(pooled.begin(), pooled.end()));
}

}  // namespace

TEST_CASE("resnet: the fused stem (7x7/2, bias, ReLU, 3x3/2 max pool) matches the CPU", "[gpu]") {
  GPU100_REQUIRE_GPU();
  const bool run_tf32 = runs_here(gpu100::Precision::kTf32);
  const bool run_bf16 = runs_here(gpu100::Precision::kBf16);
  if (!run_tf32 && !run_bf16) return;
  struct StemCase {
    int n, c, h, w;
  };
  // One pixel; sizes no 7 x 8 tile of pool outputs divides (partial tiles in both directions);
  // several tiles per image; the depth trunk's single channel. Widths that are multiples of 4
  // (100, 68, 204, 132) take the TMA form where the GPU runs sm_90a code, the others the loads'.
  const std::vector<StemCase> cases = {{1, 3, 1, 1},    {2, 3, 37, 53},   {1, 1, 29, 31},
                                       {3, 1, 9, 100},  {1, 3, 115, 131}, {2, 3, 60, 68},
                                       {1, 1, 83, 204}, {2, 3, 121, 132}};
  uint64_t seed = 1500;
  for (const StemCase& sc : cases) {
    const Trunk t = resnet18_trunk(sc.c);
    REQUIRE(stem_pool_takes(t));
    const int P = t.pool_out(t.stem.out(sc.h)), Q = t.pool_out(t.stem.out(sc.w));
    const size_t out = size_t(sc.n) * P * Q * 64;
    INFO("N " << sc.n << " C " << sc.c << " " << sc.h << "x" << sc.w << " -> " << P << "x" << Q);
    FoldedConv cv;
    cv.spec = t.stem;
    const double scale = 1.0 / std::sqrt(sc.c * 49.0);
    cv.w = gpu100::random_vector<float>(size_t(64) * sc.c * 49, ++seed, -scale, scale);
    cv.b = gpu100::random_vector<float>(64, ++seed, -0.5, 0.5);
    const auto x = gpu100::random_vector<float>(size_t(sc.n) * sc.c * sc.h * sc.w, ++seed);
    gpu100::DeviceBuffer<float> d_x(x.size()), d_b(64);
    d_b.upload(cv.b);
    // Both precisions alike: the reference takes the inputs rounded as the kernel rounds them,
    // so only fp32 summation and the output's rounding remain (bf16 2^-9, TF32 2^-11 relative).
    auto check = [&](auto zero, const char* name, double rel_tol) {
      using T = decltype(zero);
      constexpr bool kBf16 = std::is_same_v<T, bf16>;
      const auto round = [](const std::vector<float>& v) {
        if constexpr (kBf16) {
          return gpu100::round_trip<bf16>(v);
        } else {
          return gpu100::round_to_tf32(v);
        }
      };
      FoldedConv cr = cv;
      cr.w = round(cv.w);
      d_x.upload(x);  // the kernel rounds the fp32 input itself
      std::vector<T> wk;
      if constexpr (kBf16) {
        wk = stem_filters_bf16(cv.w, sc.c);
      } else {
        wk = stem_filters_tf32(cv.w, sc.c);
      }
      gpu100::DeviceBuffer<T> d_w(wk.size()), d_y(out);
      d_w.upload(wk);
      d_y.poison();
      if constexpr (kBf16) {
        stem_pool_bf16(t, d_x.data(), d_w.data(), d_b.data(), d_y.data(), sc.n, sc.h, sc.w,
                       nullptr);
      } else {
        stem_pool_tf32(t, d_x.data(), d_w.data(), d_b.data(), d_y.data(), sc.n, sc.h, sc.w,
                       nullptr);
      }
      sync_check();
      const auto cmp = gpu100::compare(stem_pool_cpu(cr, round(x), sc.n, sc.h, sc.w),
                                       gpu100::convert_to_float(d_y.download()), 1e-4, rel_tol);
      INFO(name << ": " << cmp.summary());
      REQUIRE(cmp.ok);
    };
    if (run_bf16) check(bf16{}, "bf16", 1.0 / 256);
    if (run_tf32) check(0.f, "tf32", 1e-3);
  }
}

TEST_CASE("resnet: the fused stem refuses what it cannot take, before any launch", "[gpu]") {
  GPU100_REQUIRE_GPU();
  const Trunk t = resnet18_trunk(3);
  Trunk wide = t, no_pad = t;
  wide.stem.c_in = 4;
  no_pad.pool_pad = 0;
  CHECK_FALSE(stem_pool_takes(wide));
  CHECK_FALSE(stem_pool_takes(no_pad));
  CHECK_THROWS_AS(stem_filters_bf16(std::vector<float>(64 * 4 * 49), 4), std::invalid_argument);
  CHECK_THROWS_AS(stem_filters_tf32(std::vector<float>(64 * 3 * 49 - 1), 3), std::invalid_argument);
  gpu100::DeviceBuffer<float> d(64 * 64), b(64);
  gpu100::DeviceBuffer<bf16> d16(64 * 64);
  d.poison();
  d16.poison();
  // A trunk it does not take, an empty batch, a negative size, a null or unaligned pointer, and
  // an image past its 32-bit limits.
  CHECK_THROWS_AS(stem_pool_tf32(wide, d.data(), d.data(), b.data(), d.data(), 1, 8, 8, nullptr),
                  std::invalid_argument);
  CHECK_THROWS_AS(stem_pool_tf32(t, d.data(), d.data(), b.data(), d.data(), 0, 8, 8, nullptr),
                  std::invalid_argument);
  CHECK_THROWS_AS(stem_pool_bf16(t, d.data(), d16.data(), b.data(), d16.data(), 1, -8, 8, nullptr),
                  std::invalid_argument);
  CHECK_THROWS_AS(stem_pool_bf16(t, nullptr, d16.data(), b.data(), d16.data(), 1, 8, 8, nullptr),
                  std::invalid_argument);
  CHECK_THROWS_AS(
      stem_pool_bf16(t, d.data(), d16.data(), b.data(), d16.data() + 1, 1, 8, 8, nullptr),
      std::invalid_argument);
  CHECK_THROWS_AS(stem_pool_tf32(t, d.data(), d.data() + 2, b.data(), d.data(), 1, 8, 8, nullptr),
                  std::invalid_argument);
  CHECK_THROWS_AS(check_stem_pool_args(t, 1, 1 << 16, 1 << 16), std::invalid_argument);
  sync_check();
  for (float v : d.download()) REQUIRE(std::isnan(v));
}

// ---- day08's fused layer form, as the network calls it
// -------------------------------------------

namespace {

struct ConvCase {
  int n, c, h, w, k, r, stride, pad;
  bool residual, relu;
};
// A block's conv2 (residual + ReLU), a stride-2 conv1, the 1x1/2 shortcut, the 7x7/2 stem on 3
// channels, a deeper layer, and a first-stage block's conv2 (C = K = 64: day08 v12's kernel in bf16
// on Hopper), odd sizes throughout (no tile divides them). Then two that v12 also takes, for the
// bf16 epilogues: K = 24 (16-byte output pieces, the last of 8 groups past K) and K = 10 (not a
// multiple of 8: each thread stores its register pairs).
const std::vector<ConvCase> kConvCases = {
    {2, 16, 9, 11, 32, 3, 1, 1, true, true},   {1, 16, 13, 7, 64, 3, 2, 1, false, true},
    {3, 32, 10, 9, 64, 1, 2, 0, false, false}, {1, 3, 23, 17, 64, 7, 2, 3, false, true},
    {2, 64, 5, 5, 128, 3, 1, 1, true, false},  {2, 64, 11, 13, 64, 3, 1, 1, true, true},
    {2, 32, 9, 13, 24, 3, 1, 1, true, true},   {1, 16, 7, 10, 10, 3, 1, 1, true, false}};

// One convolution's operands in both layouts, with values rounded to bf16 when `bf16_in` (so
// the CPU reference sees what the bf16 kernel reads).
struct ConvData {
  FoldedConv cv;
  std::vector<float> x, res;
  ConvData(const ConvCase& cc, uint64_t seed, bool bf16_in) {
    cv.spec = {cc.c, cc.k, cc.r, cc.stride, cc.pad};
    const double scale = 1.0 / std::sqrt(double(cc.c) * cc.r * cc.r);
    cv.w = gpu100::random_vector<float>(size_t(cc.k) * cc.c * cc.r * cc.r, seed, -scale, scale);
    cv.b = gpu100::random_vector<float>(size_t(cc.k), seed + 1, -0.5, 0.5);
    x = gpu100::random_vector<float>(size_t(cc.n) * cc.c * cc.h * cc.w, seed + 2);
    const int P = cv.spec.out(cc.h), Q = cv.spec.out(cc.w);
    if (cc.residual) res = gpu100::random_vector<float>(size_t(cc.n) * cc.k * P * Q, seed + 3);
    if (bf16_in) {
      cv.w = gpu100::round_trip<bf16>(cv.w);
      x = gpu100::round_trip<bf16>(x);
      res = gpu100::round_trip<bf16>(res);
    }
  }
  std::vector<float> reference(const ConvCase& cc) const {
    return conv_cpu(cv, x, cc.n, cc.h, cc.w, cc.residual ? &res : nullptr, cc.relu, 1);
  }
};

day08::ConvShape shape_of(const ConvCase& cc, int c_in) {
  day08::ConvShape s;
  s.n = cc.n, s.c = c_in, s.h = cc.h, s.w = cc.w, s.k = cc.k, s.r = s.s = cc.r;
  s.stride = cc.stride, s.pad = cc.pad;
  return s;
}

// fp32 or tf32: both convolutions of a group of `count` (different data) against the CPU.
void check_fused_fp32(gpu100::Precision p, const ConvCase& cc, int count, uint64_t seed) {
  std::vector<ConvData> data;
  std::vector<gpu100::DeviceBuffer<float>> bufs;
  day08::ConvGroup<float> g;
  g.count = count, g.relu = cc.relu;
  for (int i = 0; i < count; ++i) {
    data.emplace_back(cc, seed + 10 * i, false);
    const ConvData& d = data.back();
    for (const auto* v : {&d.x, &d.cv.w, &d.cv.b, &d.res}) {
      bufs.emplace_back(std::max<size_t>(v->size(), 1));
      if (!v->empty()) bufs.back().upload(*v);
    }
    bufs.emplace_back(d.reference(cc).size());
    bufs.back().poison();
    const size_t b = bufs.size() - 5;
    g.op[i] = {bufs[b].data(), bufs[b + 1].data(), bufs[b + 2].data(),
               cc.residual ? bufs[b + 3].data() : nullptr, bufs[b + 4].data()};
  }
  const day08::ConvShape shape = shape_of(cc, cc.c);
  const auto check = [&](const char* kernel, double tol_scale) {
    for (int i = 0; i < count; ++i) {
      const double abs_tol = (p == gpu100::Precision::kFp32 ? 1e-5 : 5e-3) * tol_scale;
      const double rel_tol = (p == gpu100::Precision::kFp32 ? 1e-5 : 2e-3) * tol_scale;
      const auto cmp =
          gpu100::compare(data[i].reference(cc), bufs[5 * i + 4].download(), abs_tol, rel_tol);
      INFO(gpu100::to_string(p) << " conv " << i << " of " << count << " (" << kernel
                                << "): " << cmp.summary());
      REQUIRE(cmp.ok);
    }
  };
  day08::conv2d_fused(p, shape, g);
  sync_check();
  check(p == gpu100::Precision::kFp32 ? "v4's kernel" : "v5's kernel", 1.0);
  if (p == gpu100::Precision::kFp32) {
    // v15's kernel on the same operands, each op's filters transposed to CRSK first: the same
    // FMAs in the same order as v4's, so the same outputs bit for bit.
    std::vector<std::vector<float>> v4_out;
    std::vector<gpu100::DeviceBuffer<float>> wt;
    day08::ConvGroup<float> gt = g;
    for (int i = 0; i < count; ++i) {
      v4_out.push_back(bufs[5 * i + 4].download());
      wt.emplace_back(day08::crsk_filter_floats(shape));
      day08::crsk_transform_filters(shape, g.op[i].w, wt.back().data());
      gt.op[i].w = wt.back().data();
      bufs[5 * i + 4].poison();
    }
    day08::conv2d_fused_crsk(shape, gt, nullptr);
    sync_check();
    check("v15's kernel", 1.0);
    for (int i = 0; i < count; ++i) REQUIRE(bufs[5 * i + 4].download() == v4_out[i]);
  }
  if (p == gpu100::Precision::kFp32 && day08::winograd_takes(shape)) {
    // The Winograd form on the same operands, each op's filters transformed first; its rounding
    // error is larger.
    std::vector<gpu100::DeviceBuffer<float>> u;
    for (int i = 0; i < count; ++i) {
      u.emplace_back(day08::winograd_filter_floats(shape));
      day08::winograd_transform_filters(shape, g.op[i].w, u.back().data());
      g.op[i].w = u.back().data();
      bufs[5 * i + 4].poison();
    }
    // Both forms on the same U (day08's tolerances: 4x v4's for F(2x2, 3x3), 16x for F(4x4)).
    day08::conv2d_fused_winograd(shape, g, nullptr, day08::WinogradForm::kF2x2);
    sync_check();
    check("v7's Winograd F(2x2) kernel", 4.0);
    if (day08::winograd_has_f4(shape)) {
      for (int i = 0; i < count; ++i) bufs[5 * i + 4].poison();
      day08::conv2d_fused_winograd(shape, g, nullptr, day08::WinogradForm::kF4x4);
      sync_check();
      check("v14's Winograd F(4x4) kernel", 16.0);
      for (int i = 0; i < count; ++i) bufs[5 * i + 4].poison();
      day08::conv2d_fused_winograd(shape, g, nullptr, day08::WinogradForm::kF4x4Gemm);
      sync_check();
      check("v16's Winograd F(4x4) kernels", 16.0);
    }
  }
}

// TF32 on fp32 NHWC (day08 v11's kernel, where the GPU runs it and v11 takes C): the same check,
// on operands in NHWC / KRSC and outputs and residuals in NPQK.
void check_fused_tf32_nhwc(const ConvCase& cc, int count, uint64_t seed) {
  const day08::ConvShape cs = shape_of(cc, cc.c);
  if (!day08::conv2d_fused_tf32_nhwc_takes(cs)) return;
  const int P = cs.p(), Q = cs.q();
  day08::ConvShape rs = cs;  // the residual [n, k, P, Q] as an "input" of k channels at P x Q
  rs.c = cc.k, rs.h = P, rs.w = Q;
  std::vector<ConvData> data;
  std::vector<gpu100::DeviceBuffer<float>> bufs;
  day08::ConvGroup<float> g;
  g.count = count, g.relu = cc.relu;
  for (int i = 0; i < count; ++i) {
    data.emplace_back(cc, seed + 10 * i, false);
    const ConvData& d = data.back();
    const std::vector<float> x = day08::to_nhwc_f32(cs, d.x), w = day08::to_krsc_f32(cs, d.cv.w);
    const std::vector<float> res =
        cc.residual ? day08::to_nhwc_f32(rs, d.res) : std::vector<float>(1);
    for (const auto* v : {&x, &w, &d.cv.b, &res}) {
      bufs.emplace_back(v->size());
      bufs.back().upload(*v);
    }
    bufs.emplace_back(size_t(cc.n) * cc.k * P * Q);
    bufs.back().poison();
    const size_t b = bufs.size() - 5;
    g.op[i] = {bufs[b].data(), bufs[b + 1].data(), bufs[b + 2].data(),
               cc.residual ? bufs[b + 3].data() : nullptr, bufs[b + 4].data()};
  }
  day08::conv2d_fused_tf32_nhwc(cs, g);
  sync_check();
  for (int i = 0; i < count; ++i) {
    const std::vector<float> got = day08::npqk_to_nkpq(cs, bufs[5 * i + 4].download());
    const auto cmp = gpu100::compare(data[i].reference(cc), got, 5e-3, 2e-3);
    INFO("tf32 NHWC conv " << i << " of " << count << " (day08 v11's kernel): " << cmp.summary());
    REQUIRE(cmp.ok);
  }
}

// bf16 NHWC: the same, inputs padded to 8 channels where C is not a multiple of 8. others: also
// check the Hopper kernels the fused form passes over for this shape (below).
void check_fused_bf16(const ConvCase& cc, int count, uint64_t seed, bool others = true) {
  const int c_pad = (cc.c + 7) / 8 * 8;
  const int P = (cc.h + 2 * cc.pad - cc.r) / cc.stride + 1,
            Q = (cc.w + 2 * cc.pad - cc.r) / cc.stride + 1;
  std::vector<ConvData> data;
  std::vector<gpu100::DeviceBuffer<bf16>> bufs;
  std::vector<gpu100::DeviceBuffer<float>> bias;
  day08::ConvGroup<bf16> g;
  g.count = count, g.relu = cc.relu;
  for (int i = 0; i < count; ++i) {
    data.emplace_back(cc, seed + 10 * i, true);
    const ConvData& d = data.back();
    // day08's host conversions: x NCHW -> NHWC, w KCRS -> KRSC (channels padded to c_pad), and
    // the residual [n, k, P, Q] -> NPQK (an "input" of k channels at P x Q).
    const day08::ConvShape cs = shape_of(cc, cc.c);
    day08::ConvShape rs = cs;
    rs.c = cc.k, rs.h = P, rs.w = Q;
    const std::vector<bf16> x = day08::to_nhwc_bf16(cs, d.x, c_pad);
    const std::vector<bf16> w = day08::to_krsc_bf16(cs, d.cv.w, c_pad);
    const std::vector<bf16> res =
        cc.residual ? day08::to_nhwc_bf16(rs, d.res) : std::vector<bf16>(1);
    for (const auto* v : {&x, &w, &res}) {
      bufs.emplace_back(v->size());
      bufs.back().upload(*v);
    }
    bufs.emplace_back(size_t(cc.n) * cc.k * P * Q);
    bufs.back().poison();
    bias.emplace_back(d.cv.b.size());
    bias.back().upload(d.cv.b);
    const size_t b = bufs.size() - 4;
    g.op[i] = {bufs[b].data(), bufs[b + 1].data(), bias.back().data(),
               cc.residual ? bufs[b + 2].data() : nullptr, bufs[b + 3].data()};
  }
  const day08::ConvShape shape = shape_of(cc, c_pad);
  const auto check = [&](const char* kernel) {
    for (int i = 0; i < count; ++i) {
      const std::vector<float> got = day08::npqk_to_nkpq(shape, bufs[4 * i + 3].download());
      // The inputs are the rounded values the reference sees: only fp32 summation and the output's
      // rounding to bf16 (2^-9 relative) remain.
      const auto cmp = gpu100::compare(data[i].reference(cc), got, 1e-4, 1.0 / 256);
      INFO("bf16 conv " << i << " of " << count << " (" << kernel << "): " << cmp.summary());
      REQUIRE(cmp.ok);
    }
  };
  using K = day08::FusedBf16Kernel;
  const K kernel = day08::conv2d_fused_bf16_kernel(shape, g);
  day08::conv2d_fused_bf16_nhwc(shape, g);
  sync_check();
  check(kernel == K::kV12   ? "day08 v12's kernel"
        : kernel == K::kV10 ? "day08 v10's kernel"
        : kernel == K::kV9  ? "day08 v9's kernel"
                            : "day08 v6's kernel");
  // Where the fused form runs a Hopper kernel (an sm_90a build on Hopper), the kernels it passes
  // over for this shape keep their checks: v12's under v10 where v12 takes the shape (the fused
  // form leaves it to small batches' v10), v10's under v12, v9's under both, and v6's.
  if (!others) return;
  const auto again = [&](const char* name, auto launch) {
    for (int i = 0; i < count; ++i) bufs[4 * i + 3].poison();
    launch();
    sync_check();
    check(name);
  };
  if (kernel == K::kV10 && day08::v12_refusal(shape, false).empty()) {
    again("day08 v12's kernel", [&] { day08::detail::conv2d_v12_group(shape, g, nullptr); });
  }
  if (kernel == K::kV12) {
    again("day08 v10's kernel", [&] { day08::detail::conv2d_v10_group(shape, g, nullptr); });
  }
  if (kernel == K::kV10 || kernel == K::kV12) {
    again("day08 v9's kernel", [&] { day08::detail::conv2d_v9_group(shape, g, nullptr); });
  }
  if (kernel != K::kV6) {
    again("day08 v6's kernel", [&] { day08::detail::conv2d_v6_group(shape, g, nullptr); });
  }
}

}  // namespace

TEST_CASE("resnet: day08's fused convolution (bias, residual, ReLU; one or two per launch)",
          "[gpu]") {
  GPU100_REQUIRE_GPU();
  uint64_t seed = 900;
  const bool tf32 = runs_here(gpu100::Precision::kTf32), bf16 = runs_here(gpu100::Precision::kBf16);
  for (const ConvCase& cc : kConvCases) {
    INFO("N " << cc.n << " C " << cc.c << " " << cc.h << "x" << cc.w << " K " << cc.k << " " << cc.r
              << "x" << cc.r << "/" << cc.stride << (cc.residual ? " +residual" : "")
              << (cc.relu ? " relu" : ""));
    for (int count : {1, 2}) {
      check_fused_fp32(gpu100::Precision::kFp32, cc, count, seed += 100);
      seed += 100;
      if (tf32) check_fused_fp32(gpu100::Precision::kTf32, cc, count, seed);
      if (tf32) check_fused_tf32_nhwc(cc, count, seed + 50);
      seed += 100;
      if (bf16) check_fused_bf16(cc, count, seed);
    }
  }
  // K = 256 over enough pixels (68 tiles of 128) that v10 and v11 take their 256-filter tiles
  // (day08's tma_im2col_conv.cuh), with the residual and ReLU in their epilogue.
  const ConvCase wide{1, 64, 91, 95, 256, 3, 1, 1, true, true};
  for (int count : {1, 2}) {
    INFO("N 1 C 64 91x95 K 256 3x3/1 +residual relu, " << count << " per launch");
    if (tf32) check_fused_tf32_nhwc(wide, count, seed += 100);
    if (bf16) check_fused_bf16(wide, count, seed += 100);
  }
  // The first stage's layer (C = K = 64) over enough 8 x 8 tiles (4 x 13 x 17 = 884 at 101 x 133,
  // the last row and column of tiles clipped) that day08's v12 and v13 give each consumer
  // warpgroup two rounds or more, with the residual and ReLU: their staged epilogues reuse a
  // warpgroup's box (v12: brought and stored by the TMA) tile after tile. Under the sanitizers only
  // the kernel the fused form picks: the others' checks at this size (v6's above all) took longer
  // than scripts/sanitize.sh's time limit, and they are sanitized at the smaller cases above.
  const ConvCase first{4, 64, 101, 133, 64, 3, 1, 1, true, true};
  for (int count : {1, 2}) {
    INFO("N 4 C 64 101x133 K 64 3x3/1 +residual relu, " << count << " per launch");
    if (tf32) check_fused_tf32_nhwc(first, count, seed += 100);
    if (bf16) check_fused_bf16(first, count, seed += 100, !gpu100::sanitizer_run());
  }
}

TEST_CASE("resnet: the fused convolution rejects bad groups before any launch", "[gpu]") {
  GPU100_REQUIRE_GPU();
  const ConvCase cc{1, 8, 5, 5, 8, 3, 1, 1, false, false};
  gpu100::DeviceBuffer<float> d(1024);
  d.poison();
  day08::ConvGroup<float> g;
  g.op[0] = {d.data(), d.data(), nullptr, nullptr, d.data()};
  g.count = 3;
  CHECK_THROWS_AS(day08::conv2d_fused(gpu100::Precision::kFp32, shape_of(cc, 8), g),
                  std::invalid_argument);
  g.count = 1;
  g.op[0].w = nullptr;
  CHECK_THROWS_AS(day08::conv2d_fused(gpu100::Precision::kFp32, shape_of(cc, 8), g),
                  std::invalid_argument);
  gpu100::DeviceBuffer<bf16> d16(1024);
  day08::ConvGroup<bf16> g16;
  g16.op[0] = {d16.data(), d16.data(), nullptr, nullptr, d16.data()};
  CHECK_THROWS_AS(day08::conv2d_fused_bf16_nhwc(shape_of(cc, 3), g16), std::invalid_argument);
  // Winograd: 3x3 stride 1 only, for the transform as for the convolution.
  const ConvCase strided{1, 8, 5, 5, 8, 3, 2, 1, false, false};
  CHECK_FALSE(day08::winograd_takes(shape_of(strided, 8)));
  CHECK_THROWS_AS(day08::winograd_transform_filters(shape_of(strided, 8), d.data(), d.data()),
                  std::invalid_argument);
  CHECK_THROWS_AS(day08::conv2d_fused_winograd(shape_of(strided, 8), g), std::invalid_argument);
  sync_check();
  for (float v : d.download()) REQUIRE(std::isnan(v));
}

// ---- the networks -------------------------------------------------------------------------------

namespace {

// The inputs (one per trunk) on the device, and the pointers Net::forward takes.
struct DeviceInputs {
  std::vector<gpu100::DeviceBuffer<float>> d;
  std::vector<const float*> ptrs;
  explicit DeviceInputs(const std::vector<std::vector<float>>& inputs) {
    for (const auto& x : inputs) {
      d.emplace_back(x.size());
      d.back().upload(x);
      ptrs.push_back(d.back().data());
    }
  }
};

// Runs `net` on random inputs (one per trunk) and returns the logits; poisons them first.
std::vector<float> run_net(Net& net, const std::vector<std::vector<float>>& inputs, int n, int h,
                           int w) {
  const DeviceInputs in(inputs);
  const std::vector<const float*>& ptrs = in.ptrs;
  gpu100::DeviceBuffer<float> logits(size_t(n) * net.classes());
  logits.poison();
  net.forward(ptrs, n, h, w, logits.data());
  sync_check();
  return logits.download();
}

std::vector<std::vector<float>> random_inputs(Model m, int n, int h, int w, uint64_t seed) {
  std::vector<std::vector<float>> in;
  for (int c : trunk_channels(m)) {
    in.push_back(gpu100::random_vector<float>(size_t(n) * c * h * w, ++seed));
  }
  return in;
}

constexpr Trunks kTrunks[] = {Trunks::kSequential, Trunks::kStreams, Trunks::kDual};

}  // namespace

TEST_CASE("resnet: MC-ResNet18, every precision x trunks mode, matches the CPU reference",
          "[gpu]") {
  GPU100_REQUIRE_GPU();
  const NetWeights wts = random_net_weights(Model::kMcResNet18, 5);
  const std::vector<gpu100::Precision> precisions = precisions_here();
  uint64_t seed = 500;
  // N = 1 and 3 at each of the odd and square sizes; 17 x 23 and 1 x 1 also run under the
  // sanitizers.
  for (const auto& [n, h, w] :
       {std::tuple{1, 33, 47}, std::tuple{3, 33, 47}, std::tuple{1, 64, 64}, std::tuple{3, 64, 64},
        std::tuple{1, 97, 131}, std::tuple{3, 97, 131}, std::tuple{1, 17, 23},
        std::tuple{2, 1, 1}}) {
    if (gpu100::test_sizes({int64_t(n) * 64 * h * w}).empty()) continue;  // sanitizer runs
    const auto inputs = random_inputs(Model::kMcResNet18, n, h, w, seed += 10);
    const std::vector<float> ref = net_forward_cpu(wts, inputs, n, h, w);
    for (gpu100::Precision p : precisions)
      for (Trunks t : kTrunks) {
        INFO("N " << n << ", " << h << " x " << w << ", " << gpu100::to_string(p) << ", "
                  << to_string(t));
        Net net(wts, p, t);
        const std::vector<float> got = run_net(net, inputs, n, h, w);
        const auto cmp = gpu100::compare(ref, got, 1e30, 0);  // rel L2 is the rule here
        INFO(cmp.summary());
        REQUIRE(std::all_of(got.begin(), got.end(), [](float v) { return std::isfinite(v); }));
        REQUIRE(cmp.rel_l2 <= logits_tolerance(p));
        if (p == gpu100::Precision::kFp32) {  // the same bits again
          REQUIRE(gpu100::compare_exact(got, run_net(net, inputs, n, h, w)).ok);
        }
      }
  }
}

TEST_CASE("resnet: ResNet-18 (one trunk, 1000 classes) matches the CPU reference", "[gpu]") {
  GPU100_REQUIRE_GPU();
  const NetWeights wts = random_net_weights(Model::kResNet18, 6);
  const int n = 2, h = 64, w = 48;
  if (gpu100::test_sizes({int64_t(n) * 64 * h * w}).empty()) return;
  const auto inputs = random_inputs(Model::kResNet18, n, h, w, 700);
  const std::vector<float> ref = net_forward_cpu(wts, inputs, n, h, w);
  for (gpu100::Precision p : precisions_here()) {
    INFO(gpu100::to_string(p));
    Net net(wts, p, Trunks::kSequential);
    const auto cmp = gpu100::compare(ref, run_net(net, inputs, n, h, w), 1e30, 0);
    INFO(cmp.summary());
    REQUIRE(cmp.rel_l2 <= logits_tolerance(p));
  }
  CHECK_THROWS_AS(Net(wts, gpu100::Precision::kFp32, Trunks::kDual), std::invalid_argument);
}

TEST_CASE("resnet: a batch over the device memory is refused with its bytes, before allocating",
          "[gpu]") {
  GPU100_REQUIRE_GPU();
  const NetWeights wts = random_net_weights(Model::kMcResNet18, 5);
  Net net(wts, gpu100::Precision::kFp32, Trunks::kSequential);
  // The refusal comes before the plan's only allocation, its arena, so the GPU's free memory is
  // the same after it. Other processes (ctest workers sharing the GPU) allocate meanwhile, so the
  // refusal is tried up to 3 times and must leave the free memory in place at least once: memory
  // the plan itself kept would be missing after every attempt.
  bool memory_kept = false;
  for (int attempt = 0; attempt < 3 && !memory_kept; ++attempt) {
    const size_t before = gpu100::free_device_memory();
    try {
      net.plan(30000, 416, 544);
      FAIL("no refusal");
    } catch (const gpu100::UsageError& e) {
      INFO(e.what());
      CHECK(std::string(e.what()).find("bytes") != std::string::npos);
    }
    memory_kept = gpu100::free_device_memory() + (size_t(64) << 20) >= before;
  }
  CHECK(memory_kept);
  CHECK(net.arena_bytes() == 0);
  CHECK_THROWS_AS(net.plan(0, 416, 544), gpu100::UsageError);
  CHECK_THROWS_AS(net.plan(1, 0, 544), gpu100::UsageError);
}

TEST_CASE("resnet: the forward replayed as a CUDA graph gives the eager forward's bits", "[gpu]") {
  GPU100_REQUIRE_GPU();
  const NetWeights wts = random_net_weights(Model::kMcResNet18, 8);
  const int n = 2, h = 29, w = 37;
  if (gpu100::test_sizes({int64_t(n) * 64 * h * w}).empty()) return;
  const auto inputs = random_inputs(Model::kMcResNet18, n, h, w, 800);
  const DeviceInputs in(inputs);
  const std::vector<const float*>& ptrs = in.ptrs;
  for (gpu100::Precision p : precisions_here())
    for (Trunks t : kTrunks) {
      INFO(gpu100::to_string(p) << ", " << to_string(t));
      Net net(wts, p, t);
      gpu100::DeviceBuffer<float> eager(size_t(n) * 15), graph(size_t(n) * 15);
      net.forward(ptrs, n, h, w, eager.data());
      for (int rep = 0; rep < 2; ++rep) {  // the capture, then a replay of it
        graph.poison();
        net.forward_graph(ptrs, n, h, w, graph.data());
        sync_check();
        REQUIRE(gpu100::compare_exact(eager.download(), graph.download()).ok);
      }
      // Another output pointer: captured again, the same bits.
      gpu100::DeviceBuffer<float> other(size_t(n) * 15);
      other.poison();
      net.forward_graph(ptrs, n, h, w, other.data());
      sync_check();
      REQUIRE(gpu100::compare_exact(eager.download(), other.download()).ok);
    }
}

TEST_CASE("resnet: the network in two parts (a trunk each) and fc() give the whole one's bits",
          "[gpu]") {
  GPU100_REQUIRE_GPU();
  const NetWeights wts = random_net_weights(Model::kMcResNet18, 9);
  const int n = 3, h = 31, w = 45;
  if (gpu100::test_sizes({int64_t(n) * 64 * h * w}).empty()) return;
  const auto inputs = random_inputs(Model::kMcResNet18, n, h, w, 900);
  const DeviceInputs in(inputs);
  for (gpu100::Precision p : precisions_here()) {
    INFO(gpu100::to_string(p));
    Net whole(wts, p, Trunks::kSequential);
    gpu100::DeviceBuffer<float> want(size_t(n) * 15), got(size_t(n) * 15);
    whole.forward(in.ptrs, n, h, w, want.data());
    Net rgb(wts, p, Trunks::kSequential, 0), depth(wts, p, Trunks::kSequential, 1);
    CHECK(rgb.trunk_count() == 1);
    // A part has no FC of its own: logits are refused, features only.
    CHECK_THROWS_AS(rgb.forward({in.ptrs[0]}, n, h, w, got.data()), std::invalid_argument);
    got.poison();
    rgb.forward({in.ptrs[0]}, n, h, w, nullptr);
    depth.forward_graph({in.ptrs[1]}, n, h, w, nullptr);  // a part replays as a graph too
    rgb.fc({rgb.features(0), depth.features(0)}, n, got.data(), nullptr);
    sync_check();
    REQUIRE(gpu100::compare_exact(want.download(), got.download()).ok);
    CHECK_THROWS_AS(rgb.fc({rgb.features(0)}, n, got.data(), nullptr), std::invalid_argument);
  }
  CHECK_THROWS_AS(Net(wts, gpu100::Precision::kFp32, Trunks::kSequential, 2),
                  std::invalid_argument);
  CHECK_THROWS_AS(Net(wts, gpu100::Precision::kFp32, Trunks::kDual, 0), std::invalid_argument);
}

TEST_CASE("resnet: the layer profile times every step and counts every FLOP", "[gpu]") {
  GPU100_REQUIRE_GPU();
  const NetWeights wts = random_net_weights(Model::kMcResNet18, 9);
  const int n = 1, h = 31, w = 23;
  const auto inputs = random_inputs(Model::kMcResNet18, n, h, w, 900);
  const DeviceInputs in(inputs);
  const std::vector<const float*>& ptrs = in.ptrs;
  gpu100::DeviceBuffer<float> logits(15);
  for (gpu100::Precision p : precisions_here()) {
    Net net(wts, p, Trunks::kSequential);
    const auto steps = net.profile(ptrs, n, h, w, logits.data());
    double flops = 0;
    int convs = 0;
    std::map<std::string, int> per_stage;  // the 3x3 stride-1 convolutions by stage
    for (const auto& st : steps) {
      REQUIRE(st.ms >= 0);
      flops += st.flops;
      // The convolutions' kinds carry their filter and stride ("conv 3x3/1 l2"); the pools' do not.
      if (st.kind.find('/') == std::string::npos) continue;
      ++convs;
      if (st.kind.rfind("conv 3x3/1 l", 0) == 0) {
        ++per_stage[st.kind];
        // Stage l writes 64 << (l - 1) channels; its shape is the model's.
        const int stage = st.kind.back() - '0';
        CHECK(st.shape.k == (64 << (stage - 1)));
        CHECK(st.shape.c == st.shape.k);
        CHECK(st.shape.n == n);
        CHECK(st.flops ==
              Catch::Approx(2.0 * n * st.shape.c * st.shape.k * 9 * st.shape.p() * st.shape.q()));
      }
    }
    CHECK(convs == 2 * 20);  // per trunk: the stem, 16 block convolutions, 3 shortcuts
    // Per trunk: l1's 4, and 3 in each later stage (its first block's conv1 has stride 2).
    CHECK(per_stage == std::map<std::string, int>{{"conv 3x3/1 l1", 8},
                                                  {"conv 3x3/1 l2", 6},
                                                  {"conv 3x3/1 l3", 6},
                                                  {"conv 3x3/1 l4", 6}});
    CHECK(flops == Catch::Approx(net_flops(Model::kMcResNet18, h, w, 15)).epsilon(1e-9));
  }
}

TEST_CASE("resnet: a precision this build lacks is refused with the build it needs", "[gpu]") {
  GPU100_REQUIRE_GPU();
  const NetWeights wts = random_net_weights(Model::kResNet18, 3);
  for (gpu100::Precision p : kPrecisions) {
    INFO(gpu100::to_string(p));
    if (gpu100::build_has(net_needs(p))) {
      CHECK_NOTHROW(Net(wts, p, Trunks::kSequential));
      continue;
    }
    try {
      Net net(wts, p, Trunks::kSequential);
      FAIL("no refusal");
    } catch (const gpu100::ArchUnavailable& e) {
      INFO(e.what());
      CHECK(std::string(e.what()).find(gpu100::needs_text(net_needs(p))) != std::string::npos);
    }
  }
}

TEST_CASE("resnet: the precisions this build lacks are reported as skipped", "[gpu]") {
  GPU100_REQUIRE_GPU();
  std::string lacked;
  for (gpu100::Precision p : kPrecisions) {
    if (gpu100::build_has(net_needs(p))) continue;
    lacked += (lacked.empty() ? "" : ", ") + std::string(gpu100::to_string(p)) + " (" +
              gpu100::needs_text(net_needs(p)) + ")";
  }
  if (!lacked.empty()) {
    GPU100_SKIP(std::string("this build (CMAKE_CUDA_ARCHITECTURES=") +
                gpu100::build_architectures() + ") lacks the network in " + lacked);
  }
}
