// day04_matmul: the host driver. Two parts, each with its own rows:
//  1. transpose of an M x N fp32 matrix (GB/s, % of the copy ceiling);
//  2. GEMM C = A B at M x N x K (TFLOP/s), every variant against the cuBLAS call of its
//     precision, verified against cuBLAS fp32 (and cuBLAS itself against a double-precision CPU
//     check of sampled entries). The FP8 rows get the same inputs quantised to e4m3 (B given as
//     B^T) and are checked against the exact product of those e4m3 values. --precision keeps the
//     rows of one precision.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "common/arch.hpp"
#include "common/args.hpp"
#include "common/compare.hpp"
#include "common/cublas_check.hpp"
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
  std::string precision;  // --precision: "" for every precision
  bool selected(const std::string& name) const {
    const auto& names = common.variants;
    return names.empty() || std::find(names.begin(), names.end(), name) != names.end();
  }
  bool selected(const day04::GemmVariant& v) const {
    return selected(v.name) && (precision.empty() || precision == day04::to_string(v.precision));
  }
};

// ---- part 1: transpose ----
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

// ---- part 2: GEMM ----
// The GEMM's inputs on the device (fp32, and bf16 converted once), C, and the references: cuBLAS
// fp32 (pedantic) on the fp32 inputs and on the bf16-rounded inputs, and cuBLAS itself against
// double-precision dot products at 257 sampled entries, by the same rule.
struct GemmData {
  std::vector<float> a, b, ref32, ref16;
  gpu100::DeviceBuffer<float> d_a, d_b, d_c;
  gpu100::DeviceBuffer<__nv_bfloat16> d_a16, d_b16;
  gpu100::CompareResult cublas;
};

GemmData make_gemm_data(day04::GemmShape s, uint64_t seed) {
  const size_t na = size_t(s.m) * s.k, nb = size_t(s.k) * s.n, nc = size_t(s.m) * s.n;
  GemmData g;
  g.a = gpu100::random_vector<float>(na, seed + 1);
  g.b = gpu100::random_vector<float>(nb, seed + 2);
  g.d_a = gpu100::DeviceBuffer<float>(na);
  g.d_b = gpu100::DeviceBuffer<float>(nb);
  g.d_c = gpu100::DeviceBuffer<float>(nc);
  g.d_a16 = gpu100::DeviceBuffer<__nv_bfloat16>(na);
  g.d_b16 = gpu100::DeviceBuffer<__nv_bfloat16>(nb);
  g.d_a.upload(g.a);
  g.d_b.upload(g.b);
  g.d_a16.upload(gpu100::convert_from_float<__nv_bfloat16>(g.a));
  g.d_b16.upload(gpu100::convert_from_float<__nv_bfloat16>(g.b));
  day04::cublas_sgemm(s, 1.f, g.d_a.data(), g.d_b.data(), 0.f, g.d_c.data(), nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());
  g.ref32 = g.d_c.download();
  {
    gpu100::DeviceBuffer<float> ar(na), br(nb);
    ar.upload(gpu100::round_trip<__nv_bfloat16>(g.a));
    br.upload(gpu100::round_trip<__nv_bfloat16>(g.b));
    day04::cublas_sgemm(s, 1.f, ar.data(), br.data(), 0.f, g.d_c.data(), nullptr);
    CUDA_CHECK(cudaDeviceSynchronize());
    g.ref16 = g.d_c.download();
  }
  const gpu100::Tolerance tol32 = day04::gemm_tolerance(day04::Precision::kFp32, s.k);
  g.cublas.count = 257;
  for (int i = 0; i < 257; ++i) {
    const int r = int(gpu100::splitmix64(seed + 100 + i) % s.m);
    const int c = int(gpu100::splitmix64(seed + 500 + i) % s.n);
    const double exact = day04::dot_cpu(s, g.a.data(), g.b.data(), r, c);
    gpu100::record(g.cublas, size_t(r) * s.n + c, exact, g.ref32[size_t(r) * s.n + c],
                   tol32.abs_tol + tol32.rel_tol * std::fabs(exact));
  }
  fmt::print("reference: cuBLAS fp32 against the double CPU at 257 sampled entries: {}\n",
             g.cublas.summary());
  return g;
}

