#pragma once
// capstone_dual_conv internals: the arguments every single-launch kernel takes, the shared
// epilogue, and the launchers (one .cu file per kernel variant).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace capstone::detail {

// One stream's device operands. y = act(alpha[k] * conv(x, w) + beta[k]).
struct StreamArgs {
  const float* x = nullptr;      // [N, C, H, W]
  const float* w = nullptr;      // [K, C, R, S]
  const float* alpha = nullptr;  // [K]: BN scale, or all ones (no BN, or BN folded into w)
  const float* beta = nullptr;   // [K]: bias * scale + shift (zeros without bias and BN)
  void* y = nullptr;             // [N, K, P, Q], float or bf16
  int c = 1;
};

// Both streams and the geometry they share. act: 0 none, 1 ReLU, 2 SiLU.
struct DualArgs {
  StreamArgs s[2];
  int n = 1, h = 1, w = 1, k = 1, r = 3, sw = 3, stride = 1, pad = 0, p = 1, q = 1;
  int act = 0;
  bool bf16 = false;
};

#ifdef __CUDACC__  // the device helpers: only .cu files see them

__device__ __forceinline__ float activate(float v, int act) {
  if (act == 1) return fmaxf(v, 0.f);
  if (act == 2) return v / (1.f + __expf(-v));
  return v;
}

// The fused epilogue of one output element.
__device__ __forceinline__ float epilogue(float acc, const StreamArgs& sa, int k, int act) {
  return activate(fmaf(acc, __ldg(sa.alpha + k), __ldg(sa.beta + k)), act);
}

// Stores one element of either output type (the naive and halo kernels).
__device__ __forceinline__ void store_one(void* y, int64_t i, float v, bool bf16) {
  if (bf16) {
    static_cast<__nv_bfloat16*>(y)[i] = __float2bfloat16_rn(v);
  } else {
    static_cast<float*>(y)[i] = v;
  }
}

// Stores 4 consecutive outputs of one row: one 16-byte (fp32) or 8-byte (bf16) streaming store
// when `vec` (Q % 4 == 0, so the 4 are aligned and all inside when the first is), else one
// predicated element at a time.
__device__ __forceinline__ void store_row4(void* y, int64_t o, const float (&v)[4], int valid,
                                           bool vec, bool bf16) {
  if (vec) {
    if (bf16) {
      unsigned short h[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) h[j] = __bfloat16_as_ushort(__float2bfloat16_rn(v[j]));
      const uint2 bits = make_uint2(h[0] | (unsigned(h[1]) << 16), h[2] | (unsigned(h[3]) << 16));
      __stcs(reinterpret_cast<uint2*>(static_cast<__nv_bfloat16*>(y) + o), bits);
    } else {
      __stcs(reinterpret_cast<float4*>(static_cast<float*>(y) + o),
             make_float4(v[0], v[1], v[2], v[3]));
    }
  } else {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      if (j < valid) store_one(y, o + j, v[j], bf16);
    }
  }
}

// The register-blocked kernels' epilogue (v3, v5): for channels k0 .. k0 + kK - 1 below K of
// 4 consecutive pixels, y = act(alpha[k] acc + beta[k]), one store_row4 per channel. o0: the
// first pixel's index in channel 0 of y; plane: P x Q, the distance from one channel to the next.
template <int kK>
__device__ __forceinline__ void store_channels(const float (&acc)[kK][4], const StreamArgs& sa,
                                               const DualArgs& a, int k0, int64_t o0, int64_t plane,
                                               int valid, bool vec) {
#pragma unroll
  for (int i = 0; i < kK; ++i) {
    const int k = k0 + i;
    if (k >= a.k) break;
    const float al = __ldg(sa.alpha + k), be = __ldg(sa.beta + k);
    float v[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) v[j] = activate(fmaf(acc[i][j], al, be), a.act);
    store_row4(sa.y, o0 + int64_t(k) * plane, v, valid, vec, a.bf16);
  }
}

#endif  // __CUDACC__

// Launchers: one kernel launch computes both outputs. They check their launch and do not
// synchronise. Throw std::invalid_argument when the shape is outside what the kernel supports.
void launch_dual_naive(const DualArgs& a, cudaStream_t stream);
void launch_dual_halo(const DualArgs& a, cudaStream_t stream);
void launch_dual_regblock(const DualArgs& a, cudaStream_t stream);
void launch_dual_igemm(const DualArgs& a, cudaStream_t stream);
// The stem kernel: 3 x 3, stride 1, pad 1, C in {1, 3} per stream; any other layer is handed to
// launch_dual_regblock (dual_store_bound_supports says which path a layer takes).
void launch_dual_store_bound(const DualArgs& a, cudaStream_t stream);
bool dual_store_bound_supports(const DualArgs& a);

// The separate epilogue passes of the sequential rows (fp32 only), in place on y [N, K, P*Q]:
// y = alpha[k] * y + beta[k], then y = act(y).
void launch_affine(float* y, const float* alpha, const float* beta, int n, int k, int64_t pq,
                   cudaStream_t stream);
void launch_activation(float* y, int64_t count, int act, cudaStream_t stream);

// Gathers y[idx[i]] (float or bf16) into out[i] as float: the sampled checks at large N.
void launch_gather(const void* y, bool bf16, const int64_t* idx, float* out, int count,
                   cudaStream_t stream);

}  // namespace capstone::detail
