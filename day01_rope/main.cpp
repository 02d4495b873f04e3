// day01_rope: the host driver.
//
// Steps: parse and validate every argument (no GPU call before that) -> the device and the copy
// ceiling -> seeded random Q and K in [-1, 1] -> the fp64 CPU reference on the whole problem
// (std::chrono, one thread) -> the cos/sin table, built once before any timing -> for each fp32
// variant: poison the outputs, launch once, check every element against the reference, then time
// it (CUDA events) -> the same for the bf16 variant, against the reference recomputed from the
// bf16-rounded inputs. One row per variant; exit 1 on any mismatch.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <functional>
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
#include "rope.cuh"

namespace {

using day01::RopeParams;
using gpu100::ResultRow;

struct Options {
  gpu100::CommonOptions common;
  RopeParams p;
  std::vector<const day01::Variant*> variants;
};

std::string shape_label(const RopeParams& p) {
  std::string s =
      fmt::format("B={} S={} Hq={} Hkv={} D={}", p.batch, p.seq, p.q_heads, p.kv_heads, p.dim);
  if (p.pos_offset != 0) s += fmt::format(" pos0={}", p.pos_offset);
  if (p.style == day01::RopeStyle::kHalfSplit) s += " half-split";
  return s;
}

double parse_base(const std::string& text) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(v) || v <= 0) {
    throw gpu100::UsageError(fmt::format("--base expects a number > 0, got '{}'", text));
  }
  return v;
}

// The reference outputs, fp64, for Q and K.
struct Reference {
  std::vector<double> q, k;
};

