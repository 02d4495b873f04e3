#include "common/args.hpp"

#include <fmt/format.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <limits>
#include <stdexcept>

#include "common/errors.hpp"

namespace gpu100 {

namespace {

// Parses a plain decimal integer, with an optional sign, and nothing else.
std::optional<int64_t> parse_decimal(const std::string& s) {
  if (s.empty()) return std::nullopt;
  size_t i = (s[0] == '-' || s[0] == '+') ? 1 : 0;
  if (i == s.size()) return std::nullopt;
  for (size_t j = i; j < s.size(); ++j) {
    if (!std::isdigit(static_cast<unsigned char>(s[j]))) return std::nullopt;
  }
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (errno == ERANGE) throw std::out_of_range(s);
  return static_cast<int64_t>(v);
}

}  // namespace

int64_t parse_size(const std::string& flag, const std::string& text) {
  try {
    std::string base, exponent;
    bool power = false, shift = false;
    if (auto p = text.find('^'); p != std::string::npos) {
      base = text.substr(0, p), exponent = text.substr(p + 1), power = true;
    } else if (auto q = text.find("<<"); q != std::string::npos) {
      base = text.substr(0, q), exponent = text.substr(q + 2), shift = true;
    }
    if (!power && !shift) {
      if (auto v = parse_decimal(text)) return *v;
    } else {
      auto b = parse_decimal(base), e = parse_decimal(exponent);
      if (b && e && *e >= 0 && *e <= 62 && (!power || *b == 2) && *b >= 1) {
        // 2^k is 1 << k; b<<k is checked for overflow first.
        const int64_t mantissa = power ? 1 : *b;
        if (mantissa > (std::numeric_limits<int64_t>::max() >> *e)) throw std::out_of_range(text);
        return mantissa << *e;
      }
    }
  } catch (const std::out_of_range&) {
    throw UsageError(fmt::format("--{} value '{}' is out of range", flag, text));
  }
  throw UsageError(
      fmt::format("--{} expects an integer such as 1000, 2^20 or 1<<20, got '{}'", flag, text));
}

std::vector<int64_t> parse_int_list(const std::string& flag, const std::string& text, int64_t lo,
                                    int64_t hi) {
  std::vector<int64_t> out;
  for (const auto& item : split_list(text)) {
    const int64_t v = parse_size(flag, item);
    if (v < lo || v > hi) {
      throw UsageError(fmt::format("--{}: {} is outside [{}, {}]", flag, item, lo, hi));
    }
    out.push_back(v);
  }
  if (out.empty()) throw UsageError(fmt::format("--{} needs at least one value", flag));
  return out;
}

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    if (comma > start) out.push_back(text.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

ArgParser::ArgParser(std::string program, std::string description)
    : program_(std::move(program)), description_(std::move(description)) {}

void ArgParser::add_int(const std::string& name, const std::string& help, int64_t default_value,
                        int64_t min_value, int64_t max_value) {
  if (default_value < min_value || default_value > max_value) {
    throw std::logic_error(fmt::format("ArgParser: the default of --{} ({}) is outside {}..{}",
                                       name, default_value, min_value, max_value));
  }
  Option o;
  o.kind = Kind::kInt;
  o.help = help;
  o.int_value = default_value;
  o.min_value = min_value;
  o.max_value = max_value;
  order_.push_back(name);
  options_[name] = o;
}

void ArgParser::add_string(const std::string& name, const std::string& help,
                           const std::string& default_value) {
  Option o;
  o.kind = Kind::kString;
  o.help = help;
  o.string_value = default_value;
  order_.push_back(name);
  options_[name] = o;
}

void ArgParser::add_flag(const std::string& name, const std::string& help) {
  order_.push_back(name);
  Option o;
  o.kind = Kind::kFlag;
  o.help = help;
  options_[name] = o;
}

void ArgParser::add_alias(const std::string& old_name, const std::string& name) {
  if (options_.count(name) == 0 || options_.count(old_name) != 0) {
    throw std::logic_error("ArgParser: bad alias --" + old_name + " for --" + name);
  }
  aliases_[old_name] = name;
}

void ArgParser::add_common(int64_t default_iters) {
  add_int("iters", "timed repeats per variant (the median is reported)", default_iters, 1, 100000);
  add_int("warmup", "untimed warm-up launches per variant", 5, 0, 100000);
  add_string("variant", "comma-separated variants to run (default: all; see --list)", "");
  add_int("seed", "seed of the random inputs", 42, 0, std::numeric_limits<int64_t>::max());
  add_string("json", "write the results as JSON to this path", "");
  add_flag("no-flush-l2", "do not flush the L2 cache between timed repeats");
  add_flag("list", "list the variants and exit");
}

bool ArgParser::parse(int argc, const char* const* argv) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      fmt::print("{}", help());
      return false;
    }
    if (arg.rfind("--", 0) != 0 || arg.size() == 2) {
      throw UsageError(fmt::format("unexpected argument '{}' (see --help)", arg));
    }
    std::string name = arg.substr(2), value;
    bool has_value = false;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1), name = name.substr(0, eq), has_value = true;
    }
    if (auto alias = aliases_.find(name); alias != aliases_.end()) {
      fmt::print(stderr, "note: --{} is now --{}; the old spelling works for one release\n", name,
                 alias->second);
      name = alias->second;
    }
    auto it = options_.find(name);
    if (it == options_.end()) {
      throw UsageError(fmt::format("unknown option '--{}' (see --help)", name));
    }
    Option& o = it->second;
    if (o.kind == Kind::kFlag) {
      if (has_value) throw UsageError(fmt::format("--{} takes no value", name));
      o.flag_value = true;
      o.set = true;
      continue;
    }
    if (!has_value) {
      if (i + 1 >= argc) throw UsageError(fmt::format("--{} needs a value", name));
      value = argv[++i];
    }
    if (o.kind == Kind::kInt) {
      int64_t v = parse_size(name, value);
      if (v < o.min_value) {
        throw UsageError(fmt::format("--{} must be at least {} (got {})", name, o.min_value, v));
      }
      if (v > o.max_value) {
        throw UsageError(fmt::format("--{} must be at most {} (got {})", name, o.max_value, v));
      }
      o.int_value = v;
    } else {
      o.string_value = value;
    }
    o.set = true;
  }
  return true;
}

