// day04_matmul: the host driver. Two parts, each with its own rows:
//  1. transpose of an M x N fp32 matrix (GB/s, % of the copy ceiling);
//  2. GEMM C = A B at M x N x K (TFLOP/s), every variant against the cuBLAS call of its
//     precision, verified against cuBLAS fp32 (and cuBLAS itself against a double-precision CPU
//     check of sampled entries).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "common/arch.hpp"
#include "common/args.hpp"
#include "common/compare.hpp"
#include "common/cuda_check.hpp"
#include "common/device_buffer.hpp"
#include "common/device_info.hpp"
#include "common/errors.hpp"
#include "common/half.hpp"
#include "common/harness.hpp"
#include "common/peak.hpp"
#include "common/random.hpp"
#include "common/results.hpp"
#include "common/timer.hpp"
#include "gemm.hpp"
#include "transpose.hpp"

namespace {

using gpu100::ResultRow;

struct Options {
  gpu100::CommonOptions common;
  bool selected(const std::string& name) const {
    const auto& names = common.variants;
    return names.empty() || std::find(names.begin(), names.end(), name) != names.end();
  }
};

// ---- part 1: transpose
// ----------------------------------------------------------------------------
void run_transpose(int m, int n, const Options& opt, gpu100::DayRun& run, std::string& best_note) {
  const size_t count = size_t(m) * n;
  gpu100::require_device_memory(2 * count * sizeof(float), "the transpose");
  const auto in = gpu100::random_vector<float>(count, opt.common.seed);
  std::vector<float> ref(count);
  const double cpu_ms =
      gpu100::time_host_ms([&] { day04::transpose_cpu(in.data(), ref.data(), m, n); }, 1);
  const std::string shape = fmt::format("{}x{}", m, n);
  const double bytes = 2.0 * count * sizeof(float);

  gpu100::DeviceBuffer<float> d_in(count), d_out(count);
  d_in.upload(in);
  const double ceiling = run.ceiling_gbps();
  gpu100::ResultTable& table = run.table();
  double best = 0;
  for (const auto& v : day04::transpose_variants()) {
    if (!opt.selected(v.name)) continue;
    ResultRow row = run.measure(
        v.name, "fp32", shape, [&] { d_out.poison(); },
        [&] { v.launch(d_in.data(), d_out.data(), m, n, nullptr); },
        [&] { return gpu100::compare_exact(ref, d_out.download()); });  // a copy: exact
    gpu100::derive(row, bytes, 0, ceiling, cpu_ms, 0);
    best = std::max(best, row.pct_of_ceiling.value_or(0));
    table.add(row);
  }
  if (best > 0) best_note = fmt::format("best transpose at {:.1f}% of the copy ceiling", best);
}

// ---- part 2: GEMM
// -----------------------------------------------------------------------------------
struct GemmInputs {
  gpu100::DeviceBuffer<float> a, b;
  gpu100::DeviceBuffer<__nv_bfloat16> a16, b16;
  gpu100::DeviceBuffer<float> c;
  gpu100::DeviceBuffer<float> ref_fp32;  // cuBLAS fp32 on the fp32 inputs
  gpu100::DeviceBuffer<float> ref_bf16;  // cuBLAS fp32 on the bf16-rounded inputs
};

void run_gemm(day04::GemmShape s, const Options& opt, double fp32_peak, gpu100::DayRun& run,
              std::string& verdict) {
  gpu100::ResultTable& table = run.table();
  const size_t na = size_t(s.m) * s.k, nb = size_t(s.k) * s.n, nc = size_t(s.m) * s.n;
  gpu100::require_device_memory(4 * (na + nb) * 3 / 2 + 3 * nc * 4, "the GEMM");
  const std::string shape = fmt::format("{}x{}x{}", s.m, s.n, s.k);
  const double flops = 2.0 * s.m * s.n * s.k;

  const auto a = gpu100::random_vector<float>(na, opt.common.seed + 1);
  const auto b = gpu100::random_vector<float>(nb, opt.common.seed + 2);
  GemmInputs in{gpu100::DeviceBuffer<float>(na),         gpu100::DeviceBuffer<float>(nb),
                gpu100::DeviceBuffer<__nv_bfloat16>(na), gpu100::DeviceBuffer<__nv_bfloat16>(nb),
                gpu100::DeviceBuffer<float>(nc),         gpu100::DeviceBuffer<float>(nc),
                gpu100::DeviceBuffer<float>(nc)};
  in.a.upload(a);
  in.b.upload(b);
  in.a16.upload(gpu100::convert_from_float<__nv_bfloat16>(a));
  in.b16.upload(gpu100::convert_from_float<__nv_bfloat16>(b));

  // References: cuBLAS fp32 (pedantic) on the fp32 inputs and on the bf16-rounded inputs.
  day04::cublas_sgemm(s, 1.f, in.a.data(), in.b.data(), 0.f, in.ref_fp32.data(), nullptr);
  {
    gpu100::DeviceBuffer<float> ar(na), br(nb);
    ar.upload(gpu100::round_trip<__nv_bfloat16>(a));
    br.upload(gpu100::round_trip<__nv_bfloat16>(b));
    day04::cublas_sgemm(s, 1.f, ar.data(), br.data(), 0.f, in.ref_bf16.data(), nullptr);
  }
  CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<float> ref32 = in.ref_fp32.download(), ref16 = in.ref_bf16.download();

  // cuBLAS itself against double-precision dot products at 257 sampled entries, by the same rule.
  const gpu100::Tolerance tol32 = day04::gemm_tolerance(day04::Precision::kFp32, s.k);
  gpu100::CompareResult cublas;
  cublas.count = 257;
  for (int i = 0; i < 257; ++i) {
    const int r = int(gpu100::splitmix64(opt.common.seed + 100 + i) % s.m);
    const int c = int(gpu100::splitmix64(opt.common.seed + 500 + i) % s.n);
    const double exact = day04::dot_cpu(s, a.data(), b.data(), r, c);
    gpu100::record(cublas, size_t(r) * s.n + c, exact, ref32[size_t(r) * s.n + c],
                   tol32.abs_tol + tol32.rel_tol * std::fabs(exact));
  }
  fmt::print("reference: cuBLAS fp32 against the double CPU at 257 sampled entries: {}\n",
             cublas.summary());

  // The CPU reference at full size would take minutes: time it at 1024^3 (or the problem size,
  // if smaller) and scale by the FLOP ratio. The rows say so.
  const day04::GemmShape cs{std::min(s.m, 1024), std::min(s.n, 1024), std::min(s.k, 1024)};
  std::vector<float> cpu_c(size_t(cs.m) * cs.n);
  const double cpu_small_ms = gpu100::time_host_ms(
      [&] { day04::gemm_cpu(cs, 1.0, a.data(), b.data(), 0.0, cpu_c.data()); }, 1, false);
  const double cpu_scale = flops / (2.0 * cs.m * cs.n * cs.k);
  const double cpu_ms = cpu_small_ms * cpu_scale;
  const bool extrapolated = cpu_scale > 1.0;

  ResultRow peak = gpu100::make_row("fp32_fma_peak", "fp32", "FMA chains on every SM");
  peak.tflops = fp32_peak;
  peak.pct_of_ceiling = 100.0;
  peak.verified = false;
  table.add(peak);
  ResultRow cpu = gpu100::make_row("cpu_reference", "fp64 acc", shape);
  cpu.ms = cpu_ms;
  cpu.tflops = flops / (cpu_ms * 1e9);
  cpu.speedup_vs_cpu = 1.0;
  cpu.verified = false;
  if (extrapolated) {
    cpu.note = fmt::format("time measured at {}x{}x{} ({:.0f} ms) and scaled by the FLOP ratio",
                           cs.m, cs.n, cs.k, cpu_small_ms);
  }
  table.add(cpu);

  struct Measured {
    const day04::GemmVariant* v;
    ResultRow row;
  };
  std::vector<Measured> measured;
  for (const auto& v : day04::gemm_variants()) {
    if (!opt.selected(v.name) || !gpu100::build_has(v.needs)) continue;
    auto launch = [&] {
      if (v.fp32 != nullptr) {
        v.fp32(s, 1.f, in.a.data(), in.b.data(), 0.f, in.c.data(), nullptr);
      } else {
        v.bf16(s, 1.f, in.a16.data(), in.b16.data(), 0.f, in.c.data(), nullptr);
      }
    };
    // beta = 0: C is never read, so its NaN poison must be overwritten everywhere. For
    // v8_autotuned the first call also runs the tuning.
    const gpu100::Tolerance tol = day04::gemm_tolerance(v.precision, s.k);
    const std::vector<float>& ref = v.precision == day04::Precision::kBf16 ? ref16 : ref32;
    ResultRow row = run.measure(
        v.name, day04::to_string(v.precision), shape, [&] { in.c.poison(); }, launch,
        [&] {
          const auto cmp = gpu100::compare(ref, in.c.download(), tol.abs_tol, tol.rel_tol);
          // The fp32 library row is also the reference: it answers for the sampled CPU check.
          const bool reference = v.is_library && v.precision == day04::Precision::kFp32;
          return reference ? gpu100::worst_of({cmp, cublas}) : cmp;
        });
    gpu100::derive(row, 0, flops, 0, cpu_ms, 0);
    if (v.precision == day04::Precision::kFp32)
      row.pct_of_ceiling = 100.0 * *row.tflops / fp32_peak;
    if (v.row_note != nullptr) row.note = v.row_note(s) + (row.note.empty() ? "" : "; " + row.note);
    measured.push_back({&v, row});
  }
  // Ratios to the cuBLAS call of the same precision, once all rows are timed.
  double best_ratio[3] = {0, 0, 0};
  std::string best_name[3];
  for (auto& m : measured) {
    for (const auto& lib : measured) {
      if (m.v->library[0] != '\0' && std::string(lib.v->name) == m.v->library) {
        m.row.library = m.v->library;
        m.row.ratio_vs_library = *lib.row.ms / *m.row.ms;
        const int p = static_cast<int>(m.v->precision);
        if (m.row.ok && *m.row.ratio_vs_library > best_ratio[p]) {
          best_ratio[p] = *m.row.ratio_vs_library;
          best_name[p] = m.v->name;
        }
      }
    }
    table.add(m.row);
  }
  for (int p = 0; p < 3; ++p) {
    if (best_name[p].empty()) continue;
    verdict += fmt::format("{}best {}: {} at {:.2f}x cuBLAS", verdict.empty() ? "" : "; ",
                           day04::to_string(static_cast<day04::Precision>(p)), best_name[p],
                           best_ratio[p]);
  }
  if (extrapolated) verdict += "; x CPU scaled from a smaller CPU run (see note)";
}

int run(int argc, char** argv) {
  gpu100::ArgParser args("day04_matmul",
                         "matrix transpose and GEMM (C = A B), naive to tensor cores, vs cuBLAS");
  args.add_int("m", "GEMM rows of A and C", 4096, 1, 32768);
  args.add_int("n", "GEMM columns of B and C", 4096, 1, 32768);
  args.add_int("k", "GEMM columns of A, rows of B", 4096, 1, 32768);
  args.add_int("tm", "transpose rows", 8192, 1, 65535 * 32);
  args.add_int("tn", "transpose columns", 8192, 1, 1 << 20);
  args.add_flag("no-transpose", "skip the transpose part");
  args.add_flag("no-gemm", "skip the GEMM part");
  args.add_common();
  if (!args.parse(argc, argv)) return gpu100::kExitOk;
  if (args.get_flag("list")) {
    gpu100::print_list(day04::transpose_variants());
    gpu100::print_list(day04::gemm_variants());
    return gpu100::kExitOk;
  }
  Options opt;
  opt.common = gpu100::CommonOptions::read(args);
  const auto& names = opt.common.variants;
  for (const auto& name : names) {
    bool known = day04::find_gemm_variant(name) != nullptr;
    for (const auto& v : day04::transpose_variants()) known = known || name == v.name;
    if (!known) throw gpu100::UsageError(fmt::format("unknown variant '{}' (see --list)", name));
  }
  gpu100::refuse_named_not_built(day04::gemm_variants(), names);
  const int64_t tm = args.get_int("tm"), tn = args.get_int("tn");
  if (tm * tn > (int64_t(1) << 31)) {
    throw gpu100::UsageError("--tm x --tn must be at most 2^31 elements");
  }
  const day04::GemmShape s{int(args.get_int("m")), int(args.get_int("n")), int(args.get_int("k"))};

  gpu100::DayRun run("day04_matmul", "transpose and GEMM", opt.common);
  if (const auto lacked = gpu100::refuse_or_list_lacked(day04::gemm_variants(), names);
      !lacked.empty()) {
    fmt::print("{}\n", lacked);
  }
  const double fp32_peak = gpu100::measure_fp32_peak_tflops();
  fmt::print("fp32 FMA ceiling: {:.1f} TFLOP/s (measured now)\n\n", fp32_peak);

  std::string verdict;
  if (!args.get_flag("no-transpose")) run_transpose(int(tm), int(tn), opt, run, verdict);
  if (!args.get_flag("no-gemm")) {
    std::string gemm_verdict;
    run_gemm(s, opt, fp32_peak, run, gemm_verdict);
    if (!gemm_verdict.empty()) verdict += (verdict.empty() ? "" : "; ") + gemm_verdict;
  }
  return run.finish("day04_matmul", verdict);
}

}  // namespace

int main(int argc, char** argv) {
  return gpu100::guarded_main(argc, argv, run);
}
