// day05_attention_block: the attention block (block.hpp), unfused against fused, in one run.
// Two groups of rows:
//  - the QKV stage (X W_qkv, RoPE on Q and K, Q K V as [B, H, S, D]): the eager chain, the GEMM
//    then one rotate-and-scatter kernel, and the GEMM with RoPE in its epilogue, each against
//    cuBLAS's GEMM of the same shape alone ("x library" of qkv_rope_wgmma: how nearly free its
//    epilogue is);
//  - the whole block X -> Y, fused against unfused.
// Every row is checked against a double CPU reference at --check-rows sampled tokens (the QKV
// stage from X and the weights; the attention and output projection from the Q, K, V that row's
// own run computed), and the whole output against the first row that made it (qkv_unfused,
// block_unfused). TFLOP/s counts the GEMMs' 2 M N K and attention_flops.
//
// Run: build/day05_self_attention/day05_attention_block [--batch 8 --seq 2048 --d-model 2048
//      --heads 16 --head-dim 128] [--mask causal|none] [--rope half|interleaved] [--json out.json]
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "block.hpp"
#include "common/half.hpp"
#include "common/harness.hpp"
#include "common/random.hpp"

namespace {

using day05::BlockShape;
using day05::BlockTensors;
using day05::BlockVariant;
using gpu100::ResultRow;
using bf16 = __nv_bfloat16;

constexpr const char* kDay = "day05_attention_block";

struct Options {
  gpu100::CommonOptions common;
  std::vector<const BlockVariant*> variants;
  int check_rows = 32;
};

void declare_flags(gpu100::ArgParser& args) {
  args.add_int("batch", "batch size B", 8, 1, 1 << 16);
  args.add_int("seq", "sequence length S", 2048, 1, day05::kMaxS);
  args.add_int("d-model", "model width d_model (the projections' K)", 2048, 1, 1 << 20);
  args.add_int("heads", "heads H", 16, 1, 1 << 16);
  args.add_int("head-dim", "head dimension D (64 or 128)", 128, 1, day05::kMaxD);
  args.add_string("mask", "causal or none", "causal");
  args.add_string("rope", "RoPE pairing: half (x[i], x[i + D/2]) or interleaved", "half");
  args.add_int("check-rows", "tokens checked against the CPU reference", 32, 2, 1 << 16);
  args.add_common(10);
}

Options read_options(const gpu100::ArgParser& args, BlockShape& s) {
  Options opt;
  opt.common = gpu100::CommonOptions::read(args);
  opt.variants = gpu100::select(day05::block_variants(), opt.common.variants);
  gpu100::refuse_named_not_built(day05::block_variants(), opt.common.variants);
  const std::string mask = args.get_string("mask"), rope = args.get_string("rope");
  if (mask != "causal" && mask != "none") {
    throw gpu100::UsageError(fmt::format("--mask must be causal or none (got '{}')", mask));
  }
  if (rope != "half" && rope != "interleaved") {
    throw gpu100::UsageError(fmt::format("--rope must be half or interleaved (got '{}')", rope));
  }
  s.causal = mask == "causal";
  s.style = rope == "half" ? day01::RopeStyle::kHalfSplit : day01::RopeStyle::kInterleaved;
  s.b = static_cast<int>(args.get_int("batch"));
  s.s = static_cast<int>(args.get_int("seq"));
  s.d_model = static_cast<int>(args.get_int("d-model"));
  s.h = static_cast<int>(args.get_int("heads"));
  s.d = static_cast<int>(args.get_int("head-dim"));
  opt.check_rows = static_cast<int>(args.get_int("check-rows"));
  try {
    day05::check_block_shape(s);
  } catch (const std::invalid_argument& e) {
    throw gpu100::UsageError(e.what());
  }
  return opt;
}

// The sampled tokens: the first and the last always, then distinct random ones.
std::vector<int64_t> sample_tokens(const BlockShape& s, int count, uint64_t seed) {
  std::vector<int64_t> rows = {0, s.tokens() - 1};
  for (int r = 2; r < count && int64_t(rows.size()) < s.tokens(); ++r) {
    const int64_t t = int64_t(gpu100::splitmix64(seed * 104729 + r) % uint64_t(s.tokens()));
    if (std::find(rows.begin(), rows.end(), t) == rows.end()) rows.push_back(t);
  }
  std::sort(rows.begin(), rows.end());
  rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
  return rows;
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

std::vector<float> to_float(const gpu100::DeviceBuffer<bf16>& b) {
  return gpu100::convert_to_float(b.download());
}

// The projection reference at the sampled tokens (computed once).
struct QkvReference {
  std::vector<std::vector<double>> p, abs_p, qkv;
  double ms = 0, flops = 0;
};

// What the first row of each output produced: the others' whole-output reference.
struct FirstOutputs {
  std::vector<float> q, k, v, y;
  double y_scale = 0;  // mean of y_abs over the sampled tokens
};

// |got - ref| <= tol_abs + 2^-7 |ref| for every element (whole tensors against the first row's).
gpu100::CompareResult compare_whole(const std::vector<float>& ref, const std::vector<float>& got,
                                    double tol_abs) {
  return gpu100::compare(ref, got, tol_abs, std::ldexp(1.0, -7));
}

double rms(const std::vector<float>& x) {
  double s = 0;
  for (float v : x) s += double(v) * v;
  return x.empty() ? 0 : std::sqrt(s / double(x.size()));
}

int run(int argc, char** argv) {
  gpu100::ArgParser args(kDay,
                         "one attention layer: QKV projection + RoPE, flash attention, output "
                         "projection; fused against unfused");
  declare_flags(args);
  if (!args.parse(argc, argv)) return gpu100::kExitOk;
  if (gpu100::list_requested(args, day05::block_variants())) return gpu100::kExitOk;
  BlockShape s;
  Options opt = read_options(args, s);
  const double need = day05::block_tensor_bytes(s);
  if (need > double(size_t(1) << 40)) {
    throw gpu100::UsageError(
        fmt::format("the block needs {:.0f} GiB of device memory", need / double(1 << 30)));
  }
  const std::string label = day05::block_label(s);

  // The GPU is touched from here on.
  gpu100::DayRun run(kDay, fmt::format("attention block, bf16, {}", label), opt.common);
  if (const auto lacked =
          gpu100::refuse_or_list_lacked(day05::block_variants(), opt.common.variants);
      !lacked.empty()) {
    fmt::print("{}\n", lacked);
  }
  opt.variants.erase(
      std::remove_if(opt.variants.begin(), opt.variants.end(),
                     [](const BlockVariant* v) { return !gpu100::build_has(v->needs); }),
      opt.variants.end());
  gpu100::require_device_memory(static_cast<size_t>(need) + (size_t(64) << 20), kDay);

  const day05::BlockInputs in = day05::make_block_inputs(s, opt.common.seed);
  BlockTensors t(s);
  day05::upload_block_inputs(t, in.x, in.w_qkv, in.w_o);
  const std::vector<int64_t> tokens = sample_tokens(s, opt.check_rows, opt.common.seed);

  QkvReference ref;
  {
    const auto t0 = std::chrono::steady_clock::now();
    for (int64_t row : tokens) {
      std::vector<double> p, abs_p, qkv;
      ref.flops += day05::qkv_row_cpu(s, in, row, p, abs_p, qkv);
      ref.p.push_back(std::move(p));
      ref.abs_p.push_back(std::move(abs_p));
      ref.qkv.push_back(std::move(qkv));
    }
    ref.ms = ms_since(t0);
  }
  // The CPU's time for the whole problem, scaled from the sampled tokens by the FLOP ratio; the
  // block's attention part from the first block row's check.
  const double qkv_cpu_ms = ref.ms * day05::qkv_flops(s) / std::max(ref.flops, 1.0);
  double block_cpu_ms = 0;

  FirstOutputs first;
  std::vector<ResultRow> rows;
  const size_t hd = size_t(s.hd()), dm = size_t(s.d_model);
  for (const BlockVariant* var : opt.variants) {
    if (const std::string why = var->refusal(s); !why.empty()) {
      ResultRow row = gpu100::make_row(var->name, "bf16", label);
      row.verified = false;
      row.note = "refused: " + why;
      rows.push_back(row);
      continue;
    }
    std::vector<std::string> notes;
    ResultRow row = run.measure(
        var->name, "bf16", label,
        [&] {
          for (auto* b : {&t.q, &t.k, &t.v, &t.scratch, &t.o, &t.o_tok, &t.y}) b->poison();
        },
        [&] { var->run(t, nullptr); },
        [&] {
          std::vector<gpu100::CompareResult> parts;
          auto add = [&](const char* what, const gpu100::CompareResult& c) {
            parts.push_back(c);
            if (!c.ok) notes.push_back(std::string(what) + ": " + c.summary());
          };
          if (var->projection) {
            const std::vector<float> out = to_float(t.scratch);
            gpu100::CompareResult c;
            for (size_t r = 0; r < tokens.size(); ++r) {
              const auto first_el = out.begin() + tokens[r] * 3 * hd;
              day05::check_projection_row(ref.p[r], ref.abs_p[r],
                                          std::vector<float>(first_el, first_el + 3 * hd), c);
            }
            add("sampled tokens vs CPU", c);
            return gpu100::worst_of(parts);
          }
          const std::vector<float> q = to_float(t.q), k = to_float(t.k), v = to_float(t.v);
          gpu100::CompareResult c;
          for (size_t r = 0; r < tokens.size(); ++r) {
            day05::check_qkv_row(s, tokens[r], ref.p[r], ref.abs_p[r], ref.qkv[r], q, k, v, c);
          }
          add("Q, K, V at sampled tokens vs CPU", c);
          if (!var->is_block) {
            if (first.q.empty()) {
              first.q = q, first.k = k, first.v = v;
            } else {
              for (auto [what, a, b] : {std::tuple{"whole Q vs the first row's", &first.q, &q},
                                        std::tuple{"whole K vs the first row's", &first.k, &k},
                                        std::tuple{"whole V vs the first row's", &first.v, &v}}) {
                add(what, compare_whole(*a, *b, std::ldexp(rms(*a), -5)));
              }
            }
            return gpu100::worst_of(parts);
          }
          // The block: Y at the sampled tokens from this run's own Q, K, V, then the whole Y.
          const std::vector<float> y = to_float(t.y);
          gpu100::CompareResult cy;
          double y_scale = 0, flops = 0;
          const auto t0 = std::chrono::steady_clock::now();
          for (int64_t token : tokens) {
            std::vector<double> yr, y_abs;
            flops += day05::block_row_cpu(s, in, q, k, v, token, yr, y_abs);
            const auto first_el = y.begin() + token * dm;
            day05::check_block_row(yr, y_abs, std::vector<float>(first_el, first_el + dm), cy);
            for (double a : y_abs) y_scale += a / double(dm * tokens.size());
          }
          if (block_cpu_ms == 0) {
            const double attn_ms =
                ms_since(t0) * (day05::block_flops(s) - day05::qkv_flops(s)) / std::max(flops, 1.0);
            block_cpu_ms = qkv_cpu_ms + attn_ms;
          }
          add("Y at sampled tokens vs CPU", cy);
          if (first.y.empty()) {
            first.y = y;
            first.y_scale = y_scale;
          } else {
            add("whole Y vs the first block row's",
                compare_whole(first.y, y, 2 * day05::kBf16Tol * first.y_scale));
          }
          return gpu100::worst_of(parts);
        });
    const double flops = var->is_block ? day05::block_flops(s) : day05::qkv_flops(s);
    gpu100::derive(row, 0, flops, 0, var->is_block ? block_cpu_ms : qkv_cpu_ms, 0);
    if (*var->library != '\0') row.library = var->library;
    if (std::string(var->name) == "block_fused") {
      notes.push_back(fmt::format("QKV stage: {}; attention: {} writing O token-major",
                                  day05::block_fused_qkv(s), day05::best_flash_bf16()));
    } else if (std::string(var->name) == "block_unfused") {
      notes.push_back(fmt::format("attention: {}", day05::best_flash_bf16()));
    }
    row.note.clear();
    for (const auto& note : notes) gpu100::append(row.note, note);
    rows.push_back(row);
  }
  gpu100::link_libraries(rows);
  std::string verdict;
  for (const auto& row : rows) {
    if (row.ratio_vs_library && (row.variant == "qkv_rope_wgmma" || row.variant == "block_fused")) {
      gpu100::append(
          verdict, fmt::format("{} {:.2f}x {}", row.variant, *row.ratio_vs_library, *row.library));
    }
  }
  ResultRow cpu = gpu100::reference_row(
      "cpu_reference", "fp64", label, block_cpu_ms > 0 ? block_cpu_ms : qkv_cpu_ms, 0,
      block_cpu_ms > 0 ? day05::block_flops(s) : day05::qkv_flops(s));
  cpu.note = fmt::format(
      "one thread, double; timed on {} sampled tokens and scaled by the FLOP ratio", tokens.size());
  run.table().add(cpu);
  for (const auto& row : rows) run.table().add(row);
  fmt::print("device memory: {:.1f} MiB\n", double(t.bytes()) / double(1 << 20));
  return run.finish(kDay, verdict);
}

}  // namespace

int main(int argc, char** argv) {
  return gpu100::guarded_main(argc, argv, run);
}
