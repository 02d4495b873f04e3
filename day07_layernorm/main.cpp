// day07_layernorm: the host driver.
//
// Versions (one file each; v5, v6 and rmsnorm_rows share norm_registers.cuh):
//   v1_thread_per_row  one thread per row, two passes for the statistics, uncoalesced
//   v2_block_tree      a block per row, shared-memory tree, naive E[x^2] - E[x]^2
//   v3_warp_shuffle    a warp per row, shuffles, naive E[x^2] - E[x]^2
//   v4_welford         v3 with Welford statistics (stable)
//   v5_registers       the row in registers, x read once, 16-byte accesses
//   v6_bf16            v5 in bf16 (fp32 math)
//   rmsnorm_rows       RMSNorm rows x D (fp32, bf16); rmsnorm_vector: one long vector (fp32)
//   backward_fused     dx, dgamma, dbeta (fp32, bf16)
// Every row is checked against the double CPU reference, then timed: median of --iters runs
// after --warmup, L2 flushed before each. GB/s counts the compulsory bytes (README, "The math").
//
// Run: build/day07_layernorm/day07_layernorm [--rows 32768] [--cols 4096] [--json out.json]
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "common/args.hpp"
#include "common/compare.hpp"
#include "common/cuda_check.hpp"
#include "common/device_buffer.hpp"
#include "common/device_info.hpp"
#include "common/errors.hpp"
#include "common/half.hpp"
#include "common/harness.hpp"
#include "common/random.hpp"
#include "common/results.hpp"
#include "common/timer.hpp"
#include "layernorm.cuh"

