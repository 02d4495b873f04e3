#pragma once
// day04 transpose: out = in^T for a row-major M x N fp32 matrix (out is N x M), any M and N.
// The warm-up exercise of day 4: 2D indexing, coalescing, shared-memory tiles and bank conflicts.
#include <cuda_runtime.h>

#include <string>
#include <vector>

namespace day04 {

using TransposeFn = void (*)(const float* in, float* out, int m, int n, cudaStream_t stream);

void transpose_v1_row_per_block(const float*, float*, int, int, cudaStream_t);
void transpose_v2_coalesced_reads(const float*, float*, int, int, cudaStream_t);
void transpose_v3_smem_tile(const float*, float*, int, int, cudaStream_t);
void transpose_v4_padded_tile(const float*, float*, int, int, cudaStream_t);
// t4 into an N x ld_out matrix (ld_out >= M; columns M .. ld_out - 1 are not written): SGEMM v8's
// A^T with rows padded to a multiple of 4 floats, so that its 16-byte copies work for any M.
void transpose_v4_padded_tile_ld(const float* in, float* out, int m, int n, int ld_out,
                                 cudaStream_t stream);

void transpose_cpu(const float* in, float* out, int m, int n);

struct TransposeVariant {
  const char* name;
  const char* description;
  TransposeFn launch;
};
const std::vector<TransposeVariant>& transpose_variants();

}  // namespace day04
