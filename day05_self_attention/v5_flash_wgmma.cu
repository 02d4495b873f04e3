// v5_flash_wgmma: FlashAttention on Hopper's warpgroup MMA (kernel code only in sm_90a targets;
// refused elsewhere), in the FlashAttention-3 style (Shah et al. 2024), with
// day04's wgmma / TMA / mbarrier wrappers (day04_matmul/wgmma.cuh, tma.hpp).
// What changed from v4, and why it is faster:
//  - the products run on wgmma: a warpgroup (4 warps) issues one asynchronous m64n128k16 whose
//    operands come from shared memory through descriptors, instead of each warp issuing m16n8k16
//    mma.sync fed by ldmatrix: no fragment loads for Q, K or V, and four times the work per
//    instruction. For O += P V the A operand (P) stays in registers (the "RS" form): the score
//    accumulators of S = Q K^T are already in the A-fragment layout, as in v4;
//  - warp specialisation: a producer warpgroup feeds K/V through TMA (one thread describes a
//    whole 128 x 64 box; the copy engine writes it in the 128-byte swizzled layout wgmma reads,
//    zero-filling rows past S) and hands its registers to the consumers (setmaxnreg: 24 for it,
//    240 for each of the 2 consumer warpgroups). The ring of kStages K/V stages is passed with
//    mbarriers (full: the bytes landed; empty: all 8 consumer warps finished the tile), so no
//    consumer waits for an address calculation or a __syncthreads;
//  - the consumer loop is software-pipelined (FlashAttention-3's intra-warpgroup overlap): S of
//    tile t and O += P V of tile t - 1 are issued together, and the softmax of tile t runs on the
//    CUDA cores while P V is still on the tensor cores; at D = 64 the two warpgroups also take
//    turns at the tensor cores (ping-pong, named barriers);
//  - 128 keys per K/V tile, 2 consumer warpgroups of 64 query rows (128 queries per block). At
//    D = 64 the tiling is chosen at compile time from a table of candidates (3 warpgroups, 192
//    queries; 192-key tiles; turns in a ring or none; the overlap on or off; one block per
//    item or one per SM walking the items): D64Configs below. The default there, 3 warpgroups
//    with turns, persistent, 5 stages, took S 2048 D 64 from 0.74x to 0.98x cuDNN (H200; 1.00x
//    with the descriptors built once, below).
//  - as in v4, only the tiles that cross S or the warp's causal diagonal run the mask code; the
//    others run a copy of the softmax without it. The softmax is what the tensor cores wait for,
//    and the mask's per-score compares and selects had been in every tile: 569 -> 678 TFLOP/s
//    at S 4096 D 128 in one A/B run (README).
//  - the persistent items' order (the kernel's item_at) is computed directly, not through
//    causal_order.hpp's band_major_item with one band of all heads: the order is the same, but
//    with it ptxas laid the D = 64 kernel out differently and it ran up to 2% slower (causal).
//    Measured and not kept: each row's sum of exponentials as four interleaved partial sums (the
//    chain of 32 dependent FADDs split in four), and the row max split so. A/B in one call on an
//    H200, three alternating rounds, S 2048 D 64 / causal, median ms: band order with the four sums
//    0.2878 / 0.1938, direct order with them 0.2883 / 0.1920, direct order without them (kept)
//    0.2862 / 0.1884. At D = 128 the sums split was 4.3% slower and the max split 3.6%. A change
//    that leaves the instructions nearly as they were can still move this kernel by percents: time
//    each one against the build before it, in the same call;
//  - the wgmma descriptors are built once (make_desc) and moved by a 32-bit add for each k-step and
//    stage (desc_at), not built afresh for every wgmma: that took 5 uniform instructions per wgmma,
//    issued by the same warps as the softmax (Nsight Compute at S 2048 D 64: 1.49 uniform
//    instructions per score, now 1.15; 131.8 M instructions per launch, now 126.2 M; cuDNN's kernel
//    120.4 M). A/B in one call on an H200, three alternating rounds, median ms: S 2048 D 64 0.2859
//    -> 0.2816, causal 0.1874 -> 0.1864; B 1 H 8 S 16384 1.1004 -> 1.0751; S 1024 0.0884 -> 0.0874;
//    S 4096 D 128 unchanged (1.592), causal 0.8830 -> 0.8885 (0.6% slower: fewer instructions,
//    scheduled differently);
//  - the last round split along the keys (persistent, not causal): the blocks walk the items in
//    rounds of one per SM, and at B 1 H 8 S 16384 the 688 items of 192 queries are 5 rounds and
//    28 items, so the last round ran on 28 of 132 SMs. When the last round would leave more than
//    half the SMs idle, its items are cut into parts of an equal share of the keys (here 4 parts
//    of 32 key tiles, 112 parts for 132 blocks); each part writes its O / l in fp32 and its row
//    log-sum-exp to the workspace, and a small second kernel adds the parts up, weighted by
//    exp(lse_p - lse) (Flash-Decoding's combine, Dao et al. 2023). Predicted 1.075 x 5.25 / 6
//    = 0.94 ms; A/B in one call on an H200, three rounds, median ms: 1.0665 -> 0.9516 (cuDNN
//    0.9853). Launches without split items run the kernel built without the parts' code (kSplit):
//    with it in every launch, S 2048 D 64 causal went from 0.1856 to 0.1874 ms;
//  - a head's last query tile, when S leaves it partly empty, costs what its rows need
//    (persistent): a warpgroup whose 64 rows are all past S only takes its turns and releases the
//    stages, and without the mask those items go after every whole tile, so they fall on the
//    blocks with the fewest items. At S 1024 (5 x 192 + 64) a sixth of the items have two idle
//    warpgroups, and 768 items on 132 blocks had 108 blocks take 6 whole items' time. Predicted
//    about 5.3 / 6 of that; A/B in one call on an H200, three rounds, median ms: S 1024 0.0889 ->
//    0.0830 (cuDNN 0.0831), causal 0.0685 -> 0.0679; S 2048 (10 x 192 + 128) 0.2828 -> 0.2783,
//    causal 0.1888 -> 0.1874; B 1 H 8 S 16384 0.9574 -> 0.9553;
//  - causal, one block per item (D = 128): the query tiles go in bands of 8 heads, every head's
//    last (longest) tile of the band first (causal_order.hpp), so the grid does not end on the
//    longest tiles of the last heads: 620 -> 629 TFLOP/s at S 4096 D 128 causal, one A/B run on an
//    H200 against head-major order.
// The costs: sm_90a only; 1 block of 384 threads per SM, whose consumers need more than the 168
// registers an even split would give (S, P and O are live together: ptxas used 222 with a 224
// cap, and the 168 of an even split made it spill and serialise the wgmma); 224 KB of shared
// memory at D = 128 (D = 64: 512 threads, 160 registers a consumer, 209 KB). O leaves through
// shared memory and a TMA store. Not done here: FP8. Extra device memory: the row log-sum-exp, 4 B
// H S bytes, and at D = 64 without the mask room for the split round's parts (v5_workspace_bytes:
// 192 x 65 floats a part, for up to 256 parts: at most 12.2 MiB). Output O in bf16.
#include <cuda.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <tuple>
#include <type_traits>

#include "attention.hpp"
#include "causal_order.hpp"
#include "common/arch.cuh"
#include "common/cuda_check.hpp"
#include "common/math.hpp"
#include "common/occupancy.hpp"
#include "flash_util.cuh"
#include "tma.hpp"
#include "wgmma.cuh"

