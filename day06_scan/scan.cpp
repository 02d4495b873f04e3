// day06_scan: the CPU references, the checks and the registries.
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "common/learner.hpp"
#include "scan.cuh"

namespace day06 {

namespace {

void check_cpu_n(int64_t n, const char* who) {
  if (n < 0) throw std::invalid_argument(std::string(who) + ": n must be >= 0");
}

// int64 -> int32 modulo 2^32, as the GPU's 32-bit adds wrap.
int32_t wrap32(int64_t v) {
  return static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint64_t>(v)));
}

}  // namespace

double reduce_cpu(const float* x, int64_t n) {
  check_cpu_n(n, "reduce_cpu");
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += x[i];
  return sum;
}

int32_t reduce_cpu(const int32_t* x, int64_t n) {
  check_cpu_n(n, "reduce_cpu");
  int64_t sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += x[i];
  return wrap32(sum);
}

template <typename T>
void scan_cpu(const T* x, T* y, int64_t n, bool exclusive) {
  check_cpu_n(n, "scan_cpu");
  using Acc = std::conditional_t<std::is_same_v<T, float>, double, int64_t>;
  Acc sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    const Acc before = sum;
    sum += x[i];
    const Acc value = exclusive ? before : sum;
    if constexpr (std::is_same_v<T, float>) {
      y[i] = static_cast<float>(value);
    } else {
      y[i] = wrap32(value);
    }
  }
}
template void scan_cpu<float>(const float*, float*, int64_t, bool);
template void scan_cpu<int32_t>(const int32_t*, int32_t*, int64_t, bool);

gpu100::CompareResult check_scan(const std::vector<float>& x, const std::vector<float>& got,
                                 bool exclusive) {
  gpu100::CompareResult r;
  r.count = x.size();
  if (got.size() != x.size()) {
    r.ok = false;
    r.num_bad = 1;
    r.first_bad = 0;
    return r;
  }
  double sum = 0, abs_sum = 0;  // the double prefix, and the prefix of |x| that scales the bound
  for (size_t i = 0; i < x.size(); ++i) {
    if (exclusive) gpu100::record(r, i, sum, got[i], kFp32TolC * kFp32Eps * abs_sum);
    sum += x[i];
    abs_sum += std::fabs(static_cast<double>(x[i]));
    if (!exclusive) gpu100::record(r, i, sum, got[i], kFp32TolC * kFp32Eps * abs_sum);
  }
  return r;
}

gpu100::CompareResult check_scan(const std::vector<int32_t>& x, const std::vector<int32_t>& got,
                                 bool exclusive) {
  std::vector<int32_t> ref(x.size());
  scan_cpu(x.data(), ref.data(), static_cast<int64_t>(x.size()), exclusive);
  return gpu100::compare_exact(ref, got);
}

gpu100::CompareResult check_reduce(const std::vector<float>& x, float got) {
  gpu100::CompareResult r;
  r.count = 1;
  double abs_sum = 0;
  for (float v : x) abs_sum += std::fabs(static_cast<double>(v));
  gpu100::record(r, 0, reduce_cpu(x.data(), static_cast<int64_t>(x.size())), got,
                 kFp32TolC * kFp32Eps * abs_sum);
  return r;
}

gpu100::CompareResult check_reduce(const std::vector<int32_t>& x, int32_t got) {
  gpu100::CompareResult r;
  r.count = 1;
  gpu100::record(r, 0, reduce_cpu(x.data(), static_cast<int64_t>(x.size())), got, 0.0);
  return r;
}

size_t scan_no_workspace_bytes(int64_t) {
  return 0;
}

namespace {
struct LearnerTag;  // this registry's list of learner entries (common/learner.hpp)
}

void add_learner_reduction(const ReduceVariant& v) {
  gpu100::learner_entries<ReduceVariant, LearnerTag>().push_back(v);
}

