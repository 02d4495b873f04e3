// day05_self_attention: the host driver (the rows of one shape: driver_rows.cpp, and with
// --backward driver_backward.cpp). The registry (attention.cpp; --list) runs from the naive
// three-kernel path to FlashAttention-style kernels; every row is checked against a double CPU
// reference at sampled query rows and against the library row's whole output, then timed. TFLOP/s
// counts 4 B H S^2 D (half when causal); "% ceiling" of the fp32 rows is of the fp32 FMA peak
// measured in this run. A variant that refuses a shape (v1 above its S x S budget, v4 at D other
// than 64 and 128) gets a row with the reason. --backward runs the backward registry
// (attention_backward.cpp) instead: dQ, dK, dV from dO and the GPU forward's O and log-sum-exp,
// checked on whole heads, TFLOP/s counting 10 B H S^2 D (half when causal). --training-step times
// one layer's forward and backward as one unit instead, the build's own pair against cuDNN's
// (attention_backward.hpp), TFLOP/s counting 4 + 10 = 14 B H S^2 D (half when causal).
//
// Run: build/day05_self_attention/day05_self_attention [--batch 8 --heads 16 --seq 2048
//      --head-dim 64] [--mask none|causal|both] [--variant v3_flash_fp32] [--json out.json]
//      [--backward [--save-grads FILE] | --training-step] [--check-heads 2]
#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "common/half.hpp"
#include "common/peak.hpp"
#include "common/random.hpp"
#include "driver.hpp"

