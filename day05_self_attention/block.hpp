#pragma once
// day05's attention block: the forward pass of one attention layer, built from the days before it.
//
//   [Qp | Kp | V] = X W_qkv                X [B S, d_model], W_qkv [d_model, 3 H D]
//   Q, K = RoPE(Qp), RoPE(Kp)               day01's rotation (either pairing), position = s
//   O = softmax(Q K^T / sqrt(D) + mask) V   day05's flash kernel, per head
//   Y = O W_o                               O as [B S, H D], W_o [H D, d_model], Y [B S, d_model]
//
// bf16 storage, fp32 accumulation. Row b S + s of X, Y and of every [B S, ...] matrix is token s of
// sequence b. The projections' rows are token-major: head h of token (b, s) is columns h D ..
// h D + D - 1, i.e. the tensor [B, S, H, D]; the flash kernel reads Q, K and V as [B, H, S, D].
// Two ways to run the block:
//   unfused (block_unfused): what an eager framework runs, one kernel per step: three projections
//     (cuBLAS, one weight each), day01's RoPE kernel on Q and K, one transposition [B, S, H, D] ->
//     [B, H, S, D] per tensor, the flash kernel, the transposition of O back, the output
//     projection (cuBLAS);
//   fused (block_fused): one GEMM by the concatenated W_qkv whose epilogue rotates Q and K and
//     writes Q, K and V straight into [B, H, S, D] (qkv_rope_wgmma: day04's v13 main loop; where it
//     cannot run, the GEMM then one kernel that rotates and scatters: qkv_gemm_rope_scatter), the
//     flash kernel writing O token-major (OLayout::kBSHD), the output projection.
// Every launcher checks its arguments (std::invalid_argument), checks its launches and does not
// synchronise.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "attention.hpp"
#include "common/arch.hpp"
#include "common/compare.hpp"
#include "common/device_buffer.hpp"
#include "rope.cuh"

namespace day05 {

struct BlockShape {
  int b = 8, s = 2048, d_model = 2048, h = 16, d = 128;
  bool causal = true;
  day01::RopeStyle style = day01::RopeStyle::kHalfSplit;
  double rope_base = 10000.0;

