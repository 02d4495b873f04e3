#pragma once
// day04 host helpers for the Hopper kernels (v11 here, day05's wgmma attention): TMA tensor maps
// and the compute-capability check. A CUtensorMap describes a tensor in global memory (sizes,
// strides, element type) and the box one TMA instruction copies into shared memory, here always in
// the 128-byte swizzle the wgmma descriptors of wgmma.cuh expect (a box is 128 bytes wide).
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>

namespace day04 {

// A row-major rows x cols matrix, read in boxes of box_rows x box_cols (box_cols x the element
// size = 128 bytes). Throws std::runtime_error when the driver rejects it.
CUtensorMap make_tma_map_2d(const float* ptr, int rows, int cols, int box_rows, int box_cols);
CUtensorMap make_tma_map_2d(const __nv_bfloat16* ptr, int rows, int cols, int box_rows,
                            int box_cols);
// One-byte elements (day04's v14): box_cols = 128; cols % 16 == 0 for the 16-byte row stride.
CUtensorMap make_tma_map_2d(const __nv_fp8_e4m3* ptr, int rows, int cols, int box_rows,
                            int box_cols);
// `batches` row-major rows x cols matrices one after the other, read in boxes of box_rows x
// box_cols of one matrix (rows past `rows` are zero-filled, never the next matrix's).
CUtensorMap make_tma_map_3d(const __nv_bfloat16* ptr, long long batches, int rows, int cols,
                            int box_rows, int box_cols);
// The same for fp32, in the 128-byte swizzle (box_cols x 4 = 128 bytes) or, with swizzle_128b
// false, without one: the box's rows one after another in shared memory (box_cols x 4 a multiple
// of 16 bytes). day05's bwd v3 adds its dQ partials through the second (tma_reduce_add_3d in
// wgmma.cuh).
CUtensorMap make_tma_map_3d(const float* ptr, long long batches, int rows, int cols, int box_rows,
                            int box_cols, bool swizzle_128b);
// A 4-dimensional bf16 tensor: dims[0] contiguous, dims[1..3] `strides` elements apart (each a
// multiple of 8, each at least the span of the dimensions below it), in boxes of box[0] x box[1] x
// box[2] x box[3] (box[0] x 2 = 128 bytes). Coordinates past a dimension are clipped on stores and
// zero-filled on loads. (day05's attention writes O token-major through it.)
CUtensorMap make_tma_map_4d(const __nv_bfloat16* ptr, const long long (&dims)[4],
                            const long long (&strides)[3], const int (&box)[4]);
// The same for fp32, in the 128-byte swizzle (box[0] x 4 = 128 bytes; day08's v13 reads its
// halos so) or, with swizzle_128b false, without one: the box's rows land one after another in
// shared memory (box[0] x 4 bytes a multiple of 16; the capstone's fused stem reads its fp32 NCHW
// input windows so). Strides are multiples of 4 elements.
CUtensorMap make_tma_map_4d(const float* ptr, const long long (&dims)[4],
                            const long long (&strides)[3], const int (&box)[4], bool swizzle_128b);

// A bf16 or fp32 NHWC tensor [n][h][w][c] read in im2col mode, for a convolution's implicit GEMM
// (day08's v10 and v11): one copy brings `pixels` consecutive output pixels (w fastest, then h,
// then n) x `channels` channels of one filter tap (channels x the element size = 128 bytes),
// zero-filled in the padding and past the tensor. The window corners of the first tap bound the box
// the copy walks: from (lower_h, lower_w) to (h + upper_h, w + upper_w) exclusive, in steps of
// (stride_h, stride_w). For a convolution with padding pad and an R x S window of dilation dil:
// lower = -pad, upper = pad - (R - 1) dil (h) and pad - (S - 1) dil (w). Rows of whole 16-byte
// units (c % 8 == 0 in bf16, c % 4 == 0 in fp32) and a 16-byte aligned ptr; the corners within
// [-128, 127], the strides within [1, 8]. Throws std::runtime_error when the driver rejects it.
CUtensorMap make_tma_map_im2col_nhwc(const __nv_bfloat16* ptr, int n, int h, int w, int c,
                                     int lower_h, int lower_w, int upper_h, int upper_w,
                                     int stride_h, int stride_w, int pixels, int channels);
CUtensorMap make_tma_map_im2col_nhwc(const float* ptr, int n, int h, int w, int c, int lower_h,
                                     int lower_w, int upper_h, int upper_w, int stride_h,
                                     int stride_w, int pixels, int channels);

}  // namespace day04
