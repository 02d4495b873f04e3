// bwd_v3_flash_wgmma: the attention backward on Hopper's warpgroup MMA (kernel code only in sm_90a
// targets; refused elsewhere), after FlashAttention-3's backward (Shah et al. 2024), written here
// from scratch with day04's wgmma / TMA / mbarrier wrappers (day04_matmul/wgmma.cuh, tma.hpp).
// What changed from bwd v2 (bwd_v2_flash_mma.cu), and why it should be faster:
//  - the five products run on wgmma: a warpgroup issues m64nNk16 whose operands come from shared
//    memory through descriptors (no ldmatrix), four times the work per instruction of mma.sync;
//    dV += P^T dO and dK += dS^T Q take P^T and dS^T from registers (the RS form), dO and Q read
//    MN-major through the transpose bit; dQ = dS K reads dS^T and K both MN-major;
//  - a producer warpgroup feeds the query tiles (Q, dO, and the row lse and D_i) with TMA through a
//    ring of mbarriers (full: the bytes landed; empty: all 256 consumer threads are done), and
//    gives its registers to the 2 consumer warpgroups (setmaxnreg 24 / 240), as v5_flash_wgmma.cu
//    does;
//  - 128 keys per block (64 per consumer warpgroup: the wgmma's M), twice bwd v2's, so Q and dO
//    are read half as often.
//  - dQ's fp32 partial of each tile leaves through shared memory by TMA reduce-adds (two 64 x 32
//    boxes per warpgroup) instead of 16 red.global.add.v2.f32 per thread: 477 against 393
//    TFLOP/s at S 4096 D 128 (323 against 313 at S 2048 D 64), one A/B run on an H200;
//  - dQ's products are issued before dK's, so dQ completes first and its partial is stored while
//    dK still runs; two producer warps that had nothing to do become dQ writers (one per consumer
//    warpgroup: it waits on a named barrier for the partial, issues the reduce-adds and signals
//    the buffer free again), so a consumer only arrives instead of waiting for the copy engine;
//    dS^T is computed whole before it is stored and the tile's lse and D_i are read before the
//    waits, so those loads no longer queue behind shared-memory stores (Nsight Compute had put
//    about 11% of the stall samples on them and 10% on the tile's final wgmma wait). One A/B on an
//    H200, two rounds: 458 / 477 to 514 / 497 TFLOP/s at S 4096 D 128, 322 to 357 at S 2048 D 64.
//    Inside a warpgroup P^T is computed while dP^T is still on the tensor cores and dS^T while dV's
//    products run (FlashAttention-3's intra-warpgroup overlap; measured alone, with the reductions
//    still by red, no change: 393 / 313 against 392 / 320).
//  - the ring holds more query tiles: 3 at D = 128 (all the shared memory a block may have), 4 at
//    D = 64, instead of 2. With 2, the copies of tile n + 2 could start only once every consumer
//    thread was done with tile n, so at most one tile's loads travelled under the work. One A/B
//    on an H200, two rounds (the day's binary, --backward --batch 8 --heads 16 --check-heads 1):
//    S 2048 D 64 362-364 to 375-377 TFLOP/s (3 stages: 367-369), causal 283-285 to 292-294;
//    S 4096 D 128 499 to 510-522, causal 462-465 to 462-471.
//  - under the causal mask the key blocks go in bands of 8 heads, every head's key block 0 of the
//    band first (causal_order.hpp), so that the longest blocks do not start last: causal S 2048
//    D 64 292 to 300 TFLOP/s (head-major order before), one A/B on an H200, two rounds.
//  - at D = 64 the warpgroups take turns at dQ (one 64-column box), so every other tile a
//    warpgroup reached the dS^T barrier with nothing on the tensor cores and waited there for the
//    other (Nsight Compute: about an eighth of the consumer warps' time). It now issues its dK
//    before the barrier, and the warpgroup with the dQ box issues dQ behind it. One A/B on an
//    H200, two rounds: S 2048 D 64 392 to 404 TFLOP/s, causal 326 to 334 (kernel 811 to 785 us).
//    At D = 128 both warpgroups have a dQ box every tile and the same order lost (503 to 477,
//    causal 469-482 to 443-453: dQ's hand-off to the writer then waits for dK), so it keeps dQ
//    first.
//  - at D = 128 the tile's lse is read from shared memory before S^T and dP^T are issued, not
//    after: Nsight Compute put 7% of the stall samples on the softmax waiting for those 8 loads,
//    which queued behind the 16 wgmmas' operand reads. The mask test is also written with one
//    value, kw0 + 15, for both of its key tests. One A/B on an H200 (Nsight Compute kernel time;
//    these two forms three rounds at D = 128, two causal): S 4096 D 128 B 4 2.48-2.49 to 2.39-2.40
//    ms, causal 1.33 to 1.29 ms; the training step (S 2048 D 128, causal) 1.134 to 1.106-1.107 ms.
//    At D = 64 (one round) the mask test alone: 777 to 770 us, causal 444 to 440; reading lse
//    early there: 784 us, so D = 64 keeps it after the products.
//  - at D = 128 the swizzled stores of dS^T and dQ XOR their 16-byte chunk with g, not with r % 8
//    (the same number: each row r is g plus a multiple of 8): ptxas had kept those values in
//    local memory (16 bytes of spill stores, 24 of loads) and reloaded two of them every tile (2
//    LDL in the tile loop's SASS); now no spill, and 1861 SASS instructions instead of 1909.
//    Nsight Compute kernel time on an H200, two rounds alternating with the tree before: S 4096
//    D 128 B 4 2.38 to 2.35 ms, causal 1.28 to 1.26 ms. At D = 64 (no spill either way; 1847 to
//    1791 instructions) the same form measured slower, 766-768 to 773-776 us, so D = 64 keeps
//    r % 8 (kSwizzleByG).
//  - dQ's fp32 partial goes through shared memory in 8 boxes of 8 columns (32-byte rows, no
//    swizzle) instead of 2 boxes of 32 columns in the 128-byte swizzle. A warp's 8-byte stores
//    reach the banks a half-warp (16 lanes, 128 bytes) at a time, and lanes 0-15 hold rows g =
//    0..3: in the swizzle, rows g and g ^ 1 put their 32 bytes in the same two 16-byte columns (XOR
//    with 1 only swaps a pair), so every store took 4 wavefronts instead of 2. Nsight Compute at S
//    4096 D 128 had counted 36.7 M bank conflicts on the shared stores (280 a tile, 30% of their
//    wavefronts); with the narrow boxes 3.8 M, and the kernel's shared wavefronts 395 M to 363 M.
//    The writer warp issues 8 reduce-adds per box instead of 2; the L2 adds the same sectors.
//    One A/B on an H200 (two rounds): S 4096 D 128 2.48-2.51 to 2.42 ms (548-553 to 568 TFLOP/s),
//    causal 1.384-1.389 to 1.352-1.354 ms; kernel 2.36 to 2.31 ms under Nsight Compute. At D = 64
//    no change (0.834 ms either way, causal 0.507-0.509), kept for one layout.
// What it costs: sm_90a only; one block of 384 threads per SM (225.5 KB of shared memory at D =
// 128); dQ's partial sums still go through L2 as fp32 additions, S / 128 per element of dQ; the
// pre-pass also writes the row log-sum-exp x log2 e, in rows padded to 64.
// Tried and not kept: at D = 64, dQ split by keys (each warpgroup all 64 columns over its own 64
// keys, no barrier between the warpgroups, twice the reduce-adds): 297 against 322 TFLOP/s, and
// again with the writer warps issuing the reduce-adds: 338 against 393 (949 against 807 us). Also
// at D = 64, dQ split by columns (each warpgroup 32 of the 64 columns every tile, m64n32k16, one
// reduce-add each, so neither waits for the other's turn): 340-343 against 362-364 with 2 stages,
// 347-349 against 375-377 with 4.
// Tried and not kept: dK left running into the next tile (its wait moved to the next tile's first
// one): ptxas then serialises every wgmma of the kernel (its C7515 advice), because the next
// tile's S^T lands in the registers that held dK's A operand. With dK's A operand read from
// shared memory instead (dS^T is stored there anyway; no serialisation), an A/B on an H200 over
// two rounds: 485 / 517 to 489 / 485 TFLOP/s at S 4096 D 128, 357 to 343-346 at S 2048 D 64.
// Tried and not kept: persistent (one block per SM walks the key blocks, the next one's K and V
// loaded while this one's dK and dV are stored): 819 against 807 us at S 2048 D 64; with the last
// round's key blocks cut into one equal run of query tiles per block (stream-K's tail): 805 us.
// Tried and not kept, at D = 64, on top of dK before the barrier (same A/B, 785 us): the
// warpgroup without a dQ box only arriving at the barrier (bar.arrive, two barrier ids by tile
// parity): 783 us, 404 TFLOP/s, no gain for a second barrier; and each tile's dQ issued in the
// next tile, behind its S^T and dP^T: 793 us, 399.
// Tried and not kept, at D = 128 (same A/B, one round each): lse read between S^T's and dP^T's
// issue, 2.51 ms; read from global memory (L2) at the top of the tile, before the wait for its
// stage, 2.53 ms; the new mask test alone, 2.51 ms.
// Tried and not kept: the dQ post-pass folded in (one A/B on an H200, two rounds; the day05 README
// has the tables). The block that adds a tile's last dQ part converting that tile (per-tile
// counters, a hand-off ring to the idle producer warp) was 1.3-2.0x slower: the last-started block
// of a head completes nearly every tile of it and converts the whole head alone. The post-pass as
// a programmatic dependent launch, converting each head once its blocks are done while the last
// blocks run: 0.1-0.9% at D = 64, none at D = 128.
// Not done here (FlashAttention-3 does more): 3 consumer warpgroups at D = 64.
#include <cuda.h>
#include <cuda_bf16.h>
#include <fmt/format.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "attention_backward.hpp"
#include "bwd_util.hpp"
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
using flash::kLog2e;
using flash::pack_bf16;

