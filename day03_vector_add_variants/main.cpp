// day03_vector_add_variants: the host driver (this file: the options, the add and types parts;
// driver_fusion.cpp: the silu and diffusion parts; driver_transfers.cpp: the transfer part). The
// variants are the registry's (--list prints it). Parts of the run (--parts), each a group of table
// rows:
//   add        the fp32 variants at --n, against the CPU and the library row (CUB)
//   types      the variant tagged "types" at fp16, bf16, fp64 and int32
//   silu       y = silu(a + b * c): one fused kernel against chains of 3 and 4 kernels
//   diffusion  one denoising step with temporal blending (--abar, --w), fp32, fp16 and bf16: one
//              fused kernel against the 7-kernel chain an eager framework runs
//   transfers  pageable / pinned copies, the k-stream pipeline against the serial trip, and a
//              column copy with one cudaMemcpy per element against one cudaMemcpy2D
// --sweep times the variants tagged "sweep" at n = 2^10 ... 2^28 (the add part only).
//
// Run: build/day03_vector_add_variants/day03_vector_add_variants [--n 2^28] [--sweep] [--json f]
#include <fmt/format.h>

#include <cstdlib>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "common/device_buffer.hpp"
#include "common/random.hpp"
#include "common/tags.hpp"
#include "driver.hpp"

using day03::Options;
using day03::time_cpu_ms;

