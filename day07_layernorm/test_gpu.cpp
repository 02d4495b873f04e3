// day07 GPU tests: every variant against the double CPU reference at awkward shapes (rows 1, 3,
// 1000 x D 1, 7, 768, 1000, 4096, 16384, plus the looped paths past the register limits and an
// unaligned pointer), fresh seeded inputs, outputs poisoned with NaN first; bf16 within its stated
// tolerance; the large-mean rows where the naive variance fails and Welford holds; the backward
// against the CPU, against finite differences, over many rows, and run to run.
#include <cmath>
#include <functional>
#include <vector>

#include "common/tags.hpp"
#include "test_suite.hpp"

using day07::bf16;

using namespace day07_tests;

namespace {

template <typename T>
gpu100::CompareResult check_rmsnorm_rows(const Problem<T>& p, int64_t offset = 0) {
  const int64_t n = p.rows * p.dim;
  auto x = place<T>(p.x, offset), g = place<T>(p.gamma, offset);
  auto y = place<T>(std::vector<float>(n), offset);
  y.buf.poison();
  gpu100::DeviceBuffer<float> rstd(p.rows);
  rstd.poison();
  day07::rmsnorm_rows<T>(x.ptr(), g.ptr(), y.ptr(), rstd.data(), p.rows, p.dim, kEps, nullptr);
  sync_check();
  std::vector<double> ry(n), rr(p.rows);
  day07::rmsnorm_cpu(p.x.data(), p.gamma.data(), ry.data(), rr.data(), p.rows, p.dim, kEps);
  const auto tol = out_tol<T>();
  return gpu100::worst_of(
      {gpu100::compare(ry, fetch(y, n), tol.abs_tol, tol.rel_tol),
       gpu100::compare(rr, rstd.download(), day07::kStats.abs_tol, day07::kStats.rel_tol)});
}

// The backward outputs for the statistics of the exact forward (rounded to fp32).
template <typename T>
struct Grads {
  std::vector<T> dx;
  std::vector<float> dgamma, dbeta;
};

template <typename T>
Grads<T> run_backward(const Problem<T>& p, int64_t offset = 0) {
  const int64_t n = p.rows * p.dim;
  std::vector<double> y(n), m(p.rows), r(p.rows);
  day07::layernorm_forward_cpu(p.x.data(), p.gamma.data(), p.beta.data(), y.data(), m.data(),
                               r.data(), p.rows, p.dim, kEps);
  auto x = place<T>(p.x, offset), g = place<T>(p.gamma, offset), dy = place<T>(p.dy, offset);
  auto dx = place<T>(std::vector<float>(n), offset);
  dx.buf.poison();
  gpu100::DeviceBuffer<float> mean(p.rows), rstd(p.rows), dg(p.dim), db(p.dim);
  mean.upload(std::vector<float>(m.begin(), m.end()));
  rstd.upload(std::vector<float>(r.begin(), r.end()));
  dg.poison();
  db.poison();
  const size_t ws_bytes = day07::layernorm_backward_workspace_bytes(p.rows, p.dim);
  gpu100::DeviceBuffer<char> ws(ws_bytes);
  ws.poison();  // the partials must be written before they are read
  day07::layernorm_backward<T>(dy.ptr(), x.ptr(), g.ptr(), mean.data(), rstd.data(), dx.ptr(),
                               dg.data(), db.data(), p.rows, p.dim, ws.data(), ws_bytes, nullptr);
  sync_check();
  return {fetch(dx, n), dg.download(), db.download()};
}

template <typename T>
gpu100::CompareResult check_backward(const Problem<T>& p, int64_t offset = 0) {
  const int64_t n = p.rows * p.dim;
  const Grads<T> got = run_backward(p, offset);
  std::vector<double> dx(n), dg(p.dim), db(p.dim), dg_abs(p.dim), db_abs(p.dim);
  day07::layernorm_backward_cpu(p.dy.data(), p.x.data(), p.gamma.data(), kEps, p.rows, p.dim,
                                dx.data(), dg.data(), db.data(), dg_abs.data(), db_abs.data());
  const auto tol = out_tol<T>();
  return gpu100::worst_of({gpu100::compare(dx, got.dx, tol.abs_tol, tol.rel_tol),
                           day07::check_param_grad(dg, dg_abs, got.dgamma),
                           day07::check_param_grad(db, db_abs, got.dbeta)});
}

}  // namespace