constexpr size_t kAlign = 256;  // each buffer of the workspace starts on this boundary
constexpr int kBQ = 64;         // queries per tile; the lse and D_i rows are padded to a multiple
// Named barriers (0 is __syncthreads): both consumer warpgroups' dS^T written; consumer warpgroup
// w's dQ partial in its buffer (kDqFull0 + w), and that buffer free again (kDqEmpty0 + w), each
// between the warpgroup's 128 threads and its writer warp.
constexpr int kDsBarrier = 1, kDqFull0 = 2, kDqEmpty0 = 4;

// One instantiation's tiling. A tile of kD columns is kD / 64 TMA boxes of 64 columns (128 bytes:
// one swizzle span) side by side, each box `rows` x 128 bytes, as in v5.
template <int kD_, int kStages_>
struct V3Config {
  static constexpr int kD = kD_;
  static constexpr int kBK = 128;           // keys per block: 2 consumer warpgroups x 64
  static constexpr int kStages = kStages_;  // query tiles (Q, dO, lse, D_i) in the TMA ring
  static constexpr int kConsumerWarps = 8;
  static constexpr int kThreads = 32 * (kConsumerWarps + 4);  // + the producer warpgroup
  static constexpr int kProducerRegs = 24, kConsumerRegs = 240;
  static_assert(128 * kProducerRegs + 256 * kConsumerRegs <= 65536, "register file");
  static constexpr int kBoxes = kD / 64;
  static constexpr int kKVBox = kBK * 128, kQBox = kBQ * 128;  // bytes
  static constexpr int kKVBytes = kBoxes * kKVBox, kQBytes = kBoxes * kQBox;
  static constexpr int kDsBytes = kBK * kBQ * 2;  // dS^T, [128 keys][64 queries] bf16: one box
  // dQ's fp32 partial of a warpgroup, [64 queries][64 columns], as 8 unswizzled TMA boxes of 8
  // columns (32 bytes a row)
  static constexpr int kDqBoxes = 8, kDqBox = kBQ * 32, kDqBytes = kDqBoxes * kDqBox;
  static constexpr int kRowBytes = kBQ * 4;                     // a tile's lse x log2 e, or its D_i
  static constexpr int kStageTx = 2 * kQBytes + 2 * kRowBytes;  // bytes landing per stage
  static constexpr int kBarriers = 1 + 2 * kStages;  // K/V full; Q/dO full and empty per stage
  static constexpr size_t kSmemBytes = 2 * size_t(kKVBytes) + size_t(kStages) * kStageTx +
                                       2 * size_t(kDsBytes) + 2 * size_t(kDqBytes) + 8 * kBarriers +
                                       1024 /* align */;
  static_assert(kD == 64 || kD == 128, "instantiated for D = 64 and 128");
  static_assert(kSmemBytes <= 227 * 1024, "over the 227 KB of shared memory a block may use");
};
// D = 128, 3 stages: K 32 KB + V 32 KB + 3 x (Q 16 KB + dO 16 KB + 512 B) + 2 x dS^T 16 KB + 2 x
// dQ 16 KB = 225.5 KB, all a block may have. D = 64, 4 stages: 16 + 16 + 4 x (8 + 8 + 0.5) + 2 x 16
// + 2 x 16 = 162 KB (2 stages before: 193 and 129 KB; the step is measured in the header).
using ConfigD128 = V3Config<128, 3>;
using ConfigD64 = V3Config<64, 4>;

