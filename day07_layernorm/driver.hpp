#pragma once
// day07_layernorm's driver: its options, and Bench<T>, one precision's inputs, buffers, CPU
// references and rows (main.cpp runs them op by op).
#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "common/device_buffer.hpp"
#include "common/harness.hpp"
#include "layernorm.cuh"

namespace day07 {

struct Options {
  gpu100::CommonOptions common;
  int64_t rows = 32768, dim = 4096;
  float eps = kDefaultEps;
  std::vector<const Variant*> selected;
};

template <typename T>
gpu100::CompareResult check(const std::vector<double>& ref, const gpu100::DeviceBuffer<T>& got,
                            gpu100::Tolerance tol) {
  return gpu100::compare(ref, got.download(), tol.abs_tol, tol.rel_tol);
}

// One precision's inputs, buffers and CPU references (computed once, for the ops that run).
template <typename T>
struct Bench {
  const Options& opt;
  gpu100::DayRun& run;
  int64_t rows, dim, n;
  Problem<T> in;
  gpu100::DeviceBuffer<T> d_x, d_gamma, d_beta, d_y, d_dy, d_dx;
  gpu100::DeviceBuffer<float> d_mean, d_rstd, d_dg, d_db;
  size_t ws_bytes;
  gpu100::DeviceBuffer<char> d_ws;
  // The CPU references: y and the statistics of each op, the backward's gradients and the scale
  // of their rounding error (sum_r |term|).
  std::vector<double> y, mean, rstd, dg, db, dg_abs, db_abs;
  double cpu_ms = 0;
  const gpu100::Tolerance y_tol = std::is_same_v<T, float> ? kFp32Y : kBf16Y;

  Bench(const Options& o, gpu100::DayRun& r)
      : opt(o),
        run(r),
        rows(o.rows),
        dim(o.dim),
        n(rows * dim),
        in(make_problem<T>(rows, dim, o.common.seed)),
        d_x(n),
        d_gamma(dim),
        d_beta(dim),
        d_y(n),
        d_dy(n),
        d_dx(n),
        d_mean(rows),
        d_rstd(rows),
        d_dg(dim),
        d_db(dim),
        ws_bytes(std::max(rmsnorm_vector_workspace_bytes(),
                          layernorm_backward_workspace_bytes(rows, dim))),
        d_ws(ws_bytes) {
    d_x.upload(storage<T>(in.x));
    d_gamma.upload(storage<T>(in.gamma));
    d_beta.upload(storage<T>(in.beta));
    d_dy.upload(storage<T>(in.dy));
  }

  // The CPU reference of `op`, timed once (each op replaces the previous one's); the backward
  // first runs the forward for its statistics, untimed.
  void reference(Op op) {
    y.assign(n, 0);
    mean.assign(rows, 0);
    rstd.assign(rows, 0);
    const float eps = opt.eps;
    const float* x = in.x.data();
    auto forward = [&] {
      layernorm_forward_cpu(x, in.gamma.data(), in.beta.data(), y.data(), mean.data(), rstd.data(),
                            rows, dim, eps);
    };
    if (op == Op::kBackward) forward();
    for (auto* v : {&dg, &db, &dg_abs, &db_abs}) v->assign(dim, 0);
    cpu_ms = gpu100::time_host_ms(
        [&] {
          if (op == Op::kLayerNorm) forward();
          if (op == Op::kRmsNormRows) {
            rmsnorm_cpu(x, in.gamma.data(), y.data(), rstd.data(), rows, dim, eps);
          }
          if (op == Op::kRmsNormVector) {  // one row of n elements; dy serves as its gamma
            rmsnorm_cpu(x, in.dy.data(), y.data(), rstd.data(), 1, n, eps);
          }
          if (op == Op::kBackward) {
            layernorm_backward_cpu(in.dy.data(), x, in.gamma.data(), eps, rows, dim, y.data(),
                                   dg.data(), db.data(), dg_abs.data(), db_abs.data());
          }
        },
        1, false);
  }

  std::string shape(Op op) const {
    return op == Op::kRmsNormVector ? fmt::format("n={} (one vector)", n)
                                    : fmt::format("{}x{}", rows, dim);
  }

  // The compulsory bytes of an op (README, "The math").
  double bytes(Op op) const {
    const double s = sizeof(T);
    switch (op) {
      case Op::kLayerNorm:
        return (2.0 * n + 2.0 * dim) * s + 8.0 * rows;
      case Op::kRmsNormRows:
        return (2.0 * n + dim) * s + 4.0 * rows;
      case Op::kRmsNormVector:
        return 3.0 * n * s + 4.0;
      case Op::kBackward:
        return (3.0 * n + dim) * s + 8.0 * rows + 8.0 * dim;
    }
    return 0;
  }

