// The all-reduce lesson (allreduce.hpp): a ring written by hand, twice, and ncclAllReduce.
//
// The ring (the algorithm NCCL's ring and nccl-tests' bus bandwidth are built on; the idea is
// NCCL's, the code here is this lesson's own). With n ranks each buffer is cut into n chunks.
//   reduce-scatter, steps s = 0 .. n - 2: rank r adds chunk (r - 1 - s) mod n of its left
//     neighbour (rank r - 1) into its own: at s = 0 the neighbour's input, later the neighbour's
//     output, which the neighbour reduced at step s - 1. After n - 1 steps rank r holds the whole
//     sum of chunk (r + 1) mod n.
//   all-gather, steps s = 0 .. n - 2: rank r copies chunk (r - s) mod n, finished, from its left
//     neighbour's output.
// plan.hpp holds that schedule (ring_reduce_chunk, ring_gather_chunk); its CPU tests replay it.
//
// The pipeline. Each chunk is cut into slices (sizes.hpp: slice_range), and every step runs slice
// by slice, one stream per rank. Global step g = 0 .. 2(n - 1) - 1 (reduce-scatter, then
// all-gather). Before rank r runs step g of slice k its stream waits for two events of step g - 1
// of the same slice:
//   event[r - 1][k][g - 1]: the left neighbour wrote what rank r is about to read;
//   event[r + 1][k][g - 1]: the right neighbour, the only rank that reads rank r's output, is done
//     with what rank r is about to overwrite (the all-gather overwrites chunks that rank r + 1 read
//     during the reduce-scatter).
// then records event[r][k][g]. Slices are independent, so slice k + 1's early steps run while the
// ranks still work on slice k's later ones: no rank waits for a whole chunk before it can start.
#include "allreduce.hpp"

#include <cuda_bf16.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "common/cuda_check.hpp"
#include "common/device_random.hpp"
#include "common/math.hpp"
#include "plan.hpp"