// One block per (tile of kBK = 128 keys, head): blocks of one head consecutive (Q and dO shared in
// L2), key tile 0 first; under the causal mask, where key tile 0 has the most query tiles, in
// bands of heads with the longest blocks of the band first (causal_order.hpp). Warps 0-7 are the
// consumers: warpgroup wg = warp / 4 owns keys j0 + 64 wg .. + 63 (S^T, dP^T, dV, dK), warp wl =
// warp % 4 of it rows 16 wl .. 16 wl + 15 of those, and lane (g, t4) = (lane / 4, lane % 4) rows g
// and g + 8, columns 8 j + 2 t4 + {0, 1} of each accumulator (wgmma.cuh's layout). Warps 8-11 are
// the producer warpgroup, of which one thread issues every copy.
// Per query tile i (64 rows; causal: from the first that meets key j0), each consumer warpgroup:
//   S^T = K_w Q_i^T, dP^T = V_w dO_i^T      m64n64, K = D, both operands K-major
//   P^T = exp2(c log2e S^T - lse_i log2e), dS^T = P^T o (dP^T - D_i), both rounded to bf16
//   dV_w += P^T dO_i, dK_w += dS^T Q_i      m64nD, K = 64 queries, A from registers, B MN-major
//   dS^T into shared memory; after both warpgroups have written theirs:
//   dQ_i[:, box b] += dS K[:, box b]       m64n64, K = 128 keys, A and B MN-major
// where dQ's 64-column box b of tile n (counted from the block's first tile) goes to warpgroup
// (b + n) % 2: at D = 128 each takes one box per tile, at D = 64 they take turns.
template <class C>
__global__ void __launch_bounds__(C::kThreads, 1)
    bwd_v3_kernel(const __grid_constant__ CUtensorMap map_q,
                  const __grid_constant__ CUtensorMap map_k,
                  const __grid_constant__ CUtensorMap map_v,
                  const __grid_constant__ CUtensorMap map_do,
                  const __grid_constant__ CUtensorMap map_dq, const float* __restrict__ lse2,
                  const float* __restrict__ delta, bf16* __restrict__ dk, bf16* __restrict__ dv,
                  int s, int s_pad, bool causal, float scale, int num_key_blocks) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int kD = C::kD, kBK = C::kBK, kStages = C::kStages, kBoxes = C::kBoxes;
  // The swizzled stores of dS^T XOR a row's 16-byte chunk with r % 8, which is g for every
  // thread (dQ's partial had the same swizzle until its boxes became 8 columns wide). At D = 128 it
  // is written as g (ptxas had spilled r % 8 there: 2.38 -> 2.35 ms); D = 64 keeps r % 8, which
  // measured faster there (766-768 against 773-776 us).
  constexpr bool kSwizzleByG = kBoxes == 2;
  extern __shared__ uint8_t smem_raw[];
  // The 128-byte swizzle repeats every 1024 bytes: every box must start on a 1024-byte boundary.
  uint8_t* smem = smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023);
  uint8_t* sk = smem;                         // kBoxes x [128 keys][64]
  uint8_t* sv = sk + C::kKVBytes;             // the same for V
  uint8_t* sq = sv + C::kKVBytes;             // kStages x kBoxes x [64 queries][64]
  uint8_t* sdo = sq + kStages * C::kQBytes;   // the same for dO
  uint8_t* sds = sdo + kStages * C::kQBytes;  // 2 x [128 keys][64 queries]: dS^T, double-buffered
  uint8_t* sdq = sds + 2 * C::kDsBytes;  // 2 warpgroups x 8 x [64 queries][8 fp32]: dQ's partial
  float* slse = reinterpret_cast<float*>(sdq + 2 * C::kDqBytes);  // kStages x [64]
  float* sdelta = slse + kStages * kBQ;                           // kStages x [64]
  uint64_t* kv_full = reinterpret_cast<uint64_t*>(sdelta + kStages * kBQ);
  uint64_t* full = kv_full + 1;      // [kStages]
  uint64_t* empty = full + kStages;  // [kStages]

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  // Causal: key block 0 has the most query tiles; blocks go in bands of kCausalBand heads, every
  // head's key block 0 of the band first (causal_order.hpp). Otherwise one head's blocks are
  // consecutive.
  const BandItem item =
      band_major_item(static_cast<int>(blockIdx.x), static_cast<int>(gridDim.x) / num_key_blocks,
                      num_key_blocks, causal ? kCausalBand : 0);
  const int bh = item.head, j0 = item.index * kBK;
  // Query tiles first_tile .. num_q_tiles - 1: under the causal mask queries before j0 see no key
  // of this block.
  const int num_q_tiles = gpu100::ceil_div(s, kBQ);
  const int first_tile = causal ? j0 / kBQ : 0;
  const int num_tiles = num_q_tiles - first_tile;  // >= 1: j0 < s

  if (tid == 0) {
    mbar_init(kv_full, 1);
    for (int st = 0; st < kStages; ++st) {
      mbar_init(&full[st], 1);                        // the producer's expect_tx arrival
      mbar_init(&empty[st], 32 * C::kConsumerWarps);  // one arrival per consumer thread
    }
    mbar_fence_init();
  }
  __syncthreads();  // the last block-wide barrier: the producer warpgroup leaves below

  if (warp >= C::kConsumerWarps) {
    // ---- producer warpgroup: gives its registers away; one thread issues every copy ----
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(C::kProducerRegs));
    if (warp == C::kConsumerWarps && lane == 0) {
      mbar_expect_tx(kv_full, 2 * C::kKVBytes);  // K and V of the block, once (zero past S)
      for (int b = 0; b < kBoxes; ++b) {
        tma_load_3d(sk + b * C::kKVBox, &map_k, 64 * b, j0, bh, kv_full);
        tma_load_3d(sv + b * C::kKVBox, &map_v, 64 * b, j0, bh, kv_full);
      }
      const float* lse_h = lse2 + size_t(bh) * s_pad;  // padded rows: 16-byte aligned tiles
      const float* delta_h = delta + size_t(bh) * s_pad;
      for (int n = 0; n < num_tiles; ++n) {
        const int st = n % kStages, i0 = (first_tile + n) * kBQ;
        // Stage st last held tile n - kStages: wait until all 256 consumer threads are done with
        // it.
        if (n >= kStages) mbar_wait(&empty[st], (n / kStages - 1) & 1);
        mbar_expect_tx(&full[st], C::kStageTx);
        for (int b = 0; b < kBoxes; ++b) {
          tma_load_3d(sq + st * C::kQBytes + b * C::kQBox, &map_q, 64 * b, i0, bh, &full[st]);
          tma_load_3d(sdo + st * C::kQBytes + b * C::kQBox, &map_do, 64 * b, i0, bh, &full[st]);
        }
        bulk_load(slse + st * kBQ, lse_h + i0, C::kRowBytes, &full[st]);
        bulk_load(sdelta + st * kBQ, delta_h + i0, C::kRowBytes, &full[st]);
      }
    } else if (warp == C::kConsumerWarps + 1 || warp == C::kConsumerWarps + 2) {
      // Warps 9 and 10: the dQ writers of consumer warpgroups 0 and 1. For each tile whose dQ box
      // the warpgroup computes: tell it the buffer is free (the previous reduce-add has read it),
      // wait until its partial is in, and send it to the accumulator by eight TMA reduce-adds.
      const int w = warp - C::kConsumerWarps - 1;
      uint8_t* buf = sdq + w * C::kDqBytes;
      bool first = true;
      for (int n = 0; n < num_tiles; ++n) {
        const int b = (w + n) % 2;
        if (b >= kBoxes) continue;
        if (!first && lane == 0) bulk_wait_read_all();
        first = false;
        __syncwarp();
        asm volatile("bar.arrive %0, 160;\n" ::"r"(kDqEmpty0 + w) : "memory");
        asm volatile("bar.sync %0, 160;\n" ::"r"(kDqFull0 + w) : "memory");
        if (lane == 0) {
          const int i0 = (first_tile + n) * kBQ;
#pragma unroll
          for (int q = 0; q < C::kDqBoxes; ++q) {
            tma_reduce_add_3d(&map_dq, buf + q * C::kDqBox, 64 * b + 8 * q, i0, bh);
          }
          bulk_commit();
        }
      }
      if (lane == 0) bulk_wait_read_all();  // shared memory must outlive the copies
    }
    return;
  }

  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(C::kConsumerRegs));
  const int wg = warp / 4, wl = warp % 4, g = lane / 4, t4 = lane % 4;
  const int kw0 = j0 + 64 * wg + 16 * wl;  // the warp's first key
  const float scale_log2 = scale * kLog2e;
  const uint8_t* skw = sk + wg * 64 * 128;  // the warpgroup's 64 key rows inside each K box
  const uint8_t* svw = sv + wg * 64 * 128;
  // Shared-memory descriptors are built once from a base and moved by 32-bit adds (desc_at: the
  // start address is the low 14 bits, address / 16), not rebuilt from an address for every wgmma.
  const uint64_t desc_kw = make_desc(skw, 16, 1024), desc_vw = make_desc(svw, 16, 1024);
  const uint64_t desc_k_mn = make_desc(sk, C::kKVBox, 1024);  // K read MN-major (dQ's B)

  float dva[kD / 2], dka[kD / 2];  // dV_w, dK_w: 64 keys x kD per warpgroup
