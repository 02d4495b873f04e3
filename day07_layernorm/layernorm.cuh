#pragma once
// day07_layernorm: LayerNorm and RMSNorm over the last dimension, forward and backward.
//
// The host API of the day, exported by the library target day07::layernorm. x is rows x dim,
// row-major (dim fastest). Per row r:
//   LayerNorm  mean_r = sum_i x_ri / D,  var_r = sum_i (x_ri - mean_r)^2 / D (biased, as PyTorch),
//              rstd_r = 1 / sqrt(var_r + eps),  y_ri = (x_ri - mean_r) * rstd_r * gamma_i + beta_i
//   RMSNorm    rstd_r = 1 / sqrt(sum_i x_ri^2 / D + eps),  y_ri = x_ri * rstd_r * gamma_i
// mean and rstd are always fp32 (one per row) and are kept for the backward pass.
// LayerNorm backward, with xhat = (x - mean) * rstd and g = dy * gamma:
//   dx_ri = rstd_r * (g_ri - mean_i(g_r.) - xhat_ri * mean_i(g_r. * xhat_r.))
//   dgamma_i = sum_r dy_ri * xhat_ri,   dbeta_i = sum_r dy_ri          (fp32 for every T)
//
// Element types: T = float (every variant) or __nv_bfloat16 (v6, RMSNorm, backward), with fp32
// math; gamma and beta have the type of x. Every launcher takes device pointers, validates the
// sizes first (rows >= 1, 1 <= dim <= kMaxDim, rows * dim <= kMaxElements; std::invalid_argument
// before any CUDA call), checks its launches (CUDA_CHECK_LAST) and does not synchronise.
// Outputs must not overlap inputs.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "common/compare.hpp"
#include "common/half.hpp"
#include "common/precision.hpp"
#include "common/random.hpp"