namespace capstone::multi {

const std::vector<AllReduceVariant>& allreduce_variants() {
  static const std::vector<AllReduceVariant> registry = {
      {"ring_copy_reduce",
       "ring by hand: each reduce-scatter step copies the neighbour's slice into a staging buffer "
       "(cudaMemcpyPeerAsync), then a kernel adds it; all-gather by peer copies; works without "
       "peer access",
       Algorithm::kRingCopyReduce, false},
      {"ring_p2p",
       "ring by hand: the reduction kernel reads the neighbour's memory directly over NVLink/PCIe "
       "(16-byte loads, 4 in flight per thread), no staging pass; needs peer access",
       Algorithm::kRingP2p, false},
      {"nccl_allreduce", "the library: ncclAllReduce (sum) on every rank inside one NCCL group",
       Algorithm::kNccl, true},
  };
  return registry;
}

namespace {

constexpr int kThreads = 256;
constexpr int kUnroll = 4;       // 16-byte loads in flight per thread and per operand
constexpr int kBlocksPerSm = 8;  // 8 x 256 threads: a full SM (2048 threads)
constexpr int64_t kAlign = 16;   // bytes of one vector load

// One element: the sum in fp32, rounded once to the element type.
__device__ __forceinline__ float add_one(float a, float b) {
  return a + b;
}
__device__ __forceinline__ __nv_bfloat16 add_one(__nv_bfloat16 a, __nv_bfloat16 b) {
  return __float2bfloat16_rn(__bfloat162float(a) + __bfloat162float(b));
}

// 16 bytes of each operand: 4 fp32 or 8 bf16 sums.
template <typename T>
__device__ __forceinline__ uint4 add_vec(uint4 a, uint4 b);

template <>
__device__ __forceinline__ uint4 add_vec<float>(uint4 a, uint4 b) {
  return make_uint4(__float_as_uint(__uint_as_float(a.x) + __uint_as_float(b.x)),
                    __float_as_uint(__uint_as_float(a.y) + __uint_as_float(b.y)),
                    __float_as_uint(__uint_as_float(a.z) + __uint_as_float(b.z)),
                    __float_as_uint(__uint_as_float(a.w) + __uint_as_float(b.w)));
}

// Two bf16 in a 32-bit word: widened to fp32 (exact), added, rounded back to bf16 once.
__device__ __forceinline__ uint32_t add_bf16x2(uint32_t a, uint32_t b) {
  __nv_bfloat162 x, y;
  std::memcpy(&x, &a, sizeof a);
  std::memcpy(&y, &b, sizeof b);
  const float2 fx = __bfloat1622float2(x), fy = __bfloat1622float2(y);
  const __nv_bfloat162 sum = __floats2bfloat162_rn(fx.x + fy.x, fx.y + fy.y);
  uint32_t out = 0;
  std::memcpy(&out, &sum, sizeof out);
  return out;
}

template <>
__device__ __forceinline__ uint4 add_vec<__nv_bfloat16>(uint4 a, uint4 b) {
  return make_uint4(add_bf16x2(a.x, b.x), add_bf16x2(a.y, b.y), add_bf16x2(a.z, b.z),
                    add_bf16x2(a.w, b.w));
}

// out[i] = mine[i] + other[i] for i < n: one reduce-scatter step on one slice. `other` is the left
// neighbour's data: in ring_copy_reduce a staging buffer on this GPU that the copy engine filled,
// in ring_p2p the neighbour's own memory, read across NVLink or PCIe by these very loads.
// Work mapping: the body, [head, head + 16 * vecs bytes), is read and written 16 bytes at a time;
// a block takes a tile of kUnroll x 256 vectors, thread t of it vectors t, t + 256, t + 512 and
// t + 768 (each load instruction of a warp covers 512 contiguous bytes), and the grid strides over
// the tiles. A thread issues all its 2 x kUnroll loads before its first add, so that each thread
// keeps 4 loads of the remote operand in flight: a read across the link takes microseconds, and
// only many loads in flight at once fill it. The few elements before the first 16-byte boundary
// (`head`) and after the last whole vector are done one by one.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    reduce_pair_kernel(T* __restrict__ out, const T* __restrict__ mine, const T* __restrict__ other,
                       int64_t head, int64_t vecs, int64_t n) {
  constexpr int64_t kVec = kAlign / sizeof(T);
  const int64_t tid = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  const int64_t body_end = head + vecs * kVec;
  for (int64_t i = tid; i < head; i += stride) out[i] = add_one(mine[i], other[i]);
  for (int64_t i = body_end + tid; i < n; i += stride) out[i] = add_one(mine[i], other[i]);

  const uint4* a = reinterpret_cast<const uint4*>(mine + head);
  const uint4* b = reinterpret_cast<const uint4*>(other + head);
  uint4* o = reinterpret_cast<uint4*>(out + head);
  const int64_t tile = int64_t(blockDim.x) * kUnroll;
  for (int64_t base = int64_t(blockIdx.x) * tile + threadIdx.x; base < vecs;
       base += int64_t(gridDim.x) * tile) {
    uint4 x[kUnroll] = {}, y[kUnroll] = {};
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t v = base + int64_t(u) * blockDim.x;
      if (v < vecs) {
        x[u] = a[v];
        y[u] = b[v];
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t v = base + int64_t(u) * blockDim.x;
      if (v < vecs) o[v] = add_vec<T>(x[u], y[u]);
    }
  }
}

template <typename T>
void reduce_pair(T* out, const T* mine, const T* other, int64_t n, int sm_count,
                 cudaStream_t stream) {
  if (n <= 0) return;
  constexpr int64_t kVec = kAlign / int64_t(sizeof(T));
  const auto addr = [](const void* p) { return reinterpret_cast<uintptr_t>(p); };
  // 16-byte loads need the three pointers at the same offset from a 16-byte boundary; the ring's
  // always are (ring_copy_reduce places its staging so). Otherwise: element by element.
  int64_t head = n, vecs = 0;
  if (((addr(out) ^ addr(mine)) | (addr(out) ^ addr(other))) % kAlign == 0) {
    head =
        std::min<int64_t>(n, int64_t((kAlign - addr(out) % kAlign) % kAlign) / int64_t(sizeof(T)));
    vecs = (n - head) / kVec;
  }
  const int64_t scalar = std::max<int64_t>(head, n - head - vecs * kVec);
  const int64_t blocks =
      std::clamp<int64_t>(std::max(gpu100::ceil_div<int64_t>(vecs, int64_t(kThreads) * kUnroll),
                                   gpu100::ceil_div<int64_t>(scalar, kThreads)),
                          1, int64_t(sm_count) * kBlocksPerSm);
  reduce_pair_kernel<T><<<unsigned(blocks), kThreads, 0, stream>>>(out, mine, other, head, vecs, n);
  CUDA_CHECK_LAST();
}

void reduce_slice(DType dtype, void* out, const void* mine, const void* other, int64_t n,
                  int sm_count, cudaStream_t stream) {
  if (dtype == DType::kFp32) {
    reduce_pair(static_cast<float*>(out), static_cast<const float*>(mine),
                static_cast<const float*>(other), n, sm_count, stream);
  } else {
    reduce_pair(static_cast<__nv_bfloat16*>(out), static_cast<const __nv_bfloat16*>(mine),
                static_cast<const __nv_bfloat16*>(other), n, sm_count, stream);
  }
}

// Makes the device that was current at construction current again when it goes out of scope:
// the ring's loop switches devices at every operation.
class DeviceRestore {
 public:
  DeviceRestore() { CUDA_CHECK(cudaGetDevice(&device_)); }
  ~DeviceRestore() { cudaSetDevice(device_); }
  DeviceRestore(const DeviceRestore&) = delete;
  DeviceRestore& operator=(const DeviceRestore&) = delete;

