#pragma once
// Error checking for every CUDA runtime call and every kernel launch.
//
//   CUDA_CHECK(cudaMalloc(&p, bytes));   // a runtime call
//   kernel<<<grid, block>>>(...);
//   CUDA_CHECK_LAST();                   // the launch itself (bad configuration, no device, ...)
//
// A failure throws gpu100::CudaError whose message holds the failing call's text, file:line and
// the CUDA error name and string. It throws rather than exit()s so that a test can catch it.
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace gpu100 {

class CudaError : public std::runtime_error {
 public:
  CudaError(cudaError_t code, const std::string& what) : std::runtime_error(what), code_(code) {}
  cudaError_t code() const { return code_; }

 private:
  cudaError_t code_;
};

inline std::string describe_failure(const char* expr, const char* file, int line,
                                    const std::string& error) {
  return std::string(file) + ":" + std::to_string(line) + ": " + expr + " failed: " + error;
}

inline void check_cuda(cudaError_t err, const char* expr, const char* file, int line) {
  if (err != cudaSuccess) {
    throw CudaError(err, describe_failure(expr, file, line,
                                          std::string(cudaGetErrorName(err)) + " (" +
                                              cudaGetErrorString(err) + ")"));
  }
}

}  // namespace gpu100

#define CUDA_CHECK(expr) ::gpu100::check_cuda((expr), #expr, __FILE__, __LINE__)
// cudaGetLastError both reports and clears a launch error, so the next check starts clean.
#define CUDA_CHECK_LAST() \
  ::gpu100::check_cuda(cudaGetLastError(), "kernel launch", __FILE__, __LINE__)