namespace day07 {

using bf16 = __nv_bfloat16;

constexpr int64_t kMaxDim = 65536;
constexpr int64_t kMaxElements = int64_t(1) << 31;  // 8 GiB per fp32 array
constexpr float kDefaultEps = 1e-5f;

// Throws std::invalid_argument unless rows >= 1, 1 <= dim <= kMaxDim, rows * dim <= kMaxElements.
void validate_shape(int64_t rows, int64_t dim);

// ---- inputs, the binary's and the tests' ----
// x and dy in [-1, 1] (x shifted by x_offset: the large-mean test), gamma in [0.5, 1.5], beta in
// [-1, 1], as floats; for bf16 the values rounded to bf16, so that the CPU reference sees what the
// GPU reads (T tags which). storage<T> gives them as the GPU stores them.
template <typename T>
struct Problem {
  int64_t rows = 0, dim = 0;
  std::vector<float> x, gamma, beta, dy;
};
template <typename T>
Problem<T> make_problem(int64_t rows, int64_t dim, uint64_t seed, double x_offset = 0.0) {
  Problem<T> p{rows,
               dim,
               gpu100::random_vector<float>(rows * dim, seed),
               gpu100::random_vector<float>(dim, seed + 1, 0.5, 1.5),
               gpu100::random_vector<float>(dim, seed + 2),
               gpu100::random_vector<float>(rows * dim, seed + 3)};
  for (auto& v : p.x) v = static_cast<float>(v + x_offset);
  if constexpr (!std::is_same_v<T, float>) {
    for (auto* v : {&p.x, &p.gamma, &p.beta, &p.dy}) *v = gpu100::round_trip<T>(*v);
  }
  return p;
}
template <typename T>
std::vector<T> storage(const std::vector<float>& v) {
  if constexpr (std::is_same_v<T, float>) {
    return v;
  } else {
    return gpu100::convert_from_float<T>(v);
  }
}

// ---- CPU references (double; inputs given as the float values the GPU reads) ----
void layernorm_forward_cpu(const float* x, const float* gamma, const float* beta, double* y,
                           double* mean, double* rstd, int64_t rows, int64_t dim, double eps);
void rmsnorm_cpu(const float* x, const float* gamma, double* y, double* rstd, int64_t rows,
                 int64_t dim, double eps);
// The backward from the exact (double) statistics of x. dgamma_abs / dbeta_abs (may be null)
// receive sum_r |dy * xhat| and sum_r |dy|, the scale of each column's rounding error.
void layernorm_backward_cpu(const float* dy, const float* x, const float* gamma, double eps,
                            int64_t rows, int64_t dim, double* dx, double* dgamma, double* dbeta,
                            double* dgamma_abs, double* dbeta_abs);

// The variance of one row in fp32, two ways, to show why the naive formula fails (CPU tests):
// naive  E[x^2] - E[x]^2 with fp32 running sums (clamped at 0);  Welford's update in fp32.
float variance_naive_fp32(const float* x, int64_t n);
float variance_welford_fp32(const float* x, int64_t n);

// ---- tolerances (the README explains them) ----
using gpu100::Tolerance;                         // common/precision.hpp: abs_tol + rel_tol * |ref|
constexpr Tolerance kFp32Y = {1e-5, 1e-4};       // y and dx, fp32
constexpr Tolerance kBf16Y = {1e-4, 1.0 / 256};  // y and dx stored in bf16: 2^-8 relative
constexpr Tolerance kStats = {1e-6, 1e-4};       // mean and rstd (fp32 for every T)
constexpr double kParamGradTol = 1e-4;           // dgamma, dbeta: 1e-4 * sum_r |term| + 1e-6

// dgamma / dbeta: element i passes when |got - ref| <= kParamGradTol * abs_sum[i] + 1e-6.
gpu100::CompareResult check_param_grad(const std::vector<double>& ref,
                                       const std::vector<double>& abs_sum,
                                       const std::vector<float>& got);

// ---- LayerNorm forward: v1..v6 ----
template <typename T>
using LayerNormFn = void (*)(const T* x, const T* gamma, const T* beta, T* y, float* mean,
                             float* rstd, int64_t rows, int64_t dim, float eps,
                             cudaStream_t stream);
void layernorm_v1_thread_per_row(const float*, const float*, const float*, float*, float*, float*,
                                 int64_t, int64_t, float, cudaStream_t);
void layernorm_v2_block_tree(const float*, const float*, const float*, float*, float*, float*,
                             int64_t, int64_t, float, cudaStream_t);
void layernorm_v3_warp_shuffle(const float*, const float*, const float*, float*, float*, float*,
                               int64_t, int64_t, float, cudaStream_t);
void layernorm_v4_welford(const float*, const float*, const float*, float*, float*, float*, int64_t,
                          int64_t, float, cudaStream_t);
void layernorm_v5_registers(const float*, const float*, const float*, float*, float*, float*,
                            int64_t, int64_t, float, cudaStream_t);
void layernorm_v6_bf16(const bf16*, const bf16*, const bf16*, bf16*, float*, float*, int64_t,
                       int64_t, float, cudaStream_t);

// The strategy by D of the register-resident kernels (v5, v6, rmsnorm_rows): each thread holds
// kRegElems elements of the row, so a group of G threads holds rows of up to G * kRegElems:
//   D <= 1024: one warp per row (G = 32, four rows per 128-thread block, shuffles only);
//   D <= 4096: 128 threads per row (one row per block);  D <= 16384: 512 threads per row;
//   longer: a looped block of 512 per row that re-reads the row from L1/L2 (not in registers).
// The row is read with 16-byte vectors when D is a multiple of 16 / sizeof(T) and every pointer is
// 16-byte aligned, with scalar accesses otherwise (same registers, same groups).
constexpr int kRegElems = 32;
constexpr int register_group_size(int64_t dim) {
  return dim <= 32 * kRegElems    ? 32
         : dim <= 128 * kRegElems ? 128
         : dim <= 512 * kRegElems ? 512
                                  : 0;
}
// The backward holds x and dy of the row and its dgamma / dbeta partial sums: kBwdElems elements
// per thread, groups of 32 (D <= 512), 64 (<= 1024), 256 (<= 4096) or 512 (<= 8192); longer rows
// take a looped path (dx by a block per row; dgamma / dbeta by a column kernel).
constexpr int kBwdElems = 16;
constexpr int backward_group_size(int64_t dim) {
  return dim <= 32 * kBwdElems    ? 32
         : dim <= 64 * kBwdElems  ? 64
         : dim <= 256 * kBwdElems ? 256
         : dim <= 512 * kBwdElems ? 512
                                  : 0;
}
// The most partial rows of dgamma / dbeta (one per block of the backward's first kernel).
constexpr int64_t kBwdMaxParts = 1024;

// How v5 / v6 / rmsnorm_rows handle a row of `dim` elements of `elem_bytes` bytes whose pointers
// are (or are not) 16-byte aligned: "warp per row, 16-byte vectors", "block of 512 per row,
// scalar", "looped block per row (too long for registers)". Host-only, for the binary and README.
std::string register_strategy(int64_t dim, int elem_bytes, bool aligned16);

// ---- RMSNorm forward ----
// Matrix form: rows x dim, one rstd per row (v5's kernel without the mean).
template <typename T>
void rmsnorm_rows(const T* x, const T* gamma, T* y, float* rstd, int64_t rows, int64_t dim,
                  float eps, cudaStream_t stream);
// Vector form: one row of n elements (n up to kMaxElements), spread over many blocks: pass 1
// writes one partial sum of squares per block into the workspace, pass 2 has every block sum the
// partials, writes rstd (one float) and scales its slice. Reads x twice (the second read hits L2
// when x fits there). Instantiated for float only.
template <typename T>
void rmsnorm_vector(const T* x, const T* gamma, T* y, float* rstd, int64_t n, float eps,
                    void* workspace, size_t workspace_bytes, cudaStream_t stream);
size_t rmsnorm_vector_workspace_bytes();

// ---- LayerNorm backward ----
// dx (type T), dgamma and dbeta (fp32). The workspace holds the per-block partial sums of dgamma
// and dbeta (no atomics); a second kernel adds them up column by column.
template <typename T>
void layernorm_backward(const T* dy, const T* x, const T* gamma, const float* mean,
                        const float* rstd, T* dx, float* dgamma, float* dbeta, int64_t rows,
                        int64_t dim, void* workspace, size_t workspace_bytes, cudaStream_t stream);
size_t layernorm_backward_workspace_bytes(int64_t rows, int64_t dim);

// ---- the registry: drives the binary's rows, the tests and the README table ----
enum class Op { kLayerNorm, kRmsNormRows, kRmsNormVector, kBackward };
struct Variant {
  const char* name;
  const char* description;
  Op op;
  bool naive_variance;  // uses E[x^2] - E[x]^2 (fails the large-mean test by design)
  bool has_fp32, has_bf16;
  // LayerNorm forward launchers (nullptr for the other ops and the precisions a variant lacks;
  // the other ops call the templates above).
  LayerNormFn<float> ln_fp32;
  LayerNormFn<bf16> ln_bf16;
  bool register_tiles = false;  // v5's row-in-registers kernel: the row's note names its strategy
  const char* tags = "";        // "mine": a learner's variant (common/learner.hpp)
};
const std::vector<Variant>& variants();  // the day's own, then the learner's (mine/*.cu)
// Adds a learner's variant (tagged "mine") from its file in mine/ (common/learner.hpp).
void add_learner_variant(const Variant& v);
const Variant* find_variant(const std::string& name);  // nullptr when unknown

}  // namespace day07
