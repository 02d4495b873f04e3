// Conv2d v11: v10's kernel on fp32 operands, multiplied as TF32 (kernel code only in sm_90a
// targets; refused elsewhere). fp32 NHWC x and KRSC filters, fp32 accumulation. What changed from
// v10, and why the TF32 convolution gets faster than v5's:
//  - v5 (mma.sync m16n8k8 TF32 on NCHW) stays far below the H100's 494 TFLOP/s of dense TF32:
//    mma.sync issues from every warp, and its gather of NCHW activations is address arithmetic
//    for every element, as v6's was in bf16 before v9 and v10. Hopper's wgmma reads both operands
//    from shared memory, but in TF32 only K-major ones (no transpose flag, unlike bf16): each row
//    of A must be consecutive GEMM_K values of one output pixel. NCHW puts a pixel's channels H*W
//    apart; NHWC puts them side by side, and the KRSC filters are K-major too. So v11 takes fp32
//    NHWC x, and the whole of v10 carries over: the TMA's im2col copies walk the window, the
//    one-warp producer, the persistent blocks, the consumer warpgroups (tma_im2col_conv.cuh,
//    implicit_gemm_wgmma.cuh).
//  - what differs is only the element: a 128-byte row now holds 32 fp32 channels, so a slab is one
//    tap x 32 channels (twice as many slabs as v10 for the same convolution), and each of its 4
//    k-steps is wgmma m64nNk8.tf32 (32 bytes of k, as v10's k16 in bf16). A slab brings the same
//    bytes as v10's and does half the multiply-adds: the copies and the L2 carry twice the bytes
//    per FLOP. TF32's peak is half of bf16's, so the balance of copy and math is v10's.
//  - rounding: the TMA copies the fp32 bits as they are and the tensor core reads the top 19 (sign,
//    exponent, 10 mantissa bits): truncation, where v5 rounds to nearest with cvt.rna as it loads
//    fragments. The error stays within TF32's tolerance (a relative 2^-10 per operand, of either
//    sign in a sum of products of either sign); rounding would cost a pass over x.
// Costs: sm_90a only; C % 4 == 0 (16-byte rows for the TMA), a 16-byte aligned x and w, a stride of
// at most 8 and window corners within [-128, 127]; a C not a multiple of 32 leaves the last slab
// of each tap part zero (tensor-core work spent on zeros), which the network never has after its
// stem. x in fp32 NHWC is the layout the network's TF32 path keeps between its layers.
// (Ideas: the PTX ISA's wgmma .tf32 forms and their K-major rule; CUTLASS's Hopper TF32 GEMMs,
// which take K-major operands for the same reason.)
#include <string>

#include "common/arch.cuh"
#include "conv_day.hpp"
#include "implicit_gemm_wgmma.cuh"
#include "tma_im2col_conv.cuh"

#if !GPU100_SM90A_CODE
#pragma nv_diag_suppress 177  // this target compiles the kernel bodies out, leaving their constants
#endif

namespace day08 {

namespace {
constexpr const char* kName = "v11_tma_im2col_wgmma_tf32_nhwc";

// kNpqk false: the day's variant, fp32 NKPQ out (+ bias); true: conv.hpp's fused layer form, fp32
// NPQK out with bias, residual and ReLU.
template <bool kNpqk>
void v11_group(const ConvShape& s, const ConvGroup<float>& grp, cudaStream_t stream,
               SplitKMode split = kDefaultSplitK) {
  wgmma_conv::check_launch(kName, v11_refusal(s, false), s, grp, kNpqk, "TMA copies");
  tma_im2col::launch_for_k<float, float, kNpqk>(kName, s, grp, stream, split);
}
}  // namespace

std::string v11_refusal(const ConvShape& s, bool /*bias*/) {
  return tma_im2col::refusal(s, 4);  // 4 fp32 = 16 bytes
}

namespace detail {
void conv2d_v11_group(const ConvShape& s, const ConvGroup<float>& grp, cudaStream_t stream,
                      SplitKMode split) {
  v11_group<true>(s, grp, stream, split);
}
}  // namespace detail

void conv2d_v11_tma_im2col_wgmma_tf32_nhwc(const ConvShape& s, const float* x, const float* w,
                                           const float* bias, float* y, cudaStream_t stream) {
  check_conv_args(s);
  ConvGroup<float> grp;
  grp.op[0] = {x, w, bias, nullptr, y};
  v11_group<false>(s, grp, stream);
}

}  // namespace day08
