#pragma once
// day08::conv: the host API of day 8's Conv2d layer, the contract the capstone links against.
// (The day's own registry, the 1D/2D filters and the CPU references are in conv_day.hpp.)
//
// Layouts: NCHW input [n, c, h, w], KCRS filters [k, c, r, s], optional bias [k], output NKPQ
// [n, k, p, q]; all fp32, contiguous, on the device. Zero padding; cross-correlation (the filter
// is not flipped), as in cuDNN's CUDNN_CROSS_CORRELATION and PyTorch's Conv2d.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <string>
#include <vector>

#include "common/precision.hpp"

namespace day08 {

// NCHW input [n, c, h, w], KCRS filters [k, c, r, s], optional bias [k], output NKPQ [n, k, p, q].
struct ConvShape {
  int n = 1, c = 1, h = 1, w = 1;  // input
  int k = 1, r = 3, s = 3;         // filters
  int stride = 1, pad = 0, dilation = 1;
  int p() const;  // (h + 2*pad - dilation*(r-1) - 1) / stride + 1
  int q() const;  // (w + 2*pad - dilation*(s-1) - 1) / stride + 1
};

// Throws std::invalid_argument with a clear message for a non-positive size, an empty output,
// or an index that would overflow int32.
void check_conv_args(const ConvShape& s);

// Conv2d forward by variant name ("v1_direct", "v2_smem_tiled", "v3_im2col_gemm",
// "v4_implicit_gemm", "v5_implicit_gemm_tf32", ..., and "best_fp32": the fp32 CUDA-core
// implicit GEMM that runs any shape on the filters as given, v4), fp32 in and out, on device
// pointers, asynchronous on `stream`. bias may be nullptr. Throws std::invalid_argument for an
// unknown name, and for the bf16 NHWC variants (v6_implicit_gemm_bf16_nhwc, cudnn_bf16_nhwc), which
// take converted inputs (conv_day.hpp). conv2d_variant_names: the names conv2d_forward accepts.
void conv2d_forward(const std::string& variant, const ConvShape& s, const float* x, const float* w,
                    const float* bias, float* y, cudaStream_t stream = nullptr);
std::vector<std::string> conv2d_variant_names();

// ---- The fused layer form (what a network needs) ------------------------------------------------
// y = relu?(conv(x, w) + bias + residual), the bias per output channel (BN folded into it), the
// residual (a tensor shaped like y, or nullptr) added before the optional ReLU: a ResNet block's
// whole epilogue in the convolution's own store, so the output is written once and never re-read.
// Up to two convolutions of the same shape (their own x, w, bias, residual and y) run in one
// launch, one per blockIdx.z: the dual-stream idea, for two network trunks whose layers match.
template <class T, class Y = T>
struct ConvOperands {
  const T* x = nullptr;
  const T* w = nullptr;
  const float* bias = nullptr;  // [k], or nullptr
  const Y* residual = nullptr;  // like y, or nullptr
  Y* y = nullptr;
};
constexpr int kMaxConvGroup = 2;
template <class T, class Y = T>
struct ConvGroup {
  ConvOperands<T, Y> op[kMaxConvGroup];
  int count = 1;  // 1 or 2 convolutions in this launch
  bool relu = false;
};
// fp32 NCHW in and out: kFp32 runs v4_implicit_gemm's kernel (FMA only), kTf32 v5's (TF32 tensor
// cores). Throws std::invalid_argument for a bad shape, count outside 1..2, a null x, w or y, or
// kBf16 (use conv2d_fused_bf16_nhwc).
void conv2d_fused(gpu100::Precision precision, const ConvShape& s, const ConvGroup<float>& g,
                  cudaStream_t stream = nullptr);
// The fp32 form on filters transposed once, ahead of the calls, for day08 v15's kernel (its
// weights come in 16-byte copies): crsk_transform_filters writes the crsk_filter_floats(s) floats
// of wt, the KCRS filters w as C*R*S rows of K (the row pitch K rounded up to 4, the pad zeroed);
// conv2d_fused_crsk runs v15's kernel on a group whose op[i].w point at such filters (16-byte
// aligned; std::invalid_argument otherwise). Any shape conv2d_fused takes; the same FMAs in the
// same order as v4's, so the same rounding.
size_t crsk_filter_floats(const ConvShape& s);
void crsk_transform_filters(const ConvShape& s, const float* w, float* wt,
                            cudaStream_t stream = nullptr);
void conv2d_fused_crsk(const ConvShape& s, const ConvGroup<float>& g,
                       cudaStream_t stream = nullptr);
// bf16 NHWC in (x [n][h][w][c], w KRSC [k][r][s][c]), bf16 NHWC out (y and residual [n][p][q][k]),
// fp32 bias and accumulation, with this epilogue, on the kernel conv2d_fused_bf16_kernel picks:
// where the running GPU executes this build's sm_90a code, v12_halo_wgmma_bf16_nhwc's (resident
// filters, TMA halo) for 3x3 stride-1 layers of C = 64 and K <= 64 with two 8 x 8-pixel tiles or
// more per warpgroup it runs (N = 1 at the network's first stage has fewer),
// v10_tma_im2col_wgmma_bf16_nhwc's (TMA im2col, wgmma) for other C % 64 == 0, else
// v9_implicit_gemm_wgmma_bf16_nhwc's (its cp.async gather); elsewhere v6_implicit_gemm_bf16_nhwc's
// (mma.sync). Needs C % 8 == 0, K % 2 == 0 and 16-byte aligned x and w (std::invalid_argument
// otherwise).
void conv2d_fused_bf16_nhwc(const ConvShape& s, const ConvGroup<__nv_bfloat16>& g,
                            cudaStream_t stream = nullptr);
// The kernel conv2d_fused_bf16_nhwc runs for this shape and group on the current GPU (decided from
// the code the GPU runs, common/arch.hpp, the pointers' alignment and the kernels' refusals).
enum class FusedBf16Kernel { kV6, kV9, kV10, kV12 };
FusedBf16Kernel conv2d_fused_bf16_kernel(const ConvShape& s, const ConvGroup<__nv_bfloat16>& g);
// Whether conv2d_fused_bf16_nhwc takes this shape on this GPU and build (16-byte aligned
// operands): C % 8 == 0 everywhere; C = 4 with an even S too where it runs v9's kernel.
bool conv2d_fused_bf16_takes(const ConvShape& s);

// fp32 NHWC in (x [n][h][w][c], w KRSC [k][r][s][c]), fp32 NHWC out (y and residual
// [n][p][q][k]), multiplied as TF32 with fp32 accumulation, with this epilogue: day08 v11's kernel
// (TMA im2col, wgmma), which runs only where the GPU executes this build's sm_90a code
// (conv2d_fused_tf32_nhwc_takes; gpu100::ArchUnavailable elsewhere). Needs C % 4 == 0, K % 2 == 0
// and 16-byte aligned x and w (std::invalid_argument otherwise); C % 32 == 0 wastes no work.
// y is stored rounded to TF32 (to nearest, cvt.rna): the TMA copies x as it is and the tensor core
// truncates what is not TF32 already, a bias toward zero of up to 2^-10 per operand that compounds
// through a network's layers (measured on MC-ResNet18 before this rounding: logits 16x further
// from the CPU's than with v5's rounding). So a layer's output is exact TF32 for the next; give
// the filters rounded too (gpu100::round_to_tf32, common/half.hpp).
void conv2d_fused_tf32_nhwc(const ConvShape& s, const ConvGroup<float>& g,
                            cudaStream_t stream = nullptr);
// Whether conv2d_fused_tf32_nhwc runs this shape here (sm_90a code on this GPU, v11's shape rules,
// an even K).
bool conv2d_fused_tf32_nhwc_takes(const ConvShape& s);
// Whether conv2d_fused_tf32_nhwc runs v13's kernel (resident filters, TMA halo) rather than v11's:
// the 3x3 stride-1 layers of C = 64 and K <= 64 that v13 takes, with tiles enough to give each of
// its consumer warpgroups two (as v12 in bf16), where the GPU executes this build's sm_90a code.
bool conv2d_fused_tf32_runs_v13(const ConvShape& s);

// The fused form on Winograd in fp32, for 3x3 filters at stride 1 and dilation 1 only
// (winograd_takes): F(2x2, 3x3) (v7's kernel, 2.25x fewer multiply-adds than the direct
// convolution) or F(4x4, 3x3) (4x fewer), in one kernel (v14's) or as transforms around 36
// batched GEMMs (v16's, which keeps its transformed input and sums in day08's per-stream scratch:
// 36 x (C + K) floats a 4x4 tile, 150 MB per convolution at C = K = 256, N = 32). Its filters
// are transformed once, ahead of the calls: winograd_transform_filters writes the
// winograd_filter_floats(s) floats of U for the KCRS filters w (only s.c and s.k matter to the
// transform), and each op[i].w of the group passed to conv2d_fused_winograd points at such a U.
// U holds the F(2x2) filters, then the F(4x4) ones (winograd_has_f4: every shape winograd_takes;
// 52 floats a filter and channel in all, 54 MB at C = K = 512). The form runs by `form`; kAuto
// picks it per call (winograd_form). The rounding error is larger than the direct convolution's
// (day08's tests allow 4x v4's for F(2x2) and 16x for F(4x4); v16 computes v14's outputs bit for
// bit).
enum class WinogradForm { kAuto, kF2x2, kF4x4, kF4x4Gemm };
bool winograd_takes(const ConvShape& s);
bool winograd_has_f4(const ConvShape& s);
// kAuto's pick at this shape: v16's F(4x4) GEMMs where C and K are at least 128 and the layer
// has 512 4x4 output tiles or more (the GEMMs' columns fill 4 tiles of 128); else v14's F(4x4)
// where its 4x4 output tiles pad the output by at most 5% more than F(2x2)'s 2x2 tiles and its
// blocks (32 tiles x 32 filters, one per SM) fill the GPU at least twice; else F(2x2). Measured on
// an H100 at N = 32 (day08 README): v16 1.2x to 2x faster than v14 and v7 at 52 x 68 (C = 128),
// 26 x 34 (256) and 13 x 17 (512), slower at 104 x 136 (C = 64), where v14 is 1.25x v7; at
// N = 1 the deep layers have 20 to 221 tiles, and the network was slower on v16 there.
WinogradForm winograd_form(const ConvShape& s);
size_t winograd_filter_floats(const ConvShape& s);
void winograd_transform_filters(const ConvShape& s, const float* w, float* u,
                                cudaStream_t stream = nullptr);
void conv2d_fused_winograd(const ConvShape& s, const ConvGroup<float>& g,
                           cudaStream_t stream = nullptr, WinogradForm form = WinogradForm::kAuto);

}  // namespace day08
