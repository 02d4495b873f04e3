#pragma once
// day04::gemm: the host API of day 4's matrix multiplication, for this day's binary and tests and
// for the days that build on it (day05 attention, day08 convolution, the capstone).
//
// Every GEMM here is row-major: A is M x K, B is K x N, C is M x N, all contiguous, and computes
//   C = alpha * A * B + beta * C.
// When beta == 0, C is never read (it may hold NaN). Any M, N, K >= 1 works: partial tiles are
// predicated, never assumed away. Calls are asynchronous on `stream` and check their launches.
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/arch.hpp"
#include "common/precision.hpp"

namespace day04 {

struct GemmShape {
  int m = 0, n = 0, k = 0;
};

// Throws std::invalid_argument for a non-positive dimension or a null pointer.
void check_gemm_args(const GemmShape& s, const void* a, const void* b, const void* c);
// True when the 16-byte-load paths apply: K % 4 == 0, N % 4 == 0 and 16-byte aligned pointers.
bool vector_path_ok(GemmShape s, const void* a, const void* b, const void* c);

// ---- fp32 (CUDA cores) -----------------------------------------------------------------------
using SgemmFn = void (*)(GemmShape, float alpha, const float* a, const float* b, float beta,
                         float* c, cudaStream_t stream);

void sgemm_v1_naive(GemmShape, float, const float*, const float*, float, float*, cudaStream_t);
void sgemm_v2_coalesced(GemmShape, float, const float*, const float*, float, float*, cudaStream_t);
void sgemm_v3_smem_tiled(GemmShape, float, const float*, const float*, float, float*, cudaStream_t);
void sgemm_v4_1d_blocktile(GemmShape, float, const float*, const float*, float, float*,
                           cudaStream_t);
void sgemm_v5_2d_blocktile(GemmShape, float, const float*, const float*, float, float*,
                           cudaStream_t);
void sgemm_v6_vectorized(GemmShape, float, const float*, const float*, float, float*, cudaStream_t);
void sgemm_v7_warptile(GemmShape, float, const float*, const float*, float, float*, cudaStream_t);
void sgemm_v8_double_buffered(GemmShape, float, const float*, const float*, float, float*,
                              cudaStream_t);

// v8's second form: cp.async straight into a ring of shared-memory stages, no register staging
// (A transposed first, timed with it).
void sgemm_v8_cp_async(GemmShape, float, const float*, const float*, float, float*, cudaStream_t);
// The same kernel (the 128 x 128 x 8 configuration) over a batch of independent GEMMs of one
// shape whose A is given transposed, as the kernel reads it: C_i = A_i B_i for i < batch.count,
// A_i^T (K x ldat, row-major, ldat >= M), B_i (K x N) and C_i (M x N) row-major, matrix i at
// at + i * batch.stride_at (and likewise for b and c). Needs ldat, N and the strides multiples of
// 4 and 16-byte aligned matrices (std::invalid_argument otherwise); the columns of A^T past M are
// read, so they must be finite. Nothing is transposed or allocated: day08's v16 runs its 36
// Winograd point GEMMs as one such launch.
struct SgemmBatch {
  int count = 1;
  int64_t stride_at = 0, stride_b = 0, stride_c = 0;  // floats between consecutive matrices
};
void sgemm_v8_batched_at(GemmShape s, int ldat, const float* at, const float* b, float* c,
                         const SgemmBatch& batch, cudaStream_t stream);
// The autotuned v8: the first call for a given (M, N, K) times every configuration in
// sgemm_v8_configs() (both forms of v8) once and remembers the fastest; later calls use it.
void sgemm_v8_autotuned(GemmShape, float, const float*, const float*, float, float*, cudaStream_t);
struct TileConfig {
  const char* name;  // "128x128x8 w64x32 256t"
  SgemmFn launch;
};
const std::vector<TileConfig>& sgemm_v8_configs();
const std::vector<TileConfig>& sgemm_v8_cp_async_configs();  // included in the above
// The configuration the autotuner chose for this shape ("" if it has not run for it).
std::string sgemm_autotuned_choice(GemmShape s);
// Every configuration's time from that one tuning run: "name 1.234 ms; ..." ("" before it ran).
std::string sgemm_autotune_report(GemmShape s);
// Both, as v8_autotuned's row note: "autotuner chose <choice> (tuning run: <report>)".
std::string sgemm_autotune_note(GemmShape s);

// ---- tensor cores ------------------------------------------------------------------------------
// TF32: fp32 inputs, rounded to TF32 (10-bit mantissa) inside, fp32 accumulation.
void gemm_v9_wmma_tf32(GemmShape, float, const float*, const float*, float, float*, cudaStream_t);
void gemm_v10_mma_tf32(GemmShape, float, const float*, const float*, float, float*, cudaStream_t);
// BF16 inputs, fp32 accumulation and output.
using GemmBf16Fn = void (*)(GemmShape, float alpha, const __nv_bfloat16* a, const __nv_bfloat16* b,
                            float beta, float* c, cudaStream_t stream);
void gemm_v9_wmma_bf16(GemmShape, float, const __nv_bfloat16*, const __nv_bfloat16*, float, float*,
                       cudaStream_t);
void gemm_v10_mma_bf16(GemmShape, float, const __nv_bfloat16*, const __nv_bfloat16*, float, float*,
                       cudaStream_t);
// v9 and v10 need code built for sm_80 or newer, v11-v13 for sm_90a (wgmma, TMA); in a build that
// lacks it for the running GPU they throw gpu100::ArchUnavailable before any launch. Shapes TMA
// cannot describe go to v10 (BF16: K or N not a multiple of 8), except in v13, which first copies
// A and B into padded buffers (gemm_v13_wgmma_cluster.cu); the TF32 call pads A and B^T the same
// way when K % 4 != 0. The
// TF32 call first transposes B into a scratch buffer (wgmma reads TF32 operands only K-major), and
// its time includes that transpose.
void gemm_v11_wgmma_bf16(GemmShape, float, const __nv_bfloat16*, const __nv_bfloat16*, float,
                         float*, cudaStream_t);
void gemm_v11_wgmma_tf32(GemmShape, float, const float*, const float*, float, float*, cudaStream_t);
// v12: v11 BF16, warp-specialised (a TMA producer warpgroup, full / empty mbarriers) and
// persistent (one block per SM loops over the output tiles).
void gemm_v12_wgmma_ws_bf16(GemmShape, float, const __nv_bfloat16*, const __nv_bfloat16*, float,
                            float*, cudaStream_t);
// v13: v12 on clusters of 2 CTAs (vertically adjacent tiles) sharing B by TMA multicast.
void gemm_v13_wgmma_cluster_bf16(GemmShape, float, const __nv_bfloat16*, const __nv_bfloat16*,
                                 float, float*, cudaStream_t);
// v13's launcher with the order of its tile pairs: 0 row-major (v13), else bands of that many pair
// rows, each band column by column (v17). Arguments as v13's, already checked by the caller.
void gemm_v13_ordered(GemmShape s, float alpha, const __nv_bfloat16* a, const __nv_bfloat16* b,
                      float beta, float* c, cudaStream_t stream, int group);
// v17: v13 with its tile pairs in grouped order (bands of 4 pair rows) (sm_90a).
void gemm_v17_wgmma_grouped_bf16(GemmShape s, float alpha, const __nv_bfloat16* a,
                                 const __nv_bfloat16* b, float beta, float* c, cudaStream_t stream);
// v21: v17 with its outputs written through shared memory by the TMA when beta == 0 (sm_90a).
void gemm_v21_wgmma_staged_bf16(GemmShape, float alpha, const __nv_bfloat16*, const __nv_bfloat16*,
                                float beta, float*, cudaStream_t);
// v22: v21 with K split into slices added into C by the TMA when the tile pairs leave clusters
// idle (sm_90a), and its row note (the slice count, or how v17 staged a shape).
void gemm_v22_wgmma_splitk_bf16(GemmShape, float alpha, const __nv_bfloat16*, const __nv_bfloat16*,
                                float beta, float*, cudaStream_t);
std::string v22_row_note(GemmShape s);
// The number of k-slices v22 cuts shape s into (1: not split), for calls it can stage (sm_90a).
int v22_splits(GemmShape s);
// v24: v22 with tiles of 128 x 64 where they leave the busiest cluster fewer columns of C than
// 128 x 256 tiles do (sm_90a), and its row note (the tile, or v22's note).
void gemm_v24_wgmma_narrow_bf16(GemmShape, float alpha, const __nv_bfloat16*, const __nv_bfloat16*,
                                float beta, float*, cudaStream_t);
std::string v24_row_note(GemmShape s);
// Whether v24 runs shape s in its narrow tiles, for calls it can stage (sm_90a).
bool v24_narrow(GemmShape s);
// v25: v24 with tiles of 128 x 128 where the 128 x 256 pairs fill half the clusters or less, the
// 128 x 128 pairs fit at once and v24 would neither run narrow tiles nor cut K into more than 2
// slices (sm_90a), and its row note (the tile, or v24's note).
void gemm_v25_wgmma_medium_bf16(GemmShape, float alpha, const __nv_bfloat16*, const __nv_bfloat16*,
                                float beta, float*, cudaStream_t);
std::string v25_row_note(GemmShape s);
// v13, v17 and v21 in TF32 (sm_90a): their kernels on K-major operands, B transposed first into a
// scratch buffer as in v11 (its time included); A and B^T padded when K % 4 != 0. v21's staged
// epilogue needs beta == 0, N % 4 == 0 and a 16-byte aligned C; other calls run v17's TF32 form.
void gemm_v13_wgmma_cluster_tf32(GemmShape, float, const float*, const float*, float, float*,
                                 cudaStream_t);
void gemm_v17_wgmma_grouped_tf32(GemmShape, float, const float*, const float*, float, float*,
                                 cudaStream_t);
void gemm_v21_wgmma_staged_tf32(GemmShape, float, const float*, const float*, float, float*,
                                cudaStream_t);
// v23: TF32 without B's transpose (sm_90a): C^T = B^T A^T on v21's kernel, B's fragments loaded
// into registers from its N-major tile. Needs K % 4 == 0, N % 4 == 0 and 16-byte aligned A and B;
// other calls run v21's TF32 form. Its row note names that fallback ("" otherwise).
void gemm_v23_wgmma_rs_tf32(GemmShape, float, const float*, const float*, float, float*,
                            cudaStream_t);
std::string v23_row_note(GemmShape s);
// v13's launcher in TF32 with the order of its tile pairs (as gemm_v13_ordered), arguments checked.
void gemm_v13_ordered_tf32(GemmShape s, float alpha, const float* a, const float* b, float beta,
                           float* c, cudaStream_t stream, int group);
// v13's row note: how it ran a shape TMA cannot describe ("" for the others).
std::string v13_row_note(GemmShape s);
// v11's and v12's BF16 row note: such a shape runs v10 instead ("" for the others).
std::string wgmma_v10_fallback_note(GemmShape s);
// ---- FP8 (e4m3) -------------------------------------------------------------------------------
// C (M x N, bf16) = scale_a scale_b (A B): A is M x K e4m3, row-major (K-major); B is given
// TRANSPOSED, as B^T (N x K e4m3, row-major: K-major too), the "TN" layout cuBLASLt requires for
// FP8 and the only one wgmma reads FP8 in. scale_a and scale_b are single fp32 values in device
// memory (per-tensor scales: the real matrices are scale x the e4m3 values). Accumulation in fp32;
// C is written, never read. K must be a multiple of 16 (rows of whole 16-byte units, which TMA and
// cuBLASLt need); A, B^T and both scales start on a 16-byte boundary (cuBLASLt refuses a scale 4
// bytes past one: the same rule for every variant); any M, N >= 1.
using GemmFp8Fn = void (*)(GemmShape, const __nv_fp8_e4m3* a, const __nv_fp8_e4m3* b_t,
                           const float* scale_a, const float* scale_b, __nv_bfloat16* c,
                           cudaStream_t stream);
// "" when an FP8 GEMM can take this shape, else why not, in one line ("K = 77 is not a multiple
// of 16: ..."). No GPU needed.
std::string gemm_fp8_refusal(GemmShape s);
// Throws std::invalid_argument (gemm_fp8_refusal's line, or a null or misaligned pointer).
void check_gemm_fp8_args(GemmShape s, const void* a, const void* b_t, const float* scale_a,
                         const float* scale_b, const void* c);
// v14: wgmma m64n128k32 e4m3 from TMA-loaded, 128-byte-swizzled tiles, a producer warpgroup and
// two consumer warpgroups, the fp32 accumulator promoted every 128 of k (sm_90a).
void gemm_v14_wgmma_fp8(GemmShape, const __nv_fp8_e4m3*, const __nv_fp8_e4m3*, const float*,
                        const float*, __nv_bfloat16*, cudaStream_t);
// v15: v14 with two wgmma accumulators, one k-tile's promotion overlapping the next k-tile's
// products (sm_90a).
void gemm_v15_wgmma_fp8_overlap(GemmShape, const __nv_fp8_e4m3*, const __nv_fp8_e4m3*, const float*,
                                const float*, __nv_bfloat16*, cudaStream_t);
// v16: v15 persistent, one block per SM looping over the tiles, its producer running ahead into
// the next tile (sm_90a).
void gemm_v16_wgmma_fp8_persistent(GemmShape, const __nv_fp8_e4m3*, const __nv_fp8_e4m3*,
                                   const float*, const float*, __nv_bfloat16*, cudaStream_t);
// v18: v16 with the tiles in grouped order (bands of 8 tile rows, each column by column) (sm_90a).
void gemm_v18_wgmma_fp8_grouped(GemmShape, const __nv_fp8_e4m3*, const __nv_fp8_e4m3*, const float*,
                                const float*, __nv_bfloat16*, cudaStream_t);
// v19: v18 with its descriptors advanced by adds and its stage and phase as wrapping counters
// (sm_90a).
void gemm_v19_wgmma_fp8_lean(GemmShape, const __nv_fp8_e4m3*, const __nv_fp8_e4m3*, const float*,
                             const float*, __nv_bfloat16*, cudaStream_t);
// v20: v19 with its outputs written through shared memory by the TMA, where N % 8 == 0 (sm_90a).
void gemm_v20_wgmma_fp8_epilogue(GemmShape, const __nv_fp8_e4m3*, const __nv_fp8_e4m3*,
                                 const float*, const float*, __nv_bfloat16*, cudaStream_t);
// The library row: cublasLtMatmul, e4m3 A and B, CUBLAS_COMPUTE_32F, bf16 D, the scales through
// CUBLASLT_MATMUL_DESC_A/B_SCALE_POINTER. The first call for a shape asks the heuristic for up
// to 8 algorithms, times each with the project's timer and keeps the fastest. Throws
// gpu100::LibraryError with cublaslt_fp8_refusal's line when the shape is refused.
void cublaslt_gemm_fp8(GemmShape, const __nv_fp8_e4m3*, const __nv_fp8_e4m3*, const float*,
                       const float*, __nv_bfloat16*, cudaStream_t);
// gemm_fp8_refusal, then (with a GPU) whether this GPU has FP8 tensor cores (8.9+), the heuristic
// offers an algorithm for the shape (N % 8 == 0 at least) and, once launched, one of them ran.
std::string cublaslt_fp8_refusal(GemmShape s);
// Its row note: which algorithm won the timing and how many were timed ("" before it ran).
std::string cublaslt_fp8_note(GemmShape s);

// An FP8 operand as a host program makes it: q = e4m3(x / scale), rounded to nearest (saturating
// at +-448), scale = absmax(x) / 448 so the largest |x| lands on e4m3's largest value. An x that
// would round to zero gets the smallest subnormal of its sign instead (the inputs are never zero).
struct Fp8Tensor {
  std::vector<__nv_fp8_e4m3> q;
  float scale = 1.f;
};
Fp8Tensor quantize_e4m3(const std::vector<float>& x);
// The e4m3 values as floats (exact: every e4m3 value is a float), without the scale.
std::vector<float> e4m3_to_float(const std::vector<__nv_fp8_e4m3>& q);
// rows x cols row-major -> cols x rows row-major (B -> B^T on the host, for the FP8 input format).
std::vector<float> transpose_host(const std::vector<float>& x, int rows, int cols);

// ---- cuBLAS, the library a user would pick instead ---------------------------------------------
// One handle per thread, created at first use. The fp32 call uses CUBLAS_PEDANTIC_MATH, so it
// never uses TF32.
void cublas_sgemm(GemmShape, float, const float*, const float*, float, float*, cudaStream_t);
void cublas_gemm_tf32(GemmShape, float, const float*, const float*, float, float*, cudaStream_t);
void cublas_gemm_bf16(GemmShape, float, const __nv_bfloat16*, const __nv_bfloat16*, float, float*,
                      cudaStream_t);
// BF16 in and out, fp32 accumulation, C rounded to bf16 once: the call a bf16 model's linear layers
// make (day05's attention block).
void cublas_gemm_bf16_out(GemmShape, float alpha, const __nv_bfloat16* a, const __nv_bfloat16* b,
                          float beta, __nv_bfloat16* c, cudaStream_t stream);

// ---- the registry -----------------------------------------------------------------------------
using gpu100::Precision;  // common/precision.hpp
using gpu100::to_string;

struct GemmVariant {
  const char* name;         // "v5_2d_blocktile"
  const char* description;  // what changed, one line
  Precision precision;
  SgemmFn fp32 = nullptr;                           // set for kFp32 and kTf32 (fp32 inputs)
  GemmBf16Fn bf16 = nullptr;                        // set for kBf16 (bf16 inputs)
  bool is_library = false;                          // the cuBLAS rows
  const char* library = "";                         // the cuBLAS row this variant is compared with
  gpu100::ArchNeed needs = gpu100::ArchNeed::kAny;  // the GPU code it needs (common/arch.hpp)
  std::string (*row_note)(GemmShape) = nullptr;     // the row's note after a run, if any
  const char* tags = "";                            // "mine": a learner's (common/learner.hpp)
  GemmFp8Fn fp8 = nullptr;                          // set for kFp8 (e4m3 inputs, bf16 output)
  std::string (*refusal)(GemmShape) = nullptr;      // "" when it takes the shape, else why not
};
const std::vector<GemmVariant>& gemm_variants();  // the day's own, then the learner's (mine/*.cu)
// Adds a learner's GEMM (tagged "mine") from its file in mine/ (common/learner.hpp).
void add_learner_gemm(const GemmVariant& v);
const GemmVariant* find_gemm_variant(const std::string& name);

// A GEMM by variant name, on device pointers (the "call by name" API for later days).
// fp32-input variants only; throws std::invalid_argument for an unknown or bf16 variant.
void gemm(const std::string& variant, GemmShape s, float alpha, const float* a, const float* b,
          float beta, float* c, cudaStream_t stream = nullptr);

// ---- the pass rule ------------------------------------------------------------------------------
// The one rule of every GEMM check (the binary's and the tests'): an entry passes when
// |got - ref| <= abs_tol + rel_tol |ref| (gpu100::compare), for inputs in [-1, 1].
//  - fp32, and bf16 checked against a reference on the same rounded inputs: only the summation
//    order differs from the exact sum. K fp32 roundings of partial sums of size ~sqrt(K)/3 add up
//    to about u K / 3 (u = 2^-24); abs_tol = 8 u K + 1e-6 (2.0e-3 at K = 4096).
//  - tf32: each input keeps 10 mantissa bits, a random error of about 2.5e-4 sqrt(K) per entry
//    when truncated (wgmma), half that when rounded (mma.sync, WMMA); abs_tol = 2e-3 sqrt(K).
//  - rel_tol = 1e-5. abs_tol scales with max(1, |alpha|), as the error of alpha A B does.
//  - fp8 (against the exact product of the e4m3 values, scaled; inputs of at most 1 in
//    magnitude after scaling): wgmma's FP8 adds keep about 14 bits, and the kernels add at most
//    128 products of k there before promoting to fp32: abs_tol = 2^-9 sqrt(K) + 8 u K. The bf16
//    output rounds to 2^-9 relative: rel_tol = 2^-8 (README, "FP8").
gpu100::Tolerance gemm_tolerance(Precision p, int k, double alpha = 1.0);

// ---- CPU reference ----------------------------------------------------------------------------
// Cache-blocked, accumulating in double. C = alpha * A * B + beta * C (C not read if beta == 0).
void gemm_cpu(GemmShape s, double alpha, const float* a, const float* b, double beta, float* c);
// One entry of A * B in double: for the sampled check of cuBLAS at large sizes.
double dot_cpu(GemmShape s, const float* a, const float* b, int row, int col);
// The FP8 reference: C = scale_a scale_b (A B) in double on the e4m3 values, A M x K and B^T N x K
// (as the FP8 GEMMs take them), C M x N rounded to float once.
void gemm_fp8_cpu(GemmShape s, const Fp8Tensor& a, const Fp8Tensor& b_t, float* c);
double dot_fp8_cpu(GemmShape s, const Fp8Tensor& a, const Fp8Tensor& b_t, int row, int col);

}  // namespace day04