// The FP8 inputs: the same random A and B quantised to e4m3 with per-tensor scales (B as B^T,
// the FP8 input format), C in bf16, and the reference: the exact product of the e4m3 values,
// computed as cuBLAS fp32 (pedantic) on those values times scale_a scale_b, and checked against
// double-precision dot products at 257 sampled entries (the CPU would take minutes at 4096^3).
struct Fp8Data {
  day04::Fp8Tensor a, b_t;
  std::vector<float> ref;
  gpu100::DeviceBuffer<__nv_fp8_e4m3> d_a, d_bt;
  gpu100::DeviceBuffer<float> d_scales;  // scale_a at 0, scale_b at 4 (16-byte aligned)
  gpu100::DeviceBuffer<__nv_bfloat16> d_c;
  gpu100::CompareResult sampled;
};

Fp8Data make_fp8_data(day04::GemmShape s, uint64_t seed) {
  const size_t na = size_t(s.m) * s.k, nb = size_t(s.k) * s.n, nc = size_t(s.m) * s.n;
  Fp8Data f;
  f.a = day04::quantize_e4m3(gpu100::random_vector<float>(na, seed + 1));
  f.b_t = day04::quantize_e4m3(
      day04::transpose_host(gpu100::random_vector<float>(nb, seed + 2), s.k, s.n));
  f.d_a = gpu100::DeviceBuffer<__nv_fp8_e4m3>(na);
  f.d_bt = gpu100::DeviceBuffer<__nv_fp8_e4m3>(nb);
  f.d_scales = gpu100::DeviceBuffer<float>(8);
  f.d_c = gpu100::DeviceBuffer<__nv_bfloat16>(nc);
  f.d_a.upload(f.a.q);
  f.d_bt.upload(f.b_t.q);
  f.d_scales.upload(std::vector<float>{f.a.scale, 0, 0, 0, f.b_t.scale, 0, 0, 0});
  {
    gpu100::DeviceBuffer<float> aq(na), bq(nb), c(nc);
    aq.upload(day04::e4m3_to_float(f.a.q));
    bq.upload(day04::transpose_host(day04::e4m3_to_float(f.b_t.q), s.n, s.k));
    day04::cublas_sgemm(s, 1.f, aq.data(), bq.data(), 0.f, c.data(), nullptr);
    CUDA_CHECK(cudaDeviceSynchronize());
    f.ref = c.download();
  }
  const double scale = double(f.a.scale) * double(f.b_t.scale);
  for (float& x : f.ref) x = static_cast<float>(scale * x);
  const gpu100::Tolerance tol32 = day04::gemm_tolerance(day04::Precision::kFp32, s.k);
  f.sampled.count = 257;
  for (int i = 0; i < 257; ++i) {
    const int r = int(gpu100::splitmix64(seed + 100 + i) % s.m);
    const int c = int(gpu100::splitmix64(seed + 500 + i) % s.n);
    const double exact = day04::dot_fp8_cpu(s, f.a, f.b_t, r, c);
    gpu100::record(f.sampled, size_t(r) * s.n + c, exact, f.ref[size_t(r) * s.n + c],
                   tol32.abs_tol + tol32.rel_tol * std::fabs(exact));
  }
  fmt::print(
      "reference (fp8): cuBLAS fp32 on the e4m3 values against the double CPU at 257 "
      "sampled entries: {}\n",
      f.sampled.summary());
  return f;
}

// The dense FP8 tensor-core peak of the data sheet, for the GPUs it is known for here: H100 and
// H200 SXM (132 SMs of compute capability 9.0), 1979 TFLOP/s; 0 (no % column) elsewhere.
double fp8_datasheet_peak(const gpu100::DeviceSummary& d) {
  return d.cc_major == 9 && d.cc_minor == 0 && d.sm_count == 132 ? 1979.0 : 0.0;
}

