#pragma once
// A learner's own variants. Each is one file in a day's mine/ folder (scripts/new_variant.sh
// writes a correct starting point): the kernel, its launcher with the day's signature, and one
// registration object at file scope,
//
//   const gpu100::AtStartup kRegister([] { day02::add_learner_variant({"my_add", ...}); });
//
// which runs before main(). The day's registry lists the learner's variants after its own
// (gpu100::with_learner), so the binary runs them (--variant my_add) and the tests check them.
// The build compiles mine/*.cu into the day's binary and GPU tests only (cmake/Gpu100.cmake,
// gpu100_add_learner_variants), so no other day sees them.
#include <stdexcept>
#include <string>
#include <vector>

namespace gpu100 {

// Runs f once, at program start-up, when constructed as a file-scope object.
struct AtStartup {
  template <class F>
  explicit AtStartup(F f) {
    f();
  }
};

// The learner's entries of one registry: a list per (Entry, Registry) pair, where Registry is a tag
// type the day's registry file declares, so two days that share an entry type (day02 and day03)
// keep separate lists. add_learner_* pushes to it; the registry reads it (with_learner).
template <class Entry, class Registry>
std::vector<Entry>& learner_entries() {
  static std::vector<Entry> list;
  return list;
}

// A day's own variants followed by the learner's. A learner name that repeats another throws
// std::logic_error (the binary reports it in one line; the tests fail on it).
template <class Entry>
std::vector<Entry> with_learner(std::vector<Entry> own, const std::vector<Entry>& learner) {
  for (const Entry& e : learner) {
    for (const Entry& o : own) {
      if (std::string(o.name) == e.name) {
        throw std::logic_error(std::string("mine/") + e.name + ".cu: the name '" + e.name +
                               "' is taken; pick another");
      }
    }
    own.push_back(e);
  }
  return own;
}

}  // namespace gpu100
