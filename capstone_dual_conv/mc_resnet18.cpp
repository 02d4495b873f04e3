// capstone_mc_resnet18: MC-ResNet18 (RGB + depth trunks, 416 x 544, 15 classes) or ResNet-18
// (--model resnet18: one trunk, 224 x 224, 1000 classes) forward on the curriculum's kernels, in
// fp32, TF32 and bf16 and with the trunks sequential, on two streams or dual (one launch per
// layer for both), against the same network on cuDNN + cuBLAS (resnet_driver.cpp has the rows).
// Every row is checked against the CPU reference (double sums) on images 0 and N - 1 of the batch:
// relative L2 error of their logits within 1e-4 (fp32), 5e-3 (TF32) or 3e-2 (bf16). "x CPU" is
// the CPU reference's time for one image times N over the row's time.
// --gpus N (a build with NCCL): bf16 over N GPUs (multi_gpu/), the batch split (--split batch) or
// the trunks on two GPUs (--split trunks), against GPU 0 alone timed the same way.
//
// Run: build/capstone_dual_conv/capstone_mc_resnet18 [--model resnet18] [--batch 1,8,32]
//      [--precision bf16] [--trunks dual] [--weights W.g100] [--input I.g100 --output O.g100]
//      [--gpus 2 --split batch,trunks]
#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "common/device_info.hpp"
#include "common/errors.hpp"
#include "common/harness.hpp"
#include "resnet_driver.hpp"
#include "resnet_weights.hpp"