namespace {

using gpu100::ResultRow;

constexpr const char* kDay = "day03_vector_add_variants";
const std::vector<std::string> kParts = {"add", "types", "silu", "diffusion", "transfers"};

// ---- part "add": the fp32 variants ----

void run_add(int64_t n, const Options& opt, gpu100::DayRun& run, std::string& verdict_extra) {
  const std::vector<float> a = gpu100::random_vector<float>(n, opt.common.seed);
  const std::vector<float> b = gpu100::random_vector<float>(n, opt.common.seed + 1);
  std::vector<float> ref(n);
  const double cpu_ms =
      time_cpu_ms(n, [&] { day02::vector_add_cpu(a.data(), b.data(), ref.data(), n); });
  const double compulsory = 12.0 * double(n);  // read A and B, write C: 4 + 4 + 4 bytes
  const std::string shape = gpu100::size_label(n);
  run.table().add(gpu100::reference_row("cpu_reference", "fp32", shape, cpu_ms, compulsory));

  gpu100::DeviceBuffer<float> d_a(n), d_b(n), d_c(n);
  d_a.upload(a);
  d_b.upload(b);
  const char* library = nullptr;  // the registry's library row
  for (const auto& v : day03::variants()) {
    if (v.is_library) library = v.name;
  }
  std::vector<ResultRow> rows;
  for (const day03::Variant* v : opt.variants) {
    rows.push_back(run.measure(
        v->name, "fp32", shape, [&] { d_c.poison(); },
        [&] { v->launch(d_a.data(), d_b.data(), d_c.data(), n, nullptr); },
        [&] { return gpu100::compare_exact(ref, d_c.download()); }));  // exact: both IEEE adds
    gpu100::derive(rows.back(), compulsory, 0, run.ceiling_gbps(), cpu_ms, 0);
    if (!v->is_library) rows.back().library = library;
  }
  gpu100::link_libraries(rows);
  const ResultRow* best = nullptr;
  for (size_t i = 0; i < rows.size(); ++i) {
    run.table().add(rows[i]);
    if (!opt.variants[i]->is_library && (best == nullptr || *rows[i].ms < *best->ms)) {
      best = &rows[i];
    }
  }
  if (best != nullptr && best->pct_of_ceiling) {
    verdict_extra =
        fmt::format("fastest: {} at {:.0f} GB/s, {:.1f}% of the {:.0f} GB/s copy ceiling",
                    best->variant, *best->gbps, *best->pct_of_ceiling, run.ceiling_gbps());
    if (best->ratio_vs_library) {
      verdict_extra += fmt::format(" ({:.2f}x CUB's time)", 1.0 / *best->ratio_vs_library);
    }
  }
}

// ---- part "types": v4_ilp (the registry's "types" entry) at fp16, bf16, fp64, int32 ----

const day03::Variant& types_variant() {
  for (const auto& v : day03::variants()) {
    if (gpu100::has_tag(v.tags, "types")) return v;
  }
  throw std::logic_error("day03: no variant tagged \"types\"");
}

template <typename T>
void run_type(int64_t n, const Options& opt, gpu100::DayRun& run) {
  const char* precision = day03::precision_name<T>();
  const std::vector<T> a = day03::random_input<T>(n, opt.common.seed + 10);
  const std::vector<T> b = day03::random_input<T>(n, opt.common.seed + 11);
  std::vector<T> ref(n);
  const double cpu_ms = time_cpu_ms(n, [&] { day03::add_cpu(a.data(), b.data(), ref.data(), n); });
  const double compulsory = 3.0 * double(n) * sizeof(T);
  run.table().add(
      gpu100::reference_row("cpu_reference", precision, gpu100::size_label(n), cpu_ms, compulsory));

  gpu100::DeviceBuffer<T> d_a(n), d_b(n), d_c(n);
  d_a.upload(a);
  d_b.upload(b);
  // Exact for every type: int32 is exact, fp32/fp64 adds are correctly rounded on both sides, and
  // fp16/bf16 are rounded once from the exact float sum on both sides.
  ResultRow row = run.measure(
      types_variant().name, precision, gpu100::size_label(n), [&] { d_c.poison(); },
      [&] { day03::add_v4_ilp<T>(d_a.data(), d_b.data(), d_c.data(), n, nullptr); },
      [&] { return gpu100::compare_exact(ref, d_c.download()); });
  gpu100::derive(row, compulsory, 0, run.ceiling_gbps(), cpu_ms, 0);
  run.table().add(row);
}

// ---- command line ----

void print_list() {
  fmt::print("fp32 add variants:\n");
  gpu100::print_list(day03::variants());
  fmt::print("types (--parts types): v4_ilp at");
  day03::for_each_type([](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (!std::is_same_v<T, float>) fmt::print(" {}", day03::precision_name<T>());
  });
  fmt::print(" (fp32 is the add part's v4_ilp row)\nsilu (--parts silu):\n");
  gpu100::print_list(day03::silu_variants());
  fmt::print("diffusion step (--parts diffusion), each at fp32, fp16 and bf16:\n");
  gpu100::print_list(day03::diffusion_variants<float>());
  fmt::print(
      "transfers (--parts transfers): h2d/d2h pageable and pinned, pipeline_serial, "
      "pipeline_<k>_streams, strided_per_element, strided_memcpy2d\n");
}

void declare_flags(gpu100::ArgParser& args) {
  args.add_int("n", "elements of the kernel parts (add, types, silu, diffusion)", int64_t(1) << 28,
               1, int64_t(1) << 31);
  args.add_int("transfer-n", "elements of the transfer part", int64_t(1) << 26, 1,
               int64_t(1) << 30);
  args.add_string("streams", "stream counts of the pipeline rows, comma-separated", "2,4,8");
  args.add_int("chunks", "chunks of the pipeline", 16, 1, 4096);
  args.add_int("matrix", "rows = columns of the strided-copy matrix", 4096, 1, 16384);
  args.add_string("abar", "the diffusion step's alpha-bar, a number in (0, 1]", "0.5");
  args.add_string("w", "the diffusion step's blend weight of the new frame, in [0, 1]", "0.8");
  args.add_string("parts", "comma-separated parts: add,types,silu,diffusion,transfers",
                  "add,types,silu,diffusion,transfers");
  args.add_flag("sweep", "time v1_naive, v4_ilp and cub_transform at n = 2^10 ... 2^28 (add only)");
  args.add_common();
}

// A real number for --abar and --w: ArgParser reads integers only, so these come as text. The
// whole text must be a number (strtod: 0.5, 1e-3, nan, inf); the range is checked by the caller.
double parse_real(const char* flag, const std::string& text) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size()) {
    throw gpu100::UsageError(fmt::format("--{} expects a number, got '{}'", flag, text));
  }
  return v;
}

