// The activation arena's planner and its one allocation (resnet_arena.hpp).
#include "resnet_arena.hpp"

#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <string>
#include <utility>

namespace capstone::resnet {

namespace {

size_t align_up(size_t x) {
  return (x + kArenaAlign - 1) / kArenaAlign * kArenaAlign;
}

bool lifetimes_meet(const ArenaTensor& a, const ArenaTensor& b) {
  return a.first <= b.last && b.first <= a.last;
}

// Byte ranges [begin, end) overlap; an empty range overlaps nothing.
bool ranges_meet(size_t a, size_t a_bytes, size_t b, size_t b_bytes) {
  return a_bytes > 0 && b_bytes > 0 && a < b + b_bytes && b < a + a_bytes;
}

}  // namespace

ArenaPlan plan_arena(const std::vector<ArenaTensor>& tensors) {
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i].last < tensors[i].first) {
      throw std::invalid_argument("plan_arena: tensor " + std::to_string(i) + " ends (step " +
                                  std::to_string(tensors[i].last) + ") before it starts (step " +
                                  std::to_string(tensors[i].first) + ")");
    }
  }
  std::vector<size_t> order(tensors.size());
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return tensors[a].bytes > tensors[b].bytes; });

  ArenaPlan plan;
  plan.offsets.assign(tensors.size(), 0);
  std::vector<size_t> placed;  // indices, in placement order
  // The byte ranges of the placed tensors live at the same time as the one being placed.
  std::vector<std::pair<size_t, size_t>> busy;
  for (size_t i : order) {
    const ArenaTensor& t = tensors[i];
    busy.clear();
    for (size_t j : placed) {
      if (tensors[j].bytes > 0 && lifetimes_meet(t, tensors[j])) {
        busy.emplace_back(plan.offsets[j], plan.offsets[j] + tensors[j].bytes);
      }
    }
    std::sort(busy.begin(), busy.end());
    // Walk the busy ranges upwards; the first aligned gap that holds the tensor wins.
    size_t offset = 0;
    if (t.bytes > 0) {
      for (const auto& [begin, end] : busy) {
        if (offset + t.bytes <= begin) break;
        offset = std::max(offset, align_up(end));
      }
    }
    plan.offsets[i] = offset;
    plan.bytes = std::max(plan.bytes, offset + t.bytes);
    placed.push_back(i);
  }
  return plan;
}

bool arena_plan_valid(const std::vector<ArenaTensor>& tensors, const ArenaPlan& plan) {
  if (plan.offsets.size() != tensors.size()) return false;
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i].last < tensors[i].first) return false;
    if (plan.offsets[i] % kArenaAlign != 0) return false;
    if (plan.offsets[i] + tensors[i].bytes > plan.bytes) return false;
    for (size_t j = 0; j < i; ++j) {
      if (lifetimes_meet(tensors[i], tensors[j]) &&
          ranges_meet(plan.offsets[i], tensors[i].bytes, plan.offsets[j], tensors[j].bytes)) {
        return false;
      }
    }
  }
  return true;
}

void Arena::reserve(size_t bytes) {
  if (bytes <= buf_.bytes()) return;
  // Free first: the old and the new buffer never need to fit at the same time.
  buf_ = gpu100::DeviceBuffer<char>();
  base_ = nullptr;
  buf_ = gpu100::DeviceBuffer<char>(bytes);
  base_ = buf_.data();
}

void Arena::throw_past_end(size_t offset) const {
  throw std::out_of_range("Arena: offset " + std::to_string(offset) + " is past the end (" +
                          std::to_string(buf_.bytes()) + " bytes)");
}

}  // namespace capstone::resnet
