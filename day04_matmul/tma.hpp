#pragma once
// day04 host helpers for the Hopper kernels (v11 here, day05's wgmma attention): TMA tensor maps
// and the compute-capability check. A CUtensorMap describes a tensor in global memory (sizes,
// strides, element type) and the box one TMA instruction copies into shared memory, here always in
// the 128-byte swizzle the wgmma descriptors of wgmma.cuh expect (a box is 128 bytes wide).
#include <cuda.h>
#include <cuda_bf16.h>

namespace day04 {

// A row-major rows x cols matrix, read in boxes of box_rows x box_cols (box_cols x the element
// size = 128 bytes). Throws std::runtime_error when the driver rejects it.
CUtensorMap make_tma_map_2d(const float* ptr, int rows, int cols, int box_rows, int box_cols);
CUtensorMap make_tma_map_2d(const __nv_bfloat16* ptr, int rows, int cols, int box_rows,
                            int box_cols);
// `batches` row-major rows x cols matrices one after the other, read in boxes of box_rows x
// box_cols of one matrix (rows past `rows` are zero-filled, never the next matrix's).
CUtensorMap make_tma_map_3d(const __nv_bfloat16* ptr, long long batches, int rows, int cols,
                            int box_rows, int box_cols);
// A 4-dimensional bf16 tensor: dims[0] contiguous, dims[1..3] `strides` elements apart (each a
// multiple of 8, each at least the span of the dimensions below it), in boxes of box[0] x box[1] x
// box[2] x box[3] (box[0] x 2 = 128 bytes). Coordinates past a dimension are clipped on stores and
// zero-filled on loads. (day05's attention writes O token-major through it.)
CUtensorMap make_tma_map_4d(const __nv_bfloat16* ptr, const long long (&dims)[4],
                            const long long (&strides)[3], const int (&box)[4]);

}  // namespace day04
