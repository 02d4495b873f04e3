#pragma once
// day08: 16-byte stores into rows that do not start on a 16-byte boundary (an image or a channel
// plane whose width is no multiple of 4 floats), for kernels in which consecutive lanes hold
// consecutive groups of 4 columns of one row (day08's f5 filter, the capstone's stem kernel).
//
// The idea: a run of kLanes lanes covers 4 kLanes consecutive floats that start s elements into a
// float4 of memory (0 <= s < 4). Lane L writes the aligned float4 that ends inside its own 4
// columns: the previous lane's last s values (one shuffle) and its own first 4 - s. The run's two
// ragged ends, lane 0's columns before the first aligned float4 and the last lane's last s
// columns, and any float4 that crosses the row's end go out element by element. The bytes are the
// same as with 4-byte stores, in a quarter of the store instructions.
#include <cuda_runtime.h>

namespace day08 {

// The aligned float4 of a lane: positions s..3 are its own values 0..3 - s, positions 0..s - 1 the
// previous lane's values 4 - s..3. A switch on s keeps the arrays in registers.
__device__ __forceinline__ float4 realign4(const float (&own)[4], const float (&prev)[4], int s) {
  switch (s) {
    case 0:
      return make_float4(own[0], own[1], own[2], own[3]);
    case 1:
      return make_float4(prev[3], own[0], own[1], own[2]);
    case 2:
      return make_float4(prev[2], prev[3], own[0], own[1]);
    default:
      return make_float4(prev[1], prev[2], prev[3], own[0]);
  }
}

// Called by every lane of the warp (it shuffles), in runs of kLanes lanes (kLanes divides 32).
// `lane`: this lane's index in its run; `dst`: where its first column `col` goes (row + col);
// `width`: the row's columns (none at or past it is written; pass 0 for a row that is not
// written at all); `s`: how many floats the run's first column lies past a 16-byte boundary.
// kStreaming: streaming stores (__stcs), for outputs no later kernel of the same pass reads.
template <int kLanes, bool kStreaming>
__device__ __forceinline__ void store4_shifted(float* dst, int lane, int col, int width, int s,
                                               const float (&own)[4]) {
  float prev[4];
  prev[0] = 0.f;  // never needed: at most the previous lane's last 3 values move (s <= 3)
#pragma unroll
  for (int j = 1; j < 4; ++j) prev[j] = __shfl_up_sync(0xffffffffu, own[j], 1, kLanes);
  const float4 v = realign4(own, prev, s);
  const float vs[4] = {v.x, v.y, v.z, v.w};
  float* chunk = dst - s;  // 16-byte aligned: columns col - s .. col - s + 3
  const int c = col - s;
  const bool head = lane == 0 && s > 0;  // positions 0..s - 1 precede the run: not ours
  if (!head && c + 3 < width) {
    if constexpr (kStreaming) {
      __stcs(reinterpret_cast<float4*>(chunk), v);
    } else {
      *reinterpret_cast<float4*>(chunk) = v;
    }
  } else {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      if ((!head || j >= s) && c + j < width) {
        if constexpr (kStreaming) {
          __stcs(chunk + j, vs[j]);
        } else {
          chunk[j] = vs[j];
        }
      }
    }
  }
  if (lane == kLanes - 1) {  // the run's tail: the last s columns, past the last aligned float4
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      if (j >= 4 - s && col + j < width) {
        if constexpr (kStreaming) {
          __stcs(dst + j, own[j]);
        } else {
          dst[j] = own[j];
        }
      }
    }
  }
}

}  // namespace day08