// An FP8 row: refused with its reason when the variant cannot take the shape; otherwise C
// poisoned, one checked launch (the library's also times its candidate algorithms), then timed.
// A library that fails at its first launch (cuBLASLt: none of its algorithms ran) is refused
// too: the row says why and the other rows still run.
ResultRow gemm_fp8_row(const day04::GemmVariant& v, day04::GemmShape s, Fp8Data& f, double cpu_ms,
                       gpu100::DayRun& run) {
  const std::string shape = fmt::format("{}x{}x{}", s.m, s.n, s.k);
  const auto refused_row = [&](const std::string& why) {
    ResultRow row = gpu100::make_row(v.name, day04::to_string(v.precision), shape);
    row.verified = false;
    row.note = "refused: " + why;
    return row;
  };
  if (const std::string why = v.refusal != nullptr ? v.refusal(s) : ""; !why.empty()) {
    return refused_row(why);
  }
  const gpu100::Tolerance tol = day04::gemm_tolerance(v.precision, s.k);
  ResultRow row;
  try {
    row = run.measure(
        v.name, day04::to_string(v.precision), shape, [&] { f.d_c.poison(); },
        [&] {
          v.fp8(s, f.d_a.data(), f.d_bt.data(), f.d_scales.data(), f.d_scales.data() + 4,
                f.d_c.data(), nullptr);
        },
        [&] {
          const auto got = gpu100::convert_to_float(f.d_c.download());
          return gpu100::worst_of(
              {gpu100::compare(f.ref, got, tol.abs_tol, tol.rel_tol), f.sampled});
        });
  } catch (const gpu100::LibraryError& e) {
    if (!v.is_library) throw;
    return refused_row(e.what());
  }
  gpu100::derive(row, 0, 2.0 * s.m * s.n * s.k, 0, cpu_ms, 0);
  if (const double peak = fp8_datasheet_peak(run.device()); peak > 0) {
    row.pct_of_ceiling = 100.0 * *row.tflops / peak;
  }
  if (v.row_note != nullptr) row.note = v.row_note(s) + (row.note.empty() ? "" : "; " + row.note);
  if (!v.is_library) row.library = v.library;
  return row;
}

// The rows of the fp32 peak and of the CPU reference; returns the CPU's time. At full size the
// CPU would take minutes: it is timed at 1024^3 (or the problem, if smaller) and scaled by the
// FLOP ratio, and its row says so. a and b: the fp32 inputs (M x K, K x N).
double add_reference_rows(day04::GemmShape s, const float* a, const float* b, double fp32_peak,
                          gpu100::ResultTable& table, bool peak_row) {
  const double flops = 2.0 * s.m * s.n * s.k;
  const day04::GemmShape cs{std::min(s.m, 1024), std::min(s.n, 1024), std::min(s.k, 1024)};
  std::vector<float> cpu_c(size_t(cs.m) * cs.n);
  const double cpu_small_ms =
      gpu100::time_host_ms([&] { day04::gemm_cpu(cs, 1.0, a, b, 0.0, cpu_c.data()); }, 1, false);
  const double cpu_ms = cpu_small_ms * flops / (2.0 * cs.m * cs.n * cs.k);
  if (peak_row) {
    ResultRow peak = gpu100::make_row("fp32_fma_peak", "fp32", "FMA chains on every SM");
    peak.tflops = fp32_peak;
    peak.pct_of_ceiling = 100.0;
    peak.verified = false;
    table.add(peak);
  }
  ResultRow cpu = gpu100::reference_row("cpu_reference", "fp64 acc",
                                        fmt::format("{}x{}x{}", s.m, s.n, s.k), cpu_ms, 0, flops);
  if (cpu_ms > cpu_small_ms) {
    cpu.note = fmt::format("time measured at {}x{}x{} ({:.0f} ms) and scaled by the FLOP ratio",
                           cs.m, cs.n, cs.k, cpu_small_ms);
  }
  table.add(cpu);
  return cpu_ms;
}

