#pragma once
// How many blocks of a kernel fit on the whole GPU at once: the size of a persistent grid, whose
// blocks each loop over many tiles (day08's wgmma convolutions, the capstone's fused stem). The
// kernel's dynamic shared memory is raised to `smem_bytes` first, so a block over 48 KB may launch.
// Callers keep the answer in a function-local PerDevice (below): one query per kernel per GPU.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <map>
#include <mutex>

#include "common/cuda_check.hpp"

namespace gpu100 {

template <class Kernel>
int resident_blocks(Kernel* kernel, int threads, size_t smem_bytes) {
  CUDA_CHECK(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem_bytes)));
  int per_sm = 0, dev = 0, sms = 0;
  CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, smem_bytes));
  CUDA_CHECK(cudaGetDevice(&dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  return std::max(1, per_sm) * sms;
}

// A value worked out once per GPU: get(make) runs make() the first time the current device asks,
// and keeps its answer for that device. A kernel's attributes (its dynamic shared-memory limit)
// belong to each GPU's copy of the module, so a process that launches on several GPUs (the
// capstone's multi-GPU paths) must set them on each; a plain function-local static would set them
// on the first GPU only, and the launch on the second would fail.
//   static gpu100::PerDevice<int> blocks;
//   const int b = blocks.get([] { return gpu100::resident_blocks(kernel, threads, smem); });
template <class T>
class PerDevice {
 public:
  template <class Make>
  T get(Make&& make) {
    int device = 0;
    CUDA_CHECK(cudaGetDevice(&device));
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = values_.find(device);
    if (it == values_.end()) it = values_.emplace(device, make()).first;
    return it->second;
  }

 private:
  std::mutex mutex_;
  std::map<int, T> values_;
};

}  // namespace gpu100
