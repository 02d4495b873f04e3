// day04: the FP8 library row, cuBLASLt's matmul with e4m3 inputs (cublasGemmEx takes no FP8).
// cuBLASLt is column-major. Our row-major C (M x N) is the bytes of a column-major N x M matrix,
// so C = A B is computed as the column-major C^T = B^T' A' where (primes: cuBLASLt's view)
//   cuBLASLt's A = our B^T buffer: column-major K x N (ld K), used transposed (CUBLAS_OP_T);
//   cuBLASLt's B = our A buffer:   column-major K x M (ld K), not transposed (CUBLAS_OP_N);
//   D = our C:                     column-major N x M (ld N), bf16.
// That is the "TN" layout cuBLASLt requires for FP8 (both inputs K-major), and the reason our
// FP8 input format is B^T. The scales swap roles with the operands: cuBLASLt's A scale is ours
// of B. Its fast-accumulation mode stays off (the default), so it promotes its partial sums to
// fp32 as v14 does.
// "The library at its best": the first call for a shape asks the heuristic for up to 8 algorithms,
// times each (the project's timer: warm-up, repeats, median) and keeps the fastest; the
// heuristic's own first choice is not always the fastest.
// Refusals. cuBLASLt's FP8 kernels need 16-byte-aligned dimensions and leading dimensions (cuBLAS
// docs, cublasLtMatmul, "To use FP8 kernels ..."): here N % 8 == 0 (N is the row count of the
// bf16 D in cuBLASLt's view) and K % 16 == 0. On an H200 (cuBLAS 13.0) its heuristic offered
// nothing at every shape tested with N % 8 != 0. A shape where none of the offered algorithms
// runs is refused too, with cuBLAS's status, from then on.
// The scale pointers must each start on a 16-byte boundary: on an H200 (cuBLASLt 13.1) every
// algorithm the heuristic offered returned CUBLAS_STATUS_NOT_SUPPORTED for two scales 4 bytes
// apart, and ran for the same scales 16 bytes apart (the heuristic itself accepts both).
// check_gemm_fp8_args makes that every variant's rule, so a misaligned scale is one clear line.
// C is passed as nullptr (beta = 0: never read). cuBLASLt 13.0 checks an in-place call (C == D)
// against the descriptors; PyTorch (#167873) and XLA (#34912) pass a null C for FP8 since.
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <fmt/format.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "common/cublas_check.hpp"
#include "common/cuda_check.hpp"
#include "common/device_buffer.hpp"
#include "common/timer.hpp"
#include "gemm.hpp"

namespace day04 {

namespace {

constexpr size_t kWorkspaceBytes = size_t(32) << 20;  // what the heuristic may ask for
constexpr int kMaxAlgos = 8;

struct LtDeleter {
  void operator()(cublasLtContext* h) const { cublasLtDestroy(h); }
};

// One cuBLASLt handle and one workspace per host thread, created at first use.
cublasLtHandle_t lt_handle() {
  thread_local std::unique_ptr<cublasLtContext, LtDeleter> h;
  if (!h) {
    cublasLtHandle_t raw = nullptr;
    CUBLAS_CHECK(cublasLtCreate(&raw));
    h.reset(raw);
  }
  return h.get();
}
gpu100::DeviceBuffer<char>& workspace() {
  thread_local gpu100::DeviceBuffer<char> w(kWorkspaceBytes);
  return w;
}

// The descriptors of one shape, the heuristic's candidates and, once timed, the fastest.
struct Plan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  std::vector<cublasLtMatmulHeuristicResult_t> algos;
  int chosen = -1;  // index into algos once timed
  std::string note;
  std::string refused;  // set when no algorithm ran: why, in one line
  Plan() = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan() {
    if (d != nullptr) cublasLtMatrixLayoutDestroy(d);
    if (b != nullptr) cublasLtMatrixLayoutDestroy(b);
    if (a != nullptr) cublasLtMatrixLayoutDestroy(a);
    if (op != nullptr) cublasLtMatmulDescDestroy(op);
  }
};

std::mutex g_mutex;
std::map<std::tuple<int, int, int>, std::unique_ptr<Plan>> g_plans;

void set_scales(const Plan& p, const float* scale_a, const float* scale_b) {
  // cuBLASLt's A is our B^T and its B our A: the scales follow their operands.
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &scale_b,
                                              sizeof(scale_b)));
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &scale_a,
                                              sizeof(scale_a)));
}