#if !GPU100_SM90A_CODE
#pragma nv_diag_suppress 177  // this target compiles the kernel body out, leaving its constants
#endif

namespace day05 {

namespace {

using bf16 = __nv_bfloat16;
using namespace day04::wgmma;
using flash::fast_exp2;
using flash::kLn2;
using flash::kLog2e;
using flash::pack_bf16;

// One instantiation's tiling. kD: head dimension (64 or 128); kStages: K/V tiles in the TMA ring;
// kWGs consumer warpgroups of 64 query rows (2 or 3: 128 or 192 queries per block); kBKV keys per
// K/V tile (128, or 192 or 256 at D = 64; the N of the S = Q K^T wgmma); kPingPong: the warpgroups
// take turns at the tensor cores, a ring of named barriers; kOverlap: S of tile t is issued with P
// V of tile t - 1 (FlashAttention-3's intra-warpgroup overlap; off: S, softmax, P V in turn, which
// frees the registers of one tile's P). A tile of kD columns is kD / 64 TMA boxes of 64 columns
// (128 bytes: one swizzle span) side by side, each box `rows` x 128 bytes.
template <int kD_, int kStages_, int kWGs_, int kBKV_, bool kPingPong_, bool kOverlap_ = true,
          bool kPersistent_ = false, bool kPSmem_ = false>
struct V5Config {
  static constexpr int kD = kD_, kStages = kStages_, kWGs = kWGs_, kBKV = kBKV_;
  static constexpr bool kPingPong = kPingPong_, kOverlap = kOverlap_, kPersistent = kPersistent_;
  // kPersistent: one block per SM walks the query tiles (items) i, i + gridDim.x, ...; the K/V ring
  // runs on across items and Q is double-buffered, so the next item's Q and first K/V tiles load
  // while this item's last tiles and its O store run. Off: one block per item.
  static constexpr int kQBuffers = kPersistent ? 2 : 1;
  // kPSmem: P goes through shared memory (each warpgroup's 64 x kBKV, bf16, in the 128-byte
  // swizzle) and O += P V reads both operands from there, as FlashAttention-3 does at D = 64
  // non-causal: no registers for P's A fragments, one store of P and a warpgroup barrier per tile.
  static constexpr bool kPSmem = kPSmem_;
  static constexpr int kPBytes = kPSmem ? 64 * kBKV * 2 : 0;  // per warpgroup
  static constexpr int kConsumerWarps = 4 * kWGs;
  static constexpr int kBQ = 64 * kWGs;  // queries per block
  // + a producer warpgroup: with a single producer warp (288 threads) ptxas still held the kernel
  // to 168 registers (65536 / 384) and a 224 cap failed to launch; setmaxnreg (below) works on
  // whole warpgroups, so the producer is a full one although a single thread of it works.
  static constexpr int kThreads = 32 * (kConsumerWarps + 4);
  // setmaxnreg budgets: the register file (64 K) moved from the producer to the consumers
  // (FlashAttention-3's values: 24 / 240 with 2 consumer warpgroups, 32 / 160 with 3).
  static constexpr int kProducerRegs = kWGs == 2 ? 24 : 32;
  static constexpr int kConsumerRegs = kWGs == 2 ? 240 : 160;
  static_assert(128 * kProducerRegs + 128 * kWGs * kConsumerRegs <= 65536, "register file");
  static_assert(kProducerRegs % 8 == 0 && kConsumerRegs % 8 == 0 && kProducerRegs >= 24 &&
                    kConsumerRegs <= 256,
                "setmaxnreg takes multiples of 8 in [24, 256]");
  static constexpr int kBoxes = kD / 64;
  static constexpr int kQBox = kBQ * 128, kKVBox = kBKV * 128;  // bytes
  static constexpr int kQBytes = kBoxes * kQBox, kKVBytes = kBoxes * kKVBox;
  // Q full and empty per Q buffer; K/V full and empty per stage.
  static constexpr int kBarriers = 2 * kQBuffers + 2 * kStages;
  static constexpr size_t kSmemBytes = size_t(kQBuffers) * kQBytes +
                                       2 * size_t(kStages) * kKVBytes + size_t(kWGs) * kPBytes +
                                       8 * kBarriers + 1024 /* alignment */;
  // Named barriers: 0 is __syncthreads; 1 .. kWGs the turns; kWGs + 1 .. 2 kWGs each warpgroup's
  // epilogue. The hardware has 16.
  static constexpr int kTurnBarrier0 = 1, kEpilogueBarrier0 = 1 + kWGs;
  static_assert(kTurnBarrier0 + kWGs <= kEpilogueBarrier0 && kEpilogueBarrier0 + kWGs <= 16,
                "named barriers");
  static_assert(kD == 64 || kD == 128, "instantiated for D = 64 and 128");
  static_assert(!kPSmem || kD == 64, "P through shared memory: written for D = 64 only");
  static_assert(kWGs == 2 || kWGs == 3, "2 or 3 consumer warpgroups");
  static_assert(kBKV == 128 || ((kBKV == 192 || kBKV == 256) && kD == 64),
                "128-key tiles, or 192 or 256 at D = 64");
  static_assert(kBQ <= 256 && kBKV <= 256, "a TMA box has at most 256 rows");
  static_assert(kSmemBytes <= 227 * 1024, "over the 227 KB of shared memory a block may use");
};

// Measured on the H100 (B 8, H 16, non-causal; S 4096 at D = 128, S 2048 at D = 64), one A/B run,
// each setting written into this file and rebuilt, in TFLOP/s (D = 128 / D = 64), with 2
// consumer warpgroups and 128-key tiles:
//   no intra-warpgroup overlap (S, softmax, P V in turn), 3 / 4 stages, no ping-pong: 485 / 302
//   overlap, 3 / 4 stages, ping-pong:    554 / 345
//   overlap, 3 / 4 stages, no ping-pong: 604 / 316
//   overlap, 2 / 2 stages, ping-pong:    444 / 285
// so D = 128 runs without the turns and D = 64 with them. (A reading, not profiled: at D = 128 a
// warpgroup's multiplies are long enough that the two warpgroups interleave well by themselves and
// the turns only add waits; at D = 64 the softmax is a larger share of each tile.)
// Shared memory: D = 128, Q 32 KB + 3 stages x (K 32 KB + V 32 KB) = 224 KB; D = 64, 16 KB + 4 x
// 32 KB = 144 KB.
using ConfigD128 = V5Config<128, 3, 2, 128, false>;

// D = 64 candidates, chosen at compile time: GPU100_V5_D64_CONFIG (non-causal, default 12) and
// GPU100_V5_D64_CAUSAL_CONFIG (causal, default the same), e.g. through CMake's cache variables
// of the same names. ptxas (13.0) spills in none of them; the highest register a consumer thread
// touches is noted (of 240 with 2 warpgroups, 160 with 3). Timed one by one on an H200 (B 8,
// H 16, S 2048, against cuDNN's 500 / 378 TFLOP/s in the same runs; non-causal / causal): 0 409 /
// 330, 1 468 / 349, 2 457 / 338, 3 409 / 324, 5 464 / 347, 7 430 / 320, 8 492 / 377 (246 causal
// with head-major items), 10 324 / 268, 11 328 / 177, 12 493 / 379
// (results/h200/day05_v5_d64_tilings.txt). 12 is the default for both masks.
//   0: 2 warpgroups (128 queries) x 128 keys, 4 stages, turns, overlap: the tiling measured at
//      345-378 TFLOP/s (R156)
//   1: 3 warpgroups (192 queries) x 128 keys, 4 stages, turns in a ring of 3, overlap: what
//      FlashAttention-3 runs at D = 64 causal (hopper/tile_size.h; R156)
//   2: as 1 without the turns (R156)
//   3: 2 warpgroups x 192 keys, 4 stages, turns, overlap (S 96 + P 48 + O 32 registers; R236)
//   4: 3 warpgroups x 128 keys, 4 stages, no turns, no overlap: the three warpgroups' own
//      interleaving as the only overlap (R125)
//   5: as 4 with the turns (R125)
//   6: 2 warpgroups x 192 keys, 4 stages, no turns, overlap (R237)
//   7, 8, 9: 0, 1 and 3, persistent (one block per SM; R156, R156, R237). Items go to blocks
//      round-robin, head-major (non-causal: equal items, one head's K and V shared in L2) or
//      tile-major (causal: each block gets one item of each length in turn).
//   10: 3 warpgroups x 192 keys, 2 stages, turns, overlap, P through shared memory: what
//      FlashAttention-3 runs at D = 64 non-causal (R157)
//   11: 10, persistent (R157)
//   12: 8 with 5 K/V stages
//   13: 2 warpgroups x 256 keys (cuDNN's tile at D = 64), 3 stages, turns, no overlap,
//       persistent (S 128 + P 64 + O 32 registers; 224 KB of shared memory)
//   14: 13 without the turns
//   (14 passed day05's v5 test cases; 13 was checked only by the driver's rows at the shapes below,
//   every row within tolerance.)
//   Against 12 on an H200, median ms of three alternating rounds in one call, before / after
//   the descriptor change above: S 2048 D 64 13 0.3085 / -, 14 0.2986 / 0.3044, 12 0.2850 /
//   0.2816; causal 13 0.2041 / -, 14 0.2004 / 0.2036, 12 0.1862 / 0.1864; S 1024 14 0.0856 /
//   0.0893, 12 0.0886 / 0.0874; B 1 H 8 S 16384 14 1.0790 / 1.0733, 12 1.1013 / 1.0751.
//   Without the overlap a warpgroup's softmax waits for its own S.
// Not in the table: 13 with the overlap (S of tile t, P of t - 1 and O live together: 224
// registers of data) spilled 144 bytes and serialised its wgmma (ptxas warning C7512); 3
// warpgroups x 192 keys with P in registers, without the overlap (S 96 + O 32
// registers, then P 48): ptxas spilled 288 bytes at 160 registers, with or without the turns (in
// the SASS, the exponentials went to other registers than the scores they replace).
using D64Configs = std::tuple<V5Config<64, 4, 2, 128, true>,                     // 0
                              V5Config<64, 4, 3, 128, true>,                     // 1
                              V5Config<64, 4, 3, 128, false>,                    // 2
                              V5Config<64, 4, 2, 192, true>,                     // 3
                              V5Config<64, 4, 3, 128, false, false>,             // 4
                              V5Config<64, 4, 3, 128, true, false>,              // 5
                              V5Config<64, 4, 2, 192, false>,                    // 6
                              V5Config<64, 4, 2, 128, true, true, true>,         // 7
                              V5Config<64, 4, 3, 128, true, true, true>,         // 8
                              V5Config<64, 4, 2, 192, true, true, true>,         // 9
                              V5Config<64, 2, 3, 192, true, true, false, true>,  // 10
                              V5Config<64, 2, 3, 192, true, true, true, true>,   // 11
                              V5Config<64, 5, 3, 128, true, true, true>,         // 12
                              V5Config<64, 3, 2, 256, true, false, true>,        // 13
                              V5Config<64, 3, 2, 256, false, false, true>>;      // 14
#ifndef GPU100_V5_D64_CONFIG
#define GPU100_V5_D64_CONFIG 12
#endif
#ifndef GPU100_V5_D64_CAUSAL_CONFIG
#define GPU100_V5_D64_CAUSAL_CONFIG GPU100_V5_D64_CONFIG
#endif
using ConfigD64 = std::tuple_element_t<GPU100_V5_D64_CONFIG, D64Configs>;
using ConfigD64Causal = std::tuple_element_t<GPU100_V5_D64_CAUSAL_CONFIG, D64Configs>;

// Persistent and not causal: item i's head and query tile (0 the last). The items of whole query
// tiles go first, head by head (one head's K and V shared in L2); each head's last tile, when S
// leaves it partly empty (`ragged`), comes after all of them. Its empty warpgroups skip their
// work, so it is the cheapest item, and it lands on the blocks with the fewest items.
struct HeadTile {
  int bh, index;
};
__host__ __device__ inline HeadTile noncausal_item(int i, int heads, int num_q_blocks,
                                                   bool ragged) {
  const int whole = ragged ? num_q_blocks - 1 : num_q_blocks;  // whole tiles per head
  if (i < heads * whole) return {i / whole, num_q_blocks - whole + i % whole};
  return {i - heads * whole, 0};
}

// kSplit: the launch has split items (persistent only). Without them the kernel is built without
// the parts' code, which keeps that code out of every other launch (compiled into all of them, it
// made ptxas lay out the D = 64 kernel differently, and the causal rows ran 1% slower).
template <class C, bool kSplit>
__global__ void __launch_bounds__(C::kThreads, 1)
    flash_v5_kernel(const __grid_constant__ CUtensorMap map_q,
                    const __grid_constant__ CUtensorMap map_k,
                    const __grid_constant__ CUtensorMap map_v,
                    const __grid_constant__ CUtensorMap map_o, float* __restrict__ lse, int s,
                    bool causal, float scale_log2, int num_q_blocks, int num_items, int o_heads,
                    float* __restrict__ partials, int split_from, int splits) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  static_assert(!kSplit || C::kPersistent, "only the persistent tilings split items");
  constexpr int kD = C::kD, kBKV = C::kBKV, kStages = C::kStages;
  extern __shared__ uint8_t smem_raw[];
  // The 128-byte swizzle repeats every 1024 bytes: every box must start on a 1024-byte boundary.
  uint8_t* smem = smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023);
  uint8_t* sq0 = smem;                            // kQBuffers x kBoxes x [kBQ][64]
  uint8_t* sk = sq0 + C::kQBuffers * C::kQBytes;  // kStages x kBoxes x [kBKV][64]
  uint8_t* sv = sk + kStages * C::kKVBytes;       // the same for V
  uint8_t* sp0 = sv + kStages * C::kKVBytes;      // kPSmem: kWGs x (kBKV / 64) x [64][64]
  uint64_t* q_full = reinterpret_cast<uint64_t*>(sp0 + C::kWGs * C::kPBytes);  // [kQBuffers]
  uint64_t* q_empty = q_full + C::kQBuffers;                                   // [kQBuffers]
  uint64_t* kv_full = q_empty + C::kQBuffers;                                  // [kStages]
  uint64_t* kv_empty = kv_full + kStages;                                      // [kStages]

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  // Item i: head bh = i / num_q_blocks, query tile num_q_blocks - 1 - i % num_q_blocks. The items
  // of one head are consecutive (K and V shared in L2); query tiles last to first, so the longest
  // causal ones start first. A block takes items blockIdx.x, + gridDim.x, ... (one item unless
  // kPersistent); its nth item (from 0) uses Q buffer nth % kQBuffers. Persistent and causal, the
  // items go tile-major instead (every head's last query tile, then every head's one before it):
  // with head-major items a block would meet the same tile of every head, always the longest or
  // always the shortest, while tile-major gives each block one item of each length in turn. One
  // block per item and causal, the items go in bands of kCausalBand heads, tile-major inside a band
  // (causal_order.hpp): the longest start first, so that the grid does not end on them.
  // A work unit is a whole item (key tiles 0 .. its last, slot -1) or, persistent and past
  // split_from, one of the `splits` parts of a last-round item (key tiles t0 .. t1 - 1, whose
  // partial O and log-sum-exp go to workspace slot `slot`; flash_v5_combine adds them up).
  struct Item {
    int bh, q0, t0, t1, slot;
  };
  auto item_at = [&](int u) {
    Item it;
    int i = u, part = 0;
    it.slot = -1;
    if constexpr (kSplit) {
      if (u >= split_from) {
        it.slot = u - split_from;
        i = split_from + it.slot / splits;
        part = it.slot % splits;
      }
    }
    const int heads = num_items / num_q_blocks;
    int index;  // which query tile of head it.bh, 0 the last (longest)
    if constexpr (C::kPersistent) {
      // band_major_item with one band of all heads gives the same order, but the D = 64 kernel
      // was up to 2% slower with it (causal; the header): ptxas laid the kernel out differently.
      const HeadTile ht = noncausal_item(i, heads, num_q_blocks, s % C::kBQ != 0);
      it.bh = causal ? i % heads : ht.bh;
      index = causal ? i / heads : ht.index;
    } else {
      const BandItem b = band_major_item(i, heads, num_q_blocks, causal ? kCausalBand : 0);
      it.bh = b.head;
      index = b.index;
    }
    it.q0 = (num_q_blocks - 1 - index) * C::kBQ;
    const int tiles = gpu100::ceil_div(causal ? min(s, it.q0 + C::kBQ) : s, kBKV);
    it.t0 = 0;
    it.t1 = tiles;
    if constexpr (kSplit) {
      if (it.slot >= 0) {  // part `part` of `splits`: as many tiles as the others, +-1
        it.t0 = part * tiles / splits;
        it.t1 = (part + 1) * tiles / splits;
      }
    }
    return it;
  };

