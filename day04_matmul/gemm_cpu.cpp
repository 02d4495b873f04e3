// day04: the CPU reference, argument checks, the registry and the call-by-name API.
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/learner.hpp"
#include "common/math.hpp"
#include "gemm.hpp"

namespace day04 {

void check_gemm_args(const GemmShape& s, const void* a, const void* b, const void* c) {
  if (s.m <= 0 || s.n <= 0 || s.k <= 0) {
    throw std::invalid_argument("gemm: M, N and K must be positive, got " + std::to_string(s.m) +
                                " x " + std::to_string(s.n) + " x " + std::to_string(s.k));
  }
  if (a == nullptr || b == nullptr || c == nullptr) {
    throw std::invalid_argument("gemm: null matrix pointer");
  }
}

// Cache-blocked i-k-j loops, accumulating a block of C rows in double: the innermost loop runs
// along contiguous rows of B and C, and a 64 x 256 block of B stays in the L2 cache while a
// 64-row panel of A passes over it.
void gemm_cpu(GemmShape s, double alpha, const float* a, const float* b, double beta, float* c) {
  check_gemm_args(s, a, b, c);
  constexpr int kRows = 64, kCols = 256, kDepth = 64;
  std::vector<double> acc(size_t(kRows) * kCols);
  for (int i0 = 0; i0 < s.m; i0 += kRows) {
    const int i1 = std::min(s.m, i0 + kRows);
    for (int j0 = 0; j0 < s.n; j0 += kCols) {
      const int j1 = std::min(s.n, j0 + kCols), w = j1 - j0;
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int p0 = 0; p0 < s.k; p0 += kDepth) {
        const int p1 = std::min(s.k, p0 + kDepth);
        for (int i = i0; i < i1; ++i) {
          double* acc_row = &acc[size_t(i - i0) * kCols];
          for (int p = p0; p < p1; ++p) {
            const double av = a[size_t(i) * s.k + p];
            const float* b_row = b + size_t(p) * s.n + j0;
            for (int j = 0; j < w; ++j) acc_row[j] += av * b_row[j];
          }
        }
      }
      for (int i = i0; i < i1; ++i) {
        for (int j = j0; j < j1; ++j) {
          float& out = c[size_t(i) * s.n + j];
          const double prior = beta != 0.0 ? beta * double(out) : 0.0;
          out = static_cast<float>(alpha * acc[size_t(i - i0) * kCols + (j - j0)] + prior);
        }
      }
    }
  }
}

gpu100::Tolerance gemm_tolerance(Precision p, int k, double alpha) {
  const double scale = std::max(1.0, std::fabs(alpha));
  const double u = 0x1p-24;    // the fp32 rounding unit
  if (p == Precision::kFp8) {  // derived in the README, "FP8"
    return {scale * (0x1p-9 * std::sqrt(double(k)) + 8 * u * k), 0x1p-8};
  }
  const double abs_tol = p == Precision::kTf32 ? 2e-3 * std::sqrt(double(k)) : 8 * u * k + 1e-6;
  return {scale * abs_tol, 1e-5};
}

double dot_cpu(GemmShape s, const float* a, const float* b, int row, int col) {
  double sum = 0;
  for (int p = 0; p < s.k; ++p) sum += double(a[size_t(row) * s.k + p]) * b[size_t(p) * s.n + col];
  return sum;
}

// ---- FP8 ----------------------------------------------------------------------------------------
std::string gemm_fp8_refusal(GemmShape s) {
  if (s.k > 0 && s.k % 16 != 0) {
    return "K = " + std::to_string(s.k) +
           " is not a multiple of 16: FP8 rows of A and B^T must be whole 16-byte units (TMA, "
           "cuBLASLt); pad K with zeros to " +
           std::to_string(gpu100::round_up(s.k, 16));
  }
  return "";
}

void check_gemm_fp8_args(GemmShape s, const void* a, const void* b_t, const float* scale_a,
                         const float* scale_b, const void* c) {
  check_gemm_args(s, a, b_t, c);
  if (scale_a == nullptr || scale_b == nullptr) {
    throw std::invalid_argument("gemm fp8: null scale pointer");
  }
  if (const std::string why = gemm_fp8_refusal(s); !why.empty()) {
    throw std::invalid_argument("gemm fp8: " + why);
  }
  if (!gpu100::aligned16(a) || !gpu100::aligned16(b_t)) {
    throw std::invalid_argument("gemm fp8: A and B^T must start on a 16-byte boundary");
  }
  if (!gpu100::aligned16(scale_a) || !gpu100::aligned16(scale_b)) {
    throw std::invalid_argument("gemm fp8: scale_a and scale_b must start on a 16-byte boundary");
  }
}

