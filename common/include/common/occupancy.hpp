#pragma once
// How many blocks of a kernel fit on the whole GPU at once: the size of a persistent grid, whose
// blocks each loop over many tiles (day08's wgmma convolutions, the capstone's fused stem). The
// kernel's dynamic shared memory is raised to `smem_bytes` first, so a block over 48 KB may launch.
// Callers keep the answer in a function-local static: one query per kernel per process.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>

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

}  // namespace gpu100
