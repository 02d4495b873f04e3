#pragma once
// day08: 16-byte stores into rows that do not start on a 16-byte boundary (an image or a channel
// plane whose width is no multiple of 4 floats), for kernels in which consecutive lanes hold
// consecutive groups of 4 columns of one row (day08's f5 filter, the capstone's stem kernel).
//
// A lane's 4 columns start s floats past a 16-byte boundary (the same s for every lane of the
// row). The aligned float4 that starts inside them begins c = (4 - s) % 4 columns in: the lane's
// last 4 - c values, then the next lane's first c, one shuffle each. Each lane stores that float4
// with one 16-byte store; the kernel decides who stores the float4s at the ends of a run of lanes
// (f5 and the stem kernel: tiles that overlap by one lane's 4 columns, so the last lane stores
// none, and the image's row ends go out element by element).
#include <cuda_runtime.h>

namespace day08 {

// s known at compile time: only the c shuffles it needs, no branch.
template <int kS>
__device__ __forceinline__ float4 realign_next(const float (&v)[4]) {
  if constexpr (kS == 0) {
    return make_float4(v[0], v[1], v[2], v[3]);
  } else if constexpr (kS == 1) {
    return make_float4(v[3], __shfl_down_sync(0xffffffffu, v[0], 1),
                       __shfl_down_sync(0xffffffffu, v[1], 1),
                       __shfl_down_sync(0xffffffffu, v[2], 1));
  } else if constexpr (kS == 2) {
    return make_float4(v[2], v[3], __shfl_down_sync(0xffffffffu, v[0], 1),
                       __shfl_down_sync(0xffffffffu, v[1], 1));
  } else {
    return make_float4(v[1], v[2], v[3], __shfl_down_sync(0xffffffffu, v[0], 1));
  }
}

// s at run time (0 <= s < 4, the same for the whole warp): three shuffles, then a branch the warp
// takes together, not a select per value. v: the float4; c: its first column within the lane's 4.
__device__ __forceinline__ void realign_next(const float (&own)[4], int s, float4& v, int& c) {
  float nx[3];  // the next lane's first 3 values
#pragma unroll
  for (int j = 0; j < 3; ++j) nx[j] = __shfl_down_sync(0xffffffffu, own[j], 1);
  switch (s) {
    case 0:
      v = make_float4(own[0], own[1], own[2], own[3]), c = 0;
      break;
    case 1:
      v = make_float4(own[3], nx[0], nx[1], nx[2]), c = 3;
      break;
    case 2:
      v = make_float4(own[2], own[3], nx[0], nx[1]), c = 2;
      break;
    default:
      v = make_float4(own[1], own[2], own[3], nx[0]), c = 1;
      break;
  }
}

}  // namespace day08
