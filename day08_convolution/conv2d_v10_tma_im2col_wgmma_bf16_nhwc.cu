// Conv2d v10: v9 with its A tile brought by the TMA engine in im2col mode (kernel code only in
// sm_90a targets; refused elsewhere). bf16 NHWC x and KRSC filters, fp32 accumulation. What changed
// from v9, and why it should be faster:
//  - v9's producer warpgroup computes, for each of a slab's 128 rows, whether the tap falls in the
//    image and where, and issues 8 cp.async per thread per slab: address arithmetic, not the tensor
//    cores, sets its pace (on the network's stem Nsight Compute put the integer pipe first, 50%
//    busy: results/h100/mc_resnet18_ladder/4_persistent_v9_blocks_ncu_stem.txt). Here one
//    instruction per slab, cp.async.bulk.tensor.4d ... im2col, names the tile's first output pixel
//    and the filter tap (r, s); the copy engine walks the 128 output pixels itself (w fastest,
//    across rows and images), applies the stride, zero-fills the taps that fall in the padding and
//    the pixels past the last image, and writes the 128-byte-swizzled rows the wgmma reads. The
//    tensor map (cuTensorMapEncodeIm2col, day04's make_tma_map_im2col_nhwc) holds the layout of x,
//    the padding and the stride.
//  - GEMM_K is walked tap by tap: a slab is one (r, s) and 64 channels. The filters' box for it
//    starts at column (r S + s) C + c0 of the [K][R S C] weights. Where C is not a multiple of 64
//    the last slab of a tap reads channels past C, which the im2col copy zero-fills in A: the B
//    columns they meet (the next tap's weights) multiply zeros. That wastes tensor-core work, so
//    the fused layer form takes v10 for C % 64 == 0 (every 3x3 and 1x1 layer of a ResNet) and v9
//    for the rest.
//  - the producer is one warp, one of whose threads issues both copies; the stage's `full` barrier
//    waits for one arrival and the two copies' bytes.
// Costs: sm_90a only; C % 8 == 0 (the tensor's rows are 16-byte multiples for the TMA), a 16-byte
// aligned x and w, a stride of at most 8 and window corners within [-128, 127] (the im2col
// descriptor's limits); two tensor maps per convolution made on the host at each call (four with
// the staged epilogue: y and the residual too).
// The kernel and its launcher are in tma_im2col_conv.cuh (v11 runs the same code on fp32 operands
// as TF32); the tiling, the stages and the consumer warpgroups are v9's (implicit_gemm_wgmma.cuh),
// with four additions: where K is a multiple of 256 and the tiles fill half the GPU, a tile is 256
// filters wide (m64n256), so each A row read from shared memory serves twice the filters
// (tma_im2col_conv.cuh says when; measured 8-9% faster at the network's 256- and 512-filter
// layers); where a tile has 8 slabs or more and every block gets two tiles, ping-pong consumers:
// each warpgroup owns a whole 128 x 128 tile, the two take turns at the tensor cores, and one's
// epilogue runs under the other's main loop (10% faster at the network's l2, in bf16 and TF32);
// in the fused form on those tiles, the epilogue staged in shared memory: the TMA brings the
// residual tile during the main loop, ldmatrix / stmatrix read and write it in the accumulators'
// layout, and TMA stores write the outputs, so far fewer instructions run beside the other
// warpgroup's multiplies than with per-thread loads, shuffles and stores (l2 another 11% faster),
// and with one 16 KB staging box per warpgroup, the tile in two passes, 6 stages fit (l2 6%
// faster again, TF32's 11%, on an H200); in bf16 these staged tiles also come before the 256-wide
// ones, and a last wave that would fill at most half the blocks runs as 64-row half tiles
// (tile_walk.hpp; the network's l3 0.390 to 0.325 ms on an H200);
// and in the fused layer form where C >= 128 and the 128-wide tiles fill the GPU without giving
// each block two, 3 pipeline stages instead of 4 so that two blocks share an SM.
// The fused form's epilogue loads the residual two 16-byte pieces ahead of their stores
// (implicit_gemm_wgmma.cuh's store_registers). (Ideas: the PTX ISA's im2col tensor mode and
// cuTensorMapEncodeIm2col; CUTLASS's Hopper implicit GEMM convolution, whose producer issues im2col
// TMA copies, and its ping-pong warp-specialised GEMM kernels.)
#include <cuda_bf16.h>

#include <string>
#include <type_traits>

#include "common/arch.cuh"
#include "conv_day.hpp"
#include "implicit_gemm_wgmma.cuh"
#include "tma_im2col_conv.cuh"

#if !GPU100_SM90A_CODE
#pragma nv_diag_suppress 177  // this target compiles the kernel bodies out, leaving their constants
#endif

namespace day08 {

namespace {
using bf16 = __nv_bfloat16;
constexpr const char* kName = "v10_tma_im2col_wgmma_bf16_nhwc";
}  // namespace

std::string v10_refusal(const ConvShape& s, bool /*bias*/) {
  return tma_im2col::refusal(s, 8);  // 8 bf16 = 16 bytes
}

namespace detail {
// Y = float: the day's variant, fp32 NKPQ out (+ bias). Y = bf16: conv.hpp's fused layer form,
// bf16 NPQK out with bias, residual and ReLU.
template <class Y>
void conv2d_v10_group(const ConvShape& s, const ConvGroup<bf16, Y>& grp, cudaStream_t stream,
                      SplitKMode split) {
  constexpr bool kNpqk = std::is_same_v<Y, bf16>;
  wgmma_conv::check_launch(kName, v10_refusal(s, false), s, grp, kNpqk, "TMA copies");
  tma_im2col::launch_for_k<bf16, Y, kNpqk>(kName, s, grp, stream, split);
}
template void conv2d_v10_group(const ConvShape&, const ConvGroup<bf16, bf16>&, cudaStream_t,
                               SplitKMode);
template void conv2d_v10_group(const ConvShape&, const ConvGroup<bf16, float>&, cudaStream_t,
                               SplitKMode);
}  // namespace detail

void conv2d_v10_tma_im2col_wgmma_bf16_nhwc(const ConvShape& s, const bf16* x, const bf16* w,
                                           const float* bias, float* y, cudaStream_t stream) {
  check_conv_args(s);
  ConvGroup<bf16, float> grp;
  grp.op[0] = {x, w, bias, nullptr, y};
  detail::conv2d_v10_group(s, grp, stream);
}

}  // namespace day08
