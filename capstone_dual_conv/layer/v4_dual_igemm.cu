// dual v4: implicit GEMM through day04's tiles, both streams in one launch. For image n of stream
// t the convolution is a GEMM Y[K][P*Q] = W[K][C*R*S] x X_col[C*R*S][P*Q]; X_col (im2col) is never
// built: each k-slab of it is gathered from the input straight into shared memory. The weights go
// through day04::tiles::ATileLoader, the FMAs through day04::tiles::WarpTile (8 x 8 outputs per
// thread, float4 shared-memory reads), with v8's double buffering: slab t + 1's global loads are
// in flight while slab t is multiplied. With C = 64 the layer does 1152 FMAs per output and is
// compute-bound, so this reuse (each loaded value feeds 64 or 128 FMAs) is what matters; at the
// stem (27 or 9 products per output) it only adds gather overhead to a store-bound problem.
// (Implicit GEMM: Chetlur et al., "cuDNN", 2014; CUTLASS's implicit-GEMM convolutions.)
#include <algorithm>
#include <stdexcept>

#include "common/cuda_check.hpp"
#include "common/math.hpp"
#include "kernels.cuh"
#include "tiles.cuh"

namespace capstone::detail {

namespace {

constexpr int BM = 64, BN = 128, BK = 8, WM = 64, WN = 32, kThreads = 128;
static_assert((BM / WM) * (BN / WN) * 32 == kThreads, "one warp per warp tile");
static_assert(BN == kThreads, "the gather gives each thread one column of the B slab");

// The B slab gatherer: thread tid owns column col0 + tid (one output pixel) and fetches its BK
// values of X_col: crs = k0 .. k0 + BK - 1 decoded to (c, r, s), the input at
// (p * stride - pad + r, q * stride - pad + s) or 0 in the padding or past C*R*S. The (c, r, s)
// decoding is the same for the whole block (warp-uniform); consecutive threads read consecutive
// pixels (coalesced for stride 1).
struct BGather {
  float reg[BK];
  __device__ void load(const float* __restrict__ x, const DualArgs& a, int kd, int k0, bool valid,
                       int ih0, int iw0) {
    const int rs = a.r * a.sw;
#pragma unroll
    for (int kk = 0; kk < BK; ++kk) {
      const int crs = k0 + kk;
      float v = 0.f;
      if (valid && crs < kd) {
        const int ci = crs / rs, t = crs - ci * rs;
        const int r = t / a.sw, s = t - r * a.sw;
        const int ih = ih0 + r, iw = iw0 + s;
        if (ih >= 0 && ih < a.h && iw >= 0 && iw < a.w) {
          v = __ldg(x + (int64_t(ci) * a.h + ih) * a.w + iw);
        }
      }
      reg[kk] = v;
    }
  }
  __device__ void store(float* bs, int tid) const {
#pragma unroll
    for (int kk = 0; kk < BK; ++kk) bs[kk * BN + tid] = reg[kk];
  }
};

// blockIdx.x: a BN-column tile of P*Q (pixels), blockIdx.y: a BM-row tile of K (output channels),
// blockIdx.z = 2 * n + stream. Warp w owns columns w * 32 .. w * 32 + 31 of the block tile and all
// 64 rows; WarpTile's lane mapping is repeated in the epilogue below.
template <bool kVecA>
__global__ void __launch_bounds__(kThreads) dual_igemm_kernel(DualArgs a, bool vec_out) {
  constexpr int kAStage = BK * (BM + day04::tiles::kAPad), kBStage = BK * BN;
  __shared__ __align__(16) float as[2 * kAStage];
  __shared__ __align__(16) float bs[2 * kBStage];
  const int st = blockIdx.z & 1, n = blockIdx.z >> 1;
  const StreamArgs& sa = a.s[st];
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int pq = a.p * a.q;
  const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
  const int wn0 = warp * WN;
  const int kd = sa.c * a.r * a.sw;
  const float* x = sa.x + int64_t(n) * sa.c * a.h * a.w;

  // This thread's gather pixel (fixed for the whole K loop).
  const int col = col0 + tid;
  const bool valid = col < pq;
  const int pp = valid ? col / a.q : 0, qq = valid ? col - pp * a.q : 0;
  const int ih0 = pp * a.stride - a.pad, iw0 = qq * a.stride - a.pad;

  day04::tiles::ATileLoader<BM, BK, kThreads, kVecA> load_a;
  BGather load_b;
  day04::tiles::WarpTile<BM, BN, BK, WM, WN> tile;
  tile.zero();

  const int slabs = gpu100::ceil_div(kd, BK);
  load_a.load(sa.w, a.k, kd, row0, 0, tid);
  load_b.load(x, a, kd, 0, valid, ih0, iw0);
  load_a.store(as, tid);
  load_b.store(bs, tid);
  __syncthreads();  // slab 0 is in shared memory
  for (int t = 0; t < slabs; ++t) {
    const int cur = t % 2;
    const bool more = t + 1 < slabs;
    if (more) {  // slab t + 1's global loads, in flight during the FMAs below
      load_a.load(sa.w, a.k, kd, row0, (t + 1) * BK, tid);
      load_b.load(x, a, kd, (t + 1) * BK, valid, ih0, iw0);
    }
    tile.mma(as + cur * kAStage, bs + cur * kBStage, 0, wn0, lane);
    if (more) {  // buffer cur ^ 1 was last read before the previous barrier
      load_a.store(as + (cur ^ 1) * kAStage, tid);
      load_b.store(bs + (cur ^ 1) * kBStage, tid);
    }
    __syncthreads();  // slab t + 1 complete; slab t no longer read
  }

  // Fused epilogue: lane (lm, ln) holds, for i, j < 2, rows i*32 + lm*4 + r and columns
  // j*16 + ln*4 .. +3 of the warp tile (day04::tiles::WarpTile's mapping).
  using Tile = day04::tiles::WarpTile<BM, BN, BK, WM, WN>;
  const int lm = lane / Tile::kLanesN, ln = lane % Tile::kLanesN;
#pragma unroll
  for (int i = 0; i < Tile::kWmIter; ++i)
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const int k = row0 + i * Tile::kLanesM * 4 + lm * 4 + r;
      if (k >= a.k) continue;
      const float al = __ldg(sa.alpha + k), be = __ldg(sa.beta + k);
#pragma unroll
      for (int j = 0; j < Tile::kWnIter; ++j) {
        const int c0 = col0 + wn0 + j * Tile::kLanesN * 4 + ln * 4;
        if (c0 >= pq) continue;
        float v[4];
#pragma unroll
        for (int u = 0; u < 4; ++u)
          v[u] = activate(fmaf(tile.acc[4 * i + r][4 * j + u], al, be), a.act);
        store_row4(sa.y, (int64_t(n) * a.k + k) * pq + c0, v, min(4, pq - c0), vec_out, a.bf16);
      }
    }
}

}  // namespace