Fp8Tensor quantize_e4m3(const std::vector<float>& x) {
  constexpr float kE4m3Max = 448.f;
  float absmax = 0.f;
  for (float v : x) absmax = std::max(absmax, std::fabs(v));
  Fp8Tensor t;
  t.scale = absmax > 0.f ? absmax / kE4m3Max : 1.f;
  t.q.resize(x.size());
  const __nv_fp8_e4m3 tiny_pos(0x1p-9f), tiny_neg(-0x1p-9f);  // e4m3's smallest subnormals
  for (size_t i = 0; i < x.size(); ++i) {
    t.q[i] = __nv_fp8_e4m3(x[i] / t.scale);  // round to nearest even, saturating
    if (float(t.q[i]) == 0.f && x[i] != 0.f) t.q[i] = x[i] > 0.f ? tiny_pos : tiny_neg;
  }
  return t;
}

std::vector<float> e4m3_to_float(const std::vector<__nv_fp8_e4m3>& q) {
  std::vector<float> out(q.size());
  for (size_t i = 0; i < q.size(); ++i) out[i] = float(q[i]);
  return out;
}

std::vector<float> transpose_host(const std::vector<float>& x, int rows, int cols) {
  std::vector<float> out(x.size());
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c) out[size_t(c) * rows + r] = x[size_t(r) * cols + c];
  }
  return out;
}

// Both operands are K-major, so each entry is a dot product of two contiguous rows of e4m3
// values (exact as doubles; products and sums of them exact in double up to K ~ 2^25).
void gemm_fp8_cpu(GemmShape s, const Fp8Tensor& a, const Fp8Tensor& b_t, float* c) {
  check_gemm_args(s, a.q.data(), b_t.q.data(), c);
  const std::vector<float> af = e4m3_to_float(a.q), bf = e4m3_to_float(b_t.q);
  const double scale = double(a.scale) * double(b_t.scale);
  for (int i = 0; i < s.m; ++i) {
    const float* ar = &af[size_t(i) * s.k];
    for (int j = 0; j < s.n; ++j) {
      const float* br = &bf[size_t(j) * s.k];
      double sum = 0;
      for (int p = 0; p < s.k; ++p) sum += double(ar[p]) * br[p];
      c[size_t(i) * s.n + j] = static_cast<float>(scale * sum);
    }
  }
}

double dot_fp8_cpu(GemmShape s, const Fp8Tensor& a, const Fp8Tensor& b_t, int row, int col) {
  double sum = 0;
  for (int p = 0; p < s.k; ++p) {
    sum += double(float(a.q[size_t(row) * s.k + p])) * double(float(b_t.q[size_t(col) * s.k + p]));
  }
  return double(a.scale) * double(b_t.scale) * sum;
}

namespace {
struct LearnerTag;  // this registry's list of learner entries (common/learner.hpp)
}

void add_learner_gemm(const GemmVariant& v) {
  gpu100::learner_entries<GemmVariant, LearnerTag>().push_back(v);
}

