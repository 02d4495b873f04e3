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

}  // namespace day04
