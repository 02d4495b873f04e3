#pragma once
// The all-reduce lesson's arithmetic that needs no GPU, kept apart from CUDA and NCCL so that the
// CPU tests check it on every build: the --sizes and --dtype lists of capstone_allreduce, the
// labels of its table's shapes, and how the ring cuts each chunk into pipeline slices.
#include <cctype>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "common/args.hpp"
#include "common/errors.hpp"
#include "plan.hpp"

namespace capstone::multi {

// The element types the all-reduce sums: fp32, and bf16 (summed in fp32, rounded to bf16 at every
// step of the ring, as the ring must: a partial sum travels between GPUs as bf16).
enum class DType { kFp32, kBf16 };

inline const char* dtype_name(DType d) {
  return d == DType::kFp32 ? "fp32" : "bf16";
}
inline int dtype_bytes(DType d) {
  return d == DType::kFp32 ? 4 : 2;
}

// "--dtype fp32,bf16": each type once, in the order given. Anything else (fp16 among them: NCCL
// has it, but the lesson keeps to the two types training uses) throws gpu100::UsageError.
inline std::vector<DType> parse_dtypes(const std::string& flag, const std::string& text) {
  std::vector<DType> out;
  for (const std::string& item : gpu100::split_list(text)) {
    DType d;
    if (item == "fp32") {
      d = DType::kFp32;
    } else if (item == "bf16") {
      d = DType::kBf16;
    } else {
      throw gpu100::UsageError("--" + flag + ": unknown type '" + item + "' (fp32 or bf16)");
    }
    bool seen = false;
    for (DType e : out) seen = seen || e == d;
    if (!seen) out.push_back(d);
  }
  if (out.empty()) throw gpu100::UsageError("--" + flag + " needs at least one type");
  return out;
}

// The largest size one rank may all-reduce: 1 TiB, far past any GPU's memory (the driver then
// refuses what does not fit with one line), but small enough that no count overflows.
inline constexpr int64_t kMaxAllReduceBytes = int64_t(1) << 40;

// One --sizes item, in bytes: decimal digits and an optional binary suffix K, M or G (k, m, g
// too): "3000004", "256K", "1M", "1G". It must be more than 0 and a multiple of 4 bytes (whole
// fp32 elements, and whole bf16 ones). Anything else throws gpu100::UsageError.
inline int64_t parse_byte_size(const std::string& flag, const std::string& item) {
  size_t digits = 0;
  while (digits < item.size() && std::isdigit(static_cast<unsigned char>(item[digits]))) ++digits;
  const std::string suffix = item.substr(digits);
  int shift = -1;
  if (suffix.empty()) shift = 0;
  if (suffix == "K" || suffix == "k") shift = 10;
  if (suffix == "M" || suffix == "m") shift = 20;
  if (suffix == "G" || suffix == "g") shift = 30;
  if (digits == 0 || shift < 0) {
    throw gpu100::UsageError("--" + flag + ": '" + item +
                             "' is not a size in bytes such as 3000004, 256K, 1M or 1G");
  }
  // More than 13 digits is past 1 TiB whatever the suffix: refused before std::stoll could
  // overflow.
  const int64_t value = digits > 13 ? -1 : std::stoll(item.substr(0, digits));
  if (value < 0 || value > (kMaxAllReduceBytes >> shift)) {
    throw gpu100::UsageError("--" + flag + ": " + item + " is more than the largest size, 1 TiB");
  }
  const int64_t bytes = value << shift;
  if (bytes == 0) throw gpu100::UsageError("--" + flag + ": a size must be more than 0 bytes");
  if (bytes % 4 != 0) {
    throw gpu100::UsageError("--" + flag + ": " + item +
                             " bytes is not a multiple of 4 (whole fp32 and bf16 elements)");
  }
  return bytes;
}

// "--sizes 1M,4M,1G": each item through parse_byte_size, in the order given.
inline std::vector<int64_t> parse_byte_sizes(const std::string& flag, const std::string& text) {
  std::vector<int64_t> out;
  for (const std::string& item : gpu100::split_list(text)) {
    out.push_back(parse_byte_size(flag, item));
  }
  if (out.empty()) throw gpu100::UsageError("--" + flag + " needs at least one size");
  return out;
}

// A size as the table shows it: "1 GiB", "256 MiB", "4 KiB" when it is a whole number of them,
// else the bytes ("3000004 B").
inline std::string byte_label(int64_t bytes) {
  const char* units[] = {"GiB", "MiB", "KiB"};
  const int shifts[] = {30, 20, 10};
  for (int u = 0; u < 3; ++u) {
    const int64_t unit = int64_t(1) << shifts[u];
    if (bytes >= unit && bytes % unit == 0) {
      return std::to_string(bytes / unit) + " " + units[u];
    }
  }
  return std::to_string(bytes) + " B";
}

// The most slices the ring cuts a chunk into: each slice costs every rank an event and a launch
// per step, so a slice of a few bytes on a large buffer would spend all its time issuing them.
inline constexpr int64_t kMaxSlices = int64_t(1) << 16;

// How many slices the ring cuts each chunk into: enough that no slice of the longest chunk (the
// ring's chunks are chunk_begin's, the first count % ranks one element longer) holds more than
// `slice_bytes`; at least 1, and no more than the longest chunk has elements. Throws
// std::invalid_argument for counts or sizes below 1, or past kMaxSlices slices.
inline int slice_count(int64_t count, int ranks, int elem_bytes, int64_t slice_bytes) {
  if (count < 1 || ranks < 1 || elem_bytes < 1 || slice_bytes < 1) {
    throw std::invalid_argument(
        "slice_count: count, ranks, element size and slice size must be "
        "at least 1");
  }
  const int64_t longest = (count + ranks - 1) / ranks;  // elements of chunk 0
  const int64_t bytes = longest * elem_bytes;
  int64_t slices = (bytes + slice_bytes - 1) / slice_bytes;
  if (slices > longest) slices = longest;  // a slice holds at least one element
  if (slices < 1) slices = 1;
  if (slices > kMaxSlices) {
    throw std::invalid_argument("slice_count: " + std::to_string(slices) + " slices per chunk (" +
                                std::to_string(slice_bytes) + "-byte slices of a " +
                                std::to_string(bytes) + "-byte chunk) is more than " +
                                std::to_string(kMaxSlices) + "; use larger slices");
  }
  return int(slices);
}

// Slice k of chunk c, as element indices [first, last) of the whole buffer: the chunk's elements
// split over `slices` as chunk_begin splits a buffer over ranks (as even as can be). A slice of a
// chunk shorter than `slices` may be empty.
inline std::pair<int64_t, int64_t> slice_range(int64_t count, int ranks, int slices, int c, int k) {
  const int64_t first = chunk_begin(count, ranks, c);
  const int64_t length = chunk_begin(count, ranks, c + 1) - first;
  return {first + chunk_begin(length, slices, k), first + chunk_begin(length, slices, k + 1)};
}

}  // namespace capstone::multi
