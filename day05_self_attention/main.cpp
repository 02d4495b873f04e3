// day05_self_attention: the host driver.
//
// Versions (one file each; the registry is in attention.cpp):
//   v1_naive        day04 GEMM per head + a 3-pass row softmax + day04 GEMM; all S x S scores
//   v2_cublas       cuBLAS strided-batched SGEMMs + a fused one-warp-per-row online softmax
//   v3_flash_fp32   flash attention on CUDA cores: K/V tiles through shared memory, online softmax
//   v4_flash_bf16   FlashAttention-2 style: mma.sync + ldmatrix, Q in registers, cp.async K/V
//   v5_flash_wgmma  FlashAttention-3 style (sm_90a builds only): wgmma, TMA producer warp,
//   mbarriers
// Every row is checked twice: against a double-precision CPU reference at --check-rows sampled
// query rows (v4 against the reference on its bf16-rounded inputs), and, when v2 ran, element by
// element against v2's whole output. Then timed: median of --iters runs after --warmup, L2
// flushed. TFLOP/s counts 4 B H S^2 D (half when causal); "% ceiling" of the fp32 rows is of the
// fp32 FMA peak measured in this run. A variant that refuses a shape (v1 above its S x S budget,
// v4 at D other than 64 and 128) gets a row with the reason and no time.
//
// Run: build/day05_self_attention/day05_self_attention [--batch 8 --heads 16 --seq 2048 --head-dim
// 64]
//      [--mask none|causal|both] [--variant v3_flash_fp32,v4_flash_bf16] [--json out.json]
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "attention.hpp"
#include "common/arch.hpp"
#include "common/args.hpp"
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