// One variant's row: C poisoned (beta = 0: C is never read, so the NaN must be overwritten
// everywhere), one checked launch (for v8_autotuned it also runs the tuning), then timed.
ResultRow gemm_row(const day04::GemmVariant& v, day04::GemmShape s, GemmData& g, double cpu_ms,
                   double fp32_peak, gpu100::DayRun& run) {
  const gpu100::Tolerance tol = day04::gemm_tolerance(v.precision, s.k);
  const std::vector<float>& ref = v.precision == day04::Precision::kBf16 ? g.ref16 : g.ref32;
  ResultRow row = run.measure(
      v.name, day04::to_string(v.precision), fmt::format("{}x{}x{}", s.m, s.n, s.k),
      [&] { g.d_c.poison(); },
      [&] {
        if (v.fp32 != nullptr) {
          v.fp32(s, 1.f, g.d_a.data(), g.d_b.data(), 0.f, g.d_c.data(), nullptr);
        } else {
          v.bf16(s, 1.f, g.d_a16.data(), g.d_b16.data(), 0.f, g.d_c.data(), nullptr);
        }
      },
      [&] {
        const auto cmp = gpu100::compare(ref, g.d_c.download(), tol.abs_tol, tol.rel_tol);
        // The fp32 library row is also the reference: it answers for the sampled CPU check.
        const bool reference = v.is_library && v.precision == day04::Precision::kFp32;
        return reference ? gpu100::worst_of({cmp, g.cublas}) : cmp;
      });
  gpu100::derive(row, 0, 2.0 * s.m * s.n * s.k, 0, cpu_ms, 0);
  if (v.precision == day04::Precision::kFp32) row.pct_of_ceiling = 100.0 * *row.tflops / fp32_peak;
  if (v.row_note != nullptr) row.note = v.row_note(s) + (row.note.empty() ? "" : "; " + row.note);
  if (!v.is_library) row.library = v.library;
  return row;
}