namespace {

using day07::bf16;
using day07::Op;
using gpu100::ResultRow;

constexpr const char* kDay = "day07_layernorm";

struct Options {
  gpu100::CommonOptions common;
  int64_t rows = 32768, dim = 4096;
  float eps = day07::kDefaultEps;
  std::vector<const day07::Variant*> selected;
};

template <typename T>
constexpr const char* precision_name() {
  return std::is_same_v<T, float> ? "fp32" : "bf16";
}

template <typename T>
bool has_precision(const day07::Variant& v) {
  return std::is_same_v<T, float> ? v.has_fp32 : v.has_bf16;
}

template <typename T>
day07::Tolerance output_tolerance() {
  return std::is_same_v<T, float> ? day07::kFp32Y : day07::kBf16Y;
}

template <typename Got>
gpu100::CompareResult compare_tol(const std::vector<double>& ref, const std::vector<Got>& got,
                                  day07::Tolerance tol) {
  return gpu100::compare(ref, got, tol.abs_tol, tol.rel_tol);
}

// The inputs of one precision: what the GPU reads (T) and the same values as floats (the CPU
// reference's input: for bf16, the rounded values).
template <typename T>
struct Inputs {
  std::vector<float> x, gamma, beta, dy;
  std::vector<T> x_t, gamma_t, beta_t, dy_t;
};

template <typename T>
std::vector<T> to_storage(const std::vector<float>& v) {
  if constexpr (std::is_same_v<T, float>) {
    return v;
  } else {
    return gpu100::convert_from_float<T>(v);
  }
}

template <typename T>
Inputs<T> make_inputs(const Options& opt, bool need_dy) {
  const size_t n = static_cast<size_t>(opt.rows * opt.dim);
  const size_t d = static_cast<size_t>(opt.dim);
  Inputs<T> in;
  const uint64_t seed = opt.common.seed;
  in.x = gpu100::random_vector<float>(n, seed);
  in.gamma = gpu100::random_vector<float>(d, seed + 1, 0.5, 1.5);
  in.beta = gpu100::random_vector<float>(d, seed + 2);
  if (need_dy) in.dy = gpu100::random_vector<float>(n, seed + 3);
  if constexpr (!std::is_same_v<T, float>) {
    for (auto* v : {&in.x, &in.gamma, &in.beta, &in.dy}) *v = gpu100::round_trip<T>(*v);
  }
  in.x_t = to_storage<T>(in.x);
  in.gamma_t = to_storage<T>(in.gamma);
  in.beta_t = to_storage<T>(in.beta);
  in.dy_t = to_storage<T>(in.dy);
  return in;
}

std::vector<float> to_float_vector(const std::vector<double>& v) {
  return std::vector<float>(v.begin(), v.end());
}

void set_check(ResultRow& row, const gpu100::CompareResult& cmp) {
  row.max_rel_err = cmp.max_rel;
  row.ok = cmp.ok;
  if (!cmp.ok) row.note += (row.note.empty() ? "" : "; ") + cmp.summary();
}

// Best row of an op and precision, for the verdict line.
struct Best {
  std::string variant;
  double pct = -1;
};

template <typename T>
void run_precision(const Options& opt, gpu100::DayRun& run, std::vector<std::string>& summary) {
  gpu100::ResultTable& table = run.table();
  const double ceiling = run.ceiling_gbps();
  std::vector<const day07::Variant*> list;
  bool need_ln = false, need_rms = false, need_vec = false, need_bwd = false;
  for (const auto* v : opt.selected) {
    if (!has_precision<T>(*v)) continue;
    list.push_back(v);
    need_ln |= v->op == Op::kLayerNorm;
    need_rms |= v->op == Op::kRmsNormRows;
    need_vec |= v->op == Op::kRmsNormVector;
    need_bwd |= v->op == Op::kBackward;
  }
  if (list.empty()) return;
  const int64_t rows = opt.rows, dim = opt.dim, n = rows * dim;
  const std::string prec = precision_name<T>();
  const std::string shape = fmt::format("{}x{}", rows, dim);
  const double s = sizeof(T);
  const Inputs<T> in = make_inputs<T>(opt, need_bwd || need_vec);

  // ---- CPU references (double), each timed once ----
  std::vector<double> ln_y, ln_mean(rows), ln_rstd(rows), rms_y, rms_rstd(rows), vec_y, bwd_dx,
      bwd_dg(dim), bwd_db(dim), bwd_dg_abs(dim), bwd_db_abs(dim);
  double vec_rstd = 0, cpu_ln_ms = 0, cpu_rms_ms = 0, cpu_vec_ms = 0, cpu_bwd_ms = 0;
  if (need_ln || need_bwd) {
    ln_y.resize(n);
    cpu_ln_ms = gpu100::time_host_ms(
        [&] {
          day07::layernorm_forward_cpu(in.x.data(), in.gamma.data(), in.beta.data(), ln_y.data(),
                                       ln_mean.data(), ln_rstd.data(), rows, dim, opt.eps);
        },
        1, false);
  }
  if (need_rms) {
    rms_y.resize(n);
    cpu_rms_ms = gpu100::time_host_ms(
        [&] {
          day07::rmsnorm_cpu(in.x.data(), in.gamma.data(), rms_y.data(), rms_rstd.data(), rows, dim,
                             opt.eps);
        },
        1, false);
  }
  if (need_vec) {  // one row of n elements; dy serves as its gamma (n values)
    vec_y.resize(n);
    cpu_vec_ms = gpu100::time_host_ms(
        [&] {
          day07::rmsnorm_cpu(in.x.data(), in.dy.data(), vec_y.data(), &vec_rstd, 1, n, opt.eps);
        },
        1, false);
  }
  if (need_bwd) {
    bwd_dx.resize(n);
    cpu_bwd_ms = gpu100::time_host_ms(
        [&] {
          day07::layernorm_backward_cpu(in.dy.data(), in.x.data(), in.gamma.data(), opt.eps, rows,
                                        dim, bwd_dx.data(), bwd_dg.data(), bwd_db.data(),
                                        bwd_dg_abs.data(), bwd_db_abs.data());
        },
        1, false);
  }
  if constexpr (std::is_same_v<T, float>) {
    const auto cpu_row = [&](const char* name, double ms, double bytes, const std::string& shp) {
      ResultRow row = gpu100::make_row(name, "fp64 (fp32 in)", shp);
      row.ms = ms;
      row.verified = false;
      gpu100::derive(row, bytes, 0, 0, ms, 0);
      table.add(row);
    };
    if (need_ln) cpu_row("cpu_layernorm", cpu_ln_ms, (2.0 * n + 2.0 * dim) * s + 8.0 * rows, shape);
    if (need_rms) cpu_row("cpu_rmsnorm", cpu_rms_ms, (2.0 * n + dim) * s + 4.0 * rows, shape);
    if (need_vec) cpu_row("cpu_rmsnorm_vector", cpu_vec_ms, 3.0 * n * s, fmt::format("n={}", n));
    if (need_bwd) {
      cpu_row("cpu_backward", cpu_bwd_ms, (3.0 * n + dim) * s + 8.0 * rows + 8.0 * dim, shape);
    }
  }

  // ---- device buffers ----
  gpu100::DeviceBuffer<T> d_x(n), d_gamma(dim), d_beta(dim), d_y(n);
  gpu100::DeviceBuffer<T> d_dy(need_bwd || need_vec ? n : 0), d_dx(need_bwd ? n : 0);
  gpu100::DeviceBuffer<float> d_mean(rows), d_rstd(rows), d_dg(dim), d_db(dim);
  size_t ws_bytes = day07::rmsnorm_vector_workspace_bytes();
  if (need_bwd) ws_bytes = std::max(ws_bytes, day07::layernorm_backward_workspace_bytes(rows, dim));
  gpu100::DeviceBuffer<char> d_ws(ws_bytes);
  d_x.upload(in.x_t);
  d_gamma.upload(in.gamma_t);
  d_beta.upload(in.beta_t);
  if (!d_dy.empty()) d_dy.upload(in.dy_t);
  const bool aligned = true;  // cudaMalloc'd buffers are 256-byte aligned

  Best best_ln, best_rms, best_bwd;
  for (const auto* v : list) {
    std::function<void()> launch;
    gpu100::CompareResult cmp;
    double bytes = 0, cpu_ms = 0;
    std::string row_shape = shape, note;
    switch (v->op) {
      case Op::kLayerNorm: {
        day07::LayerNormFn<T> fn;
        if constexpr (std::is_same_v<T, float>) {
          fn = v->ln_fp32;
        } else {
          fn = v->ln_bf16;
        }
        launch = [&, fn] {
          fn(d_x.data(), d_gamma.data(), d_beta.data(), d_y.data(), d_mean.data(), d_rstd.data(),
             rows, dim, opt.eps, nullptr);
        };
        d_y.poison();
        d_mean.poison();
        d_rstd.poison();
        launch();
        CUDA_CHECK(cudaDeviceSynchronize());
        cmp = day07::worst_of({compare_tol(ln_y, d_y.download(), output_tolerance<T>()),
                               compare_tol(ln_mean, d_mean.download(), day07::kStats),
                               compare_tol(ln_rstd, d_rstd.download(), day07::kStats)});
        bytes = (2.0 * n + 2.0 * dim) * s + 8.0 * rows;
        cpu_ms = cpu_ln_ms;
        if (v->register_tiles) note = day07::register_strategy(dim, sizeof(T), aligned);
        break;
      }
      case Op::kRmsNormRows: {
        launch = [&] {
          day07::rmsnorm_rows<T>(d_x.data(), d_gamma.data(), d_y.data(), d_rstd.data(), rows, dim,
                                 opt.eps, nullptr);
        };
        d_y.poison();
        d_rstd.poison();
        launch();
        CUDA_CHECK(cudaDeviceSynchronize());
        cmp = day07::worst_of({compare_tol(rms_y, d_y.download(), output_tolerance<T>()),
                               compare_tol(rms_rstd, d_rstd.download(), day07::kStats)});
        bytes = (2.0 * n + dim) * s + 4.0 * rows;
        cpu_ms = cpu_rms_ms;
        note = day07::register_strategy(dim, sizeof(T), aligned);
        break;
      }
      case Op::kRmsNormVector: {
        if constexpr (std::is_same_v<T, float>) {
          launch = [&] {
            day07::rmsnorm_vector<float>(d_x.data(), d_dy.data(), d_y.data(), d_rstd.data(), n,
                                         opt.eps, d_ws.data(), ws_bytes, nullptr);
          };
          d_y.poison();
          d_rstd.poison();
          launch();
          CUDA_CHECK(cudaDeviceSynchronize());
          const std::vector<float> rstd = d_rstd.download();
          cmp = day07::worst_of({compare_tol(vec_y, d_y.download(), output_tolerance<T>()),
                                 compare_tol(std::vector<double>{vec_rstd},
                                             std::vector<float>{rstd[0]}, day07::kStats)});
          bytes = 3.0 * n * s + 4.0;
          cpu_ms = cpu_vec_ms;
          row_shape = fmt::format("n={} (one vector)", n);
        }
        break;
      }
      case Op::kBackward: {
        // The backward reads the statistics of the exact forward (rounded to fp32).
        d_mean.upload(to_float_vector(ln_mean));
        d_rstd.upload(to_float_vector(ln_rstd));
        launch = [&] {
          day07::layernorm_backward<T>(d_dy.data(), d_x.data(), d_gamma.data(), d_mean.data(),
                                       d_rstd.data(), d_dx.data(), d_dg.data(), d_db.data(), rows,
                                       dim, d_ws.data(), ws_bytes, nullptr);
        };
        d_dx.poison();
        d_dg.poison();
        d_db.poison();
        launch();
        CUDA_CHECK(cudaDeviceSynchronize());
        cmp = day07::worst_of({compare_tol(bwd_dx, d_dx.download(), output_tolerance<T>()),
                               day07::check_param_grad(bwd_dg, bwd_dg_abs, d_dg.download()),
                               day07::check_param_grad(bwd_db, bwd_db_abs, d_db.download())});
        bytes = (3.0 * n + dim) * s + 8.0 * rows + 8.0 * dim;
        cpu_ms = cpu_bwd_ms;
        const int g = day07::backward_group_size(dim);
        note = g > 0 ? fmt::format("{} threads per row, x and dy in registers", g)
                     : std::string("looped path (rows too long for registers)");
        break;
      }
    }
    const gpu100::Timing t = run.time(launch);
    ResultRow row = gpu100::make_row(v->name, prec, row_shape);
    row.ms = t.median_ms;
    row.ms_min = t.min_ms;
    row.note = note;
    set_check(row, cmp);
    gpu100::derive(row, bytes, 0, ceiling, cpu_ms, 0);
    Best& best = v->op == Op::kLayerNorm ? best_ln : v->op == Op::kBackward ? best_bwd : best_rms;
    if (row.pct_of_ceiling && *row.pct_of_ceiling > best.pct) {
      best.pct = *row.pct_of_ceiling;
      best.variant = v->name;
    }
    table.add(row);
  }
  for (const auto* best : {&best_ln, &best_rms, &best_bwd}) {
    if (best->pct >= 0) {
      summary.push_back(fmt::format("{} {} {:.1f}%", best->variant, prec, best->pct));
    }
  }
}

void print_list() {
  fmt::print("variants (--variant):\n");
  for (const auto& v : day07::variants()) {
    const char* prec = v.has_fp32 && v.has_bf16 ? "fp32, bf16" : v.has_fp32 ? "fp32" : "bf16";
    fmt::print("  {:<18} [{}] {}\n", v.name, prec, v.description);
  }
}

float parse_eps(const std::string& text) {
  char* end = nullptr;
  const double eps = std::strtod(text.c_str(), &end);
  if (text.empty() || end == nullptr || *end != '\0' || !std::isfinite(eps) || eps <= 0 ||
      eps > 1) {
    throw gpu100::UsageError(fmt::format("--eps '{}' must be a number in (0, 1]", text));
  }
  return static_cast<float>(eps);
}

int run(int argc, char** argv) {
  gpu100::ArgParser args(kDay,
                         "LayerNorm (v1-v6), RMSNorm and the LayerNorm backward, fp32 and "
                         "bf16, against a double CPU reference");
  args.add_int("rows", "number of rows", 32768, 1, std::numeric_limits<int32_t>::max());
  args.add_int("cols", "elements per row (the normalized dimension D)", 4096, 1, day07::kMaxDim);
  args.add_string("eps", "epsilon added to the variance", "1e-5");
  args.add_common();
  args.add_alias("dim", "cols");
  if (!args.parse(argc, argv)) return gpu100::kExitOk;
  if (args.get_flag("list")) {
    print_list();
    return gpu100::kExitOk;
  }
  Options opt;
  opt.rows = args.get_int("rows");
  opt.dim = args.get_int("cols");
  opt.eps = parse_eps(args.get_string("eps"));
  try {
    day07::validate_shape(opt.rows, opt.dim);
  } catch (const std::invalid_argument& e) {
    throw gpu100::UsageError(e.what());
  }
  opt.common = gpu100::CommonOptions::read(args);
  opt.selected = gpu100::select(day07::variants(), opt.common.variants);

  // Everything above is argument handling; the GPU is touched from here on.
  gpu100::DayRun run(kDay,
                     fmt::format("LayerNorm / RMSNorm forward and backward, {} x {}, eps {:g}",
                                 opt.rows, opt.dim, opt.eps),
                     opt.common);
  // fp32: x, y, dy, dx (4 arrays of rows x dim) plus the backward's partials and the small ones.
  const size_t n = static_cast<size_t>(opt.rows * opt.dim);
  gpu100::require_device_memory(
      n * 16 + day07::layernorm_backward_workspace_bytes(opt.rows, opt.dim) + (size_t(64) << 20),
      kDay);
  std::vector<std::string> summary;
  run_precision<float>(opt, run, summary);
  run_precision<bf16>(opt, run, summary);
  std::string extra;
  if (!summary.empty()) {
    extra = "best of the copy ceiling: ";
    for (size_t i = 0; i < summary.size(); ++i) extra += (i ? ", " : "") + summary[i];
  }
  return run.finish(kDay, extra);
}

}  // namespace

int main(int argc, char** argv) {
  return gpu100::guarded_main(argc, argv, run);
}