  // (Without kPersistent the loops over items below run once, visibly to the compiler.)
  const int items_end = kSplit           ? split_from + (num_items - split_from) * splits
                        : C::kPersistent ? num_items
                                         : static_cast<int>(blockIdx.x) + 1;
  const int items_step = C::kPersistent ? static_cast<int>(gridDim.x) : 1;

  if (tid == 0) {
    for (int b = 0; b < C::kQBuffers; ++b) {
      mbar_init(&q_full[b], 1);         // the producer's expect_tx arrival
      mbar_init(&q_empty[b], C::kWGs);  // one per consumer warpgroup, once its O store read it
    }
    for (int st = 0; st < kStages; ++st) {
      mbar_init(&kv_full[st], 1);                   // the producer's expect_tx arrival
      mbar_init(&kv_empty[st], C::kConsumerWarps);  // one arrival per consumer warp
    }
    mbar_fence_init();
  }
  __syncthreads();  // the last block-wide barrier: the producer warpgroup leaves below

  if (warp >= C::kConsumerWarps) {
    // ---- producer warpgroup: gives its registers away; one thread issues every TMA copy ----
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(C::kProducerRegs));
    if (warp == C::kConsumerWarps && lane == 0) {
      int n = 0;  // K/V tiles loaded so far, over all items: stage n % kStages
      for (int item_idx = blockIdx.x, nth = 0; item_idx < items_end;
           item_idx += items_step, ++nth) {
        const Item it = item_at(item_idx);
        const int qb = nth % C::kQBuffers;
        uint8_t* sq = sq0 + qb * C::kQBytes;
        // Buffer qb last held item nth - kQBuffers: wait until its O has left (every warpgroup).
        if (nth >= C::kQBuffers) mbar_wait(&q_empty[qb], (nth / C::kQBuffers - 1) & 1);
        mbar_expect_tx(&q_full[qb], C::kQBytes);
        for (int b = 0; b < C::kBoxes; ++b)
          tma_load_3d(sq + b * C::kQBox, &map_q, 64 * b, it.q0, it.bh, &q_full[qb]);
        for (int t = it.t0; t < it.t1; ++t, ++n) {
          const int st = n % kStages;
          // Stage st last held tile n - kStages: wait until every consumer warp is done with it.
          if (n >= kStages) mbar_wait(&kv_empty[st], (n / kStages - 1) & 1);
          mbar_expect_tx(&kv_full[st], 2 * C::kKVBytes);
          for (int b = 0; b < C::kBoxes; ++b) {
            tma_load_3d(sk + st * C::kKVBytes + b * C::kKVBox, &map_k, 64 * b, t * kBKV, it.bh,
                        &kv_full[st]);
            tma_load_3d(sv + st * C::kKVBytes + b * C::kKVBox, &map_v, 64 * b, t * kBKV, it.bh,
                        &kv_full[st]);
          }
        }
      }
    }
    return;
  }

  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(C::kConsumerRegs));
  // ---- consumers: warpgroup wg owns query rows q0 + 64 wg .. + 63; warp wl of it rows 16 wl ..
  // 16 wl + 15 of those; lane (g, t4) rows g and g + 8, columns 8 j + 2 t4 + {0, 1} ----
  // wg and wl through a shuffle from lane 0, as CUTLASS does: ptxas then knows them warp-uniform
  // and may keep them (and the barrier IDs and row bases made from them) in uniform registers.
  const int wg = __shfl_sync(0xffffffffu, warp / 4, 0), wl = __shfl_sync(0xffffffffu, warp % 4, 0);
  const int g = lane / 4, t4 = lane % 4;
  int n0 = 0;                                       // K/V tiles consumed so far, over all items
  const uint64_t desc_k = make_desc(sk, 16, 1024);  // K K-major (S's B)
  const uint64_t desc_v = make_desc(sv, C::kKVBox, 1024);              // V read N-major (O's B)
  const uint64_t desc_p = make_desc(sp0 + wg * C::kPBytes, 16, 1024);  // kPSmem: P as O's A
  for (int item_idx = blockIdx.x, nth = 0; item_idx < items_end; item_idx += items_step, ++nth) {
    const Item item = item_at(item_idx);
    const int bh = item.bh, q0 = item.q0, qb = nth % C::kQBuffers;
    // This unit's key tiles t0 .. t0 + num_tiles - 1; the loops below count t from 0.
    const int t0 = item.t0, num_tiles = item.t1 - item.t0;
    uint8_t* sq = sq0 + qb * C::kQBytes;
    // The stage of this item's tile t, and the parity its full barrier completes with.
    // (n0 and nth are 0 without kPersistent: written so that the compiler sees it, else they
    // took registers, which spilled with P in shared memory.)
    auto stage = [&](int t) { return ((C::kPersistent ? n0 : 0) + t) % kStages; };
    auto parity = [&](int t) { return (((C::kPersistent ? n0 : 0) + t) / kStages) & 1; };
    const int warp_first = q0 + 64 * wg + 16 * wl;  // the warp's first query row
    const int row_g = warp_first + g;               // this lane's rows: row_g, row_g + 8

    float oacc[kD / 2];  // O: 64 x kD per warpgroup
#pragma unroll
    for (int i = 0; i < kD / 2; ++i) oacc[i] = 0.f;
    float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.f, 0.f};  // l: this lane's partial sums
    float sacc[kBKV / 2];  // S, then P in fp32: sacc[4 j + 2 h + e] is row row_g + 8 h,
                           // key kv0 + 8 j + 2 t4 + e
    // P in bf16 A fragments, one per 16 keys (with kPSmem, in shared memory at sp instead).
    uint32_t pa[C::kPSmem ? 1 : kBKV / 16][4];
    uint8_t* sp = sp0 + wg * C::kPBytes;

    // S = Q K^T for the tile in stage st (64 x kBKV per warpgroup): both operands K-major (d
    // contiguous). A k-step of 16 d is 32 bytes further inside each 128-byte row, the next box
    // after 4 steps; the warpgroup's Q rows start 64 rows = 8 KB into each Q box; SBO = 1024 B per
    // 8 rows.
    // The descriptors are built once (make_desc: the item's Q rows, stage 0 of K and V, P) and
    // moved with one 32-bit add each (day04's desc_at), as bwd v3 does: built afresh for every
    // wgmma they cost 5 uniform instructions each, which issue from the same warps as the softmax.
    const uint64_t desc_q = make_desc(sq + wg * 64 * 128, 16, 1024);
    auto issue_qk = [&](int st) {
      const uint32_t stage_off = st * (C::kKVBytes >> 4);
#pragma unroll
      for (int kk = 0; kk < kD / 16; ++kk) {
        const uint32_t off = (kk % 4) * 32;
        const uint64_t dq = desc_at(desc_q, ((kk / 4) * C::kQBox + off) >> 4);
        const uint64_t dk = desc_at(desc_k, stage_off + (((kk / 4) * C::kKVBox + off) >> 4));
        if constexpr (kBKV == 128) {
          wgmma_m64n128k16_bf16_ss(sacc, dq, dk, kk > 0 ? 1 : 0);
        } else if constexpr (kBKV == 192) {
          wgmma_m64n192k16_bf16_ss(sacc, dq, dk, kk > 0 ? 1 : 0);
        } else {
          wgmma_m64n256k16_bf16_ss(sacc, dq, dk, kk > 0 ? 1 : 0);
        }
      }
      commit();
    };
    // O += P V for the tile in stage st: A = P from registers (kPSmem: from shared memory, laid
    // out as Q), B = V as stored, [key][d], i.e. N-major (a transposed read): a k-step of 16 keys
    // is 16 rows = 2048 B further, LBO = one box (the next 64 columns of d).
    auto issue_pv = [&](int st) {
      const uint32_t stage_off = st * (C::kKVBytes >> 4);
#pragma unroll
      for (int kk = 0; kk < kBKV / 16; ++kk) {
        const uint64_t dv = desc_at(desc_v, stage_off + kk * (2048 >> 4));
        if constexpr (C::kPSmem) {  // P as K-major A: 16 keys = 32 bytes, the next box after 4
          const uint64_t dp = desc_at(desc_p, ((kk / 4) * 8192 + (kk % 4) * 32) >> 4);
          wgmma_m64n64k16_bf16_ss_major<0, 1>(oacc, dp, dv, 1);
        } else if constexpr (kD == 128) {
          wgmma_m64n128k16_bf16_rs(oacc, pa[kk], dv);
        } else {
          wgmma_m64n64k16_bf16_rs(oacc, pa[kk], dv);
        }
      }
      commit();
    };
    // Mask and online softmax of tile t (as v4): P overwrites S in sacc, m and l are updated, and
    // alpha = exp2(m_old - m_new) per row is returned for O. As in v4, only the tiles that cross S
    // or the warp's causal diagonal run the mask code (kMask); the others run a copy without it.
    auto softmax_body = [&](int t, float(&alpha)[2], auto mask_tag) {
      constexpr bool kMask = decltype(mask_tag)::value;
      const int kv0 = t * kBKV;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        // The row's last visible key (key < S, and key <= row if causal), relative to this lane's
        // first column kv0 + 2 t4: column 8 j + e is masked past it (one compare with a constant).
        const int last = (causal ? min(s - 1, row_g + 8 * h) : s - 1) - kv0 - 2 * t4;
        float mx = -INFINITY;
#pragma unroll
        for (int j = 0; j < kBKV / 8; ++j)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            float& x = sacc[4 * j + 2 * h + e];
            if constexpr (kMask) {
              if (8 * j + e > last) x = -INFINITY;
            }
            mx = fmaxf(mx, x);
          }
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));  // a row spans the 4 lanes of a quad
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        const float m_new = fmaxf(m_run[h], mx);
        const float m_scaled = m_new == -INFINITY ? 0.f : m_new * scale_log2;
        alpha[h] = fast_exp2(m_run[h] * scale_log2 - m_scaled);  // 0 at first
        m_run[h] = m_new;
        float sum = 0.f;