  gpu100::ResultRow measure(const Variant& v, const std::string& shp,
                            const std::function<void()>& poison,
                            const std::function<void()>& launch,
                            const std::function<gpu100::CompareResult()>& cmp) {
    gpu100::ResultRow row =
        run.measure(v.name, std::is_same_v<T, float> ? "fp32" : "bf16", shp, poison, launch, cmp);
    gpu100::derive(row, bytes(v.op), 0, run.ceiling_gbps(), cpu_ms, 0);
    return row;
  }

  gpu100::ResultRow layernorm(const Variant& v) {
    LayerNormFn<T> fn;
    if constexpr (std::is_same_v<T, float>) {
      fn = v.ln_fp32;
    } else {
      fn = v.ln_bf16;
    }
    gpu100::ResultRow row = measure(
        v, shape(v.op),
        [&] {
          poison({&d_mean, &d_rstd}, &d_y);
        },
        [&] {
          fn(d_x.data(), d_gamma.data(), d_beta.data(), d_y.data(), d_mean.data(), d_rstd.data(),
             rows, dim, opt.eps, nullptr);
        },
        [&] {
          return gpu100::worst_of(
              {check(y, d_y, y_tol), check(mean, d_mean, kStats), check(rstd, d_rstd, kStats)});
        });
    if (v.register_tiles) row.note = register_strategy(dim, sizeof(T), true);
    return row;
  }

  gpu100::ResultRow rmsnorm_rows(const Variant& v) {
    gpu100::ResultRow row = measure(
        v, shape(v.op), [&] { poison({&d_rstd}, &d_y); },
        [&] {
          day07::rmsnorm_rows<T>(d_x.data(), d_gamma.data(), d_y.data(), d_rstd.data(), rows, dim,
                                 opt.eps, nullptr);
        },
        [&] {
          return gpu100::worst_of({check(y, d_y, y_tol), check(rstd, d_rstd, kStats)});
        });
    row.note = register_strategy(dim, sizeof(T), true);  // cudaMalloc: 256-byte aligned
    return row;
  }

  gpu100::ResultRow rmsnorm_vector(const Variant& v) {  // fp32 only (the registry says so)
    if constexpr (std::is_same_v<T, float>) {
      return measure(
          v, shape(v.op), [&] { poison({&d_rstd}, &d_y); },
          [&] {
            day07::rmsnorm_vector<float>(d_x.data(), d_dy.data(), d_y.data(), d_rstd.data(), n,
                                         opt.eps, d_ws.data(), ws_bytes, nullptr);
          },
          [&] {
            const std::vector<float> got{d_rstd.download()[0]};
            return gpu100::worst_of(
                {check(y, d_y, y_tol), gpu100::compare(std::vector<double>{rstd[0]}, got,
                                                       kStats.abs_tol, kStats.rel_tol)});
          });
    } else {
      throw std::logic_error(std::string("day07: no bf16 form of ") + v.name);
    }
  }

  gpu100::ResultRow backward(const Variant& v) {
    // The backward reads the statistics of the exact forward (rounded to fp32).
    d_mean.upload(std::vector<float>(mean.begin(), mean.end()));
    d_rstd.upload(std::vector<float>(rstd.begin(), rstd.end()));
    gpu100::ResultRow row = measure(
        v, shape(v.op),
        [&] {
          poison({&d_dg, &d_db}, &d_dx);
        },
        [&] {
          layernorm_backward<T>(d_dy.data(), d_x.data(), d_gamma.data(), d_mean.data(),
                                d_rstd.data(), d_dx.data(), d_dg.data(), d_db.data(), rows, dim,
                                d_ws.data(), ws_bytes, nullptr);
        },
        [&] {
          return gpu100::worst_of({check(y, d_dx, y_tol),
                                   check_param_grad(dg, dg_abs, d_dg.download()),
                                   check_param_grad(db, db_abs, d_db.download())});
        });
    const int g = backward_group_size(dim);
    row.note = g > 0 ? fmt::format("{} threads per row, x and dy in registers", g)
                     : std::string("looped path (rows too long for registers)");
    return row;
  }

  static void poison(std::initializer_list<gpu100::DeviceBuffer<float>*> stats,
                     gpu100::DeviceBuffer<T>* out) {
    out->poison();
    for (auto* s : stats) s->poison();
  }
};

}  // namespace day07
