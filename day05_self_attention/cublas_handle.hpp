#pragma once
// day05's cuBLAS handle, shared by v2_cublas (the forward's library path) and bwd_v1_cublas (the
// backward's first rung): one per host thread, created at first use (creation takes
// milliseconds) and destroyed with the thread. Each launcher sets its stream on it before its
// calls and changes nothing else (the default math mode), so the two can share it.
#include <cublas_v2.h>

#include "common/cublas_check.hpp"

namespace day05 {

inline cublasHandle_t cublas_handle() {
  struct Handle {
    cublasHandle_t h = nullptr;
    Handle() { CUBLAS_CHECK(cublasCreate(&h)); }
    ~Handle() { cublasDestroy(h); }
  };
  thread_local Handle handle;
  return handle.h;
}

}  // namespace day05