 private:
  int device_ = 0;
};

const char* at(const void* base, int64_t element, int elem_bytes) {
  return static_cast<const char*>(base) + element * elem_bytes;
}
char* at(void* base, int64_t element, int elem_bytes) {
  return static_cast<char*>(base) + element * elem_bytes;
}

}  // namespace

AllReduce::AllReduce(Ranks& ranks, DType dtype, int64_t count, int64_t slice_bytes)
    : ranks_(ranks), dtype_(dtype), count_(count) {
  const int n = ranks_.size();
  const int esize = dtype_bytes(dtype_);
  slices_ = slice_count(count_, n, esize, slice_bytes);
  steps_ = 2 * (n - 1);
  slice_elems_ = gpu100::ceil_div<int64_t>(gpu100::ceil_div<int64_t>(count_, n), slices_);
  sm_count_.assign(n, 1);
  staging_.resize(n);
  events_.assign(size_t(n) * slices_ * steps_, nullptr);
  try {
    for (int r = 0; r < n; ++r) {
      ranks_.on(r, [&] {
        CUDA_CHECK(cudaDeviceGetAttribute(&sm_count_[r], cudaDevAttrMultiProcessorCount, r));
        if (n == 1) return;  // one rank: the all-reduce is a copy, no ring
        // One slice, plus room to start it at any offset from a 16-byte boundary (reduce_pair).
        staging_[r] = gpu100::DeviceBuffer<char>(size_t(slice_elems_ * esize + kAlign));
        for (int k = 0; k < slices_; ++k) {
          for (int g = 0; g < steps_; ++g) {
            cudaEvent_t& e = events_[(size_t(r) * slices_ + k) * steps_ + g];
            CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
          }
        }
      });
    }
  } catch (...) {
    release();
    throw;
  }
}

AllReduce::~AllReduce() {
  release();
}

void AllReduce::release() noexcept {
  int previous = 0;
  cudaGetDevice(&previous);
  for (int r = 0; r < ranks_.size(); ++r) {
    cudaSetDevice(r);
    for (int k = 0; k < slices_; ++k) {
      for (int g = 0; g < steps_; ++g) {
        cudaEvent_t& e = events_[(size_t(r) * slices_ + k) * steps_ + g];
        if (e != nullptr) cudaEventDestroy(e);
        e = nullptr;
      }
    }
    if (size_t(r) < staging_.size()) staging_[r] = gpu100::DeviceBuffer<char>();
  }
  cudaSetDevice(previous);
}

std::string AllReduce::unavailable(Algorithm algorithm) const {
  if (algorithm != Algorithm::kRingP2p) return "";
  const int n = ranks_.size();
  for (int r = 0; r < n; ++r) {
    const int left = (r + n - 1) % n;  // rank r's kernels read rank left's memory
    if (!ranks_.peer_access(r, left)) {
      return fmt::format("no peer access between GPU {} and {}", r, left);
    }
  }
  return "";
}

void AllReduce::run(Algorithm algorithm, const std::vector<const void*>& in,
                    const std::vector<void*>& out) {
  const int n = ranks_.size();
  if (int(in.size()) != n || int(out.size()) != n) {
    throw std::invalid_argument(
        fmt::format("AllReduce::run: {} ranks need {} inputs and outputs", n, n));
  }
  const std::string why = unavailable(algorithm);
  if (!why.empty()) throw std::logic_error("AllReduce::run: " + why);
  if (algorithm == Algorithm::kNccl) {
    nccl(in, out);
  } else if (n == 1) {  // the sum over one rank is its input
    ranks_.on(0, [&] {
      CUDA_CHECK(cudaMemcpyAsync(out[0], in[0], size_t(count_) * dtype_bytes(dtype_),
                                 cudaMemcpyDeviceToDevice, ranks_.stream(0)));
    });
  } else {
    ring(algorithm == Algorithm::kRingP2p, in, out);
  }
}

