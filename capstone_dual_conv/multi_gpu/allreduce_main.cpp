// capstone_allreduce: the all-reduce lesson's driver. One process drives N GPUs
// (multi_gpu/ranks.hpp), and every rank's `out` must end up holding the sum of every rank's `in`: a
// ring written by hand (ring_copy_reduce, ring_p2p) against ncclAllReduce, on buffers of 1 MiB to 1
// GiB per GPU, in fp32 and bf16.
//
// For each type and size: every rank's input filled with seeded values in (-1, 1), its output
// poisoned (NaN), one all-reduce checked element by element on every rank against the host's sum
// in double (SumReference), then timed. The columns are nccl-tests': algbw = bytes / time, and
// busbw = algbw x 2(n - 1)/n, what each link carried (plan.hpp); "% ceiling" compares busbw with a
// peer copy's bandwidth measured at start (every rank r to r + 1 at once, one ring step).
//
// Run: build/capstone_dual_conv/multi_gpu/capstone_allreduce --sizes 256M --dtype bf16
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "allreduce.hpp"
#include "common/args.hpp"
#include "common/compare.hpp"
#include "common/cuda_check.hpp"
#include "common/device_buffer.hpp"
#include "common/errors.hpp"
#include "common/harness.hpp"
#include "common/results.hpp"
#include "plan.hpp"
#include "ranks.hpp"
#include "sizes.hpp"

