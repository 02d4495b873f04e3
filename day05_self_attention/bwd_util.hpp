#pragma once
// day05: the two small kernels around the flash backwards (bwd_v2_flash_mma.cu,
// bwd_v3_flash_wgmma.cu), written once in bwd_util.cu:
//  - the pre-pass: D_i = dO_i . O_i per query row (d / 8 lanes per row), the fp32 dQ accumulator
//    zeroed, and for bwd v3 the row log-sum-exp times log2 e, both in per-head rows padded to a
//    multiple of the query tile (a TMA bulk copy needs 16-byte aligned sources);
//  - the post-pass: dQ = c x the fp32 accumulator, rounded to bf16.
// Host launchers: arguments are the caller's (checked there); launches checked, no synchronisation.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace day05::bwd {

// For every head bh < heads and row i < s_pad: row r = bh s_pad + i gets delta[r] = dO . O of
// query row bh s + i ([rows][d] bf16, d % 8 == 0) and, when lse2 != nullptr, lse2[r] = lse[bh s +
// i] log2 e; rows i >= s get 0 in both. dq_acc ([heads s][d] fp32, or nullptr): zeroed. bwd v2
// calls it with s_pad = s (no padding) and lse2 = nullptr.
void launch_prepass(const __nv_bfloat16* dout, const __nv_bfloat16* o, const float* lse,
                    float* delta, float* lse2, float* dq_acc, int64_t heads, int s, int s_pad,
                    int d, cudaStream_t stream);

// dq = scale x dq_acc in bf16, `elements` of them (a multiple of 4; both 16-byte aligned).
void launch_postpass(const float* dq_acc, __nv_bfloat16* dq, int64_t elements, float scale,
                     cudaStream_t stream);

}  // namespace day05::bwd
