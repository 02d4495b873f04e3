#pragma once
// The activation arena of a network forward: every intermediate tensor gets an offset in one
// device allocation, and two tensors share bytes only when their lifetimes do not intersect.
//
// A tensor is live from the step that writes it to the last step that reads it (inclusive), so
// an operation's inputs and output, live at the same step, never overlap. plan_arena() is the
// greedy "largest first, lowest gap that fits" placement (as TFLite Micro's GreedyMemoryPlanner):
// not optimal in general, but never more than the sum of the (aligned) tensors and never less
// than the peak of the bytes live at one step.
#include <cstddef>
#include <vector>

#include "common/device_buffer.hpp"

namespace capstone::resnet {

struct ArenaTensor {
  size_t bytes = 0;
  int first = 0, last = 0;  // live during steps first..last inclusive
};

struct ArenaPlan {
  std::vector<size_t> offsets;  // one per tensor, in the input's order
  size_t bytes = 0;             // the end of the highest tensor
};

// Every offset is a multiple of this: cudaMalloc's own alignment, enough for any vector load and
// for cuDNN's and cuBLAS's alignment rules on tensors and workspaces.
constexpr size_t kArenaAlign = 256;

// Greedy placement: tensors in order of decreasing size (ties in input order), each at the lowest
// kArenaAlign-aligned offset where it overlaps no already placed tensor whose lifetime intersects
// its own. Zero-byte tensors sit at offset 0. Throws std::invalid_argument for last < first.
ArenaPlan plan_arena(const std::vector<ArenaTensor>& tensors);

// True when the plan has one aligned offset per tensor, every tensor ends within plan.bytes, and
// no two tensors with intersecting lifetimes overlap in memory.
bool arena_plan_valid(const std::vector<ArenaTensor>& tensors, const ArenaPlan& plan);

// One device allocation that only grows: reserve() frees the old buffer and allocates a new one
// when asked for more bytes than it holds (so the old contents are lost), and does nothing
// otherwise.
class Arena {
 public:
  void reserve(size_t bytes);
  // The device address `offset` bytes into the arena. Throws std::out_of_range past its end.
  template <class T>
  T* at(size_t offset) const {
    if (offset > buf_.bytes()) throw_past_end(offset);
    return reinterpret_cast<T*>(base_ + offset);
  }
  size_t bytes() const { return buf_.bytes(); }

 private:
  [[noreturn]] void throw_past_end(size_t offset) const;
  gpu100::DeviceBuffer<char> buf_;
  char* base_ = nullptr;
};

}  // namespace capstone::resnet