const std::vector<GemmVariant>& gemm_variants() {
  using P = Precision;
  using A = gpu100::ArchNeed;
  static const std::vector<GemmVariant> kVariants = gpu100::with_learner<GemmVariant>(
      {
          {"v1_naive", "one thread per output, threadIdx.x along rows (uncoalesced)", P::kFp32,
           sgemm_v1_naive, nullptr, false, "cublas_sgemm"},
          {"v2_coalesced", "threadIdx.x along columns: coalesced B loads and C stores", P::kFp32,
           sgemm_v2_coalesced, nullptr, false, "cublas_sgemm"},
          {"v3_smem_tiled", "32 x 32 tiles of A and B staged in shared memory", P::kFp32,
           sgemm_v3_smem_tiled, nullptr, false, "cublas_sgemm"},
          {"v4_1d_blocktile", "8 outputs per thread along a column (64 x 64 x 8 tiles)", P::kFp32,
           sgemm_v4_1d_blocktile, nullptr, false, "cublas_sgemm"},
          {"v5_2d_blocktile", "8 x 8 outputs per thread (128 x 128 x 8 tiles)", P::kFp32,
           sgemm_v5_2d_blocktile, nullptr, false, "cublas_sgemm"},
          {"v6_vectorized", "float4 global and shared loads, A transposed in shared memory",
           P::kFp32, sgemm_v6_vectorized, nullptr, false, "cublas_sgemm"},
          {"v7_warptile", "warp tiles of 64 x 32, conflict-free shared reads, BK = 16", P::kFp32,
           sgemm_v7_warptile, nullptr, false, "cublas_sgemm"},
          {"v8_double_buffered", "two shared-memory stages, next slab prefetched to registers",
           P::kFp32, sgemm_v8_double_buffered, nullptr, false, "cublas_sgemm"},
          {"v8_cp_async",
           "v8 with cp.async into a 4-stage shared ring (no register staging); A transposed first "
           "(below sm_80: plain loads)",
           P::kFp32, sgemm_v8_cp_async, nullptr, false, "cublas_sgemm"},
          {"v8_autotuned", "v8 with the fastest of its tile configurations, chosen per (M, N, K)",
           P::kFp32, sgemm_v8_autotuned, nullptr, false, "cublas_sgemm", A::kAny,
           sgemm_autotune_note},
          {"v9_wmma_tf32", "tensor cores via WMMA, TF32 inputs, fp32 accumulation", P::kTf32,
           gemm_v9_wmma_tf32, nullptr, false, "cublas_tf32", A::kSm80},
          {"v9_wmma_bf16", "tensor cores via WMMA, BF16 inputs, fp32 accumulation", P::kBf16,
           nullptr, gemm_v9_wmma_bf16, false, "cublas_bf16", A::kSm80},
          {"v10_mma_tf32", "mma.sync m16n8k8 TF32 + ldmatrix + 3-stage cp.async pipeline", P::kTf32,
           gemm_v10_mma_tf32, nullptr, false, "cublas_tf32", A::kSm80},
          {"v10_mma_bf16", "mma.sync + ldmatrix + 3-stage cp.async pipeline, padded tiles",
           P::kBf16, nullptr, gemm_v10_mma_bf16, false, "cublas_bf16", A::kSm80},
          {"v11_wgmma_tf32", "Hopper wgmma m64n256k8 TF32 + TMA; B transposed first (K-major)",
           P::kTf32, gemm_v11_wgmma_tf32, nullptr, false, "cublas_tf32", A::kSm90a},
          {"v11_wgmma_bf16", "Hopper wgmma m64n256k16 from shared memory, TMA 4-stage pipeline",
           P::kBf16, nullptr, gemm_v11_wgmma_bf16, false, "cublas_bf16", A::kSm90a,
           wgmma_v10_fallback_note},
          {"v12_wgmma_ws_bf16",
           "v11 warp-specialised (TMA producer warpgroup, full/empty mbarriers) and persistent",
           P::kBf16, nullptr, gemm_v12_wgmma_ws_bf16, false, "cublas_bf16", A::kSm90a,
           wgmma_v10_fallback_note},
          {"v13_wgmma_cluster_bf16",
           "v12 on 2-CTA clusters: each B tile multicast by TMA to both CTAs (a third less L2 "
           "traffic)",
           P::kBf16, nullptr, gemm_v13_wgmma_cluster_bf16, false, "cublas_bf16", A::kSm90a,
           v13_row_note},
          {"v17_wgmma_grouped_bf16",
           "v13 with its tile pairs in grouped order: bands of 4 pair rows, each column by column, "
           "so the tiles in flight share rows of A and columns of B in L2",
           P::kBf16, nullptr, gemm_v17_wgmma_grouped_bf16, false, "cublas_bf16", A::kSm90a,
           v13_row_note},
          {"v21_wgmma_staged_bf16",
           "v17 with its outputs written through shared memory by the TMA (beta == 0): 4 passes of "
           "64 columns through a 16 KB swizzled staging tile per warpgroup",
           P::kBf16, nullptr, gemm_v21_wgmma_staged_bf16, false, "cublas_bf16", A::kSm90a,
           v13_row_note},
          {"v22_wgmma_splitk_bf16",
           "v21 with K split into slices when the tile pairs leave clusters idle, each slice's "
           "sums added into C (zeroed first) by the TMA's reducing copy",
           P::kBf16, nullptr, gemm_v22_wgmma_splitk_bf16, false, "cublas_bf16", A::kSm90a,
           v22_row_note},
          {"v24_wgmma_narrow_bf16",
           "v22 with 128 x 64 tiles where 128 x 256 tiles leave clusters idle: 4x the tiles, each "
           "CTA a whole K, B's one box multicast by halves",
           P::kBf16, nullptr, gemm_v24_wgmma_narrow_bf16, false, "cublas_bf16", A::kSm90a,
           v24_row_note},
          {"v25_wgmma_medium_bf16",
           "v24 with 128 x 128 tiles where the 128 x 256 pairs fill half the clusters or less: "
           "twice the tiles, each CTA a whole K, no slices to add",
           P::kBf16, nullptr, gemm_v25_wgmma_medium_bf16, false, "cublas_bf16", A::kSm90a,
           v25_row_note},
          {"v13_wgmma_cluster_tf32",
           "v13 in TF32: B transposed first (K-major), each CTA multicasting half of B^T's tile",
           P::kTf32, gemm_v13_wgmma_cluster_tf32, nullptr, false, "cublas_tf32", A::kSm90a},
          {"v17_wgmma_grouped_tf32", "v17 in TF32: v13's TF32 form with its tile pairs in bands",
           P::kTf32, gemm_v17_wgmma_grouped_tf32, nullptr, false, "cublas_tf32", A::kSm90a},
          {"v21_wgmma_staged_tf32",
           "v21 in TF32: v17's TF32 form with its outputs written by the TMA (beta == 0, N % 4 "
           "== 0)",
           P::kTf32, gemm_v21_wgmma_staged_tf32, nullptr, false, "cublas_tf32", A::kSm90a},
          {"v23_wgmma_rs_tf32",
           "v21 in TF32 without B's transpose: C^T = B^T A^T, B's fragments loaded into registers "
           "from its N-major tile",
           P::kTf32, gemm_v23_wgmma_rs_tf32, nullptr, false, "cublas_tf32", A::kSm90a,
           v23_row_note},
          {"v14_wgmma_fp8",
           "FP8 e4m3: wgmma m64n128k32, TMA 6-stage producer/consumer, fp32 promotion every 128 "
           "of k; B given as B^T (TN)",
           P::kFp8, nullptr, nullptr, false, "cublaslt_fp8", A::kSm90a, nullptr, "",
           gemm_v14_wgmma_fp8, gemm_fp8_refusal},
          {"v15_wgmma_fp8_overlap",
           "v14 with two wgmma accumulators: a k-tile's promotion runs while the next k-tile's "
           "products are on the tensor cores",
           P::kFp8, nullptr, nullptr, false, "cublaslt_fp8", A::kSm90a, nullptr, "",
           gemm_v15_wgmma_fp8_overlap, gemm_fp8_refusal},
          {"v16_wgmma_fp8_persistent",
           "v15 persistent: a block per SM loops over the tiles, the producer loading the next "
           "tile during the current one's last k-tiles and epilogue",
           P::kFp8, nullptr, nullptr, false, "cublaslt_fp8", A::kSm90a, nullptr, "",
           gemm_v16_wgmma_fp8_persistent, gemm_fp8_refusal},
          {"v18_wgmma_fp8_grouped",
           "v16 with its tiles in grouped order: bands of 8 tile rows, each column by column, so "
           "the "
           "tiles in flight share rows of A and columns of B^T in L2",
           P::kFp8, nullptr, nullptr, false, "cublaslt_fp8", A::kSm90a, nullptr, "",
           gemm_v18_wgmma_fp8_grouped, gemm_fp8_refusal},
          {"v19_wgmma_fp8_lean",
           "v18 with less bookkeeping in its main loop: shared-memory descriptors built once and "
           "advanced by adds, stage and phase as wrapping counters",
           P::kFp8, nullptr, nullptr, false, "cublaslt_fp8", A::kSm90a, nullptr, "",
           gemm_v19_wgmma_fp8_lean, gemm_fp8_refusal},
          {"v20_wgmma_fp8_epilogue",
           "v19 with its outputs written through shared memory by the TMA (stmatrix into a "
           "swizzled staging tile, one copy per 64 x 64 box) while the next tile starts",
           P::kFp8, nullptr, nullptr, false, "cublaslt_fp8", A::kSm90a, nullptr, "",
           gemm_v20_wgmma_fp8_epilogue, gemm_fp8_refusal},
          {"cublas_sgemm", "library: cublasSgemm, pedantic fp32 (no TF32)", P::kFp32, cublas_sgemm,
           nullptr, true, ""},
          {"cublas_tf32", "library: cublasGemmEx, CUBLAS_COMPUTE_32F_FAST_TF32", P::kTf32,
           cublas_gemm_tf32, nullptr, true, ""},
          {"cublas_bf16", "library: cublasGemmEx, BF16 inputs, fp32 compute and output", P::kBf16,
           nullptr, cublas_gemm_bf16, true, ""},
          {"cublaslt_fp8",
           "library: cublasLtMatmul, e4m3 A and B (TN), per-tensor scales, fp32 compute, bf16 out; "
           "fastest of the heuristic's algorithms",
           P::kFp8, nullptr, nullptr, true, "", A::kAny, cublaslt_fp8_note, "", cublaslt_gemm_fp8,
           cublaslt_fp8_refusal},
      },
      gpu100::learner_entries<GemmVariant, LearnerTag>());
  return kVariants;
}

const GemmVariant* find_gemm_variant(const std::string& name) {
  for (const auto& v : gemm_variants()) {
    if (name == v.name) return &v;
  }
  return nullptr;
}

void gemm(const std::string& variant, GemmShape s, float alpha, const float* a, const float* b,
          float beta, float* c, cudaStream_t stream) {
  const GemmVariant* v = find_gemm_variant(variant);
  if (v == nullptr || v->fp32 == nullptr) {
    throw std::invalid_argument("gemm: no fp32-input variant named '" + variant + "'");
  }
  v->fp32(s, alpha, a, b, beta, c, stream);
}

}  // namespace day04
