#pragma once
// The mask of day08's f2, f3 and f4 in __constant__ memory. Every file that includes this header
// gets its own copy of the symbol (whole-program compilation), and its launcher uploads the mask to
// that copy before its kernel runs.
#include <cuda_runtime.h>

#include "common/cuda_check.hpp"
#include "conv_day.hpp"

namespace day08::filter2d_detail {
namespace {

__constant__ float c_mask2d[kMaxFilter2d * kMaxFilter2d];

void upload_mask(const float* mask, int width, cudaStream_t stream) {
  CUDA_CHECK(cudaMemcpyToSymbolAsync(c_mask2d, mask, sizeof(float) * width * width, 0,
                                     cudaMemcpyDeviceToDevice, stream));
}

// Calls f(std::integral_constant<int, R>{}) for the runtime mask width (1, 3, 5 or 7; checked

}  // namespace
}  // namespace day08::filter2d_detail