#pragma unroll
        for (int j = 0; j < kBKV / 8; ++j)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            float& x = sacc[4 * j + 2 * h + e];
            x = fast_exp2(fmaf(x, scale_log2, -m_scaled));  // masked: exp2(-inf) = 0
            sum += x;
          }
        l_run[h] = l_run[h] * alpha[h] + sum;
      }
    };
    // Tiles t < mask_from lie wholly inside S and, if causal, at or left of the warp's diagonal
    // (kv0 + kBKV - 1 <= warp_first): they need no mask.
    const int mask_from = causal ? min(s / kBKV, (warp_first + 1) / kBKV) : s / kBKV;
    auto softmax = [&](int t, float(&alpha)[2]) {  // t counts from the unit's first tile
      if (t0 + t >= mask_from) {
        softmax_body(t0 + t, alpha, std::true_type{});
      } else {
        softmax_body(t0 + t, alpha, std::false_type{});
      }
    };
    // P to bf16 A fragments: keys 16 kk .. 16 kk + 15 are the S columns of n-tiles 2 kk, 2 kk + 1.
    auto pack_p = [&]() {
      if constexpr (C::kPSmem) {
        // Into the warpgroup's P tile, laid out as the O epilogue below lays out O (the 16-byte
        // chunk c of row r at chunk c ^ (r % 8)); the previous tile's P V has completed. Then the
        // writes are made visible to wgmma (async proxy). A warp's share of the warpgroup's
        // multiply reads only its own 16 rows of P, so the warp alone meets (FlashAttention-3's
        // __syncwarp here).
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int r = 16 * wl + g + 8 * h;  // row within the warpgroup's 64
#pragma unroll
          for (int j = 0; j < kBKV / 8; ++j) {
            uint8_t* dst = sp + (j / 8) * 8192 + r * 128 + (((j % 8) ^ (r % 8)) * 16) + 4 * t4;
            *reinterpret_cast<uint32_t*>(dst) =
                pack_bf16(sacc[4 * j + 2 * h], sacc[4 * j + 2 * h + 1]);
          }
        }
        fence_proxy_async_smem();
        __syncwarp();
      } else {
#pragma unroll
        for (int kk = 0; kk < kBKV / 16; ++kk) {
          pa[kk][0] = pack_bf16(sacc[8 * kk + 0], sacc[8 * kk + 1]);  // row g, keys 2 t4, +1
          pa[kk][1] = pack_bf16(sacc[8 * kk + 2], sacc[8 * kk + 3]);  // row g + 8
          pa[kk][2] = pack_bf16(sacc[8 * kk + 4], sacc[8 * kk + 5]);  // row g, keys + 8
          pa[kk][3] = pack_bf16(sacc[8 * kk + 6], sacc[8 * kk + 7]);  // row g + 8, keys + 8
        }
      }
    };
    // This warp is done reading stage st: one arrival of the kConsumerWarps the producer waits for.
    // (The lane index is read again here, not kept: with P in shared memory ptxas had spilled it.)
    auto release = [&](int st) {
      __syncwarp();
      uint32_t lane_now;
      asm volatile("mov.u32 %0, %%laneid;\n" : "=r"(lane_now));
      if (lane_now == 0) mbar_arrive(&kv_empty[st]);
    };
    // Ping-pong (kPingPong): the warpgroups take turns to issue their wgmma, in a ring. Warpgroup w
    // waits on named barrier kTurnBarrier0 + w before issuing and, once issued, lets the next one
    // go (bar.arrive on barrier (w + 1) % kWGs; 256 threads: the waiter and the one that lets it
    // go), so one warpgroup's softmax runs while another's multiplies occupy the tensor cores. The
    // last warpgroup opens the first turn; it skips its final hand-over, so every barrier sees as
    // many arrivals as waits (every warpgroup takes num_tiles turns). A warpgroup cannot pass twice
    // before the next one waits: its next turn comes round the whole ring first.
    constexpr int kWGs = C::kWGs;
    auto turn_wait = [&]() {
      if constexpr (C::kPingPong) {
        asm volatile("bar.sync %0, 256;\n" ::"r"(C::kTurnBarrier0 + wg) : "memory");
      }
    };
    auto turn_pass = [&](int t) {
      if constexpr (C::kPingPong) {
        if (!(wg == kWGs - 1 && t == num_tiles - 1)) {
          asm volatile("bar.arrive %0, 256;\n" ::"r"(C::kTurnBarrier0 + (wg + 1) % kWGs)
                       : "memory");
        }
      }
    };
    if constexpr (C::kPingPong) {
      if (wg == kWGs - 1) asm volatile("bar.arrive %0, 256;\n" ::"n"(C::kTurnBarrier0) : "memory");
    }
    // O *= alpha per row, only when some row of the warp saw its max move (a warp-uniform branch).
    auto rescale_o = [&](const float(&alpha)[2]) {
      if (__any_sync(0xffffffffu, alpha[0] != 1.f || alpha[1] != 1.f)) {
#pragma unroll
        for (int j = 0; j < kD / 8; ++j) {
          oacc[4 * j + 0] *= alpha[0];
          oacc[4 * j + 1] *= alpha[0];
          oacc[4 * j + 2] *= alpha[1];
          oacc[4 * j + 3] *= alpha[1];
        }
      }
    };

    if constexpr (C::kPersistent) {
      if (q0 + 64 * wg >= s) {
        // All 64 rows of this warpgroup are past S (a head's last query tile): it multiplies
        // nothing, only takes its turns (the others wait for them) and releases the stages, in
        // step with the others, and lets the Q buffer go.
        for (int t = 0; t < num_tiles; ++t) {
          turn_wait();
          turn_pass(t);
          release(stage(t));
        }
        if (threadIdx.x % 128 == 0) mbar_arrive(&q_empty[qb]);
        n0 += num_tiles;
        continue;
      }
    }
    mbar_wait(&q_full[qb], C::kPersistent ? (nth / C::kQBuffers) & 1 : 0);
    if constexpr (C::kOverlap) {
      // The loop is software-pipelined inside each warpgroup (FlashAttention-3's intra-warpgroup
      // overlap): S of tile t and O += P V of tile t - 1 are issued together, and the softmax of
      // tile t runs on the CUDA cores while the P V multiply is still on the tensor cores.
      mbar_wait(&kv_full[stage(0)], parity(0));
      turn_wait();
      fence();
      issue_qk(stage(0));
      turn_pass(0);
      wait<0>();
      {
        float alpha[2];
        softmax(0, alpha);  // O is still zero: no rescale
        pack_p();
      }
      for (int t = 1; t < num_tiles; ++t) {
        const int st = stage(t), prev = stage(t - 1);
        mbar_wait(&kv_full[st], parity(t));  // tile t's K and V have landed
        turn_wait();
        fence();
        issue_qk(st);    // group: S of tile t
        issue_pv(prev);  // group: O += P V of tile t - 1
        turn_pass(t);
        wait<1>();  // S of tile t is done (groups complete in order)
        float alpha[2];
        softmax(t, alpha);
        wait<0>();  // P V of tile t - 1 is done: O may be rescaled, pa rewritten, stage prev reused
        release(prev);
        rescale_o(alpha);
        pack_p();
      }
      fence();
      issue_pv(stage(num_tiles - 1));  // the last tile's P V
      wait<0>();
      release(stage(num_tiles - 1));
    } else {
      // No overlap inside the warpgroup: S, softmax, P V of each tile in turn, so S (fp32) and P
      // (bf16) of one tile only are live, never S of the next beside P of this one; the other
      // warpgroups fill the tensor cores meanwhile. The turn covers the S multiply.
      for (int t = 0; t < num_tiles; ++t) {
        const int st = stage(t);
        mbar_wait(&kv_full[st], parity(t));
        turn_wait();
        fence();
        issue_qk(st);
        turn_pass(t);
        wait<0>();
        float alpha[2];
        softmax(t, alpha);
        if (t > 0) rescale_o(alpha);  // O is still zero at t = 0
        pack_p();
        fence();
        issue_pv(st);
        wait<0>();
        release(st);
      }
    }

    if (kSplit && item.slot >= 0) {
      // ---- a part's epilogue: its O / l in fp32 and its row log-sum-exp, to its workspace slot
      // (kBQ rows of kD, then kBQ log-sum-exps; rows past S too, which the combine skips) ----
      float* slot = partials + size_t(item.slot) * (C::kBQ * (kD + 1));
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float l = l_run[h];
        l += __shfl_xor_sync(0xffffffffu, l, 1);
        l += __shfl_xor_sync(0xffffffffu, l, 2);
        const float inv = 1.f / l;  // every part has a key of every row (no mask but S)
        const int r = 64 * wg + 16 * wl + g + 8 * h;
#pragma unroll
        for (int j = 0; j < kD / 8; ++j) {
          *reinterpret_cast<float2*>(slot + r * kD + 8 * j + 2 * t4) =
              make_float2(oacc[4 * j + 2 * h] * inv, oacc[4 * j + 2 * h + 1] * inv);
        }
        if (t4 == 0) slot[C::kBQ * kD + r] = (m_run[h] * scale_log2 + log2f(l)) * kLn2;
      }
      // The warpgroup's 4 warps are done with this Q buffer: it may take the next unit's Q.
      asm volatile("bar.sync %0, 128;\n" ::"r"(C::kEpilogueBarrier0 + wg) : "memory");
      if (threadIdx.x % 128 == 0) mbar_arrive(&q_empty[qb]);
      n0 += num_tiles;
      continue;
    }
    // ---- epilogue: the row log-sum-exp, then O / l in bf16 through shared memory and the TMA ----
    float inv[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float l = l_run[h];
      l += __shfl_xor_sync(0xffffffffu, l, 1);
      l += __shfl_xor_sync(0xffffffffu, l, 2);
      inv[h] = l > 0.f ? 1.f / l : 0.f;
      const int row = row_g + 8 * h;
      if (row < s && t4 == 0 && lse != nullptr) {
        lse[size_t(bh) * s + row] = (m_run[h] * scale_log2 + log2f(l)) * kLn2;
      }
    }
    // O goes into this warpgroup's own 64 rows of the Q tile (its last Q K^T has completed, and the
    // other warpgroups read only their own rows), in the Q boxes' 128-byte swizzle: the 16-byte
    // chunk c of row r sits at chunk c ^ (r % 8), which also spreads a warp's 4-byte writes over
    // all 32 banks. One thread then stores the warpgroup's kD / 64 boxes of 64 x 64 with the TMA,
    // which clips rows past S. Measured against 4-byte global stores straight from the accumulators
    // (one A/B run, two timings each, TFLOP/s): 602-606 vs 595 at S4096 D128, 347-349 vs 345-348 at
    // S2048 D64, 259-261 vs 249-251 causal at S2048 D64.
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      int r = 64 * wg + 16 * wl + g + 8 * h;  // row within the block's kBQ
      // (An empty asm the compiler cannot see through: it computed the 2 x kD / 8 addresses
      // below before the tile loop and kept them in registers through it, 8 bytes of spill with
      // 3 warpgroups.)
      asm volatile("" : "+r"(r));
