// day07_layernorm: the host driver (the rows themselves: driver.hpp). The registry (layernorm.cpp;
// --list) holds the LayerNorm forward variants v1-v6, RMSNorm (rows, and one long vector) and the
// fused LayerNorm backward, each in fp32, bf16 or both. Every row is checked against the double CPU
// reference of its op on the values it reads (day07::make_problem: bf16-rounded for bf16), then
// timed: median of --iters runs after --warmup, L2 flushed before each. GB/s counts the compulsory
// bytes (README, "The math").
//
// Run: build/day07_layernorm/day07_layernorm [--rows 32768] [--cols 4096] [--json out.json]
#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <functional>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "common/device_buffer.hpp"
#include "common/harness.hpp"
#include "driver.hpp"

namespace {

using day07::Bench;
using day07::bf16;
using day07::Op;
using day07::Options;
using gpu100::ResultRow;

constexpr const char* kDay = "day07_layernorm";

// The selected variants of one precision, op by op in registry order, each op after its CPU
// reference's row (fp32 only); the best % of the copy ceiling of LayerNorm, RMSNorm and the
// backward goes to `summary`.
template <typename T>
void run_precision(const Options& opt, gpu100::DayRun& run, std::vector<std::string>& summary) {
  std::vector<const day07::Variant*> list;
  for (const auto* v : opt.selected) {
    if (std::is_same_v<T, float> ? v->has_fp32 : v->has_bf16) list.push_back(v);
  }
  if (list.empty()) return;
  Bench<T> b(opt, run);
  const Op ops[] = {Op::kLayerNorm, Op::kRmsNormRows, Op::kRmsNormVector, Op::kBackward};
  const char* cpu_names[] = {"cpu_layernorm", "cpu_rmsnorm", "cpu_rmsnorm_vector", "cpu_backward"};
  const int groups[] = {0, 1, 1, 2};  // the summary's: LayerNorm, RMSNorm, backward
  ResultRow best[3];
  for (int i = 0; i < 4; ++i) {
    bool first = true;
    for (const auto* v : list) {
      if (v->op != ops[i]) continue;
      if (first) {
        b.reference(ops[i]);
        if (std::is_same_v<T, float>) {
          run.table().add(gpu100::reference_row(cpu_names[i], "fp64 (fp32 in)", b.shape(ops[i]),
                                                b.cpu_ms, b.bytes(ops[i])));
        }
        first = false;
      }
      ResultRow row = ops[i] == Op::kLayerNorm       ? b.layernorm(*v)
                      : ops[i] == Op::kRmsNormRows   ? b.rmsnorm_rows(*v)
                      : ops[i] == Op::kRmsNormVector ? b.rmsnorm_vector(*v)
                                                     : b.backward(*v);
      if (row.pct_of_ceiling > best[groups[i]].pct_of_ceiling) best[groups[i]] = row;
      run.table().add(row);
    }
  }
  for (const ResultRow& r : best) {
    if (r.pct_of_ceiling) {
      summary.push_back(fmt::format("{} {} {:.1f}%", r.variant, r.precision, *r.pct_of_ceiling));
    }
  }
}

float parse_eps(const std::string& text) {
  char* end = nullptr;
  const double eps = std::strtod(text.c_str(), &end);
  if (text.empty() || end == nullptr || *end != '\0' || !std::isfinite(eps) || eps <= 0 ||
      eps > 1) {
    throw gpu100::UsageError(fmt::format("--eps '{}' must be a number in (0, 1]", text));
  }
  return static_cast<float>(eps);
}

int run(int argc, char** argv) {
  gpu100::ArgParser args(kDay,
                         "LayerNorm (v1-v6), RMSNorm and the LayerNorm backward, fp32 and "
                         "bf16, against a double CPU reference");
  args.add_int("rows", "number of rows", 32768, 1, std::numeric_limits<int32_t>::max());
  args.add_int("cols", "elements per row (the normalized dimension D)", 4096, 1, day07::kMaxDim);
  args.add_string("eps", "epsilon added to the variance", "1e-5");
  args.add_common();
  args.add_alias("dim", "cols");
  if (!args.parse(argc, argv)) return gpu100::kExitOk;
  if (gpu100::list_requested(args, day07::variants())) return gpu100::kExitOk;
  Options opt;
  opt.rows = args.get_int("rows");
  opt.dim = args.get_int("cols");
  opt.eps = parse_eps(args.get_string("eps"));
  try {
    day07::validate_shape(opt.rows, opt.dim);
  } catch (const std::invalid_argument& e) {
    throw gpu100::UsageError(e.what());
  }
  opt.common = gpu100::CommonOptions::read(args);
  opt.selected = gpu100::select(day07::variants(), opt.common.variants);

  // Everything above is argument handling; the GPU is touched from here on.
  gpu100::DayRun run(kDay,
                     fmt::format("LayerNorm / RMSNorm forward and backward, {} x {}, eps {:g}",
                                 opt.rows, opt.dim, opt.eps),
                     opt.common);
  // fp32: x, y, dy, dx (4 arrays of rows x dim) plus the backward's partials and the small ones.
  const size_t n = static_cast<size_t>(opt.rows * opt.dim);
  gpu100::require_device_memory(
      n * 16 + day07::layernorm_backward_workspace_bytes(opt.rows, opt.dim) + (size_t(64) << 20),
      kDay);
  std::vector<std::string> summary;
  run_precision<float>(opt, run, summary);
  run_precision<bf16>(opt, run, summary);
  std::string extra;
  for (const auto& s : summary) extra += (extra.empty() ? "best of the copy ceiling: " : ", ") + s;
  return run.finish(kDay, extra);
}

}  // namespace

int main(int argc, char** argv) {
  return gpu100::guarded_main(argc, argv, run);
}