#pragma unroll
  for (int i = 0; i < kD / 2; ++i) dva[i] = dka[i] = 0.f;
  float sacc[32], pacc[32];     // S^T then P^T; dP^T: [4 j + 2 h + e] is key kw0 + g + 8 h, query
                                // i0 + 8 j + 2 t4 + e
  float dqa[32];                // dQ's box: [4 j + 2 h + e] is query i0 + 16 wl + g + 8 h, column
                                // 64 b + 8 j + 2 t4 + e
  uint32_t pa[4][4], da[4][4];  // P^T and dS^T in bf16 A fragments, one per 16 queries

  // P^T of the tile, in place in sacc (fp32) and as bf16 A fragments in pa (lt: lse x log2 e of
  // its 64 queries). As in v5, only the warps whose keys cross S or the diagonal, or whose tile
  // crosses S, run the mask (masked pairs get P = 0, hence dS = 0).
  auto probs = [&](int i0, const float2(&lt)[8], auto mask_tag) {
    constexpr bool kMask = decltype(mask_tag)::value;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const float2 l = lt[j];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          float& x = sacc[4 * j + 2 * h + e];
          x = fast_exp2(fmaf(x, scale_log2, -(e == 0 ? l.x : l.y)));
          if constexpr (kMask) {
            const int key = kw0 + g + 8 * h, query = i0 + 8 * j + 2 * t4 + e;
            if (key >= s || query >= s || (causal && key > query)) x = 0.f;
          }
        }
        // Queries 8 j .. 8 j + 7 are k-step j / 2 of the A fragment, registers h + 2 (j % 2).
        pa[j / 2][h + 2 * (j % 2)] = pack_bf16(sacc[4 * j + 2 * h], sacc[4 * j + 2 * h + 1]);
      }
    }
  };
  // dS^T = P^T o (dP^T - D_i) (dt: D_i of the 64 queries) as bf16 A fragments in da, and into
  // `ds` in the 128-byte swizzle TMA would write for a [128][64] box: the 16-byte chunk c of row r
  // at chunk c ^ (r % 8), so a warp's 4-byte stores fall in 32 banks.
  // All of dS^T is computed before the first store: a load of D_i after a store to shared memory
  // could not be moved ahead of it (the compiler cannot tell the addresses apart), and each would
  // wait out its own latency.
  auto dscores = [&](const float2(&dt)[8], uint8_t* ds) {
#pragma unroll
    for (int j = 0; j < 8; ++j) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int i = 4 * j + 2 * h;
        da[j / 2][h + 2 * (j % 2)] =
            pack_bf16(sacc[i] * (pacc[i] - dt[j].x), sacc[i + 1] * (pacc[i + 1] - dt[j].y));
      }
    }
