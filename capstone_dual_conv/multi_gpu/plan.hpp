#pragma once
// The arithmetic of the multi-GPU paths, apart from any GPU or NCCL so that the CPU tests check it
// on every build: how a batch splits over GPUs, and the bandwidths of an all-reduce as nccl-tests
// defines them.
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace capstone::multi {

// One GPU's share of a batch: images first .. first + count - 1.
struct Share {
  int first = 0, count = 0;
};

// n images over `gpus` GPUs in contiguous shares as even as they can be: the first n % gpus
// shares hold one image more (33 over 2: 17 and 16). Throws std::invalid_argument for n < gpus
// (a GPU would get no image) or gpus < 1.
inline std::vector<Share> split_batch(int n, int gpus) {
  if (gpus < 1 || n < gpus) {
    throw std::invalid_argument("a batch of " + std::to_string(n) + " cannot be split over " +
                                std::to_string(gpus) + " GPUs: each needs at least one image");
  }
  std::vector<Share> out;
  int first = 0;
  for (int g = 0; g < gpus; ++g) {
    const int count = n / gpus + (g < n % gpus ? 1 : 0);
    out.push_back({first, count});
    first += count;
  }
  return out;
}

// Throws std::invalid_argument when `gpus` is not between 1 and the `visible` GPUs.
inline void check_gpu_count(int gpus, int visible) {
  if (gpus < 1) throw std::invalid_argument("--gpus must be at least 1");
  if (gpus > visible) {
    throw std::invalid_argument("--gpus " + std::to_string(gpus) + ": this machine has " +
                                std::to_string(visible) + (visible == 1 ? " GPU" : " GPUs"));
  }
}

// An all-reduce of `bytes` per rank over n ranks that took `ms`:
//   algorithm bandwidth = bytes / time (what the caller sees);
//   bus bandwidth = algorithm bandwidth * 2 (n - 1) / n, the rate each rank's link must carry:
//   a ring sends every rank (n - 1) / n of the data twice, once reducing and once gathering, so
//   the bus figure is comparable across rank counts and with a link's speed. 0 for one rank.
inline double allreduce_bus_factor(int ranks) {
  return ranks < 1 ? 0.0 : 2.0 * (ranks - 1) / ranks;
}
inline double algorithm_gbps(double bytes, double ms) {
  return ms > 0 ? bytes / (ms * 1e-3) / 1e9 : 0.0;
}
inline double bus_gbps(double bytes, double ms, int ranks) {
  return algorithm_gbps(bytes, ms) * allreduce_bus_factor(ranks);
}

// The ring's schedule: at step s of the reduce-scatter (s = 0 .. n - 2) rank r adds the chunk
// (r - 1 - s) mod n that rank r - 1 holds into its own; after n - 1 steps rank r holds the whole
// sum of chunk (r + 1) mod n. At step s of the all-gather rank r copies chunk (r - s) mod n from
// rank r - 1. (Exposed for the CPU tests, which replay the schedule on plain arrays.)
inline int ring_reduce_chunk(int rank, int step, int n) {
  return ((rank - 1 - step) % n + 2 * n) % n;
}
inline int ring_gather_chunk(int rank, int step, int n) {
  return ((rank - step) % n + 2 * n) % n;
}

// Element e of a buffer of `count` split into n chunks: chunk c covers [chunk_begin(c),
// chunk_begin(c + 1)), as even as can be (the first count % n chunks one element longer).
inline int64_t chunk_begin(int64_t count, int n, int c) {
  const int64_t base = count / n, extra = count % n;
  return c * base + (c < extra ? c : extra);
}

}  // namespace capstone::multi