const std::vector<ReduceVariant>& reduce_variants() {
  static const std::vector<ReduceVariant> kVariants = gpu100::with_learner<ReduceVariant>(
      {
          {"r1_interleaved_divergent", "shared tree, stride 1, 2, 4..., `tid % (2s) == 0` diverges",
           reduce_r1_interleaved_divergent<float>, reduce_r1_interleaved_divergent<int32_t>,
           reduce_workspace_bytes, false},
          {"r2_interleaved_strided",
           "same tree, thread t works on 2st: no divergence, bank conflicts",
           reduce_r2_interleaved_strided<float>, reduce_r2_interleaved_strided<int32_t>,
           reduce_workspace_bytes, false},
          {"r3_sequential", "stride 128, 64, ..., 1: thread t adds t + s, no conflicts",
           reduce_r3_sequential<float>, reduce_r3_sequential<int32_t>, reduce_workspace_bytes,
           false},
          {"r4_add_during_load", "512 elements per block, the first add while loading",
           reduce_r4_add_during_load<float>, reduce_r4_add_during_load<int32_t>,
           reduce_workspace_bytes, false},
          {"r5_warp_shuffle", "r4 with the last 64 values summed by __shfl_down_sync",
           reduce_r5_warp_shuffle<float>, reduce_r5_warp_shuffle<int32_t>, reduce_workspace_bytes,
           false},
          {"r6_grid_stride", "SMs x 4 blocks, each thread sums a grid-stride loop, shuffle tree",
           reduce_r6_grid_stride<float>, reduce_r6_grid_stride<int32_t>, reduce_workspace_bytes,
           false},
          {"r7_vectorized", "r6 with 16-byte loads (float4 / int4), scalar tail",
           reduce_r7_vectorized<float>, reduce_r7_vectorized<int32_t>, reduce_workspace_bytes,
           false, "sweep"},
          {"cub_reduce", "library: cub::DeviceReduce::Sum", reduce_cub<float>, reduce_cub<int32_t>,
           reduce_cub_workspace_bytes, true, "sweep"},
      },
      gpu100::learner_entries<ReduceVariant, LearnerTag>());
  return kVariants;
}

const std::vector<ScanVariant>& scan_variants() {
  static const std::vector<ScanVariant> kVariants = {
      {"v1_kogge_stone", "one block, one element per thread, log2 n shared-memory steps",
       scan_v1_kogge_stone<float>, scan_v1_kogge_stone<int32_t>, scan_no_workspace_bytes, kV1MaxN,
       false},
      {"v2_brent_kung", "one block, Blelloch up/down sweeps, padded shared memory",
       scan_v2_brent_kung<float>, scan_v2_brent_kung<int32_t>, scan_no_workspace_bytes, kV2MaxN,
       false},
      {"v3_warp_shuffle", "one block, 4 elements per thread, __shfl_up_sync warp scans",
       scan_v3_warp_shuffle<float>, scan_v3_warp_shuffle<int32_t>, scan_no_workspace_bytes, kV3MaxN,
       false},
      {"v4_hierarchical", "any n: scan tiles, scan tile sums (recursively), add back (3 kernels)",
       scan_v4_hierarchical<float>, scan_v4_hierarchical<int32_t>, scan_v4_workspace_bytes, kMaxN,
       false},
      {"v5_reduce_then_scan", "any n: reduce tiles, scan the sums, scan tiles from their prefix",
       scan_v5_reduce_then_scan<float>, scan_v5_reduce_then_scan<int32_t>, scan_v5_workspace_bytes,
       kMaxN, false},
      {"v6_decoupled_lookback", "any n, one pass: dynamic tile ids, 64-bit status words, look-back",
       scan_v6_decoupled_lookback<float>, scan_v6_decoupled_lookback<int32_t>,
       scan_v6_workspace_bytes, kMaxN, false, scan_v6_build_note, "sweep"},
      {"cub_scan", "library: cub::DeviceScan::InclusiveSum / ExclusiveSum", scan_cub<float>,
       scan_cub<int32_t>, scan_cub_workspace_bytes, kMaxN, true, nullptr, "sweep"},
  };
  return kVariants;
}

const ReduceVariant* find_reduce_variant(const std::string& name) {
  for (const auto& v : reduce_variants()) {
    if (name == v.name) return &v;
  }
  return nullptr;
}

const ScanVariant* find_scan_variant(const std::string& name) {
  for (const auto& v : scan_variants()) {
    if (name == v.name) return &v;
  }
  return nullptr;
}

}  // namespace day06
