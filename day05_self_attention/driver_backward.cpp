// day05_self_attention's driver, the backward rows of one shape (--backward). The inputs are a
// training step's: Q, K, V, a seeded dO, and the O and row log-sum-exp that the GPU's forward
// wrote (the fp32 flash kernel v3 for the fp32 rows, the fastest bf16 flash kernel the build runs
// for the bf16 rows), run once per shape, outside any timing. Every row is checked before it is
// timed: dQ, dK and dV of --check-heads whole heads (the first and the last, then evenly spaced)
// against the double CPU reference (the bf16 rows against the reference on their bf16-rounded
// inputs), and every element of the three outputs finite (they are poisoned with NaN before the
// checked run). Then timed: median of --iters runs after --warmup, L2 flushed. The CPU reference
// computes its heads on one thread each, in parallel; its row is their single-thread time scaled
// to the B H heads.
// --training-step: two rows per shape, the library's forward + backward (cuDNN's) and the build's
// own (attention_backward.hpp's TrainingStep), each timed as one unit. Each is checked first: O
// and the log-sum-exp as the forward rows check them (driver_rows.cpp's check_forward), and the
// gradients on the checked heads as the backward rows are.
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <future>
#include <limits>
#include <map>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "common/cuda_check.hpp"
#include "common/half.hpp"
#include "driver.hpp"