#pragma unroll
      for (int j = 0; j < kD / 8; ++j) {
        uint8_t* dst = sq + (j / 8) * C::kQBox + r * 128 + (((j % 8) ^ (r % 8)) * 16) + 4 * t4;
        *reinterpret_cast<uint32_t*>(dst) =
            pack_bf16(oacc[4 * j + 2 * h] * inv[h], oacc[4 * j + 2 * h + 1] * inv[h]);
      }
    }
    // These generic-proxy writes, before the TMA (async proxy) reads them; then the warpgroup's 4
    // warps meet.
    fence_proxy_async_smem();
    asm volatile("bar.sync %0, 128;\n" ::"r"(C::kEpilogueBarrier0 + wg) : "memory");
    if (threadIdx.x % 128 == 0) {
#pragma unroll
      for (int b = 0; b < C::kBoxes; ++b) {
        const uint8_t* box = sq + b * C::kQBox + wg * 64 * 128;
        if (o_heads > 0) {  // token-major O, [B, S, H, D]: the map's dimensions are (D, H, S, B)
          tma_store_4d(&map_o, box, 64 * b, bh % o_heads, q0 + 64 * wg, bh / o_heads);
        } else {
          tma_store_3d(&map_o, box, 64 * b, q0 + 64 * wg, bh);
        }
      }
      bulk_commit();
      bulk_wait_read_all();  // shared memory must outlive the copy
      if constexpr (C::kPersistent) mbar_arrive(&q_empty[qb]);  // the next Q may come in
    }
    n0 += num_tiles;
  }
