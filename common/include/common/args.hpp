#pragma once
// The one command-line parser shared by every binary.
//
//   gpu100::ArgParser args("day02_vector_add", "C = A + B on the GPU, against the CPU");
//   args.add_int("n", "number of elements", 1 << 28, /*min=*/1, /*max=*/int64_t(1) << 31);
//   args.add_common();                        // --iters --warmup --variant --seed --json ...
//   if (!args.parse(argc, argv)) return 0;    // --help was printed
//   int64_t n = args.get_int("n");
//
// Integers accept 1000, 2^20 and 1<<20. Every bad value (zero or negative where a minimum is set,
// non-numeric text, a number past the maximum, an unknown flag) throws gpu100::UsageError with a
// one-line message; guarded_main turns it into exit status 2. Nothing here touches the GPU.
// Every binary spells its options alike: --n is always an element count; --batch, --heads, --seq,
// --head-dim, --rows, --cols; --m --n --k for a GEMM; --channels / --filters for a layer.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace gpu100 {

class ArgParser {
 public:
  ArgParser(std::string program, std::string description);

  void add_int(const std::string& name, const std::string& help, int64_t default_value,
               int64_t min_value, int64_t max_value);
  void add_string(const std::string& name, const std::string& help,
                  const std::string& default_value);
  void add_flag(const std::string& name, const std::string& help);
  // An old spelling of a renamed option: --old still sets --name for one release, with a one-line
  // notice on stderr ("note: --b is now --batch; ...").
  void add_alias(const std::string& old_name, const std::string& name);

  // The options every binary has: --iters, --warmup, --variant, --seed, --json, --no-flush-l2,
  // --list.
  void add_common(int64_t default_iters = 20);

  // Returns false when --help was given (the help text has been printed to stdout).
  // Throws UsageError on any bad argument.
  bool parse(int argc, const char* const* argv);

  int64_t get_int(const std::string& name) const;
  const std::string& get_string(const std::string& name) const;
  bool get_flag(const std::string& name) const;
  bool was_set(const std::string& name) const;

  std::string help() const;

 private:
  enum class Kind { kInt, kString, kFlag };
  struct Option {
    Kind kind = Kind::kFlag;
    std::string help;
    int64_t int_value = 0, min_value = 0, max_value = 0;
    std::string string_value;
    bool flag_value = false;
    bool set = false;
  };
  const Option& find(const std::string& name, Kind kind) const;

  std::string program_, description_;
  std::vector<std::string> order_;
  std::map<std::string, Option> options_;
  std::map<std::string, std::string> aliases_;  // old spelling -> current name
};

// Parses "1000", "2^20" or "1<<20" into an int64. Throws UsageError naming `flag` on failure.
int64_t parse_size(const std::string& flag, const std::string& text);

// Splits a comma-separated --variant value: "" means all variants.
std::vector<std::string> split_list(const std::string& text);

// A comma-separated list of integers such as "3,5,7" for `flag`, each in [lo, hi]. Throws
// UsageError for an empty list or a bad item.
std::vector<int64_t> parse_int_list(const std::string& flag, const std::string& text, int64_t lo,
                                    int64_t hi);

}  // namespace gpu100
