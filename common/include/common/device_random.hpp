#pragma once
// Seeded random inputs filled on the GPU: the values random_vector (common/random.hpp) gives, for
// element i the same uniform_at(seed, i), written by a kernel. For scratch buffers that only need
// realistic (never zero) data, such as the operands a library's algorithms are re-timed on, where
// a host fill and an upload of gigabytes would take seconds.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace gpu100 {

// data[0, n) = uniform_at(seed, i, -1, 1), rounded to the element type; asynchronous on `stream`.
void fill_uniform_device(float* data, size_t n, uint64_t seed, cudaStream_t stream = nullptr);
void fill_uniform_device(__nv_bfloat16* data, size_t n, uint64_t seed,
                         cudaStream_t stream = nullptr);

}  // namespace gpu100