  int64_t tokens() const { return int64_t(b) * s; }  // B S: rows of X, Y and the projections
  int64_t hd() const { return int64_t(h) * d; }      // H D: width of Q, K, V and O per token
  AttentionShape attention() const { return {b, h, s, d, causal}; }
  day01::RopeParams rope() const;  // Q and K as [B, S, H, D], position s
};

// Throws std::invalid_argument (one line naming the size) unless: B, S, d_model, H >= 1, D is 64 or
// 128 (the flash kernels' instantiations), the attention shape passes check_shape, and every
// matrix has fewer than 2^31 rows and 2^40 elements.
void check_block_shape(const BlockShape& s);
// "B=8 S=2048 d_model=2048 H=16 D=128 causal half_dim-split"
std::string block_label(const BlockShape& s);
double qkv_flops(const BlockShape& s);    // 2 B S d_model 3 H D
double block_flops(const BlockShape& s);  // the three GEMMs and the attention (attention_flops)

// The block's device memory, allocated once (outside any timing) for one shape.
struct BlockTensors {
  explicit BlockTensors(const BlockShape& shape);
  BlockShape shape;
  gpu100::DeviceBuffer<__nv_bfloat16> x;      // [B S, d_model]
  gpu100::DeviceBuffer<__nv_bfloat16> w_qkv;  // [d_model, 3 H D], W_q | W_k | W_v side by side
  gpu100::DeviceBuffer<__nv_bfloat16> w_q, w_k, w_v;  // [d_model, H D] each: the unfused block's
  gpu100::DeviceBuffer<__nv_bfloat16> w_o;            // [H D, d_model]
  gpu100::DeviceBuffer<__nv_bfloat16> q, k, v;        // [B, H, S, D]: what the flash kernel reads
  // [B S, 3 H D]: the unfused block's three projections one after the other (each [B S, H D]), or
  // the concatenated projection's rows (qkv_cublas_gemm, qkv_v13_gemm, qkv_gemm_rope_scatter).
  gpu100::DeviceBuffer<__nv_bfloat16> scratch;
  gpu100::DeviceBuffer<__nv_bfloat16> o;  // [B, H, S, D]: the unfused block's attention output
  gpu100::DeviceBuffer<__nv_bfloat16>
      o_tok;                                // [B S, H D]: O token-major, the output projection's A
  gpu100::DeviceBuffer<__nv_bfloat16> y;    // [B S, d_model]
  gpu100::DeviceBuffer<char> workspace;     // the flash kernel's row log-sum-exp
  std::unique_ptr<day01::RopeTable> table;  // cos / sin for positions 0 .. S - 1
  size_t bytes() const;                     // all of the above
};
// The device bytes BlockTensors(shape) allocates.
double block_tensor_bytes(const BlockShape& s);
// Uploads X, W_qkv and W_o (given in float; rounded to bf16) and derives W_q, W_k, W_v from W_qkv.
void upload_block_inputs(BlockTensors& t, const std::vector<float>& x,
                         const std::vector<float>& w_qkv, const std::vector<float>& w_o);

// ---- the QKV stage: X W_qkv, RoPE, Q K V as [B, H, S, D]
// ----------------------------------------- The library row: cuBLAS's GEMM by the concatenated
// weight alone (no RoPE, rows token-major in `scratch`): what the fused stage's epilogue has to be
// nearly free against.
void qkv_cublas_gemm(BlockTensors& t, cudaStream_t stream);
// v1: the eager chain (block_v1_unfused.cu): three projections into `scratch`, day01's RoPE on the
// first two in place, three transpositions into q, k, v.
void qkv_unfused(BlockTensors& t, cudaStream_t stream);
// v2: one projection by W_qkv into `scratch`, then one kernel that rotates Q and K and writes q, k,
// v (block_v2_rope_scatter.cu).
void qkv_gemm_rope_scatter(BlockTensors& t, cudaStream_t stream);
// v3: one kernel: day04's v13 GEMM main loop whose epilogue rotates Q and K in the accumulators and
// writes q, k, v (block_v3_qkv_rope_wgmma.cu). Needs an sm_90a build and d_model % 8 == 0 (the
// TMA's 16-byte row stride): refused otherwise, with the reason.
void qkv_rope_wgmma(BlockTensors& t, cudaStream_t stream);
std::string qkv_rope_wgmma_refusal(const BlockShape& s);
// v3's main loop with a plain epilogue: the projection's rows into `scratch`, as qkv_cublas_gemm
// writes them (block_v3_qkv_rope_wgmma.cu). Not a stage of its own: the row that splits v3's gap
// to cuBLAS into the main loop's part (this row against cuBLAS) and the epilogue's (v3 against
// this row). Same needs as v3.
void qkv_v13_gemm(BlockTensors& t, cudaStream_t stream);

// The transposition of the unfused block: out[b][j][i][:] = in[b][i][j][:], in [B, I, J, D] (D %
// 8 == 0, 16-byte aligned). [B, S, H, D] -> [B, H, S, D] is (I, J) = (S, H); back is (H, S).
void swap_middle_bf16(const __nv_bfloat16* in, __nv_bfloat16* out, int64_t b, int64_t i, int64_t j,
                      int d, cudaStream_t stream);

// ---- the whole block: X -> Y
// ----------------------------------------------------------------------
void block_unfused(BlockTensors& t, cudaStream_t stream);
// The QKV stage it runs: "qkv_rope_wgmma" where that runs this shape, else "qkv_gemm_rope_scatter".
const char* block_fused_qkv(const BlockShape& s);
void block_fused(BlockTensors& t, cudaStream_t stream);

// ---- the registry of the block's binary (day05_attention_block)
// -----------------------------------
struct BlockVariant {
  const char* name;
  const char* description;
  bool is_block;  // false: the QKV stage alone (checked on q, k, v); true: the block (on y)
  void (*run)(BlockTensors&, cudaStream_t);
  std::string (*refusal)(const BlockShape&);        // "" when it runs the shape
  const char* library;                              // the row it is compared with ("" for none)
  gpu100::ArchNeed needs = gpu100::ArchNeed::kAny;  // the GPU code it needs (common/arch.hpp)
  bool projection = false;  // writes the projection's rows to `scratch` (checked there), no q k v
};
const std::vector<BlockVariant>& block_variants();

// ---- CPU reference (double) and checks
// ------------------------------------------------------------ The host inputs, as the GPU sees
// them (bf16-rounded values, kept as float).
struct BlockInputs {
  std::vector<float> x, w_qkv, w_o;
};
// X uniform in [-1, 1], W_qkv and W_o uniform in [-1, 1] / sqrt(fan-in), all rounded to bf16.
BlockInputs make_block_inputs(const BlockShape& s, uint64_t seed);

// The projection of token `row` (b S + s) in double: p[0 .. 3 H D) = X[row] W_qkv before RoPE,
// abs_p = sum_k |X[row][k]| |W_qkv[k][c]| (the scale of its fp32 accumulation error), and qkv = p
// with Q and K rotated at position s. Returns the FLOPs it did.
double qkv_row_cpu(const BlockShape& s, const BlockInputs& in, int64_t row, std::vector<double>& p,
                   std::vector<double>& abs_p, std::vector<double>& qkv);

// The checks of the QKV stage at token `row`, against qkv_row_cpu's p and qkv:
//  - q, k, v (bf16, [B, H, S, D]): |got - ref| <= 2^-7 (|p0| + |p1|) + 2^-12 abs_p, (p0, p1) the
//    element's pair before the rotation (V: its own |p|): two bf16 roundings (of the projection
//    and of the rotated value, 2^-9 each) of a pair of that size, plus fp32 accumulation;
//  - the concatenated projection (`scratch` of qkv_cublas_gemm and qkv_v13_gemm): |got - p| <= 2^-8
//  |p| +
//    2^-12 abs_p.
// Each records into `r` (element indices are positions in the row's 3 H D values).
void check_qkv_row(const BlockShape& s, int64_t row, const std::vector<double>& p,
                   const std::vector<double>& abs_p, const std::vector<double>& qkv,
                   const std::vector<float>& q_row, const std::vector<float>& k_row,
                   const std::vector<float>& v_row, gpu100::CompareResult& r);
void check_projection_row(const std::vector<double>& p, const std::vector<double>& abs_p,
                          const std::vector<float>& got, gpu100::CompareResult& r);

// The block's output at token `row` in double, from the Q, K, V the GPU computed (bf16, [B, H, S,
// D], given as float): y = O W_o with O the attention of every head at that row, and y_abs = sum_k
// abs_o[k] |W_o[k][j]| with abs_o = sum_j p_j |v_j| (the scale the flash kernel's error is measured
// against, kBf16Tol). Returns the FLOPs it did.
double block_row_cpu(const BlockShape& s, const BlockInputs& in, const std::vector<float>& q,
                     const std::vector<float>& k, const std::vector<float>& v, int64_t row,
                     std::vector<double>& y, std::vector<double>& y_abs);
// y passes when |got - ref| <= kBf16Tol y_abs + 2^-8 |ref| (the flash kernel's allowance carried
// through W_o, and the bf16 roundings of O and Y).
void check_block_row(const std::vector<double>& y, const std::vector<double>& y_abs,
                     const std::vector<float>& got, gpu100::CompareResult& r);

}  // namespace day05
