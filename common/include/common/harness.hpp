#pragma once
// The day harness: what every binary does the same way, so a day's main.cpp holds only its own
// flags, its problem, its CPU reference and a loop over its registry.
//
//   gpu100::ArgParser args("day02_vector_add", "...");  args.add_common();  ...parse...
//   if (gpu100::list_requested(args, day02::variants())) return gpu100::kExitOk;   // --list
//   const auto opt = gpu100::CommonOptions::read(args);
//   const auto chosen = gpu100::select(day02::variants(), opt.variants);        // --variant
//   gpu100::DayRun run("day02_vector_add", "C = A + B, fp32", opt);   // device line, ceiling
//   ResultRow row = run.measure(v.name, "fp32", shape, poison, launch, check);
//   ...; return run.finish(json_name, verdict_extra);        // table, JSON, exit code
//
// A registry is a std::vector of entries with `name` and `description` (and `needs`, for the
// days whose variants need newer GPU code; see common/arch.hpp).
#include <algorithm>
#include <functional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "common/arch.hpp"
#include "common/args.hpp"
#include "common/compare.hpp"
#include "common/device_info.hpp"
#include "common/errors.hpp"
#include "common/precision.hpp"
#include "common/results.hpp"
#include "common/tags.hpp"
#include "common/timer.hpp"

namespace gpu100 {

// The options add_common() declares, read once.
struct CommonOptions {
  TimingOptions timing;
  uint64_t seed = 42;
  std::vector<std::string> variants;  // --variant, empty: all
  std::string json;                   // --json, empty: none
  static CommonOptions read(const ArgParser& args);
};

// The registry's entries named in `names`, in registry order; all of them when `names` is empty.
// An unknown name throws UsageError ("unknown variant 'x' (see --list)").
template <class Entry>
std::vector<const Entry*> select(const std::vector<Entry>& registry,
                                 const std::vector<std::string>& names) {
  for (const auto& name : names) {
    const bool known = std::any_of(registry.begin(), registry.end(),
                                   [&](const Entry& e) { return name == e.name; });
    if (!known) throw UsageError("unknown variant '" + name + "' (see --list)");
  }
  std::vector<const Entry*> out;
  for (const auto& e : registry) {
    if (names.empty() || std::find(names.begin(), names.end(), e.name) != names.end()) {
      out.push_back(&e);
    }
  }
  return out;
}

// Whether `name` is among `names`, an empty list meaning every name (the --variant rule).
inline bool selected(const std::vector<std::string>& names, const std::string& name) {
  return names.empty() || std::find(names.begin(), names.end(), name) != names.end();
}

// For a day with several registries: throws UsageError for a name that none of them holds.
template <class... Registries>
void check_known(const std::vector<std::string>& names, const Registries&... registries) {
  for (const auto& name : names) {
    const bool known = (std::any_of(registries.begin(), registries.end(),
                                    [&](const auto& e) { return name == e.name; }) ||
                        ...);
    if (!known) throw UsageError("unknown variant '" + name + "' (see --list)");
  }
}

// Adds `part` to a "; "-separated line (the verdict's extra text).
inline void append(std::string& line, const std::string& part) {
  if (!part.empty()) line += (line.empty() ? "" : "; ") + part;
}

// The row of a CPU reference: its time, the bytes or FLOPs it moved, "x CPU" 1, and "-" in the
// check column (it is what the others are checked against).
ResultRow reference_row(const std::string& name, const std::string& precision,
                        const std::string& shape, double ms, double bytes, double flops = 0);

// Whether a registry entry says which GPU code it needs (a `needs` member).
template <class T, class = void>
struct HasNeeds : std::false_type {};
template <class T>
struct HasNeeds<T, std::void_t<decltype(std::declval<T>().needs)>> : std::true_type {};

// Whether a registry entry has a gpu100::Precision `precision` member (--list then shows it).
template <class T, class = void>
struct HasPrecision : std::false_type {};
template <class T>
struct HasPrecision<T, std::void_t<decltype(std::declval<T>().precision)>>
    : std::is_same<std::decay_t<decltype(std::declval<T>().precision)>, Precision> {};

// Whether a registry entry has tags (a `tags` member, see common/tags.hpp).
template <class T, class = void>
struct HasTags : std::false_type {};
template <class T>
struct HasTags<T, std::void_t<decltype(std::declval<T>().tags)>> : std::true_type {};

// One line per entry: name (padded to `width`), precision (when the entry has one), description,
// and the build it needs when this build lacks it; a learner's variant (tag "mine") ends with
// "[mine/<name>.cu]".
void print_list_line(const char* name, size_t width, const std::string& precision,
                     const char* description, const std::string& suffix);
template <class Entry>
void print_list(const std::vector<Entry>& registry) {
  size_t width = 0;
  for (const auto& e : registry) width = std::max(width, std::string(e.name).size());
  for (const auto& e : registry) {
    std::string suffix, precision;
    if constexpr (HasNeeds<Entry>::value) suffix = needs_suffix(e.needs);
    if constexpr (HasPrecision<Entry>::value) precision = to_string(e.precision);
    if constexpr (HasTags<Entry>::value) {
      if (has_tag(e.tags, "mine")) suffix += std::string(" [mine/") + e.name + ".cu]";
    }
    print_list_line(e.name, width, precision, e.description, suffix);
  }
}

// --list: prints the registry and returns true (the binary then exits 0, before any GPU call).
template <class Entry>
bool list_requested(const ArgParser& args, const std::vector<Entry>& registry) {
  if (!args.get_flag("list")) return false;
  print_list(registry);
  return true;
}

// One run of a day's binary: the GPU is touched from its construction on.
class DayRun {
 public:
  // Checks the GPU and the build (query_device), prints "<day>: <title>" and the device line,
  // measures the copy ceiling and prints it with the timing line.
  DayRun(const std::string& day, const std::string& title, const CommonOptions& options);

  const DeviceSummary& device() const { return device_; }
  double ceiling_gbps() const { return ceiling_gbps_; }
  ResultTable& table() { return table_; }

  // The check-then-time loop of one variant: poison the outputs, launch once, synchronise, check
  // against the reference, then time `launch` (median and min of the timed repeats). The row has
  // the times, the check's error and verdict (and its summary as the note when it fails); the
  // caller derives GB/s, TFLOP/s and the ratios with gpu100::derive.
  ResultRow measure(const std::string& variant, const std::string& precision,
                    const std::string& shape, const std::function<void()>& poison,
                    const std::function<void()>& launch,
                    const std::function<CompareResult()>& check);

  // Times `launch` alone (for a day whose check does not fit measure()), with the run's timing
  // options or others.
  Timing time(const std::function<void()>& launch) { return timer_.time(launch, options_.timing); }
  Timing time(const std::function<void()>& launch, const TimingOptions& t) {
    return timer_.time(launch, t);
  }

  // Prints the table and the verdict, writes the JSON when --json was given (under the results
  // name `json_day`), and returns the exit status (0 when every checked row passed, else 1).
  int finish(const std::string& json_day, const std::string& verdict_extra);

 private:
  CommonOptions options_;
  DeviceSummary device_;
  double ceiling_gbps_ = 0;
  GpuTimer timer_;
  ResultTable table_;
};

}  // namespace gpu100
