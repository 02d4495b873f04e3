// day08's staged ping-pong tiles (implicit_gemm_wgmma.cuh): the order of a persistent block's
// work units, a plain header so that the CPU tests check it too.
#pragma once
#include <cuda_runtime.h>  // __host__ __device__

namespace day08::wgmma_conv {

// The staged ping-pong tiles' work units: whole 128-row tiles and, where the tiles' last wave
// would keep at most half of the grid's blocks busy, that wave's tiles as two halves of 64 rows
// each (the whole tiles first, so the halves are the last wave, on different blocks). The layer
// then ends half a tile's time after the whole waves instead of a whole tile's: the network's l3
// at N = 32 has 442 tiles on 132 blocks, 3 waves and 46 tiles, which become 92 halves.
struct TileWalk {
  int units;  // work units: whole tiles, then half tiles
  int whole;  // the units below this are whole tiles
};
__host__ __device__ inline TileWalk tile_walk(int tiles, int grid) {
  const int tail = tiles % grid;
  if (tiles > grid && tail > 0 && 2 * tail <= grid) return {tiles + tail, tiles - tail};
  return {tiles, tiles};
}
// Unit `unit`'s tile, and which part of it: -1 for the whole tile, 0 or 1 for its rows 0-63 or
// 64-127.
__host__ __device__ inline void unit_tile(const TileWalk& w, int unit, int& tile, int& part) {
  tile = unit < w.whole ? unit : w.whole + (unit - w.whole) / 2;
  part = unit < w.whole ? -1 : (unit - w.whole) % 2;
}

}  // namespace day08::wgmma_conv
