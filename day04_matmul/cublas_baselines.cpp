// day04: the cuBLAS calls a user would make instead of writing a GEMM, for row-major matrices.
// cuBLAS is column-major: a row-major M x N matrix is the same bytes as a column-major N x M one,
// so row-major C = A B is computed as column-major C^T = B^T A^T: swap the operands and M, N.
#include <cublas_v2.h>

#include <memory>

#include "common/cublas_check.hpp"
#include "gemm.hpp"

namespace day04 {

namespace {

struct HandleDeleter {
  void operator()(cublasContext* h) const { cublasDestroy(h); }
};

// One handle per host thread, created at first use (creation costs milliseconds: never time it).
cublasHandle_t handle() {
  thread_local std::unique_ptr<cublasContext, HandleDeleter> h;
  if (!h) {
    cublasHandle_t raw = nullptr;
    CUBLAS_CHECK(cublasCreate(&raw));
    h.reset(raw);
  }
  return h.get();
}

}  // namespace

void cublas_sgemm(GemmShape s, float alpha, const float* a, const float* b, float beta, float* c,
                  cudaStream_t stream) {
  check_gemm_args(s, a, b, c);
  cublasHandle_t h = handle();
  CUBLAS_CHECK(cublasSetStream(h, stream));
  CUBLAS_CHECK(cublasSetMathMode(h, CUBLAS_PEDANTIC_MATH));  // true fp32: no TF32
  CUBLAS_CHECK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, s.n, s.m, s.k, &alpha, b, s.n, a, s.k,
                           &beta, c, s.n));
}

void cublas_gemm_tf32(GemmShape s, float alpha, const float* a, const float* b, float beta,
                      float* c, cudaStream_t stream) {
  check_gemm_args(s, a, b, c);
  cublasHandle_t h = handle();
  CUBLAS_CHECK(cublasSetStream(h, stream));
  CUBLAS_CHECK(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH));
  CUBLAS_CHECK(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, s.n, s.m, s.k, &alpha, b, CUDA_R_32F, s.n,
                            a, CUDA_R_32F, s.k, &beta, c, CUDA_R_32F, s.n,
                            CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_GEMM_DEFAULT));
}

namespace {

// BF16 inputs, fp32 compute, C in `c_type` (fp32 or bf16).
void gemm_ex_bf16(GemmShape s, float alpha, const __nv_bfloat16* a, const __nv_bfloat16* b,
                  float beta, void* c, cudaDataType c_type, cudaStream_t stream) {
  check_gemm_args(s, a, b, c);
  cublasHandle_t h = handle();
  CUBLAS_CHECK(cublasSetStream(h, stream));
  CUBLAS_CHECK(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH));
  CUBLAS_CHECK(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, s.n, s.m, s.k, &alpha, b, CUDA_R_16BF, s.n,
                            a, CUDA_R_16BF, s.k, &beta, c, c_type, s.n, CUBLAS_COMPUTE_32F,
                            CUBLAS_GEMM_DEFAULT));
}

}  // namespace

void cublas_gemm_bf16(GemmShape s, float alpha, const __nv_bfloat16* a, const __nv_bfloat16* b,
                      float beta, float* c, cudaStream_t stream) {
  gemm_ex_bf16(s, alpha, a, b, beta, c, CUDA_R_32F, stream);
}

void cublas_gemm_bf16_out(GemmShape s, float alpha, const __nv_bfloat16* a, const __nv_bfloat16* b,
                          float beta, __nv_bfloat16* c, cudaStream_t stream) {
  gemm_ex_bf16(s, alpha, a, b, beta, c, CUDA_R_16BF, stream);
}

}  // namespace day04