#else
  // Built for an architecture without wgmma: the launcher never calls this.
  (void)map_q, (void)map_k, (void)map_v, (void)map_o, (void)lse, (void)s, (void)causal,
      (void)scale_log2, (void)num_q_blocks, (void)num_items, (void)o_heads, (void)partials,
      (void)split_from, (void)splits;
#endif
}

// The parts of the last round's items put together, as flash-decoding does: for each row, over
// its parts p, lse = log sum_p exp(lse_p) and O = sum_p exp(lse_p - lse) O_p, in bf16 to O (and
// lse to the row log-sum-exp). One thread per row and 8 columns. Plain loads and stores: it runs
// on any GPU, although only v5's persistent tiling (sm_90a) writes parts.
template <int kD, int kBQ>
__global__ void __launch_bounds__(256)
    flash_v5_combine(const float* __restrict__ partials, int splits, int split_from, int num_tail,
                     int heads, int num_q_blocks, int s, bf16* __restrict__ o, int o_heads,
                     float* __restrict__ lse) {
  constexpr int kChunks = kD / 8, kSlot = kBQ * (kD + 1);
  const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int tail = static_cast<int>(idx / (kBQ * kChunks));
  if (tail >= num_tail) return;
  const int r = static_cast<int>(idx % (kBQ * kChunks)) / kChunks,
            c = static_cast<int>(idx % kChunks);
  // The item, as the kernel's item_at maps it (persistent, not causal).
  const HeadTile ht = noncausal_item(split_from + tail, heads, num_q_blocks, s % kBQ != 0);
  const int bh = ht.bh, row = (num_q_blocks - 1 - ht.index) * kBQ + r;
  if (row >= s) return;
  const float* first = partials + size_t(tail) * splits * kSlot;  // its slots: tail splits + p
  float mx = -INFINITY;
  for (int p = 0; p < splits; ++p) mx = fmaxf(mx, first[p * kSlot + kBQ * kD + r]);
  float sum = 0.f, acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
  for (int p = 0; p < splits; ++p) {
    const float* part = first + p * kSlot;
    const float w = __expf(part[kBQ * kD + r] - mx);
    const float4 a = *reinterpret_cast<const float4*>(part + r * kD + 8 * c);
    const float4 b = *reinterpret_cast<const float4*>(part + r * kD + 8 * c + 4);
    sum += w;
    acc[0] += w * a.x, acc[1] += w * a.y, acc[2] += w * a.z, acc[3] += w * a.w;
    acc[4] += w * b.x, acc[5] += w * b.y, acc[6] += w * b.z, acc[7] += w * b.w;
  }
  const float inv = 1.f / sum;
  uint4 out;
  out.x = pack_bf16(acc[0] * inv, acc[1] * inv), out.y = pack_bf16(acc[2] * inv, acc[3] * inv);
  out.z = pack_bf16(acc[4] * inv, acc[5] * inv), out.w = pack_bf16(acc[6] * inv, acc[7] * inv);
  const size_t at = o_heads > 0  // token-major [B, S, H, D], or [B, H, S, D]
                        ? ((size_t(bh / o_heads) * s + row) * o_heads + bh % o_heads) * kD
                        : (size_t(bh) * s + row) * kD;
  *reinterpret_cast<uint4*>(o + at + 8 * c) = out;
  if (c == 0 && lse != nullptr) lse[size_t(bh) * s + row] = mx + logf(sum);
}

