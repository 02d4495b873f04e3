#pragma once
// CUBLAS_CHECK(expr): like CUDA_CHECK, for cuBLAS calls. Throws gpu100::LibraryError.
#include <cublas_v2.h>

#include <stdexcept>
#include <string>

#include "common/cuda_check.hpp"

namespace gpu100 {

class LibraryError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

inline void check_cublas(cublasStatus_t status, const char* expr, const char* file, int line) {
  if (status != CUBLAS_STATUS_SUCCESS) {
    throw LibraryError(describe_failure(expr, file, line, cublasGetStatusString(status)));
  }
}

}  // namespace gpu100

#define CUBLAS_CHECK(expr) ::gpu100::check_cublas((expr), #expr, __FILE__, __LINE__)
