// capstone_dual_conv: the host driver (the rows of one batch size: driver_rows.cpp). The registry
// (dual_conv.cpp; --list) holds the library a user would call (cuDNN: sequential, two streams,
// fused), day08's best fp32 kernel per stream, and the dual kernels v1_dual_naive.cu ...
// v5_dual_store_bound.cu (one launch for both streams). Two layer configurations run at each batch
// size: the plain convolution, every row compared with the "baseline" row (cudnn_seq), and conv +
// bias + BN + activation (--act), compared with the baseline's conv followed by separate BN and
// activation kernels, and with cuDNN's fused call. Every row is checked against a double CPU
// reference (every output when there are few, else the image borders and --samples random points;
// gpu100::sample_points) and timed: the median of up to --iters runs, fewer for slow rows (about a
// second each), L2 flushed. GB/s and "% of ceiling" count the compulsory bytes: 100% is the bytes
// floor at the copy ceiling of the same run.
// --sweep runs the stem at N = 1, 8, 32, 64, 128, 256 with the rows tagged "sweep".
//
// Run: build/capstone_dual_conv/capstone_dual_conv [--layer stem|deep] [--batch 8] [--sweep]
#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/cuda_check.hpp"
#include "common/device_buffer.hpp"
#include "common/harness.hpp"
#include "common/random.hpp"
#include "common/sample.hpp"
#include "common/tags.hpp"
#include "driver.hpp"