// Bytes of one part's slot in the workspace: kBQ rows of kD floats, then kBQ log-sum-exps.
template <class C>
constexpr size_t part_slot_bytes() {
  return size_t(C::kBQ) * (C::kD + 1) * sizeof(float);
}
constexpr int kMaxTailParts = 256;  // the workspace has room for this many parts (SMs)
size_t lse_bytes_rounded(const AttentionShape& s) {
  return gpu100::round_up<size_t>(flash_workspace_bytes(s), 256);
}

// Which items the tiling C splits on a GPU of `sms` SMs (v5_tail_split in attention.hpp).
template <class C>
V5TailSplit tail_split(const AttentionShape& s, int sms) {
  V5TailSplit p;
  p.rows = C::kBQ;
  p.items = s.heads() * gpu100::ceil_div(s.s, C::kBQ);
  p.blocks = static_cast<int>(C::kPersistent ? std::min<int64_t>(p.items, sms) : p.items);
  p.split_from = p.items;
  if (!C::kPersistent || s.causal || p.blocks < 1) return p;
  const int64_t last = p.items % p.blocks;  // items in the last round; 0: every round is full
  const int tiles = gpu100::ceil_div(s.s, C::kBKV);
  if (last > 0 && 2 * last <= p.blocks) {
    const int splits = static_cast<int>(std::min<int64_t>(p.blocks / last, tiles));
    if (splits > 1) {
      p.splits = splits;
      p.split_from = p.items - last;
    }
  }
  return p;
}

