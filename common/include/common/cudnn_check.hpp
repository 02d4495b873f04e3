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

namespace gpu100 {

// One cuDNN handle per host thread, created at first use (creation takes milliseconds: never time
// it) and destroyed when the thread ends.
inline cudnnHandle_t cudnn_thread_handle() {
  thread_local struct Owner {
    cudnnHandle_t h = nullptr;
    ~Owner() {
      if (h != nullptr) cudnnDestroy(h);
    }
  } owner;
  if (owner.h == nullptr) CUDNN_CHECK(cudnnCreate(&owner.h));
  return owner.h;
}

}  // namespace gpu100