const ArgParser::Option& ArgParser::find(const std::string& name, Kind kind) const {
  auto it = options_.find(name);
  if (it == options_.end() || it->second.kind != kind) {
    throw std::logic_error("ArgParser: option --" + name + " was not declared with that type");
  }
  return it->second;
}

int64_t ArgParser::get_int(const std::string& name) const {
  return find(name, Kind::kInt).int_value;
}
const std::string& ArgParser::get_string(const std::string& name) const {
  return find(name, Kind::kString).string_value;
}
bool ArgParser::get_flag(const std::string& name) const {
  return find(name, Kind::kFlag).flag_value;
}
bool ArgParser::was_set(const std::string& name) const {
  auto it = options_.find(name);
  return it != options_.end() && it->second.set;
}

std::string ArgParser::help() const {
  std::string out =
      fmt::format("{} - {}\n\nusage: {} [options]\n\noptions:\n", program_, description_, program_);
  for (const auto& name : order_) {
    const Option& o = options_.at(name);
    std::string left = "--" + name;
    std::string def;
    if (o.kind == Kind::kInt) {
      left += " N";
      def = fmt::format(" [default {}; {}..{}]", o.int_value, o.min_value, o.max_value);
    } else if (o.kind == Kind::kString) {
      left += " S";
      if (!o.string_value.empty()) def = fmt::format(" [default {}]", o.string_value);
    }
    out += fmt::format("  {:<20} {}{}\n", left, o.help, def);
  }
  out += fmt::format("  {:<20} {}\n", "--help", "print this help and exit");
  out +=
      "\nintegers accept 1000, 2^20 or 1<<20.\n"
      "exit status: 0 all variants passed, 1 a variant failed or a CUDA error, 2 bad arguments, a\n"
      "problem too large for the GPU or a variant this build has no code for, 3 no usable GPU "
      "(none,\n"
      "or the build holds no code for it).\n";
  return out;
}

}  // namespace gpu100