#pragma unroll
    for (int j = 0; j < 8; ++j) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = 64 * wg + 16 * wl + g + 8 * h;  // key row of dS^T within the block's 128
        const int sw = kSwizzleByG ? g : r % 8;       // the same number
        *reinterpret_cast<uint32_t*>(ds + r * 128 + ((j ^ sw) * 16) + 4 * t4) =
            da[j / 2][h + 2 * (j % 2)];
      }
    }
  };
  // A tile's 16 values of lse x log2 e (or D_i) this thread uses: queries 8 j + 2 t4 + {0, 1}.
  auto row_values = [&](const float* src, float2(&dst)[8]) {
#pragma unroll
    for (int j = 0; j < 8; ++j) dst[j] = *reinterpret_cast<const float2*>(src + 8 * j + 2 * t4);
  };

  mbar_wait(kv_full, 0);  // K and V have landed
  for (int n = 0; n < num_tiles; ++n) {
    const int st = n % kStages, i0 = (first_tile + n) * kBQ;
    const uint8_t* sqt = sq + st * C::kQBytes;
    const uint8_t* sdot = sdo + st * C::kQBytes;
    uint8_t* sdst = sds + (n % 2) * C::kDsBytes;
    mbar_wait(&full[st], (n / kStages) & 1);  // tile n's Q, dO, lse and D_i have landed
    // The tile's lse x log2 e. At D = 128 it is read before the products are issued: read after
    // them (as at D = 64), the loads queue behind the 16 wgmmas' shared-memory reads and come back
    // long after S^T is done, so the softmax waits for them. At D = 64 the products are half as
    // long, the loads return in time, and reading early lost a little (the header has the A/B).
    constexpr bool kLseFirst = kBoxes == 2;
    float2 rows[8];
    if constexpr (kLseFirst) row_values(slse + st * kBQ, rows);
    const uint64_t desc_qt = make_desc(sqt, 16, 1024), desc_dot = make_desc(sdot, 16, 1024);
    const uint64_t desc_qt_mn = make_desc(sqt, C::kQBox, 1024);
    const uint64_t desc_dot_mn = make_desc(sdot, C::kQBox, 1024);

    // ---- S^T = K_w Q_i^T and dP^T = V_w dO_i^T: a k-step of 16 d is 32 bytes further inside
    // each 128-byte row, the next box after 4 steps; SBO = 1024 bytes per 8 rows ----
    fence();
#pragma unroll
    for (int kk = 0; kk < kD / 16; ++kk) {
      const int off = (kk % 4) * 32;
      wgmma_m64n64k16_bf16_ss(sacc, desc_at(desc_kw, ((kk / 4) * C::kKVBox + off) >> 4),
                              desc_at(desc_qt, ((kk / 4) * C::kQBox + off) >> 4), kk > 0);
    }
    commit();  // group: S^T
#pragma unroll
    for (int kk = 0; kk < kD / 16; ++kk) {
      const int off = (kk % 4) * 32;
      wgmma_m64n64k16_bf16_ss(pacc, desc_at(desc_vw, ((kk / 4) * C::kKVBox + off) >> 4),
                              desc_at(desc_dot, ((kk / 4) * C::kQBox + off) >> 4), kk > 0);
    }
    commit();  // group: dP^T

    // At D = 64 the tile's lse x log2 e is read here, while the products run (after the wait the
    // loads would add their latency to the softmax's).
    if constexpr (!kLseFirst) row_values(slse + st * kBQ, rows);

    // FlashAttention-3's overlap inside a warpgroup: P^T is computed while dP^T is still on the
    // tensor cores, and dS^T while dV's products are.
    wait<1>();  // S^T is done (groups complete in order)
    // The previous tile's stage is free: every consumer thread arrives (each read its lse and D_i
    // with ordinary loads, which its own arrival, a release, orders before the producer's next
    // copy into the stage; its dV and dK products, which read Q and dO, are done).
    if (n > 0) mbar_arrive(&empty[(n - 1) % kStages]);
    // (kw0 + 15 >= s rather than kw0 + 16 > s: one value, kw0 + 15, serves both key tests.)
    if (kw0 + 15 >= s || i0 + kBQ > s || (causal && kw0 + 15 > i0)) {
      probs(i0, rows, std::true_type{});
    } else {
      probs(i0, rows, std::false_type{});
    }

    // ---- dV_w += P^T dO_i: B = dO_i as stored, [query][d], i.e. N-major: a k-step of 16
    // queries is 16 rows = 2048 bytes further, LBO = one box ----
    fence();
#pragma unroll
    for (int kk = 0; kk < kBQ / 16; ++kk) {
      const uint64_t b = desc_at(desc_dot_mn, kk * (2048 >> 4));
      if constexpr (kD == 128) {
        wgmma_m64n128k16_bf16_rs(dva, pa[kk], b);
      } else {
        wgmma_m64n64k16_bf16_rs(dva, pa[kk], b);
      }
    }
    commit();  // group: dV

    wait<1>();                            // dP^T is done (dV may still run)
    row_values(sdelta + st * kBQ, rows);  // D_i of the tile
    dscores(rows, sdst);
    fence_proxy_async_smem();  // this thread's dS^T stores, before wgmma (async proxy) reads them

    // ---- dK_w += dS^T Q_i: B = Q_i, N-major as dO_i above ----
    auto issue_dk = [&] {
      fence();
#pragma unroll
      for (int kk = 0; kk < kBQ / 16; ++kk) {
        const uint64_t bq = desc_at(desc_qt_mn, kk * (2048 >> 4));
        if constexpr (kD == 128) {
          wgmma_m64n128k16_bf16_rs(dka, da[kk], bq);
        } else {
          wgmma_m64n64k16_bf16_rs(dka, da[kk], bq);
        }
      }
      commit();  // group: dK
    };
    // At D = 64 dK is issued before the barrier below (kDkFirst): the warpgroups take turns at dQ,
    // so every other tile a warpgroup has no dQ and would wait there with nothing on the tensor
    // cores. At D = 128 both have a dQ box every tile, and dQ goes first (below).
    constexpr bool kDkFirst = kBoxes == 1;
    if constexpr (kDkFirst) issue_dk();

    // Both warpgroups' dS^T are in sdst (the 256 consumer threads). Buffer n % 2 is written again
    // at tile n + 2, after this barrier's next use, which each warpgroup reaches only after its dQ
    // products of this tile have completed (the waits below).
    asm volatile("bar.sync %0, 256;\n" ::"n"(kDsBarrier) : "memory");

    // ---- dQ_i[:, box b] = dS K[:, box b]: A = dS^T as stored, [key][query], read MN-major (M =
    // the 64 queries, one 128-byte row); B = K's box b, [key][d], MN-major; a k-step of 16 keys
    // is 16 rows = 2048 bytes further in both. At D = 128 issued before dK, so that it completes
    // first and its partial leaves while dK's products run; at D = 64 the warpgroups take turns.
    // ----
    const int b = (wg + n) % 2;
    if (b < kBoxes) {
      const uint64_t desc_dst = make_desc(sdst, C::kDsBytes, 1024);
      const uint32_t box_off = uint32_t(b * (C::kKVBox >> 4));
      fence();
#pragma unroll
      for (int kk = 0; kk < kBK / 16; ++kk) {
        wgmma_m64n64k16_bf16_ss_major<1, 1>(dqa, desc_at(desc_dst, kk * (2048 >> 4)),
                                            desc_at(desc_k_mn, box_off + kk * (2048 >> 4)), kk > 0);
      }
      commit();  // group: dQ
      if constexpr (kDkFirst) {
        wait<0>();  // dK, then dQ (groups complete in order)
      } else {
        issue_dk();
        wait<1>();  // dQ is done (dK may still run)
      }
      // dQ's fp32 partial through shared memory to the warpgroup's writer warp, which adds it to
      // the accumulator by TMA reduce-adds (rows past S are skipped by the copy engine). The
      // buffer is 8 boxes of [64 rows][8 fp32], rows 32 bytes apart, no swizzle: a warp's 8-byte
      // stores go to the banks a half-warp at a time, and lanes 0-15 (rows g = 0..3, 8 bytes
      // each of 4 lanes) then fill 128 contiguous bytes, the 2 wavefronts a warp's 256 bytes need.
      uint8_t* buf = sdq + wg * C::kDqBytes;
      asm volatile("bar.sync %0, 160;\n" ::"r"(kDqEmpty0 + wg) : "memory");  // the buffer is free
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = 16 * wl + g + 8 * h;
#pragma unroll
        for (int j = 0; j < 8; ++j) {  // columns 8 j .. 8 j + 7: box j, 32 bytes a row
          *reinterpret_cast<float2*>(buf + j * C::kDqBox + r * 32 + t4 * 8) =
              make_float2(dqa[4 * j + 2 * h], dqa[4 * j + 2 * h + 1]);
        }
      }
      fence_proxy_async_smem();  // the stores, before the TMA (async proxy) reads them
      asm volatile("bar.arrive %0, 160;\n" ::"r"(kDqFull0 + wg) : "memory");  // the writer may go
    }
    wait<0>();  // dK
  }

  // ---- epilogue: dK = c x its accumulator, dV, in bf16 (4-byte stores of column pairs; keys
  // past S skipped) ----
  const size_t base = size_t(bh) * s * kD;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int key = kw0 + g + 8 * h;
    if (key < s) {
      bf16* dkr = dk + base + size_t(key) * kD + 2 * t4;
      bf16* dvr = dv + base + size_t(key) * kD + 2 * t4;
#pragma unroll
      for (int j = 0; j < kD / 8; ++j) {
        *reinterpret_cast<uint32_t*>(dkr + 8 * j) =
            pack_bf16(dka[4 * j + 2 * h] * scale, dka[4 * j + 2 * h + 1] * scale);
        *reinterpret_cast<uint32_t*>(dvr + 8 * j) =
            pack_bf16(dva[4 * j + 2 * h], dva[4 * j + 2 * h + 1]);
      }
    }
  }