namespace day05 {

namespace {

using gpu100::ResultRow;
using bf16 = __nv_bfloat16;

// The checked heads: the first and the last, and evenly spaced ones between them.
std::vector<int64_t> checked_heads(const AttentionShape& s, int count) {
  std::vector<int64_t> heads;
  const int64_t n = s.heads();
  const int64_t want = std::min<int64_t>(count, n);
  for (int64_t c = 0; c < want; ++c) {
    const int64_t h = want == 1 ? 0 : c * (n - 1) / (want - 1);
    if (heads.empty() || heads.back() != h) heads.push_back(h);
  }
  return heads;
}

// The reference of one checked head on one precision's inputs (a one-head shape).
struct HeadReference {
  int64_t bh = 0;
  bool bf16_inputs = false;
  BackwardReference r;
  double ms = 0;
};

// Computes every job, one thread per job up to the machine's cores.
void compute_references(const AttentionShape& s, const BackwardData& dev,
                        std::vector<HeadReference>& jobs) {
  AttentionShape one = s;
  one.b = one.h = 1;
  const size_t head = size_t(s.s) * size_t(s.d);
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t j = next++; j < jobs.size(); j = next++) {
      HeadReference& job = jobs[j];
      const size_t off = size_t(job.bh) * head;
      auto take = [&](const std::vector<float>& x) {
        std::vector<float> out(x.begin() + off, x.begin() + off + head);
        return job.bf16_inputs ? gpu100::round_trip<bf16>(out) : out;
      };
      const auto q = take(dev.q), k = take(dev.k), v = take(dev.v), dout = take(dev.dout);
      BackwardReference& r = job.r;
      for (auto* t : {&r.dq, &r.dk, &r.dv, &r.abs_dq, &r.abs_dk, &r.abs_dv, &r.o}) t->resize(head);
      r.lse.resize(size_t(s.s));
      r.delta.resize(size_t(s.s));
      const auto t0 = std::chrono::steady_clock::now();
      attention_backward_head_cpu(one, q.data(), k.data(), v.data(), dout.data(), 0, r);
      job.ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    }
  };
  const size_t threads =
      std::min<size_t>(jobs.size(), std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::future<void>> running;
  for (size_t t = 0; t < threads; ++t) running.push_back(std::async(std::launch::async, worker));
  for (auto& f : running) f.get();
}

// The CPU reference of the checked heads (checked_heads), on the fp32 inputs and on the
// bf16-rounded ones as asked, computed in parallel.
std::vector<HeadReference> head_references(const AttentionShape& s, const BackwardData& dev,
                                           int check_heads, bool fp32_inputs, bool bf16_inputs) {
  std::vector<HeadReference> refs;
  for (int64_t bh : checked_heads(s, check_heads)) {
    if (fp32_inputs) refs.push_back({bh, false, {}, 0});
    if (bf16_inputs) refs.push_back({bh, true, {}, 0});
  }
  compute_references(s, dev, refs);
  return refs;
}

// The CPU reference's row: the single-thread time of its heads (on one precision's inputs),
// scaled to the B H heads.
ResultRow cpu_row(const AttentionShape& s, const std::vector<HeadReference>& refs, double flops) {
  double ms_per_head = 0;
  int timed = 0;
  for (const auto& r : refs) {
    if (r.bf16_inputs == refs.front().bf16_inputs) ms_per_head += r.ms, ++timed;
  }
  const double cpu_ms = timed > 0 ? ms_per_head / timed * double(s.heads()) : 0;
  ResultRow cpu = gpu100::reference_row("cpu_reference", "fp64", shape_label(s), cpu_ms, 0, flops);
  cpu.note = fmt::format(
      "one thread, double; timed on {} of {} heads ({:.1f} ms each) and scaled to all of them",
      timed, s.heads(), timed > 0 ? ms_per_head / timed : 0.0);
  return cpu;
}

// Fails at the first element that is not finite (NaN: an element the variant never wrote).
gpu100::CompareResult all_finite(const std::vector<float>& x) {
  gpu100::CompareResult r;
  r.count = x.size();
  for (size_t e = 0; e < x.size(); ++e) {
    if (std::isfinite(x[e])) continue;
    if (r.ok) {
      r.first_bad = static_cast<int64_t>(e);
      r.got_at_first_bad = x[e];
    }
    r.ok = false;
    ++r.num_bad;
    r.max_abs = r.max_rel = r.rel_l2 = r.err_over_tol = std::numeric_limits<double>::infinity();
  }
  return r;
}

template <class T>
std::vector<float> download(const gpu100::DeviceBuffer<T>& x) {
  if constexpr (std::is_same_v<T, float>) {
    return x.download();
  } else {
    return gpu100::convert_to_float(x.download());
  }
}

// The checks of a variant's dQ, dK, dV now in `side`; each failing one adds a labelled note.
template <class T>
gpu100::CompareResult check_side(const AttentionShape& s, Precision p,
                                 const std::vector<HeadReference>& refs, BackwardSide<T>& side,
                                 std::vector<std::string>& notes) {
  const bool is16 = p == Precision::kBf16;
  const double tol = backward_tolerance(p);
  const size_t head = size_t(s.s) * size_t(s.d);
  std::vector<gpu100::CompareResult> parts;
  auto add = [&](const std::string& what, const gpu100::CompareResult& c) {
    parts.push_back(c);
    if (!c.ok) notes.push_back(what + ": " + c.summary());
  };
  const std::vector<float> got[3] = {download(side.dq), download(side.dk), download(side.dv)};
  const char* names[3] = {"dQ", "dK", "dV"};
  for (const auto& ref : refs) {
    if (ref.bf16_inputs != is16) continue;
    const std::vector<double>* want[3] = {&ref.r.dq, &ref.r.dk, &ref.r.dv};
    const std::vector<double>* scale[3] = {&ref.r.abs_dq, &ref.r.abs_dk, &ref.r.abs_dv};
    const size_t off = size_t(ref.bh) * head;
    for (int g = 0; g < 3; ++g) {
      const std::vector<float> mine(got[g].begin() + off, got[g].begin() + off + head);
      add(fmt::format("{} of head {} vs CPU", names[g], ref.bh),
          check_output(*want[g], *scale[g], mine, tol));
    }
  }
  for (int g = 0; g < 3; ++g) add(fmt::format("every element of {}", names[g]), all_finite(got[g]));
  return gpu100::worst_of(parts);
}

// What a row's device memory holds.
std::string memory_note(const AttentionShape& s, const AttentionBackwardVariant& var) {
  const std::string ws = mib(double(var.workspace_bytes(s)));
  const bool v1_fp32 = var.fp32 == attention_bwd_v1_cublas_fp32;
  if (v1_fp32 || var.bf16 == attention_bwd_v1_cublas) {
    const size_t eb = v1_fp32 ? sizeof(float) : sizeof(bf16);
    return fmt::format(
        "workspace {} (D_i, and the S x S fp32 scores and {} P of {} of {} heads at a "
        "time)",
        ws, v1_fp32 ? "fp32" : "bf16", bwd_v1_heads_per_chunk(s, eb), s.heads());
  }
  return "workspace " + ws + (var.is_library ? " (the library's own)" : "");
}

}  // namespace

