// dual v2: halo tiles (day08::load_halo_tile). A block owns a 32 x 8 tile of output pixels of one
// image and one stream; it copies the input window that tile needs (the tile plus the filter's
// halo, zero-padded) into shared memory once per channel, so each input element comes from
// global memory about once per block instead of R*S*K times per output. Each thread still
// computes one pixel, 8 output channels at a time, reading its weights from global memory (the
// same address across the block: an L1 broadcast). The cost: a barrier per channel chunk, and
// the output stores are 4-byte (a warp writes one 128-byte row segment per channel).
// (PMPP chapter 7, "tiled convolution with halo cells".)
#include <algorithm>
#include <stdexcept>

#include "common/cuda_check.hpp"
#include "common/math.hpp"
#include "halo_tile.cuh"
#include "kernels.cuh"

namespace capstone::detail {

namespace {

constexpr int kTileW = 32, kTileH = 8, kThreads = kTileW * kTileH;
constexpr int kKGroup = 8;             // output channels accumulated per pass
constexpr int kSmemBytes = 48 * 1024;  // the default dynamic shared-memory limit

// Thread (tx, ty) = output pixel (p0 + ty, q0 + tx). blockIdx.z = 2 * n + stream.
__global__ void __launch_bounds__(kThreads)
    dual_halo_kernel(DualArgs a, int rows, int cols, int pitch, int cc) {
  extern __shared__ float xs[];  // [cc][rows][pitch]: the input window of cc channels
  const int st = blockIdx.z & 1, n = blockIdx.z >> 1;
  const StreamArgs& sa = a.s[st];
  const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * kTileW + tx;
  const int p0 = blockIdx.y * kTileH, q0 = blockIdx.x * kTileW;
  const int p = p0 + ty, q = q0 + tx;
  const bool inside = p < a.p && q < a.q;
  const int rs = a.r * a.sw;
  const int chunks = (sa.c + cc - 1) / cc;
  for (int k0 = 0; k0 < a.k; k0 += kKGroup) {
    float acc[kKGroup];
#pragma unroll
    for (int j = 0; j < kKGroup; ++j) acc[j] = 0.f;
    for (int ch = 0; ch < chunks; ++ch) {
      const int c0 = ch * cc, cn = min(cc, sa.c - c0);
      if (chunks > 1 || k0 == 0) {  // with one chunk the window stays loaded for every k group
        __syncthreads();            // every thread is done reading the previous chunk
        for (int c = 0; c < cn; ++c) {
          day08::load_halo_tile(
              xs + c * rows * pitch, pitch, sa.x + (int64_t(n) * sa.c + c0 + c) * a.h * a.w, a.h,
              a.w, p0 * a.stride - a.pad, q0 * a.stride - a.pad, rows, cols, tid, kThreads);
        }
        __syncthreads();  // the window is complete
      }
      if (!inside) continue;
      for (int c = 0; c < cn; ++c) {
        const float* win = xs + c * rows * pitch + ty * a.stride * pitch + tx * a.stride;
        for (int r = 0; r < a.r; ++r) {
          for (int s = 0; s < a.sw; ++s) {
            const float x = win[r * pitch + s];
            const float* wp = sa.w + (int64_t(k0) * sa.c + c0 + c) * rs + r * a.sw + s;
#pragma unroll
            for (int j = 0; j < kKGroup; ++j) {
              if (k0 + j < a.k) acc[j] = fmaf(x, __ldg(wp + int64_t(j) * sa.c * rs), acc[j]);
            }
          }
        }
      }
    }
    if (!inside) continue;
#pragma unroll
    for (int j = 0; j < kKGroup; ++j) {
      const int k = k0 + j;
      if (k < a.k) {
        const int64_t o = ((int64_t(n) * a.k + k) * a.p + p) * a.q + q;
        store_one(sa.y, o, epilogue(acc[j], sa, k, a.act), a.bf16);
      }
    }
  }
}

}  // namespace

void launch_dual_halo(const DualArgs& a, cudaStream_t stream) {
  const int rows = (kTileH - 1) * a.stride + a.r, cols = (kTileW - 1) * a.stride + a.sw;
  const int pitch = cols;
  const int per_channel = rows * pitch * int(sizeof(float));
  if (per_channel > kSmemBytes) {
    throw std::invalid_argument("dual_halo: the input window of one channel exceeds 48 KB");
  }
  if (2 * int64_t(a.n) > 65535) throw std::invalid_argument("dual_halo: N must be <= 32767");
  const int cc = std::max(1, std::min(std::max(a.s[0].c, a.s[1].c), kSmemBytes / per_channel));
  const dim3 grid(gpu100::ceil_div(a.q, kTileW), gpu100::ceil_div(a.p, kTileH), 2 * a.n);
  dual_halo_kernel<<<grid, dim3(kTileW, kTileH), size_t(cc) * per_channel, stream>>>(a, rows, cols,
                                                                                     pitch, cc);
  CUDA_CHECK_LAST();
}

}  // namespace capstone::detail