#else
  // Built for an architecture without wgmma: the launcher never calls this.
  (void)map_q, (void)map_k, (void)map_v, (void)map_do, (void)map_dq, (void)lse2, (void)delta,
      (void)dk, (void)dv, (void)s, (void)s_pad, (void)causal, (void)scale, (void)num_key_blocks;
#endif
}

// ---- workspace: [dQ accumulator: B H S D fp32][D_i: B H S_pad fp32][lse log2 e: B H S_pad] ----
int64_t padded_s(const AttentionShape& s) {
  return gpu100::round_up<int64_t>(s.s, kBQ);
}
size_t dq_acc_bytes(const AttentionShape& s) {
  return gpu100::round_up(size_t(s.elements()) * sizeof(float), kAlign);
}
size_t rows_bytes(const AttentionShape& s) {
  return size_t(s.heads()) * size_t(padded_s(s)) * sizeof(float);
}

template <class C>
void launch_v3(const AttentionShape& s, const BackwardTensors<bf16>& t, const float* lse2,
               const float* delta, float* dq_acc, cudaStream_t stream) {
  static gpu100::PerDevice<bool> attr_set;  // the attribute is per GPU: set on each
  attr_set.get([] {
    CUDA_CHECK(cudaFuncSetAttribute(bwd_v3_kernel<C>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    int(C::kSmemBytes)));
    return true;
  });
  const int num_key_blocks = gpu100::ceil_div(s.s, C::kBK);
  const int64_t blocks = s.heads() * num_key_blocks;
  // Q, dO, K, V as B H matrices of S x D; boxes of 64 (Q, dO) or 128 (K, V) rows x 64 columns.
  const CUtensorMap mq = day04::make_tma_map_3d(t.q, s.heads(), s.s, s.d, kBQ, 64);
  const CUtensorMap mdo = day04::make_tma_map_3d(t.dout, s.heads(), s.s, s.d, kBQ, 64);
  const CUtensorMap mk = day04::make_tma_map_3d(t.k, s.heads(), s.s, s.d, C::kBK, 64);
  const CUtensorMap mv = day04::make_tma_map_3d(t.v, s.heads(), s.s, s.d, C::kBK, 64);
  // The fp32 dQ accumulator, in unswizzled boxes of 64 rows x 8 columns, for the reduce-adds.
  const CUtensorMap mdq = day04::make_tma_map_3d(dq_acc, s.heads(), s.s, s.d, kBQ, 8, false);
  bwd_v3_kernel<C><<<static_cast<unsigned>(blocks), C::kThreads, C::kSmemBytes, stream>>>(
      mq, mk, mv, mdo, mdq, lse2, delta, t.dk, t.dv, s.s, static_cast<int>(padded_s(s)), s.causal,
      softmax_scale(s.d), num_key_blocks);
  CUDA_CHECK_LAST();
}