void AllReduce::nccl(const std::vector<const void*>& in, const std::vector<void*>& out) {
  const ncclDataType_t type = dtype_ == DType::kFp32 ? ncclFloat32 : ncclBfloat16;
  // One thread drives every rank: each rank's call only enqueues its part, and ncclGroupEnd
  // launches them together (without the group, rank 0's call would wait for the others forever).
  ranks_.group([&] {
    for (int r = 0; r < ranks_.size(); ++r) {
      NCCL_CHECK(ncclAllReduce(in[r], out[r], size_t(count_), type, ncclSum, ranks_.comm(r),
                               ranks_.stream(r)));
    }
  });
}

// The ring (see the top of this file). Operations are issued slice by slice, step by step, rank
// by rank: a step's events have been recorded, by both neighbours, before any rank's next step
// waits for them (a wait refers to the last record issued before it, so the events are reused
// by every slice's own steps and by every call).
// ring_copy_reduce (peer_reads false): a reduce-scatter step is two operations, a peer copy of the
// neighbour's slice into staging (the copy engine), then reduce_pair on local memory only.
// ring_p2p (peer_reads true): what changed is that reduce_pair reads the neighbour's slice itself,
// across the link. Why it is faster: the slice is no longer written to staging and read back (two
// passes over local memory gone), and each step is one operation instead of two, so one launch and
// one dependency less per slice and step.
void AllReduce::ring(bool peer_reads, const std::vector<const void*>& in,
                     const std::vector<void*>& out) {
  const int n = ranks_.size();
  const int esize = dtype_bytes(dtype_);
  DeviceRestore restore;
  for (int k = 0; k < slices_; ++k) {
    for (int g = 0; g < steps_; ++g) {
      const bool reducing = g < n - 1;  // reduce-scatter step g, else all-gather step g - (n - 1)
      for (int r = 0; r < n; ++r) {
        const int left = (r + n - 1) % n, right = (r + 1) % n;
        const cudaStream_t stream = ranks_.stream(r);
        CUDA_CHECK(cudaSetDevice(r));
        if (g > 0) {
          CUDA_CHECK(cudaStreamWaitEvent(stream, event(left, k, g - 1), 0));  // the data
          if (right != left) {
            CUDA_CHECK(cudaStreamWaitEvent(stream, event(right, k, g - 1), 0));  // its reader
          }
        } else {
          // The first step of a call overwrites what the right neighbour read until the last step
          // of the previous call: wait for that (on the first call, an event never recorded: no
          // wait at all).
          CUDA_CHECK(cudaStreamWaitEvent(stream, event(right, k, steps_ - 1), 0));
        }
        const int chunk =
            reducing ? ring_reduce_chunk(r, g, n) : ring_gather_chunk(r, g - (n - 1), n);
        const std::pair<int64_t, int64_t> range = slice_range(count_, n, slices_, chunk, k);
        const int64_t first = range.first, length = range.second - range.first;
        if (length > 0 && reducing) {
          // Step 0 adds the neighbour's input; later steps its output, reduced at step g - 1.
          const void* theirs =
              at(g == 0 ? in[left] : static_cast<const void*>(out[left]), first, esize);
          const void* mine = at(in[r], first, esize);
          void* dst = at(out[r], first, esize);
          if (!peer_reads) {
            // ring_copy_reduce: the copy engine brings the neighbour's slice here first, at the
            // same offset from a 16-byte boundary as `dst`, so the kernel can use 16-byte loads.
            char* staged = staging_[r].data() + (first * esize) % kAlign;
            CUDA_CHECK(
                cudaMemcpyPeerAsync(staged, r, theirs, left, size_t(length) * esize, stream));
            theirs = staged;
          }
          reduce_slice(dtype_, dst, mine, theirs, length, sm_count_[r], stream);
        } else if (length > 0) {
          // All-gather: the finished slice, copied from the left neighbour's output.
          CUDA_CHECK(cudaMemcpyPeerAsync(at(out[r], first, esize), r, at(out[left], first, esize),
                                         left, size_t(length) * esize, stream));
        }
        CUDA_CHECK(cudaEventRecord(event(r, k, g), stream));
      }
    }
  }
}

void fill_input(void* data, DType dtype, int64_t count, uint64_t seed, cudaStream_t stream) {
  if (dtype == DType::kFp32) {
    gpu100::fill_uniform_device(static_cast<float*>(data), size_t(count), seed, stream);
  } else {
    gpu100::fill_uniform_device(static_cast<__nv_bfloat16*>(data), size_t(count), seed, stream);
  }
}

