#pragma once
// CUDNN_CHECK(expr): like CUDA_CHECK, for cuDNN calls. Only for targets that link gpu100::cudnn
// (cuDNN is optional: check GPU100_HAVE_CUDNN before including this header).
#include <cudnn.h>

#include <stdexcept>
#include <string>

#include "common/cuda_check.hpp"

namespace gpu100 {

class CudnnError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

inline void check_cudnn(cudnnStatus_t status, const char* expr, const char* file, int line) {
  if (status != CUDNN_STATUS_SUCCESS) {
    throw CudnnError(describe_failure(expr, file, line, cudnnGetErrorString(status)));
  }
}

}  // namespace gpu100

#define CUDNN_CHECK(expr) ::gpu100::check_cudnn((expr), #expr, __FILE__, __LINE__)