void run_gemm(day04::GemmShape s, const Options& opt, double fp32_peak, gpu100::DayRun& run,
              std::string& verdict, bool peak_row = true) {
  const size_t na = size_t(s.m) * s.k, nb = size_t(s.k) * s.n, nc = size_t(s.m) * s.n;
  std::vector<const day04::GemmVariant*> chosen;
  bool any_fp8 = false, any_other = false;
  for (const auto& v : day04::gemm_variants()) {
    if (!opt.selected(v) || !gpu100::build_has(v.needs)) continue;
    chosen.push_back(&v);
    (v.precision == day04::Precision::kFp8 ? any_fp8 : any_other) = true;
  }
  // The fp32 and bf16 inputs, C and the references; the FP8 inputs, the fp32 copies made for
  // their reference and C.
  gpu100::require_device_memory(
      (any_other ? 4 * (na + nb) * 3 / 2 + 3 * nc * 4 : 0) + (any_fp8 ? 5 * (na + nb) + 6 * nc : 0),
      "the GEMM");
  GemmData g;
  Fp8Data f;
  if (any_other) g = make_gemm_data(s, opt.common.seed);
  if (any_fp8) f = make_fp8_data(s, opt.common.seed);
  std::vector<float> a32, b32;  // the CPU row's inputs when no fp32 data was made
  if (!any_other) {
    a32 = gpu100::random_vector<float>(size_t(std::min(s.m, 1024)) * std::min(s.k, 1024), 1);
    b32 = gpu100::random_vector<float>(size_t(std::min(s.k, 1024)) * std::min(s.n, 1024), 2);
  }
  const double cpu_ms =
      add_reference_rows(s, any_other ? g.a.data() : a32.data(),
                         any_other ? g.b.data() : b32.data(), fp32_peak, run.table(), peak_row);
  std::vector<ResultRow> rows;
  std::vector<const day04::GemmVariant*> ran;
  for (const auto* v : chosen) {
    rows.push_back(v->precision == day04::Precision::kFp8
                       ? gemm_fp8_row(*v, s, f, cpu_ms, run)
                       : gemm_row(*v, s, g, cpu_ms, fp32_peak, run));
    ran.push_back(v);
  }
  gpu100::link_libraries(rows);  // x cuBLAS of the same precision
  for (day04::Precision p : {day04::Precision::kFp32, day04::Precision::kTf32,
                             day04::Precision::kBf16, day04::Precision::kFp8}) {
    const ResultRow* best = nullptr;
    for (size_t i = 0; i < rows.size(); ++i) {
      if (ran[i]->precision == p && rows[i].ok && rows[i].ratio_vs_library &&
          (best == nullptr || *rows[i].ratio_vs_library > *best->ratio_vs_library)) {
        best = &rows[i];
      }
    }
    if (best != nullptr) {
      gpu100::append(verdict, fmt::format("best {}: {} at {:.2f}x cuBLAS", day04::to_string(p),
                                          best->variant, *best->ratio_vs_library));
    }
  }
  for (const auto& row : rows) run.table().add(row);
  if (s.m > 1024 || s.n > 1024 || s.k > 1024) {
    gpu100::append(verdict, "x CPU scaled from a smaller CPU run (see note)");
  }
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
  args.add_string("precision", "only the GEMM rows of this precision: fp32, tf32, bf16 or fp8", "");
  args.add_flag("sweep",
                "the GEMM at a size sweep instead of --m --n --k (no transpose): squares 1024 to "
                "16384 and three transformer shapes (M x N x K 4096x14336x4096, 4096x4096x14336, "
                "16384x6144x4096); pick the variants with --variant or --precision");
  args.add_flag(
      "skinny-sweep",
      "the GEMM at three shapes with few rows of C instead of --m --n --k (no transpose): "
      "M x N x K 256x4096x14336, 512x4096x4096 and 1024x2048x8192, where whole tiles "
      "alone leave SMs idle; pick the variants with --variant or --precision");
  args.add_common();
  if (!args.parse(argc, argv)) return gpu100::kExitOk;
  if (args.get_flag("list")) {
    gpu100::print_list(day04::transpose_variants());
    gpu100::print_list(day04::gemm_variants());
    return gpu100::kExitOk;
  }
  Options opt;
  opt.common = gpu100::CommonOptions::read(args);
  opt.precision = args.get_string("precision");
  if (!opt.precision.empty() && opt.precision != "fp32" && opt.precision != "tf32" &&
      opt.precision != "bf16" && opt.precision != "fp8") {
    throw gpu100::UsageError("--precision must be fp32, tf32, bf16 or fp8, got '" + opt.precision +
                             "'");
  }
  if (args.get_flag("sweep") && args.get_flag("skinny-sweep")) {
    throw gpu100::UsageError("--sweep and --skinny-sweep are two runs: give one");
  }
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
  // A sweep: one row group per shape, every chosen variant at each (the sampled CPU check at each).
  const auto sweep = [&](const std::vector<day04::GemmShape>& shapes, const char* name) {
    bool first = true;
    for (const auto& shape : shapes) {
      fmt::print("GEMM {}x{}x{}\n", shape.m, shape.n, shape.k);
      std::string shape_verdict;
      run_gemm(shape, opt, fp32_peak, run, shape_verdict, first);
      first = false;
    }
    return run.finish(name, fmt::format("the GEMM at {} sizes", shapes.size()));
  };
  if (args.get_flag("sweep")) {
    return sweep({{1024, 1024, 1024},
                  {2048, 2048, 2048},
                  {4096, 4096, 4096},
                  {8192, 8192, 8192},
                  {16384, 16384, 16384},
                  {4096, 14336, 4096},
                  {4096, 4096, 14336},
                  {16384, 6144, 4096}},
                 "day04_matmul_sweep");
  }
  if (args.get_flag("skinny-sweep")) {
    return sweep({{256, 4096, 14336}, {512, 4096, 4096}, {1024, 2048, 8192}},
                 "day04_matmul_skinny_sweep");
  }
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