void launch_dual_igemm(const DualArgs& a, cudaStream_t stream) {
  if (2 * int64_t(a.n) > 65535) throw std::invalid_argument("dual_igemm: N must be <= 32767");
  const int64_t pq = int64_t(a.p) * a.q;
  if (pq > (int64_t(1) << 31) - BN) throw std::invalid_argument("dual_igemm: P*Q too large");
  if (int64_t(std::max(a.s[0].c, a.s[1].c)) * a.r * a.sw > (int64_t(1) << 30)) {
    throw std::invalid_argument("dual_igemm: C*R*S too large");
  }
  // 16-byte weight loads need every row of both W matrices to start on a float4.
  const bool vec_a = (a.s[0].c * a.r * a.sw) % 4 == 0 && (a.s[1].c * a.r * a.sw) % 4 == 0;
  const bool vec_out = pq % 4 == 0;
  const dim3 grid(static_cast<unsigned>(gpu100::ceil_div<int64_t>(pq, BN)),
                  gpu100::ceil_div(a.k, BM), 2 * a.n);
  if (grid.y > 65535) throw std::invalid_argument("dual_igemm: K too large");
  if (vec_a) {
    dual_igemm_kernel<true><<<grid, kThreads, 0, stream>>>(a, vec_out);
  } else {
    dual_igemm_kernel<false><<<grid, kThreads, 0, stream>>>(a, vec_out);
  }
  CUDA_CHECK_LAST();
}

}  // namespace capstone::detail