namespace {

using gpu100::ResultRow;
using bf16 = __nv_bfloat16;

constexpr const char* kDay = "day05_self_attention";

struct Options {
  gpu100::CommonOptions common;
  std::vector<const day05::AttentionVariant*> variants;
  std::vector<bool> masks;  // causal flags to run
  int check_rows = 64;
};

// The sampled query rows: (head, query) pairs, always including the first and the last row.
struct SampleRow {
  int64_t bh;
  int i;
};
std::vector<SampleRow> sample_rows(const day05::AttentionShape& s, int count, uint64_t seed) {
  std::vector<SampleRow> rows = {{0, 0}, {s.heads() - 1, s.s - 1}};
  for (int r = 2; r < count; ++r) {
    const uint64_t x = gpu100::splitmix64(seed * 7919 + r);
    rows.push_back({int64_t(x % uint64_t(s.heads())), int((x >> 32) % uint64_t(s.s))});
  }
  return rows;
}

// The reference at the sampled rows: O, sum p |v| and the log-sum-exp, in double.
struct SampledReference {
  std::vector<double> o, abs_o, lse;
  double ms = 0, flops = 0;  // CPU time and FLOPs of computing it
};
SampledReference reference_rows(const day05::AttentionShape& s, const std::vector<SampleRow>& rows,
                                const std::vector<float>& q, const std::vector<float>& k,
                                const std::vector<float>& v, bool round_to_bf16) {
  SampledReference r;
  r.o.resize(rows.size() * s.d);
  r.abs_o.resize(rows.size() * s.d);
  r.lse.resize(rows.size());
  const size_t head = size_t(s.s) * s.d;
  day05::AttentionShape one = s;
  one.b = one.h = 1;
  std::vector<float> hq, hk, hv;
  const auto t0 = std::chrono::steady_clock::now();
  for (size_t n = 0; n < rows.size(); ++n) {
    const size_t off = size_t(rows[n].bh) * head;
    auto take = [&](const std::vector<float>& x, std::vector<float>& out) {
      out.assign(x.begin() + off, x.begin() + off + head);
      if (round_to_bf16) out = gpu100::round_trip<bf16>(out);
    };
    take(q, hq);
    take(k, hk);
    take(v, hv);
    r.flops += day05::attention_row_cpu(one, hq.data(), hk.data(), hv.data(), 0, rows[n].i,
                                        &r.o[n * s.d], &r.abs_o[n * s.d], &r.lse[n]);
  }
  r.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

std::string mib(double bytes) {
  return bytes >= double(1 << 30) ? fmt::format("{:.2f} GiB", bytes / double(1 << 30))
                                  : fmt::format("{:.2f} MiB", bytes / double(1 << 20));
}

struct DeviceData {
  gpu100::DeviceBuffer<float> q, k, v, o;
  gpu100::DeviceBuffer<bf16> q16, k16, v16, o16;
  gpu100::DeviceBuffer<char> ws;
};

// Runs every selected variant at one shape (one mask): check, time, one row each.
void run_shape(const day05::AttentionShape& s, const Options& opt, double fp32_peak,
               const std::vector<float>& q, const std::vector<float>& k,
               const std::vector<float>& v, DeviceData& dev, gpu100::DayRun& run,
               std::string& verdict) {
  gpu100::ResultTable& table = run.table();
  const std::string label = day05::shape_label(s);
  const double flops = day05::attention_flops(s);
  const size_t n = static_cast<size_t>(s.elements());
  const auto rows = sample_rows(s, opt.check_rows, opt.common.seed + (s.causal ? 1 : 0));
  bool any_bf16 = false;
  for (const auto* v_ : opt.variants) any_bf16 |= v_->precision == day05::Precision::kBf16;
  const SampledReference ref32 = reference_rows(s, rows, q, k, v, false);
  SampledReference ref16;
  if (any_bf16) ref16 = reference_rows(s, rows, q, k, v, true);
  const double cpu_ms = ref32.ms * flops / std::max(ref32.flops, 1.0);

  ResultRow cpu = gpu100::make_row("cpu_reference", "fp64", label);
  cpu.ms = cpu_ms;
  cpu.tflops = flops / (cpu_ms * 1e9);
  cpu.speedup_vs_cpu = 1.0;
  cpu.verified = false;
  cpu.note = fmt::format(
      "one thread, double; timed on {} sampled rows ({:.1f} ms) and scaled by "
      "the FLOP ratio",
      rows.size(), ref32.ms);
  table.add(cpu);

  // v2 first (when selected): its whole output is the reference the others are compared with.
  std::vector<const day05::AttentionVariant*> order = opt.variants;
  std::stable_partition(order.begin(), order.end(),
                        [](const day05::AttentionVariant* x) { return x->is_library; });
  std::vector<float> library_out;
  double library_ms = 0;
  const char* library = nullptr;  // the registry's library row (v2), when it runs
  std::vector<std::pair<const day05::AttentionVariant*, ResultRow>> done;
  for (const auto* var : order) {
    ResultRow row = gpu100::make_row(var->name, day05::to_string(var->precision), label);
    if (const std::string why = var->refusal(s); !why.empty()) {
      row.verified = false;
      row.note = "refused: " + why;
      done.push_back({var, row});
      continue;
    }
    const size_t ws_bytes = var->workspace_bytes(s);
    const bool is16 = var->precision == day05::Precision::kBf16;
    auto launch = [&] {
      if (is16) {
        var->bf16(s, dev.q16.data(), dev.k16.data(), dev.v16.data(), dev.o16.data(), dev.ws.data(),
                  ws_bytes, nullptr);
      } else {
        var->fp32(s, dev.q.data(), dev.k.data(), dev.v.data(), dev.o.data(), dev.ws.data(),
                  ws_bytes, nullptr);
      }
    };
    dev.o.poison();
    dev.o16.poison();
    dev.ws.poison();
    launch();  // (v1's first call also runs day04's GEMM autotuner for its two shapes)
    CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<float> out;
    if (is16) {
      std::vector<bf16> o16(n);
      dev.o16.download(o16.data(), n);
      out = gpu100::convert_to_float(o16);
    } else {
      out.resize(n);
      dev.o.download(out.data(), n);
    }
    // 1. Sampled rows against the CPU.
    const double tol = day05::tolerance(var->precision);
    const SampledReference& ref = is16 ? ref16 : ref32;
    std::vector<float> got(rows.size() * s.d);
    for (size_t r = 0; r < rows.size(); ++r) {
      const size_t off = (size_t(rows[r].bh) * s.s + rows[r].i) * s.d;
      std::copy(out.begin() + off, out.begin() + off + s.d, got.begin() + r * s.d);
    }
    const auto cmp = day05::check_output(ref.o, ref.abs_o, got, tol);
    row.max_rel_err = cmp.max_rel;
    row.ok = cmp.ok;
    std::vector<std::string> notes;
    if (!cmp.ok) notes.push_back("sampled rows vs CPU: " + cmp.summary());
    // 2. The flash variants' log-sum-exp at the sampled rows.
    if (var->is_flash) {
      std::vector<float> lse_all(static_cast<size_t>(s.rows()));
      CUDA_CHECK(cudaMemcpy(lse_all.data(), dev.ws.data(), lse_all.size() * sizeof(float),
                            cudaMemcpyDeviceToHost));
      std::vector<float> lse(rows.size());
      for (size_t r = 0; r < rows.size(); ++r) lse[r] = lse_all[rows[r].bh * s.s + rows[r].i];
      const auto lcmp = day05::check_lse(ref.lse, lse, tol);
      row.ok = row.ok && lcmp.ok;
      if (!lcmp.ok) notes.push_back("log-sum-exp vs CPU: " + lcmp.summary());
    }
    // 3. The whole output against v2's (|V| <= 1, so sum p |v| <= 1: tolerance 2 tol absolute).
    if (var->is_library) {
      library_out = out;
    } else if (!library_out.empty()) {
      const auto full = gpu100::compare(library_out, out, 2 * tol, 0.0);
      row.ok = row.ok && full.ok;
      if (!full.ok) notes.push_back("whole output vs v2_cublas: " + full.summary());
    }
    const gpu100::Timing t = run.time(launch);
    row.ms = t.median_ms;
    row.ms_min = t.min_ms;
    gpu100::derive(row, 0, flops, 0, cpu_ms, 0);
    if (!is16 && fp32_peak > 0) row.pct_of_ceiling = 100.0 * *row.tflops / fp32_peak;
    if (var->is_library) library_ms = t.median_ms, library = var->name;
    if (var->is_flash) {
      notes.push_back(
          fmt::format("extra device memory {} (the row log-sum-exp, 4 B H S bytes); "
                      "no S x S matrix",
                      mib(double(ws_bytes))));
    } else if (var->is_library) {
      notes.push_back(fmt::format("workspace {} (S x S scores of {} of {} heads at a time)",
                                  mib(double(ws_bytes)), day05::v2_heads_per_chunk(s), s.heads()));
    } else {
      notes.push_back(
          fmt::format("workspace {} (K^T and all B H S S scores)", mib(double(ws_bytes))));
    }
    if (is16) notes.push_back("bf16 Q, K, V in, bf16 O out, fp32 accumulation");
    for (size_t i = 0; i < notes.size(); ++i) row.note += (i ? "; " : "") + notes[i];
    done.push_back({var, row});
  }
  // Rows in registry order, with the ratio to v2.
  for (const auto& reg : day05::attention_variants()) {
    for (auto& [var, row] : done) {
      if (var != &reg) continue;
      if (!var->is_library && library_ms > 0 && row.ms) {
        row.ratio_vs_library = library_ms / *row.ms;
        row.library = library;
      }
      if (var->precision == day05::Precision::kBf16 && row.tflops) {
        verdict += fmt::format("{}{} {:.0f} TFLOP/s{}", verdict.empty() ? "" : "; ", var->name,
                               *row.tflops, s.causal ? " causal" : "");
      }
      table.add(row);
    }
  }
}

int run(int argc, char** argv) {
  gpu100::ArgParser args(kDay,
                         "scaled dot-product attention (forward), naive to FlashAttention-2 style");
  args.add_int("batch", "batch size B", 8, 1, 1 << 16);
  args.add_int("heads", "heads H", 16, 1, 1 << 16);
  args.add_int("seq", "sequence length S", 2048, 1, day05::kMaxS);
  args.add_int("head-dim", "head dimension D (even; v4, v5: 64 or 128)", 64, 1, day05::kMaxD);
  args.add_string("mask", "none, causal or both (one set of rows per mask)", "both");
  args.add_int("check-rows", "query rows checked against the CPU reference", 64, 2, 1 << 16);
  args.add_common();
  args.add_alias("b", "batch");
  args.add_alias("h", "heads");
  args.add_alias("s", "seq");
  args.add_alias("d", "head-dim");
  if (!args.parse(argc, argv)) return gpu100::kExitOk;
  if (gpu100::list_requested(args, day05::attention_variants())) return gpu100::kExitOk;

  Options opt;
  opt.common = gpu100::CommonOptions::read(args);
  const auto& names = opt.common.variants;
  opt.variants = gpu100::select(day05::attention_variants(), names);
  gpu100::refuse_named_not_built(day05::attention_variants(), names);
  const std::string mask = args.get_string("mask");
  if (mask == "none") {
    opt.masks = {false};
  } else if (mask == "causal") {
    opt.masks = {true};
  } else if (mask == "both") {
    opt.masks = {false, true};
  } else {
    throw gpu100::UsageError(fmt::format("--mask must be none, causal or both (got '{}')", mask));
  }
  opt.check_rows = static_cast<int>(args.get_int("check-rows"));
  day05::AttentionShape s;
  s.b = static_cast<int>(args.get_int("batch"));
  s.h = static_cast<int>(args.get_int("heads"));
  s.s = static_cast<int>(args.get_int("seq"));
  s.d = static_cast<int>(args.get_int("head-dim"));
  try {
    day05::check_shape(s);
  } catch (const std::invalid_argument& e) {
    throw gpu100::UsageError(e.what());
  }
  // Device memory: Q, K, V, O in fp32 and bf16, and the largest workspace of a variant that runs.
  const size_t n = static_cast<size_t>(s.elements());
  size_t ws_bytes = 0;
  for (bool causal : opt.masks) {
    day05::AttentionShape sc = s;
    sc.causal = causal;
    for (const auto* v : opt.variants) {
      if (v->refusal(sc).empty()) ws_bytes = std::max(ws_bytes, v->workspace_bytes(sc));
    }
  }
  const double need = double(n) * (4 * 4 + 4 * 2) + double(ws_bytes);
  if (need > double(size_t(1) << 40)) {
    throw gpu100::UsageError(fmt::format("the problem needs {} of device memory", mib(need)));
  }

  // Everything above is argument handling; the GPU is touched from here on.
  gpu100::DayRun run(
      kDay, fmt::format("O = softmax(Q K^T / sqrt(D) + mask) V, {}", day05::shape_label(s)),
      opt.common);
  if (const auto lacked = gpu100::refuse_or_list_lacked(day05::attention_variants(), names);
      !lacked.empty()) {
    fmt::print("{}\n", lacked);
  }
  opt.variants.erase(
      std::remove_if(opt.variants.begin(), opt.variants.end(),
                     [](const day05::AttentionVariant* v) { return !gpu100::build_has(v->needs); }),
      opt.variants.end());
  gpu100::require_device_memory(static_cast<size_t>(need) + (size_t(64) << 20), kDay);
  const double fp32_peak = gpu100::measure_fp32_peak_tflops();
  fmt::print("fp32 FMA ceiling: {:.1f} TFLOP/s (measured now; the fp32 rows' % ceiling)\n\n",
             fp32_peak);

  const auto q = gpu100::random_vector<float>(n, opt.common.seed + 1);
  const auto k = gpu100::random_vector<float>(n, opt.common.seed + 2);
  const auto v = gpu100::random_vector<float>(n, opt.common.seed + 3);
  DeviceData dev{gpu100::DeviceBuffer<float>(n),
                 gpu100::DeviceBuffer<float>(n),
                 gpu100::DeviceBuffer<float>(n),
                 gpu100::DeviceBuffer<float>(n),
                 gpu100::DeviceBuffer<bf16>(n),
                 gpu100::DeviceBuffer<bf16>(n),
                 gpu100::DeviceBuffer<bf16>(n),
                 gpu100::DeviceBuffer<bf16>(n),
                 gpu100::DeviceBuffer<char>(std::max<size_t>(ws_bytes, 256))};
  dev.q.upload(q);
  dev.k.upload(k);
  dev.v.upload(v);
  dev.q16.upload(gpu100::convert_from_float<bf16>(q));  // converted once, outside any timing
  dev.k16.upload(gpu100::convert_from_float<bf16>(k));
  dev.v16.upload(gpu100::convert_from_float<bf16>(v));

  std::string verdict;
  for (bool causal : opt.masks) {
    day05::AttentionShape sc = s;
    sc.causal = causal;
    run_shape(sc, opt, fp32_peak, q, k, v, dev, run, verdict);
  }
  return run.finish(kDay, verdict);
}

}  // namespace

int main(int argc, char** argv) {
  return gpu100::guarded_main(argc, argv, run);
}
