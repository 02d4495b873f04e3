#include "common/harness.hpp"

#include <cuda_runtime.h>
#include <fmt/format.h>

#include "common/cuda_check.hpp"

namespace gpu100 {

CommonOptions CommonOptions::read(const ArgParser& args) {
  CommonOptions o;
  o.timing.iters = static_cast<int>(args.get_int("iters"));
  o.timing.warmup = static_cast<int>(args.get_int("warmup"));
  o.timing.flush_l2 = !args.get_flag("no-flush-l2");
  o.seed = static_cast<uint64_t>(args.get_int("seed"));
  o.variants = split_list(args.get_string("variant"));
  o.json = args.get_string("json");
  return o;
}

void print_list_line(const char* name, size_t width, const std::string& precision,
                     const char* description, const std::string& suffix) {
  if (precision.empty()) {
    fmt::print("{:<{}}  {}{}\n", name, width, description, suffix);
  } else {
    fmt::print("{:<{}}  {:<4}  {}{}\n", name, width, precision, description, suffix);
  }
}

ResultRow reference_row(const std::string& name, const std::string& precision,
                        const std::string& shape, double ms, double bytes, double flops) {
  ResultRow row = make_row(name, precision, shape);
  row.ms = ms;
  row.verified = false;
  derive(row, bytes, flops, 0, ms, 0);
  return row;
}

DayRun::DayRun(const std::string& day, const std::string& title, const CommonOptions& options)
    : options_(options), device_(query_device()) {
  fmt::print("{}: {}\ndevice: {}\n", day, title, device_.one_line());
  ceiling_gbps_ = measure_and_report_ceiling(options.timing.iters, options.timing.warmup,
                                             options.timing.flush_l2);
  fmt::print("\n");
}

ResultRow DayRun::measure(const std::string& variant, const std::string& precision,
                          const std::string& shape, const std::function<void()>& poison,
                          const std::function<void()>& launch,
                          const std::function<CompareResult()>& check) {
  poison();
  launch();
  CUDA_CHECK(cudaDeviceSynchronize());
  const CompareResult cmp = check();
  const Timing t = timer_.time(launch, options_.timing);
  ResultRow row = make_row(variant, precision, shape);
  row.ms = t.median_ms;
  row.ms_min = t.min_ms;
  set_check(row, cmp);
  return row;
}

int DayRun::finish(const std::string& json_day, const std::string& verdict_extra) {
  table_.link_libraries();
  table_.print(stdout, verdict_extra);
  if (!options_.json.empty()) {
    table_.write_json(options_.json, RunInfo::make(json_day, device_, ceiling_gbps_));
    fmt::print("wrote {}\n", options_.json);
  }
  return table_.all_ok() ? kExitOk : kExitFailed;
}

}  // namespace gpu100
