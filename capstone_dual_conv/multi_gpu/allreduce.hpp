#pragma once
// The all-reduce lesson: after it, every rank's `out` holds the element-wise sum of every rank's
// `in` (out of place: `in` is never written). Three ways, one registry:
//
//   ring_copy_reduce  the ring by hand: each reduce-scatter step copies the left neighbour's slice
//                     into a staging buffer (cudaMemcpyPeerAsync, the copy engine), then a kernel
//                     adds it to this rank's own; the all-gather steps are peer copies.
//   ring_p2p          the same ring, but the kernel reads the neighbour's memory directly (peer
//                     access over NVLink or PCIe): one pass instead of a copy and a reduction.
//   nccl_allreduce    the library: ncclAllReduce on every rank inside one NCCL group.
//
//   Ranks ranks(2);
//   AllReduce ar(ranks, DType::kBf16, count, int64_t(8) << 20);  // events, staging: once
//   ranks.fork(); ar.run(Algorithm::kRingP2p, in, out); ranks.join(); ranks.wait("all-reduce");
//
// The ring's schedule is plan.hpp's (ring_reduce_chunk, ring_gather_chunk); sizes.hpp cuts each
// chunk into the pipeline's slices. README.md walks through all of it.
#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/compare.hpp"
#include "common/device_buffer.hpp"
#include "ranks.hpp"
#include "sizes.hpp"

namespace capstone::multi {

enum class Algorithm { kRingCopyReduce, kRingP2p, kNccl };

// The lesson's registry: the binary's rows, the tests and the README, in this order.
struct AllReduceVariant {
  const char* name;
  const char* description;
  Algorithm algorithm;
  bool is_library;  // the row the others are compared with ("x library")
};
const std::vector<AllReduceVariant>& allreduce_variants();

// One all-reduce shape (an element type and a count, on every rank of `ranks`) with what the ring
// needs made once and reused by every call: a cross-device event per rank, slice and step, and
// the staging buffer of ring_copy_reduce (one slice per rank).
class AllReduce {
 public:
  // Throws std::invalid_argument for count < 1, slice_bytes < 1 or too many slices
  // (sizes.hpp: slice_count).
  AllReduce(Ranks& ranks, DType dtype, int64_t count, int64_t slice_bytes);
  ~AllReduce();
  AllReduce(const AllReduce&) = delete;
  AllReduce& operator=(const AllReduce&) = delete;

  // Why `algorithm` cannot run on these ranks ("no peer access between GPU 1 and 0"), or "".
  std::string unavailable(Algorithm algorithm) const;

  // Issues the all-reduce on every rank's stream (asynchronous: ranks.wait() waits for it).
  // in[r] and out[r] are `count` elements of the type on GPU r; out[r] is overwritten, in[r] only
  // read. Consecutive calls of one AllReduce need nothing between them (each call's first step
  // waits for the last readers of the previous call's output); any other work on `out` needs the
  // ranks' streams ordered first (ranks.wait(), or fork() and join()). Throws std::logic_error
  // for an algorithm that unavailable() refuses.
  void run(Algorithm algorithm, const std::vector<const void*>& in, const std::vector<void*>& out);

  int slices() const { return slices_; }  // per chunk
  int64_t count() const { return count_; }
  DType dtype() const { return dtype_; }

 private:
  void ring(bool peer_reads, const std::vector<const void*>& in, const std::vector<void*>& out);
  void nccl(const std::vector<const void*>& in, const std::vector<void*>& out);
  void release() noexcept;  // the events and the staging, each with its device current
  cudaEvent_t event(int rank, int slice, int step) const {
    return events_[(size_t(rank) * slices_ + slice) * steps_ + step];
  }

  Ranks& ranks_;
  DType dtype_;
  int64_t count_;
  int slices_ = 1;
  int steps_ = 0;                    // 2 (n - 1): the reduce-scatter's steps, then the all-gather's
  int64_t slice_elems_ = 0;          // the longest slice, in elements
  std::vector<cudaEvent_t> events_;  // [rank][slice][step], each on its rank's device
  std::vector<gpu100::DeviceBuffer<char>> staging_;  // per rank (ring_copy_reduce)
  std::vector<int> sm_count_;                        // per rank: the reduction's grid
};

// Fills `count` elements of `dtype` at `data` (on the current device) with seeded values in
// (-1, 1), never zero (common/device_random.hpp), asynchronously on `stream`.
void fill_input(void* data, DType dtype, int64_t count, uint64_t seed, cudaStream_t stream);

// The seed of rank r's input in a run seeded `seed`: a different stream of values per rank.
inline uint64_t input_seed(uint64_t seed, int rank) {
  return seed * 1000003 + uint64_t(rank) + 1;
}

// Copies `count` elements of `dtype` from the device (the current device's) into fp32 values:
// what the GPU holds, exactly (bf16 widens to fp32 exactly).
std::vector<float> download_floats(const void* data, DType dtype, int64_t count);

// The host reference: the sum of every rank's input in double, and the allowance of each element.
//
// The allowance. A ring (NCCL's algorithms too) forms each output element with n - 1 additions,
// each of two partial sums of some ranks' inputs, each rounded once to the type: fp32 keeps 24
// significant bits, bf16 8, so one rounding errs by at most u |s|, u = 2^-24 (fp32) or 2^-8
// (bf16), s the sum being rounded. (bf16: the kernel adds the two bf16 values in fp32, then rounds
// to bf16. The fp32 add is exact unless the two differ by more than 2^15 in magnitude, and then
// the smaller is far below half a bf16 step: the result is the correctly rounded bf16 sum.) An
// exact partial sum is at most S = sum over the ranks of |x|, and each earlier rounding can have
// grown it by at most a factor (1 + u), so
//   |out - sum| <= (n - 1) u (1 + u)^(n - 1) S.
// For n = 1 the output is a copy and the allowance is 0. A NaN (a poisoned element never written)
// fails whatever the allowance.
class SumReference {
 public:
  SumReference(DType dtype, int ranks, int64_t count);
  // One rank's input, as the GPU holds it (download_floats). Call once per rank.
  void add(const std::vector<float>& input);
  // One rank's output against the sum, element by element.
  gpu100::CompareResult check(const std::vector<float>& output) const;
  // The allowance per unit of S: (n - 1) u (1 + u)^(n - 1).
  double allowance_factor() const;

 private:
  DType dtype_;
  int ranks_;
  int added_ = 0;
  std::vector<double> sum_;
  std::vector<float> abs_sum_;
};

// The bandwidth of one ring step: every rank r copies `bytes` to rank r + 1 at once with
// cudaMemcpyPeerAsync (issued on the receiver's stream, as the ring's pulls are), the median of
// `iters` runs after one warm-up; returns the GB/s of one link in one direction. Needs 2 or more
// ranks; allocates 2 x `bytes` per rank for its duration.
double measure_p2p_ceiling_gbps(Ranks& ranks, int64_t bytes, int iters);

}  // namespace capstone::multi
