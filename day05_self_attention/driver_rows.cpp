// day05_self_attention's driver, the rows of one shape. Every variant is checked three ways:
// against a double-precision CPU reference at --check-rows sampled query rows (the bf16 variants
// against the reference on their bf16-rounded inputs), the flash variants' log-sum-exp at those
// rows, and element by element against the library row's whole output (v2 for fp32, cuDNN's
// fused attention for bf16, run first): check_forward, which the training step's rows
// (driver_backward.cpp) share. Then timed: median of --iters runs after --warmup, L2 flushed.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "common/cuda_check.hpp"
#include "common/half.hpp"
#include "common/random.hpp"
#include "common/tags.hpp"
#include "driver.hpp"

namespace day05 {

namespace {

using gpu100::ResultRow;
using bf16 = __nv_bfloat16;

// What a row's device memory holds, from its registry entry. A learner's variant (tag "mine") is
// described only by what its entry declares: the flash flag, and its workspace when it asks for
// one; the texts below that name a storage belong to the day's own rows.
std::string memory_note(const AttentionShape& s, const AttentionVariant& var) {
  const size_t bytes = var.workspace_bytes(s);
  const std::string ws = mib(double(bytes));
  if (var.is_flash && var.workspace_bytes == v5_workspace_bytes &&
      bytes > flash_workspace_bytes(s)) {
    return "extra device memory " + ws +
           " (the row log-sum-exp, 4 B H S bytes, and room for the last round's split query "
           "tiles); no S x S matrix";
  }
  if (var.is_flash) {
    return "extra device memory " + ws + " (the row log-sum-exp, 4 B H S bytes); no S x S matrix";
  }
  if (gpu100::has_tag(var.tags, "mine")) return bytes > 0 ? "workspace " + ws : "";
  if (var.is_library && var.precision == Precision::kBf16) {
    return "workspace " + ws + " (the row log-sum-exp and cuDNN's own)";
  }
  if (var.is_library) {
    return fmt::format("workspace {} (S x S scores of {} of {} heads at a time)", ws,
                       v2_heads_per_chunk(s), s.heads());
  }
  return "workspace " + ws + " (K^T and all B H S S scores)";
}

}  // namespace

std::string mib(double bytes) {
  return bytes >= double(1 << 30) ? fmt::format("{:.2f} GiB", bytes / double(1 << 30))
                                  : fmt::format("{:.2f} MiB", bytes / double(1 << 20));
}

std::vector<SampleRow> sample_rows(const AttentionShape& s, int count, uint64_t seed) {
  std::vector<SampleRow> rows = {{0, 0}, {s.heads() - 1, s.s - 1}};
  for (int r = 2; r < count; ++r) {
    const uint64_t x = gpu100::splitmix64(seed * 7919 + r);
    rows.push_back({int64_t(x % uint64_t(s.heads())), int((x >> 32) % uint64_t(s.s))});
  }
  return rows;
}

SampledReference reference_rows(const AttentionShape& s, const std::vector<SampleRow>& rows,
                                const std::vector<float>& q, const std::vector<float>& k,
                                const std::vector<float>& v, bool round_to_bf16) {
  SampledReference r;
  r.o.resize(rows.size() * s.d);
  r.abs_o.resize(rows.size() * s.d);
  r.lse.resize(rows.size());
  const size_t head = size_t(s.s) * s.d;
  AttentionShape one = s;
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
    r.flops += attention_row_cpu(one, hq.data(), hk.data(), hv.data(), 0, rows[n].i, &r.o[n * s.d],
                                 &r.abs_o[n * s.d], &r.lse[n]);
  }
  r.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

gpu100::CompareResult check_forward(const AttentionShape& s, const AttentionVariant& var,
                                    const std::vector<SampleRow>& rows, const SampledReference& ref,
                                    const std::vector<float>& out, const void* lse_device,
                                    std::map<Precision, std::vector<float>>& library_out,
                                    std::vector<std::string>& notes) {
  const size_t n = static_cast<size_t>(s.elements());
  std::vector<gpu100::CompareResult> parts;
  auto add = [&](const char* what, const gpu100::CompareResult& c) {
    parts.push_back(c);
    if (!c.ok) notes.push_back(std::string(what) + ": " + c.summary());
  };
  const double tol = tolerance(var.precision);
  std::vector<float> got(rows.size() * s.d), lse(rows.size());
  for (size_t r = 0; r < rows.size(); ++r) {
    const size_t off = (size_t(rows[r].bh) * s.s + rows[r].i) * s.d;
    std::copy(out.begin() + off, out.begin() + off + s.d, got.begin() + r * s.d);
  }
  add("sampled rows vs CPU", check_output(ref.o, ref.abs_o, got, tol));
  if (var.is_flash) {  // the row log-sum-exp
    std::vector<float> lse_all(static_cast<size_t>(s.rows()));
    CUDA_CHECK(cudaMemcpy(lse_all.data(), lse_device, lse_all.size() * sizeof(float),
                          cudaMemcpyDeviceToHost));
    for (size_t r = 0; r < rows.size(); ++r) lse[r] = lse_all[rows[r].bh * s.s + rows[r].i];
    add("log-sum-exp vs CPU", check_lse(ref.lse, lse, tol));
  }
  // The whole output against the library row of its precision, else the other one (|V| <= 1, so
  // sum p |v| <= 1: tolerance 2 tol absolute, the looser of the two precisions').
  if (var.is_library) {
    library_out[var.precision] = out;
  } else if (!library_out.empty()) {
    const auto it = library_out.count(var.precision) > 0 ? library_out.find(var.precision)
                                                         : library_out.begin();
    const double lib_tol = std::max(tol, tolerance(it->first));
    if (it->second.size() == n) {
      add("whole output vs the library row", gpu100::compare(it->second, out, 2 * lib_tol, 0.0));
    }
  }
  return gpu100::worst_of(parts);
}

void run_shape(const AttentionShape& s, const Options& opt, double fp32_peak, DeviceData& dev,
               gpu100::DayRun& run, std::string& verdict) {
  const std::string label = shape_label(s);
  const double flops = attention_flops(s);
  const auto rows = sample_rows(s, opt.check_rows, opt.common.seed + (s.causal ? 1 : 0));
  const SampledReference ref32 = reference_rows(s, rows, dev.q, dev.k, dev.v, false),
                         ref16 = reference_rows(s, rows, dev.q, dev.k, dev.v, true);
  const double cpu_ms = ref32.ms * flops / std::max(ref32.flops, 1.0);
  ResultRow cpu = gpu100::reference_row("cpu_reference", "fp64", label, cpu_ms, 0, flops);
  cpu.note = fmt::format(
      "one thread, double; timed on {} sampled rows ({:.1f} ms) and scaled by the FLOP ratio",
      rows.size(), ref32.ms);
  run.table().add(cpu);

  // The library row first (when selected): its whole output is the others' second reference.
  std::vector<const AttentionVariant*> order = opt.variants;
  std::stable_partition(order.begin(), order.end(),
                        [](const AttentionVariant* x) { return x->is_library; });
  // Each row's library: the library row of its precision among those selected, else any.
  auto library_of = [&](Precision p) -> const char* {
    const char* any = nullptr;
    for (const auto* v : opt.variants) {
      if (!v->is_library || !v->refusal(s).empty()) continue;
      if (v->precision == p) return v->name;
      any = v->name;
    }
    return any;
  };
  std::map<Precision, std::vector<float>> library_out;
  std::vector<std::pair<const AttentionVariant*, ResultRow>> done;
  for (const auto* var : order) {
    const bool is16 = var->precision == Precision::kBf16;
    if (const std::string why = var->refusal(s); !why.empty()) {
      ResultRow row = gpu100::make_row(var->name, to_string(var->precision), label);
      row.verified = false;
      row.note = "refused: " + why;
      done.push_back({var, row});
      continue;
    }
    const size_t ws_bytes = var->workspace_bytes(s);
    std::vector<std::string> notes;
    // (v1's first, checked call also runs day04's GEMM autotuner for its two shapes.)
    ResultRow row = run.measure(
        var->name, to_string(var->precision), label,
        [&] {
          dev.d_o.poison();
          dev.d_o16.poison();
          dev.ws.poison();
        },
        [&] {
          if (is16) {
            var->bf16(s, dev.d_q16.data(), dev.d_k16.data(), dev.d_v16.data(), dev.d_o16.data(),
                      dev.ws.data(), ws_bytes, nullptr);
          } else {
            var->fp32(s, dev.d_q.data(), dev.d_k.data(), dev.d_v.data(), dev.d_o.data(),
                      dev.ws.data(), ws_bytes, nullptr);
          }
        },
        [&] {
          const std::vector<float> out =
              is16 ? gpu100::convert_to_float(dev.d_o16.download()) : dev.d_o.download();
          return check_forward(s, *var, rows, is16 ? ref16 : ref32, out, dev.ws.data(), library_out,
                               notes);
        });
    gpu100::derive(row, 0, flops, 0, cpu_ms, 0);
    if (!is16 && fp32_peak > 0) row.pct_of_ceiling = 100.0 * *row.tflops / fp32_peak;
    if (const char* library = library_of(var->precision); !var->is_library && library != nullptr) {
      row.library = library;
    }
    notes.push_back(memory_note(s, *var));
    if (is16) notes.push_back("bf16 Q, K, V in, bf16 O out, fp32 accumulation");
    row.note.clear();  // the labelled notes say which check failed
    for (const auto& note : notes) gpu100::append(row.note, note);
    done.push_back({var, row});
  }
  // Rows in registry order, with the ratio to the library row.
  std::vector<ResultRow> rows_out;
  for (const auto& reg : attention_variants()) {
    for (auto& [var, row] : done) {
      if (var == &reg) rows_out.push_back(row);
    }
  }
  gpu100::link_libraries(rows_out);
  for (const auto& row : rows_out) {
    if (row.precision == to_string(Precision::kBf16) && row.tflops) {
      gpu100::append(verdict, fmt::format("{} {:.0f} TFLOP/s{}", row.variant, *row.tflops,
                                          s.causal ? " causal" : ""));
    }
    run.table().add(row);
  }
}

}  // namespace day05