// The plan of shape s (created at first use: descriptors and the heuristic's candidates; with
// none, the shape is refused). The caller holds g_mutex.
Plan& plan_for(GemmShape s, const float* scale_a, const float* scale_b) {
  auto& slot = g_plans[std::make_tuple(s.m, s.n, s.k)];
  if (slot) return *slot;
  auto p = std::make_unique<Plan>();
  CUBLAS_CHECK(cublasLtMatmulDescCreate(&p->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
  const int8_t fast_accum = 0;  // promote partial sums to fp32 (the default, said explicitly)
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast_accum,
                                              sizeof(fast_accum)));
  set_scales(*p, scale_a, scale_b);
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->a, CUDA_R_8F_E4M3, uint64_t(s.k), uint64_t(s.n),
                                          int64_t(s.k)));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->b, CUDA_R_8F_E4M3, uint64_t(s.k), uint64_t(s.m),
                                          int64_t(s.k)));
  CUBLAS_CHECK(
      cublasLtMatrixLayoutCreate(&p->d, CUDA_R_16BF, uint64_t(s.n), uint64_t(s.m), int64_t(s.n)));
  cublasLtMatmulPreference_t pref = nullptr;
  CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  const uint64_t ws = kWorkspaceBytes;
  CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                    &ws, sizeof(ws)));
  std::vector<cublasLtMatmulHeuristicResult_t> results(kMaxAlgos);
  int returned = 0;
  // C's layout is D's (beta = 0: C is never read); NOT_SUPPORTED means no algorithm, not an error.
  const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(
      lt_handle(), p->op, p->a, p->b, p->d, p->d, pref, kMaxAlgos, results.data(), &returned);
  cublasLtMatmulPreferenceDestroy(pref);
  if (st != CUBLAS_STATUS_NOT_SUPPORTED) CUBLAS_CHECK(st);
  for (int i = 0; i < returned; ++i) {
    if (results[i].state == CUBLAS_STATUS_SUCCESS) p->algos.push_back(results[i]);
  }
  if (p->algos.empty()) {
    p->refused = fmt::format(
        "cuBLASLt's heuristic offers no FP8 algorithm for {} x {} x {} (its FP8 kernels need "
        "16-byte-aligned dimensions: N % 8 == 0, K % 16 == 0)",
        s.m, s.n, s.k);
  }
  slot = std::move(p);
  return *slot;
}

cublasStatus_t run_algo(const Plan& p, int i, const void* a, const void* b_t, void* c,
                        cudaStream_t stream) {
  const float alpha = 1.f, beta = 0.f;
  return cublasLtMatmul(lt_handle(), p.op, &alpha, b_t, p.a, a, p.b, &beta, nullptr, p.d, c, p.d,
                        &p.algos[size_t(i)].algo, workspace().data(), kWorkspaceBytes, stream);
}

// Times every candidate on the caller's operands (into C, which the real call then overwrites)
// and keeps the fastest; a candidate that fails to launch is left out. When none runs, the shape
// is refused from then on and this throws gpu100::LibraryError with the first failure's status.
void choose(Plan& p, GemmShape s, const void* a, const void* b_t, void* c, cudaStream_t stream) {
  thread_local gpu100::GpuTimer timer;
  gpu100::TimingOptions opt;
  opt.warmup = 2;
  opt.iters = 10;
  opt.stream = stream;
  double best_ms = 0;
  std::string times;
  cublasStatus_t first_failure = CUBLAS_STATUS_SUCCESS;
  for (int i = 0; i < int(p.algos.size()); ++i) {
    if (const cublasStatus_t st = run_algo(p, i, a, b_t, c, stream); st != CUBLAS_STATUS_SUCCESS) {
      if (first_failure == CUBLAS_STATUS_SUCCESS) first_failure = st;
      continue;
    }
    CUDA_CHECK(cudaStreamSynchronize(stream));
    const double ms =
        timer.time([&] { CUBLAS_CHECK(run_algo(p, i, a, b_t, c, stream)); }, opt).median_ms;
    times += fmt::format("{}{:.4f}", times.empty() ? "" : ", ", ms);
    if (p.chosen < 0 || ms < best_ms) p.chosen = i, best_ms = ms;
  }
  if (p.chosen < 0) {
    p.refused = fmt::format(
        "none of the {} FP8 algorithms cuBLASLt's heuristic offered for {} x {} x {} ran (first "
        "failure: {})",
        p.algos.size(), s.m, s.n, s.k, cublasGetStatusName(first_failure));
    throw gpu100::LibraryError(p.refused);
  }
  p.note = fmt::format("fastest of {} heuristic algorithms re-timed: #{} (ms: {})", p.algos.size(),
                       p.chosen, times);
}

}  // namespace

std::string cublaslt_fp8_refusal(GemmShape s) {
  if (std::string why = gemm_fp8_refusal(s); !why.empty()) return why;
  int device = 0, major = 0, minor = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  if (major * 10 + minor < 89) {
    return fmt::format(
        "cuBLASLt's FP8 matmul needs FP8 tensor cores (compute capability 8.9 or "
        "newer; this GPU: {}.{})",
        major, minor);
  }
  thread_local gpu100::DeviceBuffer<float> probe_scales(8);  // the heuristic sees non-null scales
  std::lock_guard<std::mutex> lock(g_mutex);
  return plan_for(s, probe_scales.data(), probe_scales.data() + 4).refused;
}

void cublaslt_gemm_fp8(GemmShape s, const __nv_fp8_e4m3* a, const __nv_fp8_e4m3* b_t,
                       const float* scale_a, const float* scale_b, __nv_bfloat16* c,
                       cudaStream_t stream) {
  check_gemm_fp8_args(s, a, b_t, scale_a, scale_b, c);
  std::lock_guard<std::mutex> lock(g_mutex);
  Plan& p = plan_for(s, scale_a, scale_b);
  if (!p.refused.empty()) throw gpu100::LibraryError(p.refused);
  set_scales(p, scale_a, scale_b);
  if (p.chosen < 0) choose(p, s, a, b_t, c, stream);
  CUBLAS_CHECK(run_algo(p, p.chosen, a, b_t, c, stream));
}

std::string cublaslt_fp8_note(GemmShape s) {
  std::lock_guard<std::mutex> lock(g_mutex);
  const auto it = g_plans.find(std::make_tuple(s.m, s.n, s.k));
  return it == g_plans.end() || !it->second ? "" : it->second->note;
}

}  // namespace day04