void run_backward_shape(const AttentionShape& s, const Options& opt, double fp32_peak,
                        BackwardData& dev, gpu100::DayRun& run, std::string& verdict) {
  const std::string label = shape_label(s);
  const double flops = attention_backward_flops(s);
  bool want32 = false, want16 = false;
  for (const auto* var : opt.bwd_variants) {
    (var->precision == Precision::kBf16 ? want16 : want32) = true;
  }

  // The forward, once per precision: O and the row log-sum-exp the backward rows take.
  std::string fwd32, fwd16, no16;
  if (want32) {
    attention_v3_flash_fp32(s, dev.f32.q.data(), dev.f32.k.data(), dev.f32.v.data(),
                            dev.f32.o.data(), dev.f32.lse.data(), dev.f32.lse.bytes(), nullptr);
    for (const auto& f : attention_variants()) {
      if (f.fp32 == attention_v3_flash_fp32) fwd32 = f.name;
    }
  }
  if (want16) {
    const AttentionVariant* best = find_variant(best_flash_bf16());
    no16 = best == nullptr ? "no bf16 flash forward" : best->refusal(s);
    if (no16.empty()) {
      fwd16 = attention_flash_bf16(s, dev.b16.q.data(), dev.b16.k.data(), dev.b16.v.data(),
                                   dev.b16.o.data(), OLayout::kBHSD, dev.b16.lse.data(),
                                   dev.b16.lse.bytes(), nullptr);
    }
  }
  CUDA_CHECK(cudaDeviceSynchronize());

  // The CPU reference of the checked heads, on each precision's inputs.
  const std::vector<HeadReference> refs =
      head_references(s, dev, opt.check_heads, want32, want16 && no16.empty());
  ResultRow cpu = cpu_row(s, refs, flops);
  const double cpu_ms = *cpu.ms;
  run.table().add(cpu);

  auto library_of = [&](Precision p) -> const char* {
    for (const auto* v : opt.bwd_variants) {
      if (v->is_library && v->precision == p && v->refusal(s).empty()) return v->name;
    }
    return nullptr;
  };
  std::vector<std::pair<const AttentionBackwardVariant*, ResultRow>> done;
  for (const auto* var : opt.bwd_variants) {
    const bool is16 = var->precision == Precision::kBf16;
    std::string why = var->refusal(s);
    if (why.empty() && is16 && !no16.empty()) {
      why = "no bf16 forward for its O and log-sum-exp: " + no16;
    }
    if (!why.empty()) {
      ResultRow row = gpu100::make_row(var->name, to_string(var->precision), label);
      row.verified = false;
      row.note = "refused: " + why;
      done.push_back({var, row});
      continue;
    }
    const size_t ws_bytes = var->workspace_bytes(s);
    std::vector<std::string> notes;
    ResultRow row = run.measure(
        var->name, to_string(var->precision), label,
        [&] {
          for (auto* b : {&dev.f32.dq, &dev.f32.dk, &dev.f32.dv}) b->poison();
          for (auto* b : {&dev.b16.dq, &dev.b16.dk, &dev.b16.dv}) b->poison();
          dev.ws.poison();
        },
        [&] {
          if (is16) {
            var->bf16(s, dev.b16.tensors(), dev.ws.data(), ws_bytes, nullptr);
          } else {
            var->fp32(s, dev.f32.tensors(), dev.ws.data(), ws_bytes, nullptr);
          }
        },
        [&] {
          return is16 ? check_side(s, var->precision, refs, dev.b16, notes)
                      : check_side(s, var->precision, refs, dev.f32, notes);
        });
    gpu100::derive(row, 0, flops, 0, cpu_ms, 0);
    if (!is16 && fp32_peak > 0) row.pct_of_ceiling = 100.0 * *row.tflops / fp32_peak;
    if (const char* library = library_of(var->precision); !var->is_library && library != nullptr) {
      row.library = library;
    }
    notes.push_back(memory_note(s, *var));
    notes.push_back(fmt::format("O and log-sum-exp from {} (not timed)", is16 ? fwd16 : fwd32));
    if (is16) notes.push_back("bf16 Q, K, V, O, dO in, bf16 dQ, dK, dV out, fp32 accumulation");
    if (!opt.save_grads.empty()) {  // the outputs of the last timed run, as floats
      const std::vector<int64_t> shape = {s.b, s.h, s.s, s.d};
      const std::string prefix = fmt::format("{}.{}.", var->name, s.causal ? "causal" : "none");
      dev.saved.push_back(
          {prefix + "dq", shape, is16 ? download(dev.b16.dq) : download(dev.f32.dq)});
      dev.saved.push_back(
          {prefix + "dk", shape, is16 ? download(dev.b16.dk) : download(dev.f32.dk)});
      dev.saved.push_back(
          {prefix + "dv", shape, is16 ? download(dev.b16.dv) : download(dev.f32.dv)});
    }
    row.note.clear();  // the labelled notes say which check failed
    for (const auto& note : notes) gpu100::append(row.note, note);
    done.push_back({var, row});
  }
  // Rows in registry order, with the ratio to the library row.
  std::vector<ResultRow> rows_out;
  for (const auto& reg : attention_backward_variants()) {
    for (auto& [var, row] : done) {
      if (var == &reg) rows_out.push_back(row);
    }
  }
  gpu100::link_libraries(rows_out);
  for (const auto& row : rows_out) {
    if (row.tflops) {
      gpu100::append(verdict, fmt::format("{} {:.0f} TFLOP/s{}", row.variant, *row.tflops,
                                          s.causal ? " causal" : ""));
    }
    run.table().add(row);
  }
}