constexpr const char* kName = "bwd_v3_flash_wgmma";

}  // namespace

size_t bwd_v3_workspace_bytes(const AttentionShape& s) {
  return dq_acc_bytes(s) + gpu100::round_up(rows_bytes(s), kAlign) + rows_bytes(s);
}

std::string bwd_v3_refusal(const AttentionShape& s) {
  if (s.d != 64 && s.d != 128) {
    return fmt::format("{}: D must be 64 or 128 (got D = {})", kName, s.d);
  }
  if (s.heads() * gpu100::ceil_div<int64_t>(s.s, 128) > int64_t(0x7fffffff)) {
    return fmt::format("{}: {} needs more than 2^31 - 1 blocks", kName, shape_label(s));
  }
  return "";
}

void attention_bwd_v3_flash_wgmma(const AttentionShape& s, const BackwardTensors<bf16>& t,
                                  void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  check_shape(s);
  if (const std::string why = bwd_v3_refusal(s); !why.empty()) throw std::invalid_argument(why);
  if (t.any_null() || workspace == nullptr) {
    throw std::invalid_argument(fmt::format("{}: null tensors or workspace", kName));
  }
  const void* const pointers[] = {t.q, t.k, t.v, t.o, t.dout, t.dq, t.dk, t.dv, workspace};
  for (const void* p : pointers) {
    if (!gpu100::aligned16(p)) {
      throw std::invalid_argument(fmt::format(
          "{}: the bf16 tensors and the workspace must be 16-byte aligned (TMA)", kName));
    }
  }
  const size_t need = bwd_v3_workspace_bytes(s);
  if (workspace_bytes < need) {
    throw std::invalid_argument(
        fmt::format("{}: a workspace of {} bytes, {} needed", kName, workspace_bytes, need));
  }
  gpu100::require_build(gpu100::ArchNeed::kSm90a, kName);
  auto* ws = static_cast<char*>(workspace);
  float* dq_acc = reinterpret_cast<float*>(ws);
  float* delta = reinterpret_cast<float*>(ws + dq_acc_bytes(s));
  float* lse2 =
      reinterpret_cast<float*>(ws + dq_acc_bytes(s) + gpu100::round_up(rows_bytes(s), kAlign));

  bwd::launch_prepass(t.dout, t.o, t.lse, delta, lse2, dq_acc, s.heads(), s.s,
                      static_cast<int>(padded_s(s)), s.d, stream);
  if (s.d == 64) {
    launch_v3<ConfigD64>(s, t, lse2, delta, dq_acc, stream);
  } else {
    launch_v3<ConfigD128>(s, t, lse2, delta, dq_acc, stream);
  }
  bwd::launch_postpass(dq_acc, t.dq, s.elements(), softmax_scale(s.d), stream);  // D % 16 == 0
}

}  // namespace day05
