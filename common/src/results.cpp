#include "common/results.hpp"

#include "common/timer.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <optional>
#include <stdexcept>

#ifndef GPU100_GIT_DESCRIBE
#define GPU100_GIT_DESCRIBE "unknown"
#endif

namespace gpu100 {

void derive(ResultRow& row, double bytes, double flops, double ceiling_gbps, double cpu_ms,
            double library_ms) {
  if (!row.ms || *row.ms <= 0) return;
  const double ms = *row.ms;
  if (bytes > 0) row.gbps = bytes / (ms * 1e6);
  if (flops > 0) row.tflops = flops / (ms * 1e9);
  if (bytes > 0 && ceiling_gbps > 0) row.pct_of_ceiling = 100.0 * *row.gbps / ceiling_gbps;
  if (cpu_ms > 0) row.speedup_vs_cpu = cpu_ms / ms;
  if (library_ms > 0) row.ratio_vs_library = library_ms / ms;
}

void set_check(ResultRow& row, const CompareResult& cmp) {
  row.max_abs_err = cmp.max_abs;
  row.err_over_tol = cmp.err_over_tol;
  row.ok = cmp.ok;
  if (!cmp.ok) row.note += (row.note.empty() ? "" : "; ") + cmp.summary();
}

void link_libraries(std::vector<ResultRow>& rows) {
  for (auto& r : rows) {
    if (!r.library || r.ratio_vs_library) continue;
    const ResultRow* lib = nullptr;
    for (const auto& l : rows) {
      if (l.variant == *r.library && l.shape == r.shape && l.ms && *l.ms > 0) lib = &l;
    }
    if (lib != nullptr && r.ms && *r.ms > 0) {
      r.ratio_vs_library = *lib->ms / *r.ms;
    } else {
      r.library.reset();
    }
  }
}

RunInfo RunInfo::make(const std::string& day, const DeviceSummary& device, double ceiling_gbps) {
  RunInfo info;
  info.day = day;
  info.gpu = device.name;
  info.cuda = device.cuda_versions();
  const char* git = std::getenv("GPU100_GIT");
  info.git = (git != nullptr && *git != '\0') ? git : GPU100_GIT_DESCRIBE;
  info.timestamp = utc_timestamp();
  info.ceiling_gbps = ceiling_gbps;
  return info;
}

bool ResultTable::all_ok() const {
  for (const auto& r : rows_) {
    if (!r.ok) return false;
  }
  return true;
}

namespace {

std::string opt_num(const std::optional<double>& v, const char* spec) {
  if (!v) return "-";
  if (std::isinf(*v)) return "inf";
  if (std::isnan(*v)) return "nan";
  return fmt::format(fmt::runtime(spec), *v);
}

}  // namespace

std::string ResultTable::verdict(const std::string& extra) const {
  size_t bad = 0, checked = 0;
  for (const auto& r : rows_) {
    bad += r.ok ? 0 : 1;
    checked += r.verified ? 1 : 0;
  }
  std::string v =
      bad == 0 ? fmt::format("verdict: PASS, all {} verified rows match the reference", checked)
               : fmt::format("verdict: FAIL, {} of {} rows failed verification", bad, checked);
  if (!extra.empty()) v += "; " + extra;
  return v;
}

std::string ResultTable::format(const std::string& verdict_extra) const {
  struct Col {
    const char* title;
    bool left;
  };
  std::vector<Col> cols = {{"variant", true},    {"precision", true}, {"shape", true},
                           {"median ms", false}, {"GB/s", false},     {"TFLOP/s", false}};
  // The metrics any row has, in first-seen order, as columns after TFLOP/s.
  std::vector<std::string> metric_names;
  for (const auto& r : rows_)
    for (const auto& [name, value] : r.metrics) {
      if (std::find(metric_names.begin(), metric_names.end(), name) == metric_names.end()) {
        metric_names.push_back(name);
      }
    }
  for (const auto& name : metric_names) cols.push_back({name.c_str(), false});
  for (const Col& c : std::vector<Col>{{"% ceiling", false},
                                       {"x CPU", false},
                                       {"x library", false},
                                       {"max abs err", false},
                                       {"err/tol", false},
                                       {"check", true}}) {
    cols.push_back(c);
  }
  std::vector<std::vector<std::string>> cells;
  for (const auto& r : rows_) {
    std::string lib = r.ratio_vs_library
                          ? opt_num(r.ratio_vs_library, "{:.2f}") + " " + r.library.value_or("")
                          : "-";
    std::vector<std::string> row = {r.variant,
                                    r.precision,
                                    r.shape,
                                    opt_num(r.ms, "{:.4f}"),
                                    opt_num(r.gbps, "{:.1f}"),
                                    opt_num(r.tflops, "{:.2f}")};
    for (const auto& name : metric_names) {
      std::optional<double> v;
      for (const auto& [n, value] : r.metrics) {
        if (n == name) v = value;
      }
      row.push_back(opt_num(v, "{:.1f}"));
    }
    for (std::string cell :
         {opt_num(r.pct_of_ceiling, "{:.1f}%"), opt_num(r.speedup_vs_cpu, "{:.1f}"), lib,
          opt_num(r.max_abs_err, "{:.1e}"), opt_num(r.err_over_tol, "{:.2f}"),
          std::string(!r.verified ? "-" : (r.ok ? "PASS" : "FAIL"))}) {
      row.push_back(cell);
    }
    cells.push_back(row);
  }
  std::vector<size_t> width(cols.size());
  for (size_t c = 0; c < cols.size(); ++c) {
    width[c] = std::string(cols[c].title).size();
    for (const auto& row : cells) width[c] = std::max(width[c], row[c].size());
  }
  auto line = [&](const std::vector<std::string>& row) {
    std::string s;
    for (size_t c = 0; c < cols.size(); ++c) {
      if (c) s += "  ";
      s += cols[c].left ? fmt::format("{:<{}}", row[c], width[c])
                        : fmt::format("{:>{}}", row[c], width[c]);
    }
    while (!s.empty() && s.back() == ' ') s.pop_back();
    return s + "\n";
  };
  std::vector<std::string> titles;
  for (const auto& c : cols) titles.push_back(c.title);
  std::string out = line(titles);
  size_t total = 0;
  for (size_t w : width) total += w + 2;
  out += std::string(total - 2, '-') + "\n";
  for (const auto& row : cells) out += line(row);
  for (const auto& r : rows_) {
    if (!r.note.empty()) out += fmt::format("note: {}: {}\n", r.variant, r.note);
  }
  out += verdict(verdict_extra) + "\n";
  return out;
}

void ResultTable::print(std::FILE* out, const std::string& verdict_extra) const {
  fmt::print(out, "{}", format(verdict_extra));
  std::fflush(out);
}

std::string json_escape(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (c < 0x20) {
          out += fmt::format("\\u{:04x}", c);
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out;
}

namespace {

std::string json_str(const std::string& s) {
  return "\"" + json_escape(s) + "\"";
}

std::string json_num(const std::optional<double>& v) {
  if (!v || !std::isfinite(*v)) return "null";  // JSON has no NaN or infinity
  return fmt::format("{:.6g}", *v);
}

}  // namespace

std::string ResultTable::to_json(const RunInfo& info) const {
  std::string out = "{\n";
  out += fmt::format("  \"day\": {},\n", json_str(info.day));
  out += fmt::format("  \"gpu\": {},\n", json_str(info.gpu));
  out += fmt::format("  \"cuda\": {},\n", json_str(info.cuda));
  out += fmt::format("  \"git\": {},\n", json_str(info.git));
  out += fmt::format("  \"timestamp\": {},\n", json_str(info.timestamp));
  out += fmt::format("  \"ceiling_gbps\": {},\n", json_num(info.ceiling_gbps));
  out += "  \"cases\": [";
  for (size_t i = 0; i < rows_.size(); ++i) {
    const ResultRow& r = rows_[i];
    out += i ? ",\n    {" : "\n    {";
    out += fmt::format(
        "\"variant\": {}, \"precision\": {}, \"shape\": {}, \"ms\": {}, \"ms_min\": {}, "
        "\"gbps\": {}, \"tflops\": {}, \"pct_of_ceiling\": {}, \"speedup_vs_cpu\": {}, "
        "\"library\": {}, \"ratio_vs_library\": {}, \"max_abs_err\": {}, \"err_over_tol\": {}, "
        "\"ok\": {}, "
        "\"note\": {}",
        json_str(r.variant), json_str(r.precision), json_str(r.shape), json_num(r.ms),
        json_num(r.ms_min), json_num(r.gbps), json_num(r.tflops), json_num(r.pct_of_ceiling),
        json_num(r.speedup_vs_cpu), r.library ? json_str(*r.library) : "null",
        json_num(r.ratio_vs_library), json_num(r.max_abs_err), json_num(r.err_over_tol),
        !r.verified ? "null" : (r.ok ? "true" : "false"),
        r.note.empty() ? "null" : json_str(r.note));
    if (!r.metrics.empty()) {
      out += ", \"metrics\": {";
      for (size_t m = 0; m < r.metrics.size(); ++m) {
        out += fmt::format("{}{}: {}", m ? ", " : "", json_str(r.metrics[m].first),
                           json_num(r.metrics[m].second));
      }
      out += "}";
    }
    out += "}";
  }
  out += rows_.empty() ? "]\n}\n" : "\n  ]\n}\n";
  return out;
}

void ResultTable::write_json(const std::string& path, const RunInfo& info) const {
  std::ofstream f(path);
  if (!f) throw std::runtime_error("cannot open '" + path + "' for writing");
  f << to_json(info);
  if (!f) throw std::runtime_error("cannot write '" + path + "'");
}

std::string timing_line(int iters, int warmup, bool flush_l2) {
  return fmt::format("timing: median of {} runs after {} warm-ups, L2 {}", iters, warmup,
                     flush_l2 ? "flushed before each run" : "not flushed");
}

double measure_and_report_ceiling(int iters, int warmup, bool flush_l2) {
  const double ceiling = measure_copy_ceiling_gbps();
  fmt::print("copy ceiling: {:.1f} GB/s (device-to-device cudaMemcpy, bytes read + written)\n{}\n",
             ceiling, timing_line(iters, warmup, flush_l2));
  return ceiling;
}

std::string size_label(int64_t n) {
  const bool pow2 = n > 0 && (n & (n - 1)) == 0;
  if (!pow2) return fmt::format("n={}", n);
  int k = 0;
  while ((int64_t(1) << k) != n) ++k;
  return fmt::format("n=2^{}", k);
}

std::string utc_timestamp() {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace gpu100