namespace {

using capstone::Activation;
using capstone::Batch;
using capstone::BatchShape;
using capstone::DualConvShape;
using capstone::Options;
using capstone::OutType;
using capstone::RowSpec;
using gpu100::ResultRow;

constexpr const char* kDay = "capstone_dual_conv";
const std::vector<int> kSweepN = {1, 8, 32, 64, 128, 256};

// "N=8: best conv ... ; best fused epilogue ..." for the verdict line.
std::string summary(int n, const std::vector<RowSpec>& plain, const std::vector<ResultRow>& rows_p,
                    const std::vector<RowSpec>& epi, const std::vector<ResultRow>& rows_e) {
  auto fastest = [](const std::vector<RowSpec>& specs, const std::vector<ResultRow>& rows,
                    bool fused) {
    const ResultRow* best = nullptr;
    const size_t first = rows.size() - specs.size();  // after the floor row, if any
    for (size_t i = 0; i < specs.size(); ++i) {
      const ResultRow& r = rows[first + i];
      const bool own = !specs[i].impl->is_library && specs[i].out == OutType::kFp32;
      if (own && r.ms && (!fused || specs[i].impl->fused_epilogue) &&
          (best == nullptr || *r.ms < *best->ms)) {
        best = &r;
      }
    }
    return best;
  };
  std::string line = fmt::format("N={}:", n);
  if (const ResultRow* bp = fastest(plain, rows_p, false)) {
    line += fmt::format(" best conv {} {:.3f} ms ({:.1f}% of the bytes floor", bp->variant, *bp->ms,
                        bp->pct_of_ceiling.value_or(0));
    if (bp->library) line += fmt::format(", {:.2f}x {}", *bp->ratio_vs_library, *bp->library);
    line += ")";
  }
  if (const ResultRow* be = fastest(epi, rows_e, true)) {
    line += fmt::format("; best fused epilogue {} {:.3f} ms", be->variant, *be->ms);
    if (be->library) line += fmt::format(" ({:.2f}x {}", *be->ratio_vs_library, *be->library);
    for (size_t i = 0; i < epi.size(); ++i) {
      const ResultRow& r = rows_e[rows_e.size() - epi.size() + i];
      if (be->library && epi[i].impl->is_library && epi[i].impl->fused_epilogue && r.ms) {
        line += fmt::format(", {:.2f}x {}", *r.ms / *be->ms, r.variant);
      }
    }
    if (be->library) line += ")";
  }
  return line;
}

void declare_flags(gpu100::ArgParser& args) {
  args.add_string("layer", "stem (416x544, 3+1 -> 64) or deep (104x136, 64+64 -> 64)", "stem");
  args.add_int("batch", "batch size N", 8, 1, 32767);
  args.add_int("h", "input height (0: the layer's)", 0, 0, 1 << 20);
  args.add_int("w", "input width (0: the layer's)", 0, 0, 1 << 20);
  args.add_int("c1", "RGB stream input channels (0: the layer's)", 0, 0, 4096);
  args.add_int("c2", "depth stream input channels (0: the layer's)", 0, 0, 4096);
  args.add_int("filters", "output channels K of each stream", 64, 1, 4096);
  args.add_int("filter", "filter size R = S", 3, 1, 15);
  args.add_int("stride", "stride", 1, 1, 8);
  args.add_int("pad", "zero padding", 1, 0, 16);
  args.add_string("act", "activation of the epilogue rows: none, relu, silu", "relu");
  args.add_int("samples", "random output points checked per stream (large outputs)", 20000, 1,
               10000000);
  args.add_flag("sweep", "the stem at N = 1, 8, 32, 64, 128, 256 (fewer rows)");
  args.add_common();
  args.add_alias("n", "batch");
  args.add_alias("k", "filters");
}

Options read_options(const gpu100::ArgParser& args) {
  Options opt;
  opt.layer_name = args.get_string("layer");
  DualConvShape& sh = opt.shape;
  if (opt.layer_name == "stem") {
    opt.h = 416, opt.w = 544, sh.c1 = 3, sh.c2 = 1;
  } else if (opt.layer_name == "deep") {
    opt.h = 104, opt.w = 136, sh.c1 = 64, sh.c2 = 64;
  } else {
    throw gpu100::UsageError("unknown --layer '" + opt.layer_name + "' (stem or deep)");
  }
  auto override = [&](const char* flag, int& v) {
    if (args.get_int(flag) > 0) v = static_cast<int>(args.get_int(flag));
  };
  override("h", opt.h);
  override("w", opt.w);
  override("c1", sh.c1);
  override("c2", sh.c2);
  sh.k = static_cast<int>(args.get_int("filters"));
  sh.r = sh.s = static_cast<int>(args.get_int("filter"));
  sh.stride = static_cast<int>(args.get_int("stride"));
  sh.pad = static_cast<int>(args.get_int("pad"));
  opt.n = static_cast<int>(args.get_int("batch"));
  opt.sweep = args.get_flag("sweep");
  opt.samples = static_cast<int>(args.get_int("samples"));
  opt.common = gpu100::CommonOptions::read(args);
  gpu100::check_known(opt.common.variants, capstone::implementations());
  try {  // the activation and the shapes, before any GPU call
    opt.act = capstone::parse_activation(args.get_string("act"));
    capstone::DualConv2d probe(sh);
    for (int n : opt.sweep ? kSweepN : std::vector<int>{opt.n}) {
      probe.check_batch(BatchShape{n, opt.h, opt.w});
    }
  } catch (const std::invalid_argument& e) {
    throw gpu100::UsageError(e.what());
  }
  return opt;
}

int run(int argc, char** argv) {
  gpu100::ArgParser args(kDay,
                         "the dual-stream (RGB + depth) convolution layer against cuDNN, fp32");
  declare_flags(args);
  if (!args.parse(argc, argv)) return gpu100::kExitOk;
  if (gpu100::list_requested(args, capstone::implementations())) return gpu100::kExitOk;
  const Options opt = read_options(args);

  // Everything above is argument handling; the GPU is touched from here on.
  gpu100::DayRun run(
      kDay,
      fmt::format("dual-stream convolution, {} layer, fp32{}", opt.layer_name,
                  capstone::cudnn_available() ? "" : " (cuDNN not found: its rows are skipped)"),
      opt.common);
  std::vector<RowSpec> plain, epi;
  capstone::make_specs(opt, plain, epi);
  std::string verdict_extra;
  for (int n : opt.sweep ? kSweepN : std::vector<int>{opt.n}) {
    Batch batch;
    if (const std::string why = capstone::allocate(batch, opt, BatchShape{n, opt.h, opt.w});
        !why.empty()) {
      if (!opt.sweep) throw gpu100::UsageError(why);
      fmt::print("stopped: {}\n", why);
      ResultRow stop = gpu100::make_row("sweep_stop", "fp32", fmt::format("N={}", n));
      stop.verified = false;
      stop.note = "stopped: " + why;
      run.table().add(stop);
      break;
    }
    const std::vector<ResultRow> rows_p = capstone::run_config(opt, batch, false, plain, run);
    const std::vector<ResultRow> rows_e = capstone::run_config(opt, batch, true, epi, run);
    const std::string line = summary(n, plain, rows_p, epi, rows_e);
    fmt::print("{}\n", line);
    gpu100::append(verdict_extra, line);
    for (const auto& r : rows_p) run.table().add(r);
    for (const auto& r : rows_e) run.table().add(r);
  }
  fmt::print("\n");
  return run.finish(fmt::format("{}_{}_{}", kDay, opt.layer_name,
                                opt.sweep ? std::string("sweep") : fmt::format("n{}", opt.n)),
                    verdict_extra);
}

}  // namespace

int main(int argc, char** argv) {
  return gpu100::guarded_main(argc, argv, run);
}