template <class C>
void launch_v5(const AttentionShape& s, const bf16* q, const bf16* k, const bf16* v, bf16* o,
               void* workspace, size_t workspace_bytes, OLayout layout, cudaStream_t stream) {
  static gpu100::PerDevice<bool> attr_set;  // the attribute is per GPU: set on each
  attr_set.get([] {
    CUDA_CHECK(cudaFuncSetAttribute(flash_v5_kernel<C, false>,
                                    cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    int(C::kSmemBytes)));
    if constexpr (C::kPersistent) {
      CUDA_CHECK(cudaFuncSetAttribute(flash_v5_kernel<C, true>,
                                      cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      int(C::kSmemBytes)));
    }
    return true;
  });
  const int num_q_blocks = gpu100::ceil_div(s.s, C::kBQ);
  const int64_t items = s.heads() * num_q_blocks;
  if (items > int64_t(0x7fffffff)) throw std::invalid_argument("v5_flash_wgmma: grid too large");
  int64_t blocks = items;  // one per item, or (kPersistent) one per SM, each walking items
  float* lse = static_cast<float*>(workspace);
  // Persistent: the last round's items split into parts when that round would leave more than
  // half the blocks idle, and the workspace has room for the parts.
  V5TailSplit split;
  split.split_from = items;
  float* partials = nullptr;
  if constexpr (C::kPersistent) {
    int device = 0, sms = 0;
    CUDA_CHECK(cudaGetDevice(&device));
    CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    blocks = std::min<int64_t>(items, sms);
    const V5TailSplit plan = tail_split<C>(s, sms);
    const int64_t parts = (plan.items - plan.split_from) * plan.splits;
    if (plan.splits > 1 && parts <= kMaxTailParts &&
        workspace_bytes >= lse_bytes_rounded(s) + size_t(parts) * part_slot_bytes<C>()) {
      split = plan;
      partials = reinterpret_cast<float*>(static_cast<char*>(workspace) + lse_bytes_rounded(s));
    }
  }
  // Q, K, V as B H matrices of S x D; boxes of kBQ (Q) or kBKV (K, V) rows x 64 columns.
  const CUtensorMap mq = day04::make_tma_map_3d(q, s.heads(), s.s, s.d, C::kBQ, 64);
  const CUtensorMap mk = day04::make_tma_map_3d(k, s.heads(), s.s, s.d, C::kBKV, 64);
  const CUtensorMap mv = day04::make_tma_map_3d(v, s.heads(), s.s, s.d, C::kBKV, 64);
  // O's stores: boxes of 64 rows x 64 columns of one head, [B, H, S, D] or token-major.
  const bool token_major = layout == OLayout::kBSHD;
  const CUtensorMap mo =
      token_major
          ? day04::make_tma_map_4d(o, {s.d, s.h, s.s, s.b},
                                   {int64_t(s.d), int64_t(s.h) * s.d, int64_t(s.s) * s.h * s.d},
                                   {64, 1, 64, 1})
          : day04::make_tma_map_3d(o, s.heads(), s.s, s.d, 64, 64);
  const auto kernel =
      partials != nullptr ? flash_v5_kernel<C, C::kPersistent> : flash_v5_kernel<C, false>;
  kernel<<<static_cast<unsigned>(blocks), C::kThreads, C::kSmemBytes, stream>>>(
      mq, mk, mv, mo, lse, s.s, s.causal, softmax_scale(s.d) * kLog2e, num_q_blocks,
      static_cast<int>(items), token_major ? s.h : 0, partials, static_cast<int>(split.split_from),
      split.splits);
  CUDA_CHECK_LAST();
  if constexpr (C::kPersistent) {
    if (partials != nullptr) {
      const int tail = static_cast<int>(items - split.split_from);
      const int64_t threads = int64_t(tail) * C::kBQ * (C::kD / 8);
      flash_v5_combine<C::kD, C::kBQ>
          <<<static_cast<unsigned>(gpu100::ceil_div<int64_t>(threads, 256)), 256, 0, stream>>>(
              partials, split.splits, static_cast<int>(split.split_from), tail,
              static_cast<int>(s.heads()), num_q_blocks, s.s, o, token_major ? s.h : 0, lse);
      CUDA_CHECK_LAST();
    }
  }
}

}  // namespace

void attention_v5_flash_wgmma(const AttentionShape& s, const bf16* q, const bf16* k, const bf16* v,
                              bf16* o, void* workspace, size_t workspace_bytes,
                              cudaStream_t stream) {
  attention_v5_flash_wgmma(s, q, k, v, o, OLayout::kBHSD, workspace, workspace_bytes, stream);
}

void attention_v5_flash_wgmma(const AttentionShape& s, const bf16* q, const bf16* k, const bf16* v,
                              bf16* o, OLayout layout, void* workspace, size_t workspace_bytes,
                              cudaStream_t stream) {
  check_shape(s);
  if (const std::string why = v5_refusal(s); !why.empty()) throw std::invalid_argument(why);
  if (q == nullptr || k == nullptr || v == nullptr || o == nullptr) {
    throw std::invalid_argument("v5_flash_wgmma: null pointer");
  }
  if (!gpu100::aligned16(q) || !gpu100::aligned16(k) || !gpu100::aligned16(v) ||
      !gpu100::aligned16(o)) {
    throw std::invalid_argument("v5_flash_wgmma: Q, K, V and O must be 16-byte aligned (TMA)");
  }
  if (workspace == nullptr || workspace_bytes < flash_workspace_bytes(s)) {
    throw std::invalid_argument("v5_flash_wgmma: the workspace must hold the B H S log-sum-exp");
  }
  gpu100::require_build(gpu100::ArchNeed::kSm90a, "v5_flash_wgmma");
  if (s.d == 64 && s.causal) {
    launch_v5<ConfigD64Causal>(s, q, k, v, o, workspace, workspace_bytes, layout, stream);
  } else if (s.d == 64) {
    launch_v5<ConfigD64>(s, q, k, v, o, workspace, workspace_bytes, layout, stream);
  } else {
    launch_v5<ConfigD128>(s, q, k, v, o, workspace, workspace_bytes, layout, stream);
  }
}

V5TailSplit v5_tail_split(const AttentionShape& s, int sms) {
  check_shape(s);
  if (const std::string why = v5_refusal(s); !why.empty()) throw std::invalid_argument(why);
  if (sms < 1) throw std::invalid_argument("v5_tail_split: the GPU has at least one SM");
  if (s.d == 64) {
    return s.causal ? tail_split<ConfigD64Causal>(s, sms) : tail_split<ConfigD64>(s, sms);
  }
  return tail_split<ConfigD128>(s, sms);
}

size_t v5_workspace_bytes(const AttentionShape& s) {
  if (s.d != 64 || s.causal || !ConfigD64::kPersistent) return flash_workspace_bytes(s);
  const int64_t items = s.heads() * gpu100::ceil_div(s.s, ConfigD64::kBQ);
  return lse_bytes_rounded(s) +
         size_t(std::min<int64_t>(items, kMaxTailParts)) * part_slot_bytes<ConfigD64>();
}

}  // namespace day05