namespace {

using day05::DeviceData;
using day05::Options;
using bf16 = __nv_bfloat16;

constexpr const char* kDay = "day05_self_attention";

void declare_flags(gpu100::ArgParser& args) {
  args.add_int("batch", "batch size B", 8, 1, 1 << 16);
  args.add_int("heads", "heads H", 16, 1, 1 << 16);
  args.add_int("seq", "sequence length S", 2048, 1, day05::kMaxS);
  args.add_int("head-dim", "head dimension D (even; v4, v5: 64 or 128)", 64, 1, day05::kMaxD);
  args.add_string("mask", "none, causal or both (one set of rows per mask)", "both");
  args.add_int("check-rows", "query rows checked against the CPU reference", 64, 2, 1 << 16);
  args.add_flag("backward",
                "the backward pass: dQ, dK, dV from dO and the GPU forward's O and log-sum-exp "
                "(the backward variants of --list)");
  args.add_flag("training-step",
                "one layer's forward then backward, timed as one unit: the build's fastest own "
                "pair against cuDNN's");
  args.add_int("check-heads",
               "--backward, --training-step: whole heads checked against the CPU reference", 2, 1,
               1 << 16);
  args.add_string("save-grads",
                  "--backward: write the inputs and every row's dQ, dK, dV to this tensor file "
                  "(scripts/torch_attention_grads.py checks them against PyTorch autograd)",
                  "");
  args.add_common();
  args.add_alias("b", "batch");
  args.add_alias("h", "heads");
  args.add_alias("s", "seq");
  args.add_alias("d", "head-dim");
}

Options read_options(const gpu100::ArgParser& args, day05::AttentionShape& s) {
  Options opt;
  opt.common = gpu100::CommonOptions::read(args);
  opt.backward = args.get_flag("backward");
  opt.training_step = args.get_flag("training-step");
  if (opt.backward && opt.training_step) {
    throw gpu100::UsageError(
        "--backward and --training-step exclude each other: the backward alone, or the forward "
        "and the backward timed together");
  }
  if (opt.training_step) {
    if (!opt.common.variants.empty()) {
      throw gpu100::UsageError(
          "--training-step has two fixed rows (the build's own forward and backward, and "
          "cuDNN's): --variant does not apply");
    }
  } else if (opt.backward) {
    opt.bwd_variants = gpu100::select(day05::attention_backward_variants(), opt.common.variants);
    gpu100::refuse_named_not_built(day05::attention_backward_variants(), opt.common.variants);
  } else {
    opt.variants = gpu100::select(day05::attention_variants(), opt.common.variants);
    gpu100::refuse_named_not_built(day05::attention_variants(), opt.common.variants);
  }
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
  opt.save_grads = args.get_string("save-grads");
  if (!opt.save_grads.empty()) {
    if (!opt.backward) throw gpu100::UsageError("--save-grads needs --backward");
    // Fail now, not after the GPU work, if the file cannot be written.
    std::ofstream probe(opt.save_grads, std::ios::binary | std::ios::trunc);
    if (!probe) {
      throw gpu100::UsageError(fmt::format("--save-grads: cannot write '{}'", opt.save_grads));
    }
  }
  opt.check_rows = static_cast<int>(args.get_int("check-rows"));
  opt.check_heads = static_cast<int>(args.get_int("check-heads"));
  s.b = static_cast<int>(args.get_int("batch"));
  s.h = static_cast<int>(args.get_int("heads"));
  s.s = static_cast<int>(args.get_int("seq"));
  s.d = static_cast<int>(args.get_int("head-dim"));
  try {
    day05::check_shape(s);
  } catch (const std::invalid_argument& e) {
    throw gpu100::UsageError(e.what());
  }
  return opt;
}

// The largest workspace of a variant that runs, over the masks.
size_t workspace_bytes(const Options& opt, const day05::AttentionShape& s) {
  size_t ws_bytes = 0;
  for (bool causal : opt.masks) {
    day05::AttentionShape sc = s;
    sc.causal = causal;
    for (const auto* v : opt.variants) {
      if (v->refusal(sc).empty()) ws_bytes = std::max(ws_bytes, v->workspace_bytes(sc));
    }
  }
  return ws_bytes;
}

// Q, K, V on both sides (bf16 copies converted once, outside any timing), O and the workspace.
DeviceData make_data(const Options& opt, size_t n, size_t ws_bytes) {
  DeviceData dev;
  dev.q = gpu100::random_vector<float>(n, opt.common.seed + 1);
  dev.k = gpu100::random_vector<float>(n, opt.common.seed + 2);
  dev.v = gpu100::random_vector<float>(n, opt.common.seed + 3);
  for (auto [host, d32, d16] :
       {std::tuple{&dev.q, &dev.d_q, &dev.d_q16}, std::tuple{&dev.k, &dev.d_k, &dev.d_k16},
        std::tuple{&dev.v, &dev.d_v, &dev.d_v16}}) {
    *d32 = gpu100::DeviceBuffer<float>(n);
    d32->upload(*host);
    *d16 = gpu100::DeviceBuffer<bf16>(n);
    d16->upload(gpu100::convert_from_float<bf16>(*host));
  }
  dev.d_o = gpu100::DeviceBuffer<float>(n);
  dev.d_o16 = gpu100::DeviceBuffer<bf16>(n);
  dev.ws = gpu100::DeviceBuffer<char>(std::max<size_t>(ws_bytes, 256));
  return dev;
}

// The backward's inputs on the device, in the precisions asked for (bf16 copies converted once,
// outside any timing), the forward's O and log-sum-exp, the outputs, the workspaces.
day05::BackwardData make_backward_data(const Options& opt, size_t n, size_t rows, bool want32,
                                       bool want16, size_t ws_bytes, size_t fwd_ws_bytes) {
  day05::BackwardData dev;
  dev.q = gpu100::random_vector<float>(n, opt.common.seed + 1);
  dev.k = gpu100::random_vector<float>(n, opt.common.seed + 2);
  dev.v = gpu100::random_vector<float>(n, opt.common.seed + 3);
  dev.dout = gpu100::random_vector<float>(n, opt.common.seed + 4);
  auto fill = [&](auto& side, auto convert) {
    for (auto [host, dst] : {std::pair{&dev.q, &side.q}, std::pair{&dev.k, &side.k},
                             std::pair{&dev.v, &side.v}, std::pair{&dev.dout, &side.dout}}) {
      *dst = std::remove_reference_t<decltype(*dst)>(n);
      dst->upload(convert(*host));
    }
    for (auto* b : {&side.o, &side.dq, &side.dk, &side.dv}) {
      *b = std::remove_reference_t<decltype(*b)>(n);
    }
    side.lse = gpu100::DeviceBuffer<float>(rows);
  };
  if (want32) fill(dev.f32, [](const std::vector<float>& x) { return x; });
  if (want16) {
    fill(dev.b16, [](const std::vector<float>& x) { return gpu100::convert_from_float<bf16>(x); });
  }
  dev.ws = gpu100::DeviceBuffer<char>(std::max<size_t>(ws_bytes, 256));
  dev.fwd_ws = gpu100::DeviceBuffer<char>(std::max<size_t>(fwd_ws_bytes, 256));
  return dev;
}

// --training-step: the largest workspaces of a step that runs, over the masks (backward, forward).
std::pair<size_t, size_t> training_step_workspaces(const Options& opt,
                                                   const day05::AttentionShape& s) {
  size_t bwd = 0, fwd = 0;
  for (bool causal : opt.masks) {
    day05::AttentionShape sc = s;
    sc.causal = causal;
    for (const auto& step : {day05::library_training_step(), day05::own_training_step(sc)}) {
      if (!step.refusal(sc).empty()) continue;
      bwd = std::max(bwd, step.backward_workspace_bytes(sc));
      fwd = std::max(fwd, step.forward_workspace_bytes(sc));
    }
  }
  return {bwd, fwd};
}

int run_backward(Options& opt, const day05::AttentionShape& s) {
  const size_t n = static_cast<size_t>(s.elements()), rows = static_cast<size_t>(s.rows());
  // Device memory: eight [B, H, S, D] tensors and the log-sum-exp per precision (bf16 only for the
  // training step), the workspaces.
  const double tensors = opt.training_step ? double(n) * 8 * 2 + double(rows) * 4
                                           : double(n) * (8 * 4 + 8 * 2) + double(rows) * 8;
  if (tensors > double(size_t(1) << 40)) {
    throw gpu100::UsageError(
        fmt::format("the problem needs {} of device memory", day05::mib(tensors)));
  }
  // Everything above is argument handling; the GPU is touched from here on.
  const std::string title =
      opt.training_step
          ? fmt::format("one attention layer's training step (forward, then backward), {}",
                        day05::shape_label(s))
          : fmt::format("dQ, dK, dV of attention (backward), {}", day05::shape_label(s));
  gpu100::DayRun run(kDay, title, opt.common);
  size_t ws_bytes = 0, fwd_ws_bytes = 0;
  bool want32 = false, want16 = opt.training_step;
  if (opt.training_step) {
    std::tie(ws_bytes, fwd_ws_bytes) = training_step_workspaces(opt, s);
  } else {
    const auto& registry = day05::attention_backward_variants();
    if (const auto lacked = gpu100::refuse_or_list_lacked(registry, opt.common.variants);
        !lacked.empty()) {
      fmt::print("{}\n", lacked);
    }
    opt.bwd_variants.erase(std::remove_if(opt.bwd_variants.begin(), opt.bwd_variants.end(),
                                          [](const day05::AttentionBackwardVariant* v) {
                                            return !gpu100::build_has(v->needs);
                                          }),
                           opt.bwd_variants.end());
    for (bool causal : opt.masks) {
      day05::AttentionShape sc = s;
      sc.causal = causal;
      for (const auto* v : opt.bwd_variants) {
        if (v->refusal(sc).empty()) ws_bytes = std::max(ws_bytes, v->workspace_bytes(sc));
      }
    }
    for (const auto* v : opt.bwd_variants) {
      (v->precision == day05::Precision::kBf16 ? want16 : want32) = true;
    }
  }
  gpu100::require_device_memory(
      static_cast<size_t>(tensors) + ws_bytes + fwd_ws_bytes + (size_t(64) << 20), kDay);
  double fp32_peak = 0;
  if (!opt.training_step) {  // (the training step has no fp32 row)
    fp32_peak = gpu100::measure_fp32_peak_tflops();
    fmt::print("fp32 FMA ceiling: {:.1f} TFLOP/s (measured now; the fp32 rows' % ceiling)\n\n",
               fp32_peak);
  }
  day05::BackwardData dev =
      make_backward_data(opt, n, rows, want32, want16, ws_bytes, fwd_ws_bytes);
  std::string verdict;
  for (bool causal : opt.masks) {
    day05::AttentionShape sc = s;
    sc.causal = causal;
    if (opt.training_step) {
      day05::run_training_step_shape(sc, opt, dev, run, verdict);
    } else {
      day05::run_backward_shape(sc, opt, fp32_peak, dev, run, verdict);
    }
  }
  if (!opt.save_grads.empty()) {
    const std::vector<int64_t> shape = {s.b, s.h, s.s, s.d};
    std::vector<gpu100::Tensor> all = {
        {"q", shape, dev.q}, {"k", shape, dev.k}, {"v", shape, dev.v}, {"dout", shape, dev.dout}};
    for (auto& t : dev.saved) all.push_back(std::move(t));
    gpu100::write_tensor_file(opt.save_grads, all);
    fmt::print("wrote {}: the inputs and {} gradients\n", opt.save_grads, all.size() - 4);
  }
  return run.finish(kDay, verdict);
}

int run(int argc, char** argv) {
  gpu100::ArgParser args(kDay,
                         "scaled dot-product attention, naive to FlashAttention-2 style: the "
                         "forward, with --backward the backward, with --training-step both");
  declare_flags(args);
  if (!args.parse(argc, argv)) return gpu100::kExitOk;
  if (gpu100::list_requested(args, day05::attention_variants())) {
    fmt::print("\nthe backward pass (--backward):\n");
    gpu100::print_list(day05::attention_backward_variants());
    return gpu100::kExitOk;
  }
  day05::AttentionShape s;
  Options opt = read_options(args, s);
  if (opt.backward || opt.training_step) return run_backward(opt, s);
  // Device memory: Q, K, V, O in fp32 and bf16, and the largest workspace of a variant that runs.
  const size_t n = static_cast<size_t>(s.elements()), ws_bytes = workspace_bytes(opt, s);
  const double need = double(n) * (4 * 4 + 4 * 2) + double(ws_bytes);
  if (need > double(size_t(1) << 40)) {
    throw gpu100::UsageError(
        fmt::format("the problem needs {} of device memory", day05::mib(need)));
  }

  // Everything above is argument handling; the GPU is touched from here on.
  gpu100::DayRun run(
      kDay, fmt::format("O = softmax(Q K^T / sqrt(D) + mask) V, {}", day05::shape_label(s)),
      opt.common);
  if (const auto lacked =
          gpu100::refuse_or_list_lacked(day05::attention_variants(), opt.common.variants);
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
  DeviceData dev = make_data(opt, n, ws_bytes);
  std::string verdict;
  for (bool causal : opt.masks) {
    day05::AttentionShape sc = s;
    sc.causal = causal;
    day05::run_shape(sc, opt, fp32_peak, dev, run, verdict);
  }
  return run.finish(kDay, verdict);
}

}  // namespace

int main(int argc, char** argv) {
  return gpu100::guarded_main(argc, argv, run);
}