namespace {

using namespace capstone::resnet;
using gpu100::ResultRow;

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

void declare_flags(gpu100::ArgParser& args) {
  args.add_string("model", "mc_resnet18 (RGB + depth) or resnet18 (one RGB trunk)", "mc_resnet18");
  args.add_string("batch", "batch sizes N, comma-separated (a sweep when several)", "1");
  args.add_int("h", "input height (0: 416 for mc_resnet18, 224 for resnet18)", 0, 0, 1 << 14);
  args.add_int("w", "input width (0: 544 for mc_resnet18, 224 for resnet18)", 0, 0, 1 << 14);
  args.add_string("precision", "fp32, tf32, bf16, comma-separated", "fp32,tf32,bf16");
  args.add_string("trunks", "sequential, streams, dual, comma-separated (MC-ResNet18)",
                  "sequential,streams,dual");
  args.add_int("gpus", "run bf16 over this many GPUs through NCCL (the multi-GPU rows)", 1, 1, 64);
  args.add_string(
      "split", "with --gpus: batch (split over the GPUs), trunks (one per GPU), or both", "batch");
  args.add_flag("no-library", "leave out the cuDNN rows");
  args.add_flag("no-graph", "leave out the rows replayed as a CUDA graph");
  args.add_flag("layers",
                "time each own precision per layer kind (sequential forwards), as layers_ rows");
  args.add_string("weights", "a weights file (scripts/export_weights.py); default: --seed", "");
  args.add_string("input", "an input batch file (its N, H and W replace --batch, --h, --w)", "");
  args.add_string("output", "write the logits of the first row that runs to this file", "");
  args.add_common(20);
  args.add_alias("n", "batch");
}

// The rows the flags select, in net_rows() order (every name checked before any GPU call).
std::vector<std::string> select_rows(const gpu100::ArgParser& args, Model model,
                                     const std::vector<std::string>& variants) {
  // --gpus: the multi-GPU rows of --split and their one-GPU baseline, bf16, and no other row.
  const bool gpus = args.was_set("gpus") || args.was_set("split");
  std::vector<gpu100::Precision> precisions;
  for (const auto& p : split(gpus && !args.was_set("precision") ? std::string("bf16")
                                                                : args.get_string("precision"))) {
    if (p == "fp32" || p == "tf32" || p == "bf16") {
      precisions.push_back(p == "fp32"   ? gpu100::Precision::kFp32
                           : p == "tf32" ? gpu100::Precision::kTf32
                                         : gpu100::Precision::kBf16);
    } else {
      throw gpu100::UsageError("unknown --precision '" + p + "' (fp32, tf32 or bf16)");
    }
  }
  std::vector<Trunks> trunks;
  for (const auto& t : split(args.get_string("trunks"))) {
    try {
      trunks.push_back(parse_trunks(t));
    } catch (const std::invalid_argument& e) {
      throw gpu100::UsageError(e.what());
    }
  }
  if (model == Model::kResNet18) {
    if (args.was_set("trunks") && (trunks.size() != 1 || trunks[0] != Trunks::kSequential)) {
      throw gpu100::UsageError("resnet18 has one trunk: --trunks sequential only");
    }
    trunks = {Trunks::kSequential};
  }
  gpu100::check_known(variants, net_rows());
  std::vector<Multi> splits;
  for (const auto& s : split(args.get_string("split"))) {
    if (s != "batch" && s != "trunks") {
      throw gpu100::UsageError("unknown --split '" + s + "' (batch or trunks)");
    }
    splits.push_back(s == "batch" ? Multi::kBatch : Multi::kTrunks);
  }
  if (gpus) {
    if (!args.get_string("output").empty()) {
      throw gpu100::UsageError("--output writes a one-GPU row's logits: leave out --gpus");
    }
    if (precisions.size() != 1 || precisions[0] != gpu100::Precision::kBf16) {
      throw gpu100::UsageError("the multi-GPU rows (--gpus) are bf16: --precision bf16");
    }
    const bool trunk_split =
        std::find(splits.begin(), splits.end(), Multi::kTrunks) != splits.end();
    if (trunk_split && model != Model::kMcResNet18) {
      throw gpu100::UsageError("--split trunks runs MC-ResNet18's two trunks on two GPUs");
    }
    if (trunk_split && args.get_int("gpus") != 2) {
      throw gpu100::UsageError("--split trunks puts one trunk on each of 2 GPUs: --gpus 2");
    }
    if (!multi_gpu_built()) {
      throw gpu100::UsageError(
          "--gpus: this build has no multi-GPU rows (NCCL was not found when it was configured; "
          "pip install nvidia-nccl-cu13 or set NCCL_ROOT, then configure again)");
    }
  }
  std::vector<std::string> rows;
  for (const NetRow& r : net_rows()) {
    const bool p = std::find(precisions.begin(), precisions.end(), r.precision) != precisions.end();
    bool t = r.library ? !args.get_flag("no-library")
             : r.graph ? !args.get_flag("no-graph")
                       : std::find(trunks.begin(), trunks.end(), r.trunks) != trunks.end();
    if (gpus) {  // the multi rows only: those of --split and the one-GPU baseline
      t = r.multi == Multi::kOneGpu ||
          std::find(splits.begin(), splits.end(), r.multi) != splits.end();
    } else if (r.multi != Multi::kNone) {
      t = false;
    }
    if (gpu100::selected(variants, r.name) && (variants.empty() ? p && t : true)) {
      rows.push_back(r.name);
    }
  }
  if (rows.empty()) throw gpu100::UsageError("the flags select no row (see --list)");
  return rows;
}

NetOptions read_options(const gpu100::ArgParser& args) {
  NetOptions opt;
  try {
    opt.model = parse_model(args.get_string("model"));
  } catch (const std::invalid_argument& e) {
    throw gpu100::UsageError(e.what());
  }
  const bool mc = opt.model == Model::kMcResNet18;
  opt.h = args.get_int("h") > 0 ? int(args.get_int("h")) : (mc ? 416 : 224);
  opt.w = args.get_int("w") > 0 ? int(args.get_int("w")) : (mc ? 544 : 224);
  for (int64_t n : gpu100::parse_int_list("batch", args.get_string("batch"), 1, 1 << 16)) {
    opt.batches.push_back(int(n));
  }
  opt.weights = args.get_string("weights");
  opt.input = args.get_string("input");
  opt.output = args.get_string("output");
  if (!opt.input.empty() && (args.was_set("batch") || args.was_set("h") || args.was_set("w"))) {
    throw gpu100::UsageError("--input sets N, H and W: leave out --batch, --h and --w");
  }
  opt.common = gpu100::CommonOptions::read(args);
  opt.gpus = int(args.get_int("gpus"));
  opt.rows = select_rows(args, opt.model, opt.common.variants);
  // The batch split needs an image per GPU at every batch size.
  for (const NetRow& r : net_rows()) {
    if (r.multi != Multi::kBatch ||
        std::find(opt.rows.begin(), opt.rows.end(), r.name) == opt.rows.end()) {
      continue;
    }
    for (int n : opt.batches) {
      if (n < opt.gpus) {
        throw gpu100::UsageError(fmt::format(
            "--split batch: N={} over {} GPUs leaves a GPU without an image", n, opt.gpus));
      }
    }
  }
  opt.named = opt.common.variants;
  if (args.was_set("precision")) {
    for (const NetRow& r : net_rows()) {
      const bool chosen = std::find(opt.rows.begin(), opt.rows.end(), r.name) != opt.rows.end();
      if (chosen && !r.library) opt.named.push_back(r.name);
    }
  }
  gpu100::refuse_named_not_built(net_rows(), opt.named);  // no code in any architecture built
  return opt;
}

// "N=32: best own own_bf16_dual 12.3 ms, 2600 images/s (1.10x cudnn_bf16)" for the verdict line.
std::string best_line(int n, const std::vector<ResultRow>& rows) {
  const ResultRow* best = nullptr;
  for (const ResultRow& r : rows) {
    if (r.ms && r.library && (best == nullptr || *r.ms < *best->ms)) best = &r;
  }
  if (best == nullptr) return "";
  return fmt::format("N={}: fastest {} {:.2f} ms", n, best->variant, *best->ms);
}

int run(int argc, char** argv) {
  gpu100::ArgParser args("capstone_mc_resnet18",
                         "MC-ResNet18 / ResNet-18 forward on the curriculum's kernels vs cuDNN");
  declare_flags(args);
  if (!args.parse(argc, argv)) return gpu100::kExitOk;
  if (gpu100::list_requested(args, net_rows())) return gpu100::kExitOk;
  NetOptions opt = read_options(args);
  const bool args_layers = args.get_flag("layers");
  // Files before any GPU call: a bad one is one line and exit 2.
  const NetWeights wts = opt.weights.empty() ? random_net_weights(opt.model, opt.common.seed)
                                             : load_net_weights(opt.weights, opt.model);
  Images images(opt, wts);
  if (images.file_batch() > 0) opt.batches = {images.file_batch()};

  gpu100::DayRun run(
      "capstone_mc_resnet18",
      fmt::format("{} forward, {:.2f} GFLOP per image at {}x{}", to_string(opt.model),
                  net_flops(opt.model, images.h(), images.w(), wts.classes) / 1e9, images.h(),
                  images.w()),
      opt.common);
  if (const std::string lacked = gpu100::refuse_or_list_lacked(net_rows(), opt.named);
      !lacked.empty()) {
    fmt::print("{}\n", lacked);
  }
  fmt::print("checking against the CPU reference (image 0)...\n");
  images.reference(0);
  run.table().add(gpu100::reference_row(
      "cpu_reference", "fp32", fmt::format("N=1 {}x{}", images.h(), images.w()), images.cpu_ms(), 0,
      net_flops(opt.model, images.h(), images.w(), wts.classes)));
  std::vector<float> logits;
  std::string verdict_extra;
  // The multi-GPU rows' ranks (their NCCL communicators), made once: --gpus more GPUs than the
  // machine has is one line here.
  std::unique_ptr<MultiGpuRows> multi;
  for (const NetRow& r : net_rows()) {
    if (r.multi != Multi::kNone && !multi &&
        std::find(opt.rows.begin(), opt.rows.end(), r.name) != opt.rows.end()) {
      multi = std::make_unique<MultiGpuRows>(opt.gpus);
      fmt::print("multi-GPU rows: {}\n", multi->describe());
    }
  }
  for (int n : opt.batches) {
    const size_t in_bytes = size_t(n) * images.h() * images.w() * sizeof(float) *
                            (opt.model == Model::kMcResNet18 ? 4 : 3);
    gpu100::require_device_memory(in_bytes, "the input batch");
    const auto in = images.upload(n);
    std::vector<const float*> ptrs;
    for (const auto& b : in) ptrs.push_back(b.data());
    std::vector<ResultRow> layers;
    if (args_layers) {
      layers = layer_rows(opt, wts, ptrs, n, images.h(), images.w(), run.ceiling_gbps());
    }
    std::vector<ResultRow> rows;
    for (const NetRow& row : net_rows()) {
      if (std::find(opt.rows.begin(), opt.rows.end(), row.name) == opt.rows.end()) continue;
      const bool first = !opt.output.empty() && logits.empty();
      if (row.multi != Multi::kNone) {
        const ResultRow* one = nullptr;  // this batch's one-GPU baseline, when it ran
        for (const ResultRow& done : rows) {
          for (const NetRow& b : net_rows()) {
            if (b.multi == Multi::kOneGpu && done.variant == b.name && done.ms) one = &done;
          }
        }
        rows.push_back(multi->run(row, opt, wts, images, ptrs, n, opt.batches.size() == 1, one));
      } else {
        rows.push_back(run_net_row(row, opt, wts, images, ptrs, n, run, opt.batches.size() == 1,
                                   first ? &logits : nullptr));
      }
      const ResultRow& r = rows.back();
      fmt::print("  {} N={}: {}\n", r.variant, n,
                 r.ms ? fmt::format("{:.3f} ms, {}", *r.ms, r.ok ? "PASS" : "FAIL") : r.note);
    }
    gpu100::link_libraries(rows);
    gpu100::append(verdict_extra, best_line(n, rows));
    for (const auto& r : rows) run.table().add(r);
    for (const auto& r : layers) run.table().add(r);
  }
  if (!opt.output.empty() && !logits.empty()) {
    save_logits(opt.output, logits, int(logits.size()) / wts.classes, wts.classes);
  }
  fmt::print("\n");
  return run.finish(fmt::format("capstone_{}", to_string(opt.model)), verdict_extra);
}

}  // namespace

int main(int argc, char** argv) {
  return gpu100::guarded_main(argc, argv, run);
}
