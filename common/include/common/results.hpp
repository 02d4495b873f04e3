#pragma once
// The results table every binary prints, and the JSON file it writes with --json.
//
// One row per variant. The derived columns are computed from what the row measured:
//   GB/s          = bytes / time (the compulsory bytes: each input read once, output written once)
//   TFLOP/s       = flops / time
//   % of ceiling  = GB/s over the device-to-device copy bandwidth measured in the same run
//                   (or TFLOP/s over a compute ceiling, for compute-bound days)
//   x CPU         = CPU reference time / variant time
//   x library     = library time / variant time   (above 1: faster than the library)
//   max abs err   = the largest |GPU - reference| over the checked elements, in the output's units
//   err/tol       = the largest |GPU - reference| / allowance, the allowance being the error the
//                   element's rule permits (gpu100::compare): PASS when <= 1, on every day
//
// JSON schema (shared by every day; null where a field does not apply):
//   {"day", "gpu", "cuda", "git", "timestamp", "ceiling_gbps",
//    "cases": [{"variant", "precision", "shape", "ms", "ms_min", "gbps", "tflops",
//               "pct_of_ceiling", "speedup_vs_cpu", "library", "ratio_vs_library",
//               "max_abs_err", "err_over_tol", "ok", "note"}]}
// ("note" is the row's note, e.g. which tile shape the autotuner chose; null when there is none.)
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/compare.hpp"
#include "common/device_info.hpp"

namespace gpu100 {

struct ResultRow {
  std::string variant;
  std::string precision;  // "fp32", "bf16", "tf32", "int32", ...
  std::string shape;      // "n=268435456", "4096x4096x4096", ...
  std::optional<double> ms, ms_min;
  std::optional<double> gbps, tflops;
  std::optional<double> pct_of_ceiling;
  std::optional<double> speedup_vs_cpu;
  std::optional<std::string> library;  // the library row this one is compared with
  std::optional<double> ratio_vs_library;
  std::optional<double> max_abs_err, err_over_tol;
  bool ok = true;
  bool verified = true;  // false for rows that check nothing (the CPU reference, transfers):
                         // "-" in the table, null in the JSON
  std::string note;      // printed after the table, e.g. "skipped: cuDNN not found"
  // A day's own quantities beyond the standard columns ("images/s", "arena MB"): printed as extra
  // columns after TFLOP/s (a row without one shows "-") and written as "metrics" in the JSON.
  std::vector<std::pair<std::string, double>> metrics;
};

inline ResultRow make_row(std::string variant, std::string precision, std::string shape) {
  ResultRow row;
  row.variant = std::move(variant);
  row.precision = std::move(precision);
  row.shape = std::move(shape);
  return row;
}

// Puts a check's outcome in the row: its errors, its verdict and, when it failed, its summary
// as the note (after any note the row already has).
void set_check(ResultRow& row, const CompareResult& cmp);

// Fills the derived columns of `row` from its median time and the quantities given.
// Pass 0 (or a negative number) for a quantity that does not apply.
void derive(ResultRow& row, double bytes, double flops, double ceiling_gbps, double cpu_ms,
            double library_ms);

// "x library" from the rows' `library` fields: a row naming a library row (same variant name and
// shape) that has a time gets library time / its time; a row whose library row did not run loses
// the name. Rows with a ratio already are left as they are.
void link_libraries(std::vector<ResultRow>& rows);

struct RunInfo {
  std::string day;  // "day02_vector_add"
  std::string gpu;  // device name
  std::string cuda;
  std::string git;  // $GPU100_GIT, else the commit at configure time
  std::string timestamp;
  double ceiling_gbps = 0;

  static RunInfo make(const std::string& day, const DeviceSummary& device, double ceiling_gbps);
};

class ResultTable {
 public:
  void add(ResultRow row) { rows_.push_back(std::move(row)); }
  const std::vector<ResultRow>& rows() const { return rows_; }
  void link_libraries() { gpu100::link_libraries(rows_); }
  bool all_ok() const;

  // The table, then any notes, then one verdict line.
  std::string format(const std::string& verdict_extra = "") const;
  void print(std::FILE* out = stdout, const std::string& verdict_extra = "") const;
  std::string verdict(const std::string& extra = "") const;

  std::string to_json(const RunInfo& info) const;
  void write_json(const std::string& path, const RunInfo& info) const;  // throws on I/O error

 private:
  std::vector<ResultRow> rows_;
};

// The lines every binary prints above its table. timing_line: "timing: median of 20 runs after 5
// warm-ups, L2 flushed before each run". measure_and_report_ceiling measures the copy ceiling now,
// prints "copy ceiling: ... GB/s (...)" and the timing line, and returns the ceiling in GB/s.
std::string timing_line(int iters, int warmup, bool flush_l2);
double measure_and_report_ceiling(int iters, int warmup, bool flush_l2);

// "n=2^28" for a power of two, "n=1000003" otherwise: the shape column of 1D problems.
std::string size_label(int64_t n);

// JSON string escaping (exposed for the unit tests).
std::string json_escape(const std::string& s);

// Current UTC time as 2026-11-22T08:00:00Z.
std::string utc_timestamp();

}  // namespace gpu100
