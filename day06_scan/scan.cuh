#pragma once
// day06_scan: reductions and prefix sums (PMPP chapters 10 and 11).
//
// The host API of the day, exported by the library target day06::scan. Every launcher takes
// device pointers, n >= 0 elements (n == 0 launches nothing; a negative n throws
// std::invalid_argument before any CUDA call) and a device workspace of at least
// `workspace_bytes(n)` bytes, allocated once by the caller, outside any timed loop. Launchers
// check their launches (CUDA_CHECK_LAST) and do not synchronise.
//
// Element types: fp32 and int32 (every launcher is a template instantiated for those two only).
// int32 sums wrap modulo 2^32 on both sides; the tests choose values that never overflow.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "common/compare.hpp"

namespace day06 {

// The largest n of the day (2^30 elements, 4 GiB per fp32 array).
constexpr int64_t kMaxN = int64_t(1) << 30;

// ---- CPU references ----
// The sum of x[0, n): fp32 inputs are summed in double (the reference the GPU is compared with),
// int32 inputs in int64 and wrapped to int32, as the GPU's 32-bit adds wrap.
double reduce_cpu(const float* x, int64_t n);
int32_t reduce_cpu(const int32_t* x, int64_t n);

// Prefix sums: inclusive y[i] = x[0] + ... + x[i]; exclusive y[i] = x[0] + ... + x[i - 1] (y[0] =
// 0). fp32 accumulates in double and rounds each prefix once to float; int32 wraps like the GPU.
template <typename T>
void scan_cpu(const T* x, T* y, int64_t n, bool exclusive);

// ---- checks against the references ----
// fp32: element i passes when |got - ref| <= kFp32TolC * 2^-24 * (|x[0]| + ... + |x[i]|), with
// ref the double prefix (the README explains the constant). int32: exact.
constexpr double kFp32TolC = 32.0;
constexpr double kFp32Eps = 1.0 / (1 << 24);
gpu100::CompareResult check_scan(const std::vector<float>& x, const std::vector<float>& got,
                                 bool exclusive);
gpu100::CompareResult check_scan(const std::vector<int32_t>& x, const std::vector<int32_t>& got,
                                 bool exclusive);
gpu100::CompareResult check_reduce(const std::vector<float>& x, float got);
gpu100::CompareResult check_reduce(const std::vector<int32_t>& x, int32_t got);

// ---- reductions: out[0] = x[0] + ... + x[n - 1] ----
// r1..r7 are the steps of Harris's "Optimizing Parallel Reduction in CUDA"; each pass writes one
// partial sum per block and the same kernel is applied again to the partials until one value is
// left (no atomics: the order of the adds depends only on n and the GPU's SM count, so a run is
// reproducible, and int32 is exact in any order).
template <typename T>
using ReduceFn = void (*)(const T* x, T* out, int64_t n, void* workspace, size_t workspace_bytes,
                          cudaStream_t stream);
template <typename T>
void reduce_r1_interleaved_divergent(const T*, T*, int64_t, void*, size_t, cudaStream_t);
template <typename T>
void reduce_r2_interleaved_strided(const T*, T*, int64_t, void*, size_t, cudaStream_t);
template <typename T>
void reduce_r3_sequential(const T*, T*, int64_t, void*, size_t, cudaStream_t);
template <typename T>
void reduce_r4_add_during_load(const T*, T*, int64_t, void*, size_t, cudaStream_t);
template <typename T>
void reduce_r5_warp_shuffle(const T*, T*, int64_t, void*, size_t, cudaStream_t);
template <typename T>
void reduce_r6_grid_stride(const T*, T*, int64_t, void*, size_t, cudaStream_t);
template <typename T>
void reduce_r7_vectorized(const T*, T*, int64_t, void*, size_t, cudaStream_t);
template <typename T>
void reduce_cub(const T*, T*, int64_t, void*, size_t, cudaStream_t);
size_t reduce_workspace_bytes(int64_t n);      // r1..r7
size_t reduce_cub_workspace_bytes(int64_t n);  // CUB's temp storage (fp32 and int32)

// ---- scans: y = inclusive (or exclusive) prefix sum of x ----
// y may be x itself (in place). v1..v3 are single-block scans: n above their maximum throws
// std::invalid_argument.
template <typename T>
using ScanFn = void (*)(const T* x, T* y, int64_t n, bool exclusive, void* workspace,
                        size_t workspace_bytes, cudaStream_t stream);
constexpr int64_t kV1MaxN = 1024;  // one element per thread, 1024 threads
constexpr int64_t kV2MaxN = 2048;  // two elements per thread, 1024 threads
constexpr int64_t kV3MaxN = 4096;  // four elements per thread, 1024 threads
template <typename T>
void scan_v1_kogge_stone(const T*, T*, int64_t, bool, void*, size_t, cudaStream_t);
template <typename T>
void scan_v2_brent_kung(const T*, T*, int64_t, bool, void*, size_t, cudaStream_t);
template <typename T>
void scan_v3_warp_shuffle(const T*, T*, int64_t, bool, void*, size_t, cudaStream_t);
template <typename T>
void scan_v4_hierarchical(const T*, T*, int64_t, bool, void*, size_t, cudaStream_t);
template <typename T>
void scan_v5_reduce_then_scan(const T*, T*, int64_t, bool, void*, size_t, cudaStream_t);
template <typename T>
void scan_v6_decoupled_lookback(const T*, T*, int64_t, bool, void*, size_t, cudaStream_t);
// v6 picks its tile size from n (big tiles for large n); the tests force each one at small n, so
// that the sanitizers (which keep n small) also run the big tiles' bulk copies.
enum class V6Tiles { kByN, kSmall, kBig };
// "" where the build runs sm_90 code; otherwise the note that v6 runs its register tiles only
// (below sm_90 there is no bulk copy to fill the big tiles' shared-memory part).
std::string scan_v6_build_note();
template <typename T>
void scan_v6_tiles(const T*, T*, int64_t, bool, V6Tiles, void*, size_t, cudaStream_t);
template <typename T>
void scan_cub(const T*, T*, int64_t, bool, void*, size_t, cudaStream_t);
size_t scan_no_workspace_bytes(int64_t n);  // v1..v3: 0
size_t scan_v4_workspace_bytes(int64_t n);
size_t scan_v5_workspace_bytes(int64_t n);
size_t scan_v6_workspace_bytes(int64_t n);
size_t scan_cub_workspace_bytes(int64_t n);  // inclusive and exclusive, fp32 and int32

// ---- the registries: drive the binary's rows, the tests and the README tables ----
struct ReduceVariant {
  const char* name;
  const char* description;
  ReduceFn<float> fp32;
  ReduceFn<int32_t> int32;
  size_t (*workspace_bytes)(int64_t n);
  bool is_library;
  const char* tags = "";  // "sweep": timed by --sweep (gpu100::has_tag)
};
struct ScanVariant {
  const char* name;
  const char* description;
  ScanFn<float> fp32;
  ScanFn<int32_t> int32;
  size_t (*workspace_bytes)(int64_t n);
  int64_t max_n;  // kMaxN, or the single-block limit
  bool is_library;
  // The row's note about the path this build takes ("" when none): v6 names its fallback.
  std::string (*build_note)() = nullptr;
  const char* tags = "";  // "sweep": timed by --sweep (gpu100::has_tag)
};
const std::vector<ReduceVariant>& reduce_variants();  // the day's own, then the learner's
// Adds a learner's reduction (tagged "mine") from its file in mine/ (common/learner.hpp).
void add_learner_reduction(const ReduceVariant& v);
const std::vector<ScanVariant>& scan_variants();
const ReduceVariant* find_reduce_variant(const std::string& name);  // nullptr when unknown
const ScanVariant* find_scan_variant(const std::string& name);      // nullptr when unknown

// The launcher of one element type, from a registry entry.
template <typename T>
ReduceFn<T> launcher(const ReduceVariant& v) {
  if constexpr (std::is_same_v<T, float>) {
    return v.fp32;
  } else {
    return v.int32;
  }
}
template <typename T>
ScanFn<T> launcher(const ScanVariant& v) {
  if constexpr (std::is_same_v<T, float>) {
    return v.fp32;
  } else {
    return v.int32;
  }
}

template <typename T>
constexpr const char* precision_name() {
  return std::is_same_v<T, float> ? "fp32" : "int32";
}

}  // namespace day06
