#pragma once
// day08 halo tile: the PMPP chapter 7 idea as a reusable device piece. A block that computes an
// output tile of a convolution first copies the input window it needs (the output tile plus a
// halo of the mask radius on every side) into shared memory, once, so every input element is read
// from global memory once per block instead of once per mask tap. Elements outside the plane are
// the convolution's zero padding and are written as 0 (PMPP's "ghost cells").
#include <cuda_runtime.h>

namespace day08 {

// Cooperative load of the window rows [y0, y0 + rows) x columns [x0, x0 + cols) of one H x W
// plane (row pitch W floats) into shared memory (row pitch `pitch` floats), writing 0 for every
// element outside the plane (zero padding). All `nthreads` threads of the block call it with their
// own tid in [0, nthreads); the caller places the __syncthreads() after it.
//
// Mapping: the window is walked row-major in steps of nthreads, so consecutive threads read
// consecutive columns of a row (coalesced) and write consecutive shared-memory words (no bank
// conflicts). y0 and x0 may be negative (the halo above and left of the plane).
__device__ inline void load_halo_tile(float* smem, int pitch, const float* plane, int H, int W,
                                      int y0, int x0, int rows, int cols, int tid, int nthreads) {
  const int total = rows * cols;
  for (int i = tid; i < total; i += nthreads) {
    const int ry = i / cols, rx = i - ry * cols;
    const int gy = y0 + ry, gx = x0 + rx;
    float v = 0.f;
    if (gy >= 0 && gy < H && gx >= 0 && gx < W) v = __ldg(plane + size_t(gy) * W + gx);
    smem[ry * pitch + rx] = v;
  }
}

}  // namespace day08