namespace {

namespace multi = capstone::multi;
using gpu100::ResultRow;
using multi::AllReduceVariant;
using multi::DType;
using multi::Ranks;

constexpr int64_t kCeilingBytes = int64_t(256) << 20;  // per link, for the P2P ceiling
constexpr int kCeilingIters = 5;

struct Options {
  std::vector<int64_t> sizes;  // bytes per rank
  std::vector<DType> dtypes;
  int64_t slice_bytes = 0;
  uint64_t seed = 0;
  int warmup = 0, iters = 0;
};

// What the verdict line needs of each timed row.
struct Timed {
  DType dtype;
  int64_t bytes;
  std::string variant;
  bool is_library;
  double gbps;  // busbw (algbw with one GPU)
  double ms;
};

// The P2P ceiling, when it fits: the per-link one-direction GB/s of one ring step, or 0.
double p2p_ceiling(Ranks& ranks) {
  if (ranks.size() < 2) return 0;
  try {
    for (int r = 0; r < ranks.size(); ++r) {
      ranks.on(r, [&] {
        gpu100::require_device_memory(size_t(2 * kCeilingBytes),
                                      fmt::format("GPU {}: the P2P ceiling", r).c_str());
      });
    }
  } catch (const gpu100::UsageError& e) {
    fmt::print("P2P ceiling: not measured ({})\n", e.what());
    return 0;
  }
  const double gbps = multi::measure_p2p_ceiling_gbps(ranks, kCeilingBytes, kCeilingIters);
  fmt::print(
      "P2P ceiling: {:.1f} GB/s per link, one direction (GPU r -> r+1, all links at once; {} "
      "cudaMemcpyPeerAsync, median of {})\n",
      gbps, multi::byte_label(kCeilingBytes), kCeilingIters);
  return gbps;
}

// One element type and size: the buffers, the reference, then every variant checked and timed.
void run_size(Ranks& ranks, DType dtype, int64_t bytes,
              const std::vector<const AllReduceVariant*>& variants, const Options& opt,
              double ceiling_gbps, gpu100::DayRun& run, std::vector<Timed>& timed) {
  const int n = ranks.size();
  const int64_t count = bytes / multi::dtype_bytes(dtype);
  // The size is per rank; the type and the GPU count are in the shape too, since "x library"
  // pairs rows by variant and shape (gpu100::link_libraries).
  const std::string shape = fmt::format("{} {} x {} GPU{}", multi::byte_label(bytes),
                                        multi::dtype_name(dtype), n, n == 1 ? "" : "s");
  const char* library = nullptr;
  for (const AllReduceVariant* v : variants) {
    if (v->is_library) library = v->name;
  }

  std::vector<gpu100::DeviceBuffer<char>> in(n), out(n);
  std::vector<const void*> in_ptr(n);
  std::vector<void*> out_ptr(n);
  for (int r = 0; r < n; ++r) {
    ranks.on(r, [&] {
      in[r] = gpu100::DeviceBuffer<char>(size_t(bytes));
      out[r] = gpu100::DeviceBuffer<char>(size_t(bytes));
      multi::fill_input(in[r].data(), dtype, count, multi::input_seed(opt.seed, r),
                        ranks.stream(r));
    });
    in_ptr[r] = in[r].data();
    out_ptr[r] = out[r].data();
  }
  ranks.wait("filling the inputs");
  multi::SumReference reference(dtype, n, count);
  for (int r = 0; r < n; ++r) {
    ranks.on(r, [&] { reference.add(multi::download_floats(in[r].data(), dtype, count)); });
  }
  multi::AllReduce allreduce(ranks, dtype, count, opt.slice_bytes);

  for (const AllReduceVariant* v : variants) {
    ResultRow row = gpu100::make_row(v->name, multi::dtype_name(dtype), shape);
    const std::string why = allreduce.unavailable(v->algorithm);
    if (!why.empty()) {  // not this machine's links: reported, never a failure
      row.verified = false;
      row.note = "not run: " + why;
      run.table().add(row);
      continue;
    }
    const std::string what = fmt::format("{} on {}", v->name, shape);
    for (int r = 0; r < n; ++r) ranks.on(r, [&] { out[r].poison(ranks.stream(r)); });
    ranks.wait("poisoning the outputs");
    ranks.fork();
    allreduce.run(v->algorithm, in_ptr, out_ptr);
    ranks.join();
    ranks.wait(what);
    std::vector<gpu100::CompareResult> parts;
    for (int r = 0; r < n; ++r) {
      ranks.on(r, [&] {
        parts.push_back(reference.check(multi::download_floats(out[r].data(), dtype, count)));
      });
    }
    gpu100::set_check(row, gpu100::worst_of(parts));

    const gpu100::Timing t =
        ranks.time([&] { allreduce.run(v->algorithm, in_ptr, out_ptr); }, opt.warmup, opt.iters);
    row.ms = t.median_ms;
    row.ms_min = t.min_ms;
    const double algbw = multi::algorithm_gbps(double(bytes), t.median_ms);
    const double busbw = multi::bus_gbps(double(bytes), t.median_ms, n);
    row.metrics.push_back({"algbw GB/s", algbw});
    if (n > 1) row.metrics.push_back({"busbw GB/s", busbw});
    row.gbps = n > 1 ? busbw : algbw;
    if (n > 1 && ceiling_gbps > 0) row.pct_of_ceiling = 100.0 * busbw / ceiling_gbps;
    if (!v->is_library && library != nullptr) row.library = library;
    run.table().add(row);
    timed.push_back({dtype, bytes, v->name, v->is_library, *row.gbps, t.median_ms});
  }
}

// "1 GiB fp32: ring_p2p busbw 301.2 GB/s = 0.85x NCCL" for each type, at its largest size: the
// faster hand-written ring against the library.
std::string verdict_extra(const std::vector<Timed>& timed, int n) {
  std::string extra;
  for (DType dtype : {DType::kFp32, DType::kBf16}) {
    int64_t largest = 0;
    for (const Timed& t : timed) {
      if (t.dtype == dtype) largest = std::max(largest, t.bytes);
    }
    const Timed *ring = nullptr, *library = nullptr;
    for (const Timed& t : timed) {
      if (t.dtype != dtype || t.bytes != largest) continue;
      if (t.is_library) {
        library = &t;
      } else if (ring == nullptr || t.ms < ring->ms) {
        ring = &t;
      }
    }
    if (ring == nullptr) continue;
    std::string part =
        fmt::format("{} {}: {} {} {:.1f} GB/s", multi::byte_label(largest),
                    multi::dtype_name(dtype), ring->variant, n > 1 ? "busbw" : "algbw", ring->gbps);
    if (library != nullptr) part += fmt::format(" = {:.2f}x NCCL", library->ms / ring->ms);
    gpu100::append(extra, part);
  }
  return extra;
}

int run(int argc, char** argv) {
  gpu100::ArgParser args("capstone_allreduce",
                         "the sum of every GPU's buffer, on every GPU: a ring all-reduce written "
                         "by hand against ncclAllReduce");
  args.add_int("gpus", "ranks, one per GPU 0..N-1 (when not given: every visible GPU)", 1, 1, 64);
  args.add_string("sizes",
                  "bytes per GPU, comma-separated, each a multiple of 4, with an optional binary "
                  "suffix K, M or G (3000004, 1M, 1G)",
                  "1M,4M,16M,64M,256M,1G");
  args.add_string("dtype", "element types, comma-separated: fp32, bf16", "fp32,bf16");
  args.add_int("slice-mib",
               "the ring's pipeline: each chunk is cut into slices of at most this "
               "many MiB",
               64, 1, 1024);
  args.add_int("timeout-s", "watchdog: a rank not done after this many seconds stops every rank",
               120, 1, 86400);
  args.add_common(20);
  if (!args.parse(argc, argv)) return gpu100::kExitOk;
  if (gpu100::list_requested(args, multi::allreduce_variants())) return gpu100::kExitOk;
  const gpu100::CommonOptions common = gpu100::CommonOptions::read(args);
  const auto variants = gpu100::select(multi::allreduce_variants(), common.variants);
  Options opt;
  opt.sizes = multi::parse_byte_sizes("sizes", args.get_string("sizes"));
  opt.dtypes = multi::parse_dtypes("dtype", args.get_string("dtype"));
  opt.slice_bytes = args.get_int("slice-mib") << 20;
  opt.seed = common.seed;
  opt.warmup = common.timing.warmup;
  opt.iters = common.timing.iters;

  // Everything above is argument handling; the GPUs are touched from here on.
  gpu100::DayRun run("capstone_allreduce",
                     "out = the sum of every GPU's in, on every GPU (ring by hand vs NCCL)",
                     common);
  const int gpus = args.was_set("gpus") ? int(args.get_int("gpus")) : multi::visible_gpus();
  Ranks ranks(gpus, double(args.get_int("timeout-s")));
  fmt::print("ranks: {} GPU{}; {}\n", gpus,
             gpus == 1 ? " (every all-reduce is a copy of in to out)" : "s", ranks.links());

  // The largest size must fit on every GPU: in, out and one staging slice.
  const int64_t largest = *std::max_element(opt.sizes.begin(), opt.sizes.end());
  for (int r = 0; r < gpus; ++r) {
    ranks.on(r, [&] {
      gpu100::require_device_memory(
          size_t(2 * largest + opt.slice_bytes),
          fmt::format("GPU {}: an all-reduce of {} per GPU (in, out and a staging slice)", r,
                      multi::byte_label(largest))
              .c_str());
    });
  }
  const double ceiling = p2p_ceiling(ranks);
  fmt::print(
      "all-reduce timing: median of {} runs after {} warm-ups, every rank's work between events on "
      "GPU 0's stream, no L2 flush; ring slices of at most {}\n\n",
      opt.iters, opt.warmup, multi::byte_label(opt.slice_bytes));

  std::vector<Timed> timed;
  for (DType dtype : opt.dtypes) {
    for (int64_t bytes : opt.sizes) {
      run_size(ranks, dtype, bytes, variants, opt, ceiling, run, timed);
    }
  }
  return run.finish("capstone_allreduce", verdict_extra(timed, gpus));
}

}  // namespace

int main(int argc, char** argv) {
  return gpu100::guarded_main(argc, argv, run);
}
