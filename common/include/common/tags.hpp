#pragma once
// A registry entry's tags: space-separated words ("sweep types"). Drivers select entries by tag
// (which rows a sweep times, which row runs a part), so a variant's name is written once, in its
// registry, and a new variant joins a sweep by its tag.
#include <string_view>

namespace gpu100 {

inline bool has_tag(std::string_view tags, std::string_view tag) {
  size_t start = 0;
  while (start < tags.size()) {
    size_t end = tags.find(' ', start);
    if (end == std::string_view::npos) end = tags.size();
    if (tags.substr(start, end - start) == tag) return true;
    start = end + 1;
  }
  return false;
}

}  // namespace gpu100
