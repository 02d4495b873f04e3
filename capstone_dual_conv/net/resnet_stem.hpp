#pragma once
// The trunk's stem as one kernel: the 7x7/2 convolution (pad 3) with its folded BN bias and ReLU,
// and the 3x3/2 max pool (pad 1) after it, from the network's fp32 NCHW input straight to the
// pooled NHWC activations the next layer reads. The unfused path moves the stem's output, 4x
// the pooled tensor, through memory twice (written by the convolution, read by the pool), and
// converts the input in a pass of its own; here each block computes the stem outputs that a tile
// of pool windows covers, reduces them to the windows' maxima in registers, and writes only those.
//
// Two precisions, on mma.sync tensor cores (sm_80 and newer), fp32 accumulation and bias:
//   bf16: input and filters rounded to bf16, the output bf16 NHWC [n][P][Q][64];
//   tf32: input and filters rounded to TF32, the output fp32 NHWC rounded to TF32 (the value the
//         next layer's tensor cores read).
// Max pool and ReLU commute with rounding, so the results equal the unfused path's.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <vector>

#include "resnet.hpp"

namespace capstone::resnet {

// Whether the fused stem takes this trunk's stem and pool: a 7x7/2 convolution with pad 3 onto
// 64 channels from 1 or 3 input channels, then a 3x3/2 max pool with pad 1 (ResNet-18's).
bool stem_pool_takes(const Trunk& t);
// Throws std::invalid_argument for a stem stem_pool_takes refuses, a non-positive size, or a size
// over the kernel's limits (the launchers' checks that need no pointers).
void check_stem_pool_args(const Trunk& t, int n, int h, int w);

// The filters in the kernel's layout, from the folded KCRS fp32 [64][c][7][7]: [64][K] with
// k = (ci * 7 + r) * 8 + s, each filter row widened to 8 taps by a zero (so a pair of taps is one
// aligned 32-bit load in bf16), K rounded up to the MMA's k step with zeros; rounded to bf16 or
// to TF32. Throws std::invalid_argument for a size that does not match c.
std::vector<__nv_bfloat16> stem_filters_bf16(const std::vector<float>& w, int c);
std::vector<float> stem_filters_tf32(const std::vector<float>& w, int c);

// x: fp32 NCHW [n][c][h][w]; w: stem_filters_*'s layout; bias: fp32 [64]; y: NHWC [n][P][Q][64]
// with P, Q the pool's output size (16-byte aligned). Throws std::invalid_argument before any CUDA
// call where check_stem_pool_args does, and for a null or unaligned pointer (w and y 16-byte,
// bias 8-byte aligned); gpu100::ArchUnavailable on a build without sm_80 code. Asynchronous on
// `stream`; the launch is checked.
void stem_pool_bf16(const Trunk& t, const float* x, const __nv_bfloat16* w, const float* bias,
                    __nv_bfloat16* y, int n, int h, int wd, cudaStream_t stream);
void stem_pool_tf32(const Trunk& t, const float* x, const float* w, const float* bias, float* y,
                    int n, int h, int wd, cudaStream_t stream);

}  // namespace capstone::resnet
