#pragma once
// day08_convolution: the day's full host API (the capstone's contract is the smaller conv.hpp).
//
//  - 1D convolution: y[i] = sum_j x[i + j - r] * mask[j], mask width 2r + 1, zero padding.
//  - 2D single-channel filter: y[i][j] = sum_{a,b} x[i + a - r][j + b - r] * mask[a][b], any H x W,
//    odd square masks up to kMaxFilter2d, zero padding.
//  - Conv2d layer (conv.hpp): NCHW, KCRS filters, bias, stride, padding, dilation; and a bf16
//    NHWC form (v6 and its cuDNN row) whose inputs the caller converts once (see below).
// Each has a registry of variants that drives the binary, the tests and the README table.
// Every launcher takes device pointers, checks its arguments (std::invalid_argument before any
// CUDA call), checks its launches and does not synchronise.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/arch.hpp"
#include "common/precision.hpp"
#include "common/sample.hpp"
#include "conv.hpp"

namespace day08 {

// ---- 1D convolution ---------------------------------------------------------------------------
constexpr int kMaxMask1d = 1025;               // mask width 2r + 1 <= 1025 (the constant buffer)
constexpr int64_t kMaxN1d = int64_t(1) << 30;  // elements
void check_conv1d_args(int64_t n, int mask_width);
using Conv1dFn = void (*)(const float* x, const float* mask, int64_t n, int mask_width, float* y,
                          cudaStream_t stream);
void conv1d_v1_naive(const float*, const float*, int64_t, int, float*, cudaStream_t);
void conv1d_v2_constant_mask(const float*, const float*, int64_t, int, float*, cudaStream_t);
void conv1d_v3_smem_halo(const float*, const float*, int64_t, int, float*, cudaStream_t);
struct Conv1dVariant {
  const char* name;
  const char* description;
  Conv1dFn launch;
};
const std::vector<Conv1dVariant>& conv1d_variants();
// CPU reference in double: y[0, n).
void conv1d_cpu(const float* x, const float* mask, int64_t n, int mask_width, double* y);

// ---- 2D single-channel filter -----------------------------------------------------------------
constexpr int kMaxFilter2d = 7;  // odd mask widths 1, 3, 5, 7
void check_filter2d_args(int h, int w, int mask_width);
using Filter2dFn = void (*)(const float* x, const float* mask, int h, int w, int mask_width,
                            float* y, cudaStream_t stream);
void filter2d_f1_naive(const float*, const float*, int, int, int, float*, cudaStream_t);
void filter2d_f2_constant_mask(const float*, const float*, int, int, int, float*, cudaStream_t);
void filter2d_f3_in_tile(const float*, const float*, int, int, int, float*, cudaStream_t);
void filter2d_f4_cached_halo(const float*, const float*, int, int, int, float*, cudaStream_t);
void filter2d_f5_register_tiled(const float*, const float*, int, int, int, float*, cudaStream_t);
void filter2d_f6_pipelined(const float*, const float*, int, int, int, float*, cudaStream_t);
struct Filter2dVariant {
  const char* name;
  const char* description;
  Filter2dFn launch;
};
const std::vector<Filter2dVariant>& filter2d_variants();
// CPU reference in double of output row `row` (w values).
void filter2d_cpu_row(const float* x, int h, int w, const float* mask, int mask_width, int row,
                      double* y_row);

// ---- Conv2d layer -----------------------------------------------------------------------------
using ConvPrecision = gpu100::Precision;  // common/precision.hpp
using gpu100::to_string;

using Conv2dFn = void (*)(const ConvShape& s, const float* x, const float* w, const float* bias,
                          float* y, cudaStream_t stream);
void conv2d_v1_direct(const ConvShape&, const float*, const float*, const float*, float*,
                      cudaStream_t);
void conv2d_v2_smem_tiled(const ConvShape&, const float*, const float*, const float*, float*,
                          cudaStream_t);
void conv2d_v3_im2col_gemm(const ConvShape&, const float*, const float*, const float*, float*,
                           cudaStream_t);
void conv2d_v4_implicit_gemm(const ConvShape&, const float*, const float*, const float*, float*,
                             cudaStream_t);
// v15: v4 on filters transposed to CRSK (its own scratch, made at every call), B in 16-byte copies.
void conv2d_v15_implicit_gemm_crsk(const ConvShape&, const float*, const float*, const float*,
                                   float*, cudaStream_t);
void conv2d_v5_implicit_gemm_tf32(const ConvShape&, const float*, const float*, const float*,
                                  float*, cudaStream_t);
// v7: Winograd F(2x2, 3x3), fp32 on CUDA cores. Only 3x3 filters, stride 1, dilation 1;
// otherwise std::invalid_argument (before any CUDA call) with the reason v7_refusal gives.
void conv2d_v7_winograd(const ConvShape&, const float*, const float*, const float*, float*,
                        cudaStream_t);
std::string v7_refusal(const ConvShape& s, bool bias);
// v8: the same Winograd kernel with its products on TF32 tensor cores; v7's shapes and refusals.
void conv2d_v8_winograd_tf32(const ConvShape&, const float*, const float*, const float*, float*,
                             cudaStream_t);
// v14: Winograd F(4x4, 3x3), fp32 on CUDA cores; v7's shapes, its own refusal text.
void conv2d_v14_winograd_f4(const ConvShape&, const float*, const float*, const float*, float*,
                            cudaStream_t);
std::string v14_refusal(const ConvShape& s, bool bias);
// v16: Winograd F(4x4, 3x3) as transform kernels around 36 batched GEMMs (day04's SGEMM v8);
// v14's shapes, and its scratch (V and M) under 2^31 floats each.
void conv2d_v16_winograd_f4_gemm(const ConvShape&, const float*, const float*, const float*, float*,
                                 cudaStream_t);
std::string v16_refusal(const ConvShape& s, bool bias);
// The F(2x2, 3x3) part of conv.hpp's Winograd filters U (which the F(4x4) part follows).
size_t winograd_f2_floats(const ConvShape& s);
// The shape rule v7, v8 and v14 share ("" when taken), naming the form ("F(2x2, 3x3)").
std::string winograd_refusal(const ConvShape& s, const char* form);
// cuDNN (when GPU100_HAVE_CUDNN): cudnnConvolutionForward with the algorithm that
// cudnnFindConvolutionForwardAlgorithm picks, then cudnnAddTensor for the bias. The first call for
// a shape finds the algorithm and allocates the workspace (once, kept for later calls); later calls
// only launch. fp32: CUDNN_FMA_MATH (no tensor cores); tf32: CUDNN_TENSOR_OP_MATH, which lets
// cuDNN use TF32 for fp32 data. Without cuDNN they throw std::runtime_error. The set-up is
// CudnnConvPlan (cudnn_conv_plan.hpp), which the capstone's cuDNN rows share.
bool have_cudnn();
void conv2d_cudnn_fp32(const ConvShape&, const float*, const float*, const float*, float*,
                       cudaStream_t);
void conv2d_cudnn_tf32(const ConvShape&, const float*, const float*, const float*, float*,
                       cudaStream_t);
// cuDNN TF32 on fp32 NHWC (x fp32 NHWC, w fp32 KRSC, y fp32 NPQK; CUDNN_TENSOR_OP_MATH; the bias,
// if any, by cudnnAddTensor): the library row of the fp32 NHWC variants (v11, v13). On NCHW data
// (conv2d_cudnn_tf32) cuDNN's Hopper TF32 kernels work in NHWC and convert the layouts around
// themselves, which costs the NHWC variants' comparison nothing they pay.
void conv2d_cudnn_tf32_nhwc(const ConvShape&, const float*, const float*, const float*, float*,
                            cudaStream_t);

// ---- Conv2d in bf16, NHWC (channels last) ------------------------------------------------------
// x NHWC [n][h][w][c] bf16, filters KRSC [k][r][s][c] bf16, optional fp32 bias [k]. The caller
// converts x and w once (to_nhwc_bf16 / to_krsc_bf16 below), outside any timed region, as day05
// converts Q, K, V. `y` is the variant's output: fp32 NKPQ [n][k][p][q] (v6, like every fp32
// variant), or bf16 NPQK [n][p][q][k] for a variant with y_bf16_npqk set (the cuDNN row: cuDNN's
// legacy API has one bf16 configuration, PSEUDO_BFLOAT16_CONFIG, with x, w and y all bf16).
using Conv2dBf16NhwcFn = void (*)(const ConvShape& s, const __nv_bfloat16* x,
                                  const __nv_bfloat16* w, const float* bias, void* y,
                                  cudaStream_t stream);
// v6: implicit GEMM on mma.sync m16n8k16 bf16 tensor cores, fp32 accumulation, fp32 NKPQ out.
// Needs C % 8 == 0 and 16-byte aligned x and w; otherwise std::invalid_argument (before any CUDA
// call), with the reason v6_refusal gives.
void conv2d_v6_implicit_gemm_bf16_nhwc(const ConvShape&, const __nv_bfloat16*, const __nv_bfloat16*,
                                       const float*, float*, cudaStream_t);
// v9: the same implicit GEMM on Hopper's wgmma (sm_90a only), warp-specialised: a producer
// warpgroup gathers A (cp.async) and loads the filters (TMA), two consumer warpgroups multiply.
// v6's shapes and refusals (v9_refusal), and "needs an sm_90a build" (gpu100::ArchUnavailable)
// elsewhere; fp32 NKPQ out.
void conv2d_v9_implicit_gemm_wgmma_bf16_nhwc(const ConvShape&, const __nv_bfloat16*,
                                             const __nv_bfloat16*, const float*, float*,
                                             cudaStream_t);
// v10: v9 with A brought by the TMA engine in im2col mode (sm_90a only): one copy instruction per
// slab (one filter tap x 64 channels), the copy engine walks the window; a one-warp producer. Needs
// C % 8 == 0, a stride of at most 8, and 16-byte aligned x and w (v10_refusal); fp32 NKPQ out.
void conv2d_v10_tma_im2col_wgmma_bf16_nhwc(const ConvShape&, const __nv_bfloat16*,
                                           const __nv_bfloat16*, const float*, float*,
                                           cudaStream_t);
// v11: v10's kernel on fp32 operands as TF32 (wgmma .tf32 takes K-major operands only, which
// NHWC x and KRSC w are): x fp32 NHWC [n][h][w][c], w fp32 KRSC, optional bias, y fp32 NKPQ.
// sm_90a only; C % 4 == 0, a stride of at most 8, 16-byte aligned x and w (v11_refusal).
void conv2d_v11_tma_im2col_wgmma_tf32_nhwc(const ConvShape&, const float*, const float*,
                                           const float*, float*, cudaStream_t);
// v12: v10 for the layers whose filters fit in shared memory (sm_90a only): the 3x3 filters of
// C <= 64 channels and K <= 64 filters loaded once per block, each 8 x 8 output tile's 10 x 10
// input halo brought once by TMA (whole 128-byte pixels, 128-byte swizzle) and read in place by all
// 9 taps (one wgmma descriptor per tap, starting at the tap's shifted row).
// Needs 3x3, stride 1, dilation 1, C % 8 == 0, C <= 64, K <= 64 and 16-byte aligned x and w
// (v12_refusal); fp32 NKPQ out.
void conv2d_v12_halo_wgmma_bf16_nhwc(const ConvShape&, const __nv_bfloat16*, const __nv_bfloat16*,
                                     const float*, float*, cudaStream_t);
// v13: v12 on fp32 operands as TF32 (sm_90a only): the 3x3 filters of C <= 64 channels and K <= 64
// filters resident (147 KB), each 8 x 8 output tile's halo brought once by TMA in two copies of 32
// channels (128-byte swizzle) and read in place by all 9 taps; one halo stage per consumer
// warpgroup, which its staged epilogue reuses. x fp32 NHWC, w fp32 KRSC, optional bias, y fp32
// NKPQ. Needs 3x3, stride 1, dilation 1, C % 4 == 0, C <= 64, K <= 64 and 16-byte aligned x and w
// (v13_refusal).
void conv2d_v13_halo_wgmma_tf32_nhwc(const ConvShape&, const float*, const float*, const float*,
                                     float*, cudaStream_t);
// cuDNN bf16 NHWC (x, w and y bf16 NHWC; compute fp32; CUDNN_TENSOR_OP_MATH; the algorithm
// cudnnFindConvolutionForwardAlgorithm picks): y is bf16 NPQK. No bias (refused: the bf16
// configuration would need a bf16 bias and a second call). Throws std::runtime_error without cuDNN.
void conv2d_cudnn_bf16_nhwc(const ConvShape&, const __nv_bfloat16*, const __nv_bfloat16*,
                            const float*, __nv_bfloat16*, cudaStream_t);
// "" when the variant runs this shape (with or without a bias), else the one-line reason.
std::string v6_refusal(const ConvShape& s, bool bias);
std::string v9_refusal(const ConvShape& s, bool bias);
std::string v10_refusal(const ConvShape& s, bool bias);
std::string v11_refusal(const ConvShape& s, bool bias);
std::string v12_refusal(const ConvShape& s, bool bias);
std::string v13_refusal(const ConvShape& s, bool bias);
std::string cudnn_bf16_refusal(const ConvShape& s, bool bias);

// The algorithm cuDNN chose for this shape and precision (kFp32: the cudnn_fp32 row, kTf32:
// cudnn_tf32, or cudnn_tf32_nhwc with nhwc, kBf16: cudnn_bf16_nhwc); "" before the first call.
std::string cudnn_choice(const ConvShape& s, ConvPrecision p, bool nhwc = false);

// How v10's and v11's launcher (tma_im2col_conv.cuh) splits GEMM_K for a layer whose output tiles
// fill at most half the GPU (a small batch, a deep layer): kWorkspace, the slab ranges are work
// units of the persistent blocks, their partial sums go through a global workspace and the
// tile's last block adds them alone; kCluster, a tile's ranges run in one thread-block cluster
// and its CTAs add the sums in parallel through distributed shared memory (kBN <= 128 tiles; a
// layer the cluster rule does not split falls back to kWorkspace's rule). kDefaultSplitK is what
// the variants and conv.hpp's fused forms use: kCluster, or kWorkspace in a build configured with
// -DGPU100_DAY08_SPLITK=workspace (defines GPU100_DAY08_SPLITK_WORKSPACE), for A/B runs of
// networks; the tests call the group launchers below both ways.
enum class SplitKMode { kWorkspace, kCluster };
#if defined(GPU100_DAY08_SPLITK_WORKSPACE) && GPU100_DAY08_SPLITK_WORKSPACE
constexpr SplitKMode kDefaultSplitK = SplitKMode::kWorkspace;
#else
constexpr SplitKMode kDefaultSplitK = SplitKMode::kCluster;
#endif

namespace detail {
// The current GPU's SMs, asked once per GPU: the fill rules of the kernel picks (v12's, v14's,
// v15's tile width).
int sm_count();
// The group launchers behind the variants and conv.hpp's fused form (conv2d_fused checks the
// arguments; v6's and v9's check their own refusals and alignment).
void conv2d_v4_group(const ConvShape& s, const ConvGroup<float>& grp, cudaStream_t stream);
// v15's: the CRSK filters (v15_filter_floats(s) floats, written by v15_transform_filters from the
// KCRS ones) and its kernel on a group whose `w` are such filters (16-byte aligned).
size_t v15_filter_floats(const ConvShape& s);
void v15_transform_filters(const ConvShape& s, const float* w, float* wt, cudaStream_t stream);
void conv2d_v15_group(const ConvShape& s, const ConvGroup<float>& grp, cudaStream_t stream);
void conv2d_v5_group(const ConvShape& s, const ConvGroup<float>& grp, cudaStream_t stream);
// v7's kernel on a group whose `w` are Winograd-transformed filters (winograd_transform_filters).
void conv2d_v7_group(const ConvShape& s, const ConvGroup<float>& grp, cudaStream_t stream);
// v14's: its filter transform (v14_filter_floats(s) floats of U), its kernel on such U, and how
// many blocks it launches at a shape.
size_t v14_filter_floats(const ConvShape& s);
int64_t v14_blocks(const ConvShape& s);
void v14_transform_filters(const ConvShape& s, const float* w, float* u, cudaStream_t stream);
void conv2d_v14_group(const ConvShape& s, const ConvGroup<float>& grp, cudaStream_t stream);
// v16's on a group whose `w` are v14's U (its V and M in day08's per-stream scratch).
void conv2d_v16_group(const ConvShape& s, const ConvGroup<float>& grp, cudaStream_t stream);
template <class Y>
void conv2d_v6_group(const ConvShape& s, const ConvGroup<__nv_bfloat16, Y>& grp,
                     cudaStream_t stream);
template <class Y>
void conv2d_v9_group(const ConvShape& s, const ConvGroup<__nv_bfloat16, Y>& grp,
                     cudaStream_t stream);
template <class Y>
void conv2d_v10_group(const ConvShape& s, const ConvGroup<__nv_bfloat16, Y>& grp,
                      cudaStream_t stream, SplitKMode split = kDefaultSplitK);
template <class Y>
void conv2d_v12_group(const ConvShape& s, const ConvGroup<__nv_bfloat16, Y>& grp,
                      cudaStream_t stream);
// v11's kernel in conv.hpp's fused form: fp32 NHWC x, KRSC w, fp32 NPQK y and residual.
void conv2d_v11_group(const ConvShape& s, const ConvGroup<float>& grp, cudaStream_t stream,
                      SplitKMode split = kDefaultSplitK);
// v13's kernel in the same fused form (its shapes: v13_refusal).
void conv2d_v13_group(const ConvShape& s, const ConvGroup<float>& grp, cudaStream_t stream);
}  // namespace detail

using Conv2dF32NhwcFn = void (*)(const ConvShape& s, const float* x, const float* w,
                                 const float* bias, float* y, cudaStream_t stream);
struct Conv2dVariant {
  const char* name;
  const char* description;
  ConvPrecision precision;
  Conv2dFn launch;  // fp32 NCHW in, fp32 NKPQ out; nullptr for the bf16 NHWC variants
  bool is_library = false;
  const char* library = "";  // the library row this variant is compared with
  // The bf16 NHWC variants: launch is nullptr and this is set (conv2d_forward refuses them; the
  // binary and the tests call it on inputs converted once).
  Conv2dBf16NhwcFn launch_bf16_nhwc = nullptr;
  bool y_bf16_npqk = false;  // writes bf16 NPQK instead of fp32 NKPQ
  std::string (*refusal)(const ConvShape&, bool bias) = nullptr;  // nullptr: runs every shape
  // Scales the precision's tolerance: a fast algorithm (Winograd) rounds more than a direct sum.
  double tol_scale = 1;
  gpu100::ArchNeed needs = gpu100::ArchNeed::kAny;  // the GPU code it needs (common/arch.hpp)
  const char* tags = "";  // "mine": a learner's variant (common/learner.hpp)
  // The fp32 NHWC variants (v11, v13, cudnn_tf32_nhwc): launch is nullptr and this is set; x fp32
  // NHWC, w fp32 KRSC (converted once, to_nhwc_f32 / to_krsc_f32), y fp32 NKPQ (NPQK where
  // y_f32_npqk is set).
  Conv2dF32NhwcFn launch_f32_nhwc = nullptr;
  bool y_f32_npqk = false;  // an fp32 NHWC variant that writes fp32 NPQK (cudnn_tf32_nhwc)
  bool takes_bf16_nhwc() const { return launch_bf16_nhwc != nullptr; }
  bool takes_f32_nhwc() const { return launch_f32_nhwc != nullptr; }
  bool takes_nhwc() const { return takes_bf16_nhwc() || takes_f32_nhwc(); }
};
// Every variant, cuDNN included (its rows are skipped without cuDNN), then the learner's
// (mine/*.cu).
const std::vector<Conv2dVariant>& conv2d_variants();
// Adds a learner's Conv2d (tagged "mine") from its file in mine/ (common/learner.hpp).
void add_learner_conv2d(const Conv2dVariant& v);
// nullptr when unknown; "best_fp32" resolves to kBestFp32: v4, the implicit GEMM on the filters
// as given, for any shape (v15 is faster where the filters are transposed once, conv.hpp's
// conv2d_fused_crsk; called by name it transposes them at every call).
const Conv2dVariant* find_conv2d_variant(const std::string& name);
constexpr const char* kBestFp32 = "v4_implicit_gemm";

// FLOPs (2 per multiply-add, bias adds not counted) and compulsory bytes (x, w, bias, y once).
double conv2d_flops(const ConvShape& s);
double conv2d_bytes(const ConvShape& s, bool bias);
// The same for the bf16 NHWC variants: x and w 2 bytes, bias 4, y 4 (fp32) or 2 (bf16) bytes.
double conv2d_bytes_bf16(const ConvShape& s, bool bias, bool y_bf16);
std::string to_string(const ConvShape& s);  // "N=64 C=64 56x56 K=64 3x3 s1 p1"

// CPU reference in double: the whole output (n * k * p * q values), and one output element.
void conv2d_cpu(const ConvShape& s, const float* x, const float* w, const float* bias, double* y);
// The layout changes of the bf16 NHWC variants, on the host: NCHW fp32 -> NHWC bf16 (x),
// KCRS fp32 -> KRSC bf16 (w), each value rounded to nearest; and a bf16 NPQK output back to fp32
// NKPQ (to compare it with the reference). With c_pad > s.c the channels are padded with zeros
// to c_pad (a 3-channel image for a kernel that reads 8 channels at a time).
std::vector<__nv_bfloat16> to_nhwc_bf16(const ConvShape& s, const std::vector<float>& x_nchw,
                                        int c_pad = 0);
std::vector<__nv_bfloat16> to_krsc_bf16(const ConvShape& s, const std::vector<float>& w_kcrs,
                                        int c_pad = 0);
std::vector<float> npqk_to_nkpq(const ConvShape& s, const std::vector<__nv_bfloat16>& y_npqk);
// The same layout changes in fp32, values unchanged (v11's operands; its fused form's outputs).
std::vector<float> to_nhwc_f32(const ConvShape& s, const std::vector<float>& x_nchw);
std::vector<float> to_krsc_f32(const ConvShape& s, const std::vector<float>& w_kcrs);
std::vector<float> npqk_to_nkpq(const ConvShape& s, const std::vector<float>& y_npqk);
double conv2d_cpu_at(const ConvShape& s, const float* x, const float* w, const float* bias, int n,
                     int k, int p, int q);
// The output's extents [N, K, P, Q] (for gpu100::sample_points), and the CPU reference at the
// flat output indices `idx`: the sampled check of a layer too large for conv2d_cpu.
gpu100::Dims4 output_dims(const ConvShape& s);
std::vector<double> conv2d_cpu_at_points(const ConvShape& s, const float* x, const float* w,
                                         const float* bias, const std::vector<int64_t>& idx);

// Comparison tolerances: |got - ref| <= abs + rel * |ref|, abs scaled by sqrt(C*R*S) (the typical
// size of a sum of C*R*S products of values in [-1, 1]). kBf16 is for a reference computed on the
// bf16-rounded inputs (gpu100::round_trip): the products of two bf16 values are exact in fp32, so
// only the fp32 accumulation (and a bf16 output's rounding, 2^-9 relative) remains.
using gpu100::Tolerance;
Tolerance conv2d_tolerance(const ConvShape& s, ConvPrecision p);
// The tolerance of a variant: its precision's, times its tol_scale.
Tolerance conv2d_tolerance(const ConvShape& s, const Conv2dVariant& v);
Tolerance filter_tolerance(int taps);

// The device scratch buffer of v3 (its im2col matrix), of the Winograd variants (their
// transformed filters) and of v10's and v11's split-K (their partial sums): grown on demand, kept
// across calls, one per stream (guarded by a mutex), so layers on different streams never share
// one. The growth is a cudaMalloc, so the first call for a larger shape is slow (time only later
// calls) and must not happen inside a CUDA graph capture; the smaller buffer is kept, never freed,
// since a graph captured before may still use it.
void* conv_scratch(size_t bytes, cudaStream_t stream);
// The counters of v10's and v11's split-K (tma_im2col_conv.cuh): `count` ints, zero, one array per
// stream, grown on demand (a cudaMalloc and a memset on that stream: make the first call for a
// shape outside any CUDA graph capture, as for conv_scratch). The kernels leave them zero.
int* conv_counters(size_t count, cudaStream_t stream);

// Where conv_scratch and conv_counters take their memory while a ScratchScope is open on this
// thread: from the caller's allocator instead of day08's own buffers. A framework with a
// stream-ordered allocator of its own (the capstone's PyTorch extension hands in PyTorch's) makes
// the first call for a shape safe inside a CUDA graph capture this way, since nothing is
// cudaMalloc'ed. get() returns at least `bytes` bytes, 256-byte aligned, that stay valid for work
// enqueued on `stream` until the scope closes. counters() returns `count` ints that are zero when
// work on `stream` reaches them: by default get()'s memory, cleared on `stream` (a memset per
// split-K layer); a source may hand out memory it cleared once for many layers instead, since the
// kernels leave their counters zero.
class ScratchSource {
 public:
  virtual ~ScratchSource() = default;
  virtual void* get(size_t bytes, cudaStream_t stream) = 0;
  virtual int* counters(size_t count, cudaStream_t stream);
};
class ScratchScope {
 public:
  explicit ScratchScope(ScratchSource* source);
  ~ScratchScope();
  ScratchScope(const ScratchScope&) = delete;
  ScratchScope& operator=(const ScratchScope&) = delete;

 private:
  ScratchSource* previous_;
};

}  // namespace day08