void run_training_step_shape(const AttentionShape& s, const Options& opt, BackwardData& dev,
                             gpu100::DayRun& run, std::string& verdict) {
  const std::string label = shape_label(s);
  const double flops = attention_training_step_flops(s);
  // The library's step first: its O is the own step's second reference, as in the forward rows.
  const TrainingStep steps[] = {library_training_step(), own_training_step(s)};

  // The references, on the bf16-rounded inputs: the gradients (and O, recomputed) of the checked
  // heads, the backward's; O and the log-sum-exp at the sampled query rows, the forward's.
  const std::vector<HeadReference> refs = head_references(s, dev, opt.check_heads, false, true);
  ResultRow cpu = cpu_row(s, refs, flops);
  const double cpu_ms = *cpu.ms;
  gpu100::append(cpu.note, "the backward's reference, which recomputes O: a whole step");
  run.table().add(cpu);
  const auto rows = sample_rows(s, opt.check_rows, opt.common.seed + (s.causal ? 1 : 0));
  const SampledReference ref16 = reference_rows(s, rows, dev.q, dev.k, dev.v, true);

  std::map<Precision, std::vector<float>> library_out;
  std::vector<ResultRow> done;
  for (const TrainingStep& step : steps) {
    const bool is_library = step.forward != nullptr && step.forward->is_library;
    if (const std::string why = step.refusal(s); !why.empty()) {
      ResultRow row = gpu100::make_row(step.name(), to_string(Precision::kBf16), label);
      row.verified = false;
      row.note = "refused: " + why;
      done.push_back(row);
      continue;
    }
    const size_t fwd_bytes = step.forward_workspace_bytes(s),
                 bwd_bytes = step.backward_workspace_bytes(s);
    TrainingStepTensors t;
    t.q = dev.b16.q.data(), t.k = dev.b16.k.data(), t.v = dev.b16.v.data();
    t.dout = dev.b16.dout.data(), t.o = dev.b16.o.data();
    t.dq = dev.b16.dq.data(), t.dk = dev.b16.dk.data(), t.dv = dev.b16.dv.data();
    std::vector<std::string> notes;
    ResultRow row = run.measure(
        step.name(), to_string(Precision::kBf16), label,
        [&] {
          for (auto* b : {&dev.b16.o, &dev.b16.dq, &dev.b16.dk, &dev.b16.dv}) b->poison();
          dev.fwd_ws.poison();
          dev.ws.poison();
        },
        [&] { step.run(s, t, dev.fwd_ws.data(), fwd_bytes, dev.ws.data(), bwd_bytes, nullptr); },
        [&] {
          const std::vector<float> out = gpu100::convert_to_float(dev.b16.o.download());
          const gpu100::CompareResult o = check_forward(s, *step.forward, rows, ref16, out,
                                                        dev.fwd_ws.data(), library_out, notes);
          const gpu100::CompareResult grads = check_side(s, Precision::kBf16, refs, dev.b16, notes);
          return gpu100::worst_of({o, grads});
        });
    gpu100::derive(row, 0, flops, 0, cpu_ms, 0);
    if (!is_library) row.library = steps[0].name();
    notes.push_back(fmt::format(
        "{} writes O and the log-sum-exp, then {} takes them; timed together; workspaces {} "
        "(the forward's) and {} (the backward's)",
        step.forward->name, step.backward->name, mib(double(fwd_bytes)), mib(double(bwd_bytes))));
    notes.push_back("bf16 Q, K, V, dO in, bf16 O, dQ, dK, dV out, fp32 accumulation");
    row.note.clear();  // the labelled notes say which check failed
    for (const auto& note : notes) gpu100::append(row.note, note);
    done.push_back(row);
  }
  // The own step's row, then the library's.
  std::vector<ResultRow> rows_out(done.rbegin(), done.rend());
  gpu100::link_libraries(rows_out);
  for (const auto& row : rows_out) {
    if (row.tflops) {
      gpu100::append(verdict, fmt::format("step {} {:.0f} TFLOP/s{}", row.variant, *row.tflops,
                                          s.causal ? " causal" : ""));
    }
    run.table().add(row);
  }
}

}  // namespace day05
