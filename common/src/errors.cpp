#include "common/errors.hpp"

#include <fmt/format.h>

#include <cstdio>
#include <exception>
#include <new>

#include "common/cuda_check.hpp"
#include "common/device_info.hpp"

namespace gpu100 {

int guarded_main(int argc, char** argv, int (*body)(int, char**)) {
  const char* program = argc > 0 ? argv[0] : "gpu100";
  try {
    return body(argc, argv);
  } catch (const UsageError& e) {
    fmt::print(stderr, "{}: error: {}\n", program, e.what());
    return kExitUsage;
  } catch (const NoGpuError& e) {
    fmt::print(stderr, "{}: {}\n", program, e.what());
    return kExitNoGpu;
  } catch (const CudaError& e) {
    if (e.code() == cudaErrorMemoryAllocation) {
      fmt::print(stderr, "{}: error: out of device memory: {}\n", program, e.what());
      return kExitUsage;
    }
    fmt::print(stderr, "{}: CUDA error: {}\n", program, e.what());
    return kExitFailed;
  } catch (const std::bad_alloc&) {
    fmt::print(stderr, "{}: error: out of host memory\n", program);
    return kExitUsage;
  } catch (const std::exception& e) {
    fmt::print(stderr, "{}: error: {}\n", program, e.what());
    return kExitFailed;
  }
}

void require_device_memory(size_t bytes, const char* what) {
  const size_t free_bytes = free_device_memory();
  const size_t margin = size_t(256) << 20;  // the CUDA context, cuBLAS workspaces, the L2 flush
  if (bytes + margin > free_bytes) {
    throw UsageError(fmt::format("{} needs {:.2f} GiB of device memory but only {:.2f} GiB is free",
                                 what, bytes / double(1 << 30), free_bytes / double(1 << 30)));
  }
}

}  // namespace gpu100