TEST_CASE("every fp32 LayerNorm variant matches the CPU at awkward shapes", "[gpu]") {
  GPU100_REQUIRE_GPU();
  uint64_t seed = 100;
  for (const auto& v : day07::variants()) {
    if (v.ln_fp32 == nullptr || gpu100::has_tag(v.tags, "mine")) continue;
    check_shapes(v, seed += 100);
  }
}

TEST_CASE("v5 takes its scalar, unaligned and looped paths correctly", "[gpu]") {
  GPU100_REQUIRE_GPU();
  uint64_t seed = 200;
  struct Case {
    int64_t rows, dim, offset;
  };
  // D = 1001, 4094: not multiples of 4 (scalar); offset 1: unaligned pointers (scalar);
  // D = 1024, 1025, 16385, 20000, 65536: the group sizes' edges and the looped path.
  for (const Case c : {Case{5, 1001, 0}, Case{3, 4094, 0}, Case{3, 768, 1}, Case{7, 4096, 1},
                       Case{9, 1024, 0}, Case{9, 1025, 0}, Case{2, 16385, 0}, Case{3, 20000, 0},
                       Case{2, 65536, 0}, Case{2, 20001, 1}}) {
    if (!keep(c.rows, c.dim)) continue;
    INFO(c.rows << " x " << c.dim << ", offset " << c.offset);
    const auto cmp = check_layernorm(day07::layernorm_v5_registers,
                                     make_problem<float>(c.rows, c.dim, ++seed), c.offset);
    INFO(cmp.summary());
    REQUIRE(cmp.ok);
    const auto cmp6 = check_layernorm(day07::layernorm_v6_bf16,
                                      make_problem<bf16>(c.rows, c.dim, ++seed), c.offset);
    INFO("v6: " << cmp6.summary());
    REQUIRE(cmp6.ok);
  }
}

TEST_CASE("v6_bf16 matches the CPU within the bf16 tolerance at awkward shapes", "[gpu]") {
  GPU100_REQUIRE_GPU();
  uint64_t seed = 300;
  for (int64_t rows : kRows) {
    for (int64_t dim : kDims) {
      if (!keep(rows, dim)) continue;
      INFO("v6_bf16, " << rows << " x " << dim);
      const auto cmp =
          check_layernorm(day07::layernorm_v6_bf16, make_problem<bf16>(rows, dim, ++seed));
      INFO(cmp.summary());
      REQUIRE(cmp.ok);
      // The stated tolerance is not slack: y really carries bf16 rounding, about 2^-9 relative.
      if (rows * dim >= 4096) CHECK(cmp.max_rel > 1e-4);
    }
  }
}

