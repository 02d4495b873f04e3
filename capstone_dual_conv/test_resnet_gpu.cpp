// capstone GPU tests of MC-ResNet18's pools: fp32 NCHW and bf16 NHWC against the double CPU
// reference at awkward sizes (odd H and W, windows at the borders, one row or column, channels
// not a multiple of a warp), fresh seeded inputs, outputs poisoned with NaN first.
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <tuple>
#include <vector>

#include "common/catch.hpp"
#include "common/compare.hpp"
#include "common/cuda_check.hpp"
#include "common/device_buffer.hpp"
#include "common/half.hpp"
#include "common/random.hpp"
#include "resnet.hpp"
#include "resnet_net.hpp"

namespace {

using bf16 = __nv_bfloat16;
using namespace capstone::resnet;

struct PoolCase {
  int n, c, h, w, k, s, p;
};
// The trunk's 3x3/2 pad 1 at odd and tiny sizes, a 2x2/2 unpadded pool, and a 5x5/1 pad 2.
const std::vector<PoolCase> kCases = {{1, 1, 1, 1, 3, 2, 1},      {2, 3, 7, 9, 3, 2, 1},
                                      {1, 64, 209, 273, 3, 2, 1}, {3, 33, 1, 17, 3, 2, 1},
                                      {2, 5, 8, 6, 2, 2, 0},      {1, 7, 11, 13, 5, 1, 2}};

void sync_check() {
  CUDA_CHECK(cudaPeekAtLastError());
  CUDA_CHECK(cudaDeviceSynchronize());
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
    gpu100::DeviceBuffer<bf16> d_x16(in), d_y16(out);
    d_x16.upload(gpu100::convert_from_float<bf16>(x16));
    d_y16.poison();
    maxpool_nhwc_bf16(d_x16.data(), d_y16.data(), pc.n, pc.c, pc.h, pc.w, pc.k, pc.s, pc.p,
                      nullptr);
    sync_check();
    const auto c16 =
        gpu100::compare(maxpool_cpu(x16, pc.n, pc.c, pc.h, pc.w, pc.k, pc.s, pc.p, true),
                        gpu100::convert_to_float(d_y16.download()), 0.0, 0.0);
    INFO("bf16 NHWC: " << c16.summary());
    REQUIRE(c16.ok);
  }
}

TEST_CASE("resnet: global average pool matches the CPU, fp32 NCHW and bf16 NHWC", "[gpu]") {
  GPU100_REQUIRE_GPU();
  uint64_t seed = 400;
  for (const PoolCase& pc : kCases) {
    const size_t in = size_t(pc.n) * pc.c * pc.h * pc.w, out = size_t(pc.n) * pc.c;
    INFO("N " << pc.n << " C " << pc.c << " " << pc.h << " x " << pc.w);
    const auto x = gpu100::random_vector<float>(in, ++seed);
    gpu100::DeviceBuffer<float> d_x(in), d_y(out);
    d_x.upload(x);
    d_y.poison();
    global_avgpool_nchw(d_x.data(), d_y.data(), pc.n, pc.c, pc.h, pc.w, nullptr);
    sync_check();
    // fp32 sums of h * w values in [-1, 1]: far below 1e-6 + 1e-5 |ref| at these sizes.
    const auto c32 = gpu100::compare(global_avgpool_cpu(x, pc.n, pc.c, pc.h, pc.w, false),
                                     d_y.download(), 1e-6, 1e-5);
    INFO("fp32 NCHW: " << c32.summary());
    REQUIRE(c32.ok);
    const auto x16 = gpu100::round_trip<bf16>(x);
    gpu100::DeviceBuffer<bf16> d_x16(in), d_y16(out);
    d_x16.upload(gpu100::convert_from_float<bf16>(x16));
    d_y16.poison();
    global_avgpool_nhwc_bf16(d_x16.data(), d_y16.data(), pc.n, pc.c, pc.h, pc.w, nullptr);
    sync_check();
    // The mean is rounded once to bf16: 2^-9 relative, plus the fp32 sum's error.
    const auto c16 = gpu100::compare(global_avgpool_cpu(x16, pc.n, pc.c, pc.h, pc.w, true),
                                     gpu100::convert_to_float(d_y16.download()), 1e-5, 1.0 / 256);
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

TEST_CASE("resnet: the fp32 network (sequential trunks) matches the CPU reference", "[gpu]") {
  GPU100_REQUIRE_GPU();
  const McWeights wts = random_mc_weights(5);
  McResNet18 net(wts);
  uint64_t seed = 500;
  for (const auto& [n, h, w] : {std::tuple{1, 33, 47}, std::tuple{3, 64, 64},
                                std::tuple{1, 97, 131}, std::tuple{2, 1, 1}}) {
    if (gpu100::test_sizes({int64_t(n) * 64 * h * w}).empty()) continue;  // sanitizer runs
    INFO("N " << n << ", " << h << " x " << w);
    const auto rgb = gpu100::random_vector<float>(size_t(n) * 3 * h * w, ++seed);
    const auto depth = gpu100::random_vector<float>(size_t(n) * h * w, ++seed);
    const std::vector<float> ref = mc_resnet18_cpu(wts, rgb, depth, n, h, w);
    gpu100::DeviceBuffer<float> d_rgb(rgb.size()), d_depth(depth.size()),
        d_logits(size_t(n) * net.classes());
    d_rgb.upload(rgb);
    d_depth.upload(depth);
    d_logits.poison();
    net.forward(d_rgb.data(), d_depth.data(), n, h, w, d_logits.data());
    sync_check();
    const std::vector<float> got = d_logits.download();
    // fp32 sums in another order than the reference's double ones, through 18 layers: the logits
    // agree to about 1e-5 relative; the bound is the one the network is held to against PyTorch.
    double scale = 0;
    for (float v : ref) scale = std::max(scale, double(std::fabs(v)));
    const auto cmp = gpu100::compare(ref, got, 1e-4 * scale, 1e-4);
    INFO(cmp.summary());
    REQUIRE(cmp.ok);
    REQUIRE(cmp.rel_l2 <= 1e-4);
    // The same bits again.
    d_logits.poison();
    net.forward(d_rgb.data(), d_depth.data(), n, h, w, d_logits.data());
    sync_check();
    REQUIRE(gpu100::compare_exact(got, d_logits.download()).ok);
  }
}