Options read_options(const gpu100::ArgParser& args) {
  Options opt;
  opt.common = gpu100::CommonOptions::read(args);
  // Default: every variant; with --sweep, those tagged "sweep" (the baseline, the best variant
  // and the library).
  const bool sweep = args.get_flag("sweep");
  for (const day03::Variant* v : gpu100::select(day03::variants(), opt.common.variants)) {
    if (!opt.common.variants.empty() || !sweep || gpu100::has_tag(v->tags, "sweep")) {
      opt.variants.push_back(v);
    }
  }
  opt.parts = gpu100::split_list(args.get_string("parts"));
  if (opt.parts.empty()) throw gpu100::UsageError("--parts needs at least one part");
  for (const auto& part : opt.parts) {
    if (std::find(kParts.begin(), kParts.end(), part) == kParts.end()) {
      throw gpu100::UsageError(fmt::format(
          "unknown part '{}' (the parts are add, types, silu, diffusion, transfers)", part));
    }
  }
  if (sweep) opt.parts = {"add"};
  for (int64_t k : gpu100::parse_int_list("streams", args.get_string("streams"), 1, 64)) {
    opt.streams.push_back(static_cast<int>(k));
  }
  opt.chunks = static_cast<int>(args.get_int("chunks"));
  opt.n = sweep ? int64_t(1) << 28 : args.get_int("n");
  opt.transfer_n = args.get_int("transfer-n");
  opt.matrix = args.get_int("matrix");
  opt.step.abar = parse_real("abar", args.get_string("abar"));
  opt.step.w = parse_real("w", args.get_string("w"));
  // The launchers' rule (check_diffusion_step), said here in the flags' words. Written so that
  // NaN fails: every comparison with a NaN is false.
  if (!(opt.step.abar > 0.0 && opt.step.abar <= 1.0)) {
    throw gpu100::UsageError(
        fmt::format("--abar must be a number in (0, 1], got '{}'", args.get_string("abar")));
  }
  if (!(opt.step.w >= 0.0 && opt.step.w <= 1.0)) {
    throw gpu100::UsageError(
        fmt::format("--w must be a number in [0, 1], got '{}'", args.get_string("w")));
  }
  return opt;
}

// The largest part decides the device memory needed (parts run one after another).
size_t device_bytes_needed(const Options& opt) {
  const size_t n = static_cast<size_t>(opt.n);
  size_t need = 0;
  if (opt.has("add")) need = std::max(need, 3 * n * sizeof(float));
  if (opt.has("types")) need = std::max(need, 3 * n * sizeof(double));
  if (opt.has("silu")) need = std::max(need, 6 * n * sizeof(float));
  if (opt.has("diffusion")) need = std::max(need, 6 * n * sizeof(float));  // fp32 is the largest
  if (opt.has("transfers")) {
    need = std::max(need, (4 * static_cast<size_t>(opt.transfer_n) + opt.matrix) * sizeof(float));
  }
  return need;
}

int run(int argc, char** argv) {
  gpu100::ArgParser args(kDay,
                         "what makes an elementwise kernel fast: C = A + B variants, types, "
                         "fused SiLU, a fused diffusion step, transfers");
  declare_flags(args);
  if (!args.parse(argc, argv)) return gpu100::kExitOk;
  if (args.get_flag("list")) {
    print_list();
    return gpu100::kExitOk;
  }
  const Options opt = read_options(args);
  const bool sweep = args.get_flag("sweep");

  // Everything above is argument handling; the GPU is touched from here on.
  gpu100::DayRun run(kDay,
                     "what makes an elementwise kernel fast (C = A + B variants, types, fused "
                     "SiLU, a fused diffusion step, transfers)",
                     opt.common);
  gpu100::require_device_memory(device_bytes_needed(opt), kDay);
  std::string verdict_extra;
  if (sweep) {
    for (int k = 10; k <= 28; ++k) run_add(int64_t(1) << k, opt, run, verdict_extra);
    verdict_extra.clear();
  } else {
    if (opt.has("add")) run_add(opt.n, opt, run, verdict_extra);
    if (opt.has("types")) {
      day03::for_each_type([&](auto tag) {
        using T = typename decltype(tag)::type;
        if constexpr (!std::is_same_v<T, float>) run_type<T>(opt.n, opt, run);
      });
    }
    if (opt.has("silu")) day03::run_silu(opt.n, opt, run);
    if (opt.has("diffusion")) day03::run_diffusion(opt.n, opt, run);
    if (opt.has("transfers")) day03::run_transfers(opt, run.table());
  }
  return run.finish(sweep ? std::string(kDay) + "_sweep" : kDay, verdict_extra);
}

}  // namespace

int main(int argc, char** argv) {
  return gpu100::guarded_main(argc, argv, run);
}
