#pragma once
// day05: the order in which the causal flash kernels hand out their work (v5's query tiles, bwd
// v3's key blocks). Under the causal mask the items of one head differ in length: v5's last query
// tile meets every key, its first one a single key tile; bwd v3's first key block meets every query
// tile, its last one a few. The GPU starts blocks in blockIdx order as SMs free up. If the items go
// head by head, the last heads' longest items start near the end and run while most SMs have
// nothing left: the grid ends on a tail. In bands of `band` heads, with every head's longest item
// of the band first, then every head's second, ..., the short items come last everywhere and fill
// the SMs as they free up; a band of a few heads still keeps the blocks that run at once on a few
// heads' data, which L2 then holds.
#include <cuda_runtime.h>  // __host__ __device__

namespace day05 {

struct BandItem {
  int head;   // which head
  int index;  // which item of that head, 0 the longest
};

// Item i of `heads` x `per_head`, in bands of `band` heads, item-major inside a band (the last band
// may hold fewer heads). band <= 0: head-major (a head's items consecutive); band >= heads: item-
// major over all heads. A bijection of [0, heads x per_head) for every band.
inline __host__ __device__ BandItem band_major_item(int i, int heads, int per_head, int band) {
  if (band <= 0) return {i / per_head, i % per_head};
  const int per_band = band * per_head;
  const int g = i / per_band, r = i - g * per_band;
  const int in_band = heads - g * band < band ? heads - g * band : band;
  return {g * band + r % in_band, r / in_band};
}

// The band the causal kernels use. Measured on an H200 (B 8, H 16, causal), against head-major
// order: bwd v3 at S 2048 D 64 292 -> 300 TFLOP/s, the training step at S 2048 D 128 408 -> 420,
// v5 at S 4096 D 128 620 -> 629; bands of 16 were no better than 8.
inline constexpr int kCausalBand = 8;

}  // namespace day05