std::vector<float> download_floats(const void* data, DType dtype, int64_t count) {
  std::vector<float> out(static_cast<size_t>(count));
  if (dtype == DType::kFp32) {
    CUDA_CHECK(cudaMemcpy(out.data(), data, out.size() * sizeof(float), cudaMemcpyDeviceToHost));
    return out;
  }
  std::vector<__nv_bfloat16> raw(static_cast<size_t>(count));
  CUDA_CHECK(
      cudaMemcpy(raw.data(), data, raw.size() * sizeof(__nv_bfloat16), cudaMemcpyDeviceToHost));
  for (size_t i = 0; i < raw.size(); ++i) out[i] = __bfloat162float(raw[i]);
  return out;
}

SumReference::SumReference(DType dtype, int ranks, int64_t count)
    : dtype_(dtype), ranks_(ranks), sum_(size_t(count), 0.0), abs_sum_(size_t(count), 0.0) {}

void SumReference::add(const std::vector<float>& input) {
  if (input.size() != sum_.size() || added_ >= ranks_) {
    throw std::logic_error("SumReference::add: one input of the reference's count per rank");
  }
  for (size_t i = 0; i < input.size(); ++i) {
    sum_[i] += input[i];
    abs_sum_[i] += std::fabs(double(input[i]));
  }
  ++added_;
}

double SumReference::allowance_factor() const {
  const double u = dtype_ == DType::kFp32 ? std::ldexp(1.0, -24) : std::ldexp(1.0, -8);
  return (ranks_ - 1) * u * std::pow(1.0 + u, ranks_ - 1);
}

gpu100::CompareResult SumReference::check(const std::vector<float>& output) const {
  if (added_ != ranks_) throw std::logic_error("SumReference::check: not every rank's input added");
  gpu100::CompareResult r;
  r.count = sum_.size();
  if (output.size() != sum_.size()) {  // a length mismatch fails as compare() reports it
    r.ok = false;
    r.num_bad = 1;
    r.first_bad = int64_t(std::min(output.size(), sum_.size()));
    r.max_abs = r.max_rel = r.rel_l2 = r.err_over_tol = std::numeric_limits<double>::infinity();
    return r;
  }
  const double factor = allowance_factor();
  double err2 = 0, ref2 = 0;
  for (size_t i = 0; i < sum_.size(); ++i) {
    const double ref = sum_[i], got = output[i];
    gpu100::record(r, i, ref, got, factor * abs_sum_[i]);  // a NaN fails: its error is infinite
    if (std::isfinite(got)) err2 += (got - ref) * (got - ref);
    ref2 += ref * ref;
  }
  const double inf = std::numeric_limits<double>::infinity();
  r.rel_l2 = r.max_abs == inf ? inf : (ref2 > 0 ? std::sqrt(err2 / ref2) : std::sqrt(err2));
  return r;
}

double measure_p2p_ceiling_gbps(Ranks& ranks, int64_t bytes, int iters) {
  const int n = ranks.size();
  if (n < 2) throw std::invalid_argument("measure_p2p_ceiling_gbps: needs 2 or more ranks");
  std::vector<gpu100::DeviceBuffer<char>> src(n), dst(n);
  for (int r = 0; r < n; ++r) {
    ranks.on(r, [&] {
      src[r] = gpu100::DeviceBuffer<char>(size_t(bytes));
      dst[r] = gpu100::DeviceBuffer<char>(size_t(bytes));
      CUDA_CHECK(cudaMemsetAsync(src[r].data(), 0x3C, size_t(bytes), ranks.stream(r)));
    });
  }
  ranks.wait("the P2P ceiling's buffers");
  // Every link at once, each in one direction, as in one step of the ring: rank r + 1 pulls
  // from rank r.
  const gpu100::Timing t = ranks.time(
      [&] {
        for (int r = 0; r < n; ++r) {
          const int to = (r + 1) % n;
          ranks.on(to, [&] {
            CUDA_CHECK(cudaMemcpyPeerAsync(dst[to].data(), to, src[r].data(), r, size_t(bytes),
                                           ranks.stream(to)));
          });
        }
      },
      1, std::max(iters, 1));
  for (int r = 0; r < n; ++r) {
    ranks.on(r, [&] {
      src[r] = gpu100::DeviceBuffer<char>();
      dst[r] = gpu100::DeviceBuffer<char>();
    });
  }
  return algorithm_gbps(double(bytes), t.median_ms);
}

}  // namespace capstone::multi