TEST_CASE("large-mean rows: the naive variance fails, Welford and two-pass hold", "[gpu]") {
  GPU100_REQUIRE_GPU();
  // x = 1e4 + noise in (-1, 1): the variance is about 1/3, E[x^2] about 1e8. v2 and v3 form
  // E[x^2] - E[x]^2 in fp32 and lose every digit of the variance; v1 (two passes), v4 (Welford)
  // and v5 (two passes from registers) keep rstd to 1e-2. y is checked to 0.25 in absolute terms:
  // the mean is about 1e4, where fp32 spacing is 1e-3 and a sequential fp32 sum (v1) errs by up
  // to a few 1e-2, so x - mean cannot be better than that in any fp32 kernel.
  const int64_t rows = 64, dim = 1024;
  if (!keep(rows, dim)) return;
  const Problem<float> p = make_problem<float>(rows, dim, 400, 1e4);
  std::vector<double> ry(rows * dim), rm(rows), rr(rows);
  day07::layernorm_forward_cpu(p.x.data(), p.gamma.data(), p.beta.data(), ry.data(), rm.data(),
                               rr.data(), rows, dim, kEps);
  for (const auto& v : day07::variants()) {
    if (v.ln_fp32 == nullptr || gpu100::has_tag(v.tags, "mine")) continue;
    INFO(v.name);
    gpu100::DeviceBuffer<float> x(rows * dim), g(dim), b(dim), y(rows * dim), mean(rows),
        rstd(rows);
    x.upload(p.x);
    g.upload(p.gamma);
    b.upload(p.beta);
    y.poison();
    mean.poison();
    rstd.poison();
    v.ln_fp32(x.data(), g.data(), b.data(), y.data(), mean.data(), rstd.data(), rows, dim, kEps,
              nullptr);
    sync_check();
    const auto rstd_cmp = gpu100::compare(rr, rstd.download(), 0.0, 1e-2);
    INFO("rstd: " << rstd_cmp.summary());
    if (v.naive_variance) {
      CHECK(rstd_cmp.max_rel > 0.5);  // the cancellation: rstd off by more than half
    } else {
      CHECK(rstd_cmp.ok);
      const auto y_cmp = gpu100::compare(ry, y.download(), 0.25, 0.0);
      INFO("y: " << y_cmp.summary());
      CHECK(y_cmp.ok);
      CHECK(gpu100::compare(rm, mean.download(), 0.1, 0.0).ok);
    }
  }
}

TEST_CASE("rmsnorm_rows matches the CPU in fp32 and bf16", "[gpu]") {
  GPU100_REQUIRE_GPU();
  uint64_t seed = 500;
  std::vector<int64_t> dims = kDims;
  dims.push_back(1001);   // scalar path
  dims.push_back(20000);  // looped path
  for (int64_t rows : kRows) {
    for (int64_t dim : dims) {
      if (!keep(rows, dim)) continue;
      INFO("rmsnorm_rows, " << rows << " x " << dim);
      const auto c32 = check_rmsnorm_rows(make_problem<float>(rows, dim, ++seed));
      INFO("fp32: " << c32.summary());
      REQUIRE(c32.ok);
      const auto c16 = check_rmsnorm_rows(make_problem<bf16>(rows, dim, ++seed));
      INFO("bf16: " << c16.summary());
      REQUIRE(c16.ok);
    }
  }
  const auto unaligned = check_rmsnorm_rows(make_problem<float>(3, 4096, ++seed), 1);
  INFO("unaligned: " << unaligned.summary());
  REQUIRE(unaligned.ok);
}

TEST_CASE("rmsnorm_vector matches the CPU for short and long vectors", "[gpu]") {
  GPU100_REQUIRE_GPU();
  uint64_t seed = 600;
  for (int64_t n : gpu100::test_sizes({1, 7, 1000, 4096, 65539, (1 << 20) + 4, (1 << 24) + 3})) {
    INFO("rmsnorm_vector, n = " << n);
    const std::vector<float> x = gpu100::random_vector<float>(n, ++seed);
    const std::vector<float> g = gpu100::random_vector<float>(n, ++seed, 0.5, 1.5);
    gpu100::DeviceBuffer<float> dx(n), dg(n), dy(n), rstd(1);
    gpu100::DeviceBuffer<char> ws(day07::rmsnorm_vector_workspace_bytes());
    dx.upload(x);
    dg.upload(g);
    dy.poison();
    rstd.poison();
    day07::rmsnorm_vector<float>(dx.data(), dg.data(), dy.data(), rstd.data(), n, kEps, ws.data(),
                                 ws.bytes(), nullptr);
    sync_check();
    std::vector<double> ry(n), rr(1);
    day07::rmsnorm_cpu(x.data(), g.data(), ry.data(), rr.data(), 1, n, kEps);
    const auto cmp = gpu100::worst_of(
        {gpu100::compare(ry, dy.download(), day07::kFp32Y.abs_tol, day07::kFp32Y.rel_tol),
         gpu100::compare(rr, rstd.download(), day07::kStats.abs_tol, day07::kStats.rel_tol)});
    INFO(cmp.summary());
    REQUIRE(cmp.ok);
  }
}