// Runs the reference into `ref` and returns its wall time: the median of 3 runs, or the one run
// when that took over a second. `ref` is allocated (and its pages touched) before the clock.
double time_cpu_reference(const std::vector<float>& q, const std::vector<float>& k, Reference& ref,
                          const RopeParams& p, int& runs) {
  std::vector<double> ms;
  for (int r = 0; r < 3; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    day01::rope_cpu(q.data(), k.data(), ref.q.data(), ref.k.data(), p);
    const auto t1 = std::chrono::steady_clock::now();
    ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    if (ms.front() > 1000.0) break;
  }
  runs = static_cast<int>(ms.size());
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// Every element of both outputs against the reference, with the variant's tolerance.
template <typename T>
gpu100::CompareResult check_outputs(const day01::Variant& v, const RopeParams& p,
                                    const Reference& ref, const gpu100::DeviceBuffer<T>& q_out,
                                    const gpu100::DeviceBuffer<T>& k_out) {
  const day01::Tolerance tol = day01::tolerance(v, p);
  const std::vector<T> gq = q_out.download(), gk = k_out.download();
  const gpu100::CompareResult cq = gpu100::compare(ref.q, gq, tol.abs_tol, tol.rel_tol);
  const gpu100::CompareResult ck = gpu100::compare(ref.k, gk, tol.abs_tol, tol.rel_tol);
  return gpu100::worst_of({cq, ck});
}

Options parse_options(gpu100::ArgParser& args) {
  Options opt;
  RopeParams& p = opt.p;
  p.batch = args.get_int("batch");
  p.seq = args.get_int("seq");
  p.q_heads = args.get_int("heads");
  p.kv_heads = args.was_set("kv-heads") ? args.get_int("kv-heads") : p.q_heads;
  p.dim = args.get_int("head-dim");
  p.pos_offset = args.get_int("pos-offset");
  p.base = parse_base(args.get_string("base"));
  p.style =
      args.get_flag("half-split") ? day01::RopeStyle::kHalfSplit : day01::RopeStyle::kInterleaved;
  if (p.dim % 2 != 0) {
    throw gpu100::UsageError(
        fmt::format("--head-dim must be even (RoPE rotates pairs of values), got {}", p.dim));
  }
  try {
    day01::validate(p);
  } catch (const std::invalid_argument& e) {
    throw gpu100::UsageError(e.what());
  }

  opt.common = gpu100::CommonOptions::read(args);
  opt.variants = gpu100::select(day01::variants(), opt.common.variants);
  return opt;
}

void declare_flags(gpu100::ArgParser& args) {
  args.add_int("batch", "B, sequences per batch", 8, 1, int64_t(1) << 20);
  args.add_int("seq", "S, tokens per sequence", 4096, 1, int64_t(1) << 24);
  args.add_int("heads", "Hq, query heads", 32, 1, int64_t(1) << 16);
  args.add_int("kv-heads", "Hkv, key heads (grouped-query attention; default: --heads)", 32, 1,
               int64_t(1) << 16);
  args.add_int("head-dim", "D, head dimension (even)", 128, 1, int64_t(1) << 16);
  args.add_int("pos-offset", "position of the first token (tokens already in the KV cache)", 0, 0,
               int64_t(1) << 24);
  args.add_string("base", "the frequency base: theta_i = base^(-2i/D)", "10000");
  args.add_flag("half-split", "pair x[i] with x[i + D/2] (GPT-NeoX, HF Llama) instead of x[2i+1]");
  args.add_common();
  args.add_alias("dim", "head-dim");
}

// The rows of the selected variants of one element type T. For bf16 the inputs are rounded and
// the reference is recomputed from those exact values. Returns "best <T>: <variant> at X% of the
// copy ceiling" ("" when no variant of T ran).
template <typename T>
std::string run_precision(const Options& opt, const std::vector<float>& q,
                          const std::vector<float>& k, Reference& ref,
                          const day01::RopeTable& table, double cpu_ms, gpu100::DayRun& run) {
  const RopeParams& p = opt.p;
  const auto prec = std::is_same_v<T, float> ? day01::Precision::kFp32 : day01::Precision::kBf16;
  std::vector<const day01::Variant*> list;
  for (const auto* v : opt.variants) {
    if (v->precision == prec) list.push_back(v);
  }
  if (list.empty()) return "";
  const auto q_t = gpu100::convert_from_float<T>(q), k_t = gpu100::convert_from_float<T>(k);
  if constexpr (!std::is_same_v<T, float>) {
    day01::rope_cpu(q_t.data(), k_t.data(), ref.q.data(), ref.k.data(), p);
  }
  gpu100::DeviceBuffer<T> d_q(q.size()), d_k(k.size()), d_q_out(q.size()), d_k_out(k.size());
  d_q.upload(q_t);
  d_k.upload(k_t);
  const double bytes = 2.0 * double(q.size() + k.size()) * sizeof(T);
  gpu100::ResultRow best;
  for (const auto* v : list) {
    gpu100::ResultRow row = run.measure(
        v->name, gpu100::to_string(v->precision), shape_label(p),
        [&] { d_q_out.poison(), d_k_out.poison(); },
        [&] {
          if constexpr (std::is_same_v<T, float>) {
            v->launch_fp32(d_q.data(), d_k.data(), d_q_out.data(), d_k_out.data(), p, table,
                           nullptr);
          } else {
            v->launch_bf16(d_q.data(), d_k.data(), d_q_out.data(), d_k_out.data(), p, table,
                           nullptr);
          }
        },
        [&] { return check_outputs(*v, p, ref, d_q_out, d_k_out); });
    gpu100::derive(row, bytes, 0, run.ceiling_gbps(), cpu_ms, 0);
    if (row.ok && row.pct_of_ceiling > best.pct_of_ceiling) best = row;
    run.table().add(row);
  }
  if (!best.pct_of_ceiling) return "";
  return fmt::format("best {}: {} at {:.1f}% of the copy ceiling", gpu100::to_string(prec),
                     best.variant, *best.pct_of_ceiling);
}

int run(int argc, char** argv) {
  gpu100::ArgParser args("day01_rope",
                         "rotary position embedding on Q [B,S,Hq,D] and K [B,S,Hkv,D], against "
                         "an fp64 CPU reference");
  declare_flags(args);
  if (!args.parse(argc, argv)) return gpu100::kExitOk;
  if (gpu100::list_requested(args, day01::variants())) return gpu100::kExitOk;
  const Options opt = parse_options(args);
  const RopeParams& p = opt.p;

  // Everything above is argument handling; the GPU is touched from here on.
  gpu100::DayRun run(
      "day01_rope",
      fmt::format("RoPE on Q and K, {} pairs, base {}", day01::style_name(p.style), p.base),
      opt.common);
  const int64_t nq = p.q_elems(), nk = p.k_elems();
  const size_t table_bytes = size_t(p.positions()) * size_t(p.dim / 2) * sizeof(float2);
  gpu100::require_device_memory(2 * size_t(nq + nk) * sizeof(float) + table_bytes,
                                shape_label(p).c_str());
  fmt::print(
      "GB/s counts Q and K read once and Q_out and K_out written once; the cos/sin table\n"
      "({:.2f} MiB, built once on the host in fp64 and uploaded before timing) is neither timed "
      "nor counted.\nevery element of every output is checked against the fp64 reference.\n\n",
      table_bytes / double(1 << 20));

  const std::vector<float> q = gpu100::random_vector<float>(nq, opt.common.seed);
  const std::vector<float> k = gpu100::random_vector<float>(nk, opt.common.seed + 1);
  Reference ref{std::vector<double>(nq), std::vector<double>(nk)};
  int cpu_runs = 0;
  const double cpu_ms = time_cpu_reference(q, k, ref, p, cpu_runs);
  ResultRow cpu = gpu100::reference_row("cpu_reference", "fp64", shape_label(p), cpu_ms,
                                        2.0 * double(nq + nk) * sizeof(float));
  cpu.note = fmt::format(
      "one thread, fp64 std::complex, the whole problem (not extrapolated), median of {} run(s)",
      cpu_runs);
  run.table().add(cpu);

  const day01::RopeTable rope_table(p);
  std::string verdict_extra;
  gpu100::append(verdict_extra, run_precision<float>(opt, q, k, ref, rope_table, cpu_ms, run));
  gpu100::append(verdict_extra,
                 run_precision<__nv_bfloat16>(opt, q, k, ref, rope_table, cpu_ms, run));
  return run.finish(
      p.style == day01::RopeStyle::kHalfSplit ? "day01_rope_half_split" : "day01_rope",
      verdict_extra);
}

}  // namespace

int main(int argc, char** argv) {
  return gpu100::guarded_main(argc, argv, run);
}
