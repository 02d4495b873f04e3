#include "common/device_info.hpp"

#include <cuda_runtime.h>
#include <fmt/format.h>

#include "common/arch.hpp"
#include "common/cuda_check.hpp"
#include "common/errors.hpp"

namespace gpu100 {

std::string DeviceSummary::compute_capability() const {
  return fmt::format("{}.{}", cc_major, cc_minor);
}

std::string DeviceSummary::cuda_versions() const {
  return fmt::format("runtime {}.{}, driver {}.{}", runtime_version / 1000,
                     (runtime_version % 1000) / 10, driver_version / 1000,
                     (driver_version % 1000) / 10);
}

std::string DeviceSummary::one_line() const {
  return fmt::format("{} (sm_{}{}, {} SMs, {:.0f} MB L2, {:.1f} GiB, CUDA {}; runs {})", name,
                     cc_major, cc_minor, sm_count, l2_bytes / 1e6,
                     global_mem_bytes / double(1 << 30), cuda_versions(), code);
}

bool gpu_available() {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  cudaGetLastError();  // clear "no device" / "insufficient driver" so later checks start clean
  return err == cudaSuccess && count > 0;
}

size_t smem_per_block_optin() {
  // Only a failure of these calls is cleared, so an earlier launch's error is still there for the
  // caller's own check (gpu_available() clears whatever is pending).
  int count = 0, device = 0, bytes = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0 ||
      cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) !=
          cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return static_cast<size_t>(bytes);
}

DeviceSummary query_device() {
  if (!gpu_available()) {
    throw NoGpuError("no CUDA-capable GPU found (this binary needs an NVIDIA GPU and driver)");
  }
  DeviceSummary s;
  CUDA_CHECK(cudaGetDevice(&s.index));
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, s.index));
  s.name = prop.name;
  s.cc_major = prop.major;
  s.cc_minor = prop.minor;
  s.sm_count = prop.multiProcessorCount;
  s.l2_bytes = static_cast<size_t>(prop.l2CacheSize);
  s.global_mem_bytes = prop.totalGlobalMem;
  s.smem_per_block_optin = prop.sharedMemPerBlockOptin;
  CUDA_CHECK(cudaRuntimeGetVersion(&s.runtime_version));
  CUDA_CHECK(cudaDriverGetVersion(&s.driver_version));
  s.code = running_code().label();  // throws NoGpuError with the rebuild line if there is none
  return s;
}

size_t free_device_memory() {
  size_t free_bytes = 0, total_bytes = 0;
  CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  return free_bytes;
}

}  // namespace gpu100