TEST_CASE("the backward matches the CPU at awkward shapes in fp32 and bf16", "[gpu]") {
  GPU100_REQUIRE_GPU();
  uint64_t seed = 700;
  std::vector<int64_t> dims = kDims;
  for (int64_t d : {33, 512, 513, 2048, 8192, 8193, 1001}) dims.push_back(d);  // every group size
  for (int64_t rows : kRows) {
    for (int64_t dim : dims) {
      if (!keep(rows, dim)) continue;
      INFO("backward, " << rows << " x " << dim);
      const auto c32 = check_backward(make_problem<float>(rows, dim, ++seed));
      INFO("fp32: " << c32.summary());
      REQUIRE(c32.ok);
      const auto c16 = check_backward(make_problem<bf16>(rows, dim, ++seed));
      INFO("bf16: " << c16.summary());
      REQUIRE(c16.ok);
    }
  }
  const auto unaligned = check_backward(make_problem<float>(5, 768, ++seed), 1);
  INFO("unaligned: " << unaligned.summary());
  REQUIRE(unaligned.ok);
}

TEST_CASE("the backward over many rows: persistent blocks, partial sums, same bits twice",
          "[gpu]") {
  GPU100_REQUIRE_GPU();
  // Many more rows than resident blocks, at each group size (several groups per block at D = 64
  // and 768); rows not a multiple of the groups per block.
  for (const auto& [rows, dim] : {std::pair<int64_t, int64_t>{2001, 33},
                                  {100003, 64},
                                  {20011, 768},
                                  {4099, 4096},
                                  {1025, 8192}}) {
    if (!keep(rows, dim)) continue;
    INFO(rows << " x " << dim);
    const Problem<float> p = make_problem<float>(rows, dim, 800 + dim);
    const auto cmp = check_backward(p);
    INFO(cmp.summary());
    REQUIRE(cmp.ok);
    // No atomics: two runs give identical dgamma and dbeta bits.
    const Grads<float> a = run_backward(p), b = run_backward(p);
    CHECK(gpu100::compare_exact(a.dgamma, b.dgamma).ok);
    CHECK(gpu100::compare_exact(a.dbeta, b.dbeta).ok);
    CHECK(gpu100::compare_exact(a.dx, b.dx).ok);
  }
}

TEST_CASE("the GPU backward matches finite differences on a tiny case", "[gpu]") {
  GPU100_REQUIRE_GPU();
  // L = sum w * y: dL/dx, dL/dgamma, dL/dbeta by central differences of the double forward, the
  // GPU backward with dy = w. The step's fp32 rounding is measured and divided by.
  const int64_t rows = 3, dim = 5;
  Problem<float> p = make_problem<float>(rows, dim, 900);
  const auto loss = [&] {
    std::vector<double> y(rows * dim);
    day07::layernorm_forward_cpu(p.x.data(), p.gamma.data(), p.beta.data(), y.data(), nullptr,
                                 nullptr, rows, dim, kEps);
    double l = 0;
    for (size_t i = 0; i < y.size(); ++i) l += p.dy[i] * y[i];
    return l;
  };
  const auto numeric = [&](std::vector<float>& v, size_t i) {
    const float saved = v[i];
    v[i] = static_cast<float>(saved + 1.0 / 4096);
    const double up = loss(), x_up = v[i];
    v[i] = static_cast<float>(saved - 1.0 / 4096);
    const double down = loss(), x_down = v[i];
    v[i] = saved;
    return (up - down) / (x_up - x_down);
  };
  const Grads<float> got = run_backward(p);
  for (size_t i = 0; i < p.x.size(); ++i) {
    INFO("dx " << i);
    CHECK(got.dx[i] == Catch::Approx(numeric(p.x, i)).margin(1e-4));
  }
  for (size_t i = 0; i < p.gamma.size(); ++i) {
    INFO("dgamma / dbeta " << i);
    CHECK(got.dgamma[i] == Catch::Approx(numeric(p.gamma, i)).margin(1e-4));
    CHECK(got.dbeta[i] == Catch::Approx(numeric(p.beta, i)).margin(1e-4));
  }
}
