// day05's attention block (block.hpp): shape checks, device memory, the fused block, the registry,
// the CPU reference (double) and the checks. The kernels are in block_v1_unfused.cu,
// block_v2_rope_scatter.cu and block_v3_qkv_rope_wgmma.cu.
#include "block.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "common/cuda_check.hpp"
#include "common/half.hpp"
#include "common/random.hpp"
#include "gemm.hpp"

namespace day05 {

using bf16 = __nv_bfloat16;

day01::RopeParams BlockShape::rope() const {
  day01::RopeParams p;
  p.batch = b;
  p.seq = s;
  p.q_heads = p.kv_heads = h;
  p.dim = d;
  p.base = rope_base;
  p.style = style;
  return p;
}

void check_block_shape(const BlockShape& s) {
  if (s.b < 1 || s.s < 1 || s.d_model < 1 || s.h < 1) {
    throw std::invalid_argument(
        fmt::format("attention block: B, S, d_model and H must be >= 1 (got B={} S={} "
                    "d_model={} H={})",
                    s.b, s.s, s.d_model, s.h));
  }
  if (s.d != 64 && s.d != 128) {
    throw std::invalid_argument(fmt::format(
        "attention block: D must be 64 or 128, the flash kernels' sizes (got D={})", s.d));
  }
  check_shape(s.attention());
  const int64_t widest = std::max<int64_t>(3 * s.hd(), s.d_model);
  if (s.tokens() >= (int64_t(1) << 31) || widest >= (int64_t(1) << 31) ||
      s.tokens() * widest >= (int64_t(1) << 40) ||
      int64_t(s.d_model) * widest >= (int64_t(1) << 40)) {
    throw std::invalid_argument(fmt::format(
        "attention block: B S = {} tokens by {} columns is too large", s.tokens(), widest));
  }
  if (!(s.rope_base > 0) || !std::isfinite(s.rope_base)) {
    throw std::invalid_argument("attention block: the RoPE base must be finite and > 0");
  }
}

std::string block_label(const BlockShape& s) {
  return fmt::format("B={} S={} d_model={} H={} D={}{} {}", s.b, s.s, s.d_model, s.h, s.d,
                     s.causal ? " causal" : "", day01::style_name(s.style));
}

double qkv_flops(const BlockShape& s) {
  return 2.0 * double(s.tokens()) * double(s.d_model) * 3.0 * double(s.hd());
}

double block_flops(const BlockShape& s) {
  return qkv_flops(s) + attention_flops(s.attention()) +
         2.0 * double(s.tokens()) * double(s.hd()) * double(s.d_model);
}

// ---- device memory
// -------------------------------------------------------------------------------

double block_tensor_bytes(const BlockShape& s) {
  const double t = double(s.tokens()), hd = double(s.hd()), dm = double(s.d_model);
  const double elems = 2 * t * dm                   // x, y
                       + 2 * dm * 3 * hd + hd * dm  // w_qkv, w_q | w_k | w_v, w_o
                       + 3 * t * hd + 3 * t * hd    // q, k, v, scratch
                       + 2 * t * hd;                // o, o_tok
  return elems * sizeof(bf16) + double(flash_workspace_bytes(s.attention())) +
         double(s.s) * (s.d / 2) * sizeof(float2);
}

BlockTensors::BlockTensors(const BlockShape& sh) : shape(sh) {
  check_block_shape(shape);
  const size_t t = size_t(shape.tokens()), hd = size_t(shape.hd()), dm = size_t(shape.d_model);
  x = gpu100::DeviceBuffer<bf16>(t * dm);
  w_qkv = gpu100::DeviceBuffer<bf16>(dm * 3 * hd);
  w_q = gpu100::DeviceBuffer<bf16>(dm * hd);
  w_k = gpu100::DeviceBuffer<bf16>(dm * hd);
  w_v = gpu100::DeviceBuffer<bf16>(dm * hd);
  w_o = gpu100::DeviceBuffer<bf16>(hd * dm);
  q = gpu100::DeviceBuffer<bf16>(t * hd);
  k = gpu100::DeviceBuffer<bf16>(t * hd);
  v = gpu100::DeviceBuffer<bf16>(t * hd);
  scratch = gpu100::DeviceBuffer<bf16>(t * 3 * hd);
  o = gpu100::DeviceBuffer<bf16>(t * hd);
  o_tok = gpu100::DeviceBuffer<bf16>(t * hd);
  y = gpu100::DeviceBuffer<bf16>(t * dm);
  workspace = gpu100::DeviceBuffer<char>(flash_workspace_bytes(shape.attention()));
  table = std::make_unique<day01::RopeTable>(shape.rope());
}

size_t BlockTensors::bytes() const {
  return x.bytes() + w_qkv.bytes() + w_q.bytes() + w_k.bytes() + w_v.bytes() + w_o.bytes() +
         q.bytes() + k.bytes() + v.bytes() + scratch.bytes() + o.bytes() + o_tok.bytes() +
         y.bytes() + workspace.bytes() + table->bytes();
}

void upload_block_inputs(BlockTensors& t, const std::vector<float>& x,
                         const std::vector<float>& w_qkv, const std::vector<float>& w_o) {
  if (x.size() != t.x.size() || w_qkv.size() != t.w_qkv.size() || w_o.size() != t.w_o.size()) {
    throw std::invalid_argument("upload_block_inputs: the inputs do not match the shape");
  }
  t.x.upload(gpu100::convert_from_float<bf16>(x));
  t.w_qkv.upload(gpu100::convert_from_float<bf16>(w_qkv));
  t.w_o.upload(gpu100::convert_from_float<bf16>(w_o));
  // W_q, W_k, W_v: the column blocks of W_qkv, each its own contiguous [d_model, H D] weight.
  const size_t hd_bytes = size_t(t.shape.hd()) * sizeof(bf16);
  bf16* parts[3] = {t.w_q.data(), t.w_k.data(), t.w_v.data()};
  for (int p = 0; p < 3; ++p) {
    CUDA_CHECK(cudaMemcpy2D(parts[p], hd_bytes, t.w_qkv.data() + p * t.shape.hd(), 3 * hd_bytes,
                            hd_bytes, size_t(t.shape.d_model), cudaMemcpyDeviceToDevice));
  }
  CUDA_CHECK(cudaDeviceSynchronize());
}

// ---- the library row and the fused block
// ----------------------------------------------------------

void qkv_cublas_gemm(BlockTensors& t, cudaStream_t stream) {
  const BlockShape& s = t.shape;
  day04::cublas_gemm_bf16_out({int(s.tokens()), int(3 * s.hd()), s.d_model}, 1.f, t.x.data(),
                              t.w_qkv.data(), 0.f, t.scratch.data(), stream);
}

const char* block_fused_qkv(const BlockShape& s) {
  return gpu100::build_has(gpu100::ArchNeed::kSm90a) && qkv_rope_wgmma_refusal(s).empty()
             ? "qkv_rope_wgmma"
             : "qkv_gemm_rope_scatter";
}

void block_fused(BlockTensors& t, cudaStream_t stream) {
  const BlockShape& s = t.shape;
  if (std::string(block_fused_qkv(s)) == "qkv_rope_wgmma") {
    qkv_rope_wgmma(t, stream);
  } else {
    qkv_gemm_rope_scatter(t, stream);
  }
  attention_flash_bf16(s.attention(), t.q.data(), t.k.data(), t.v.data(), t.o_tok.data(),
                       OLayout::kBSHD, t.workspace.data(), t.workspace.bytes(), stream);
  day04::cublas_gemm_bf16_out({int(s.tokens()), s.d_model, int(s.hd())}, 1.f, t.o_tok.data(),
                              t.w_o.data(), 0.f, t.y.data(), stream);
}

// ---- registry
// ------------------------------------------------------------------------------------

namespace {
std::string runs_all(const BlockShape&) {
  return "";
}
}  // namespace

const std::vector<BlockVariant>& block_variants() {
  using gpu100::ArchNeed;
  static const std::vector<BlockVariant> kVariants = {
      {"qkv_cublas_gemm",
       "cuBLAS: X W_qkv alone, rows token-major (no RoPE, no layout): the GEMM floor", false,
       qkv_cublas_gemm, runs_all, "", ArchNeed::kAny, true},
      {"qkv_unfused",
       "3 cuBLAS projections, day01's RoPE, 3 transpositions to [B, H, S, D] (7 kernels)", false,
       qkv_unfused, runs_all, "qkv_cublas_gemm"},
      {"qkv_gemm_rope_scatter",
       "one cuBLAS GEMM by W_qkv, then one kernel: RoPE and the scatter to [B, H, S, D]", false,
       qkv_gemm_rope_scatter, runs_all, "qkv_cublas_gemm"},
      {"qkv_v13_gemm",
       "day04's v13 GEMM alone, rows token-major like cuBLAS's: v13's main loop without RoPE",
       false, qkv_v13_gemm, qkv_rope_wgmma_refusal, "qkv_cublas_gemm", ArchNeed::kSm90a, true},
      {"qkv_rope_wgmma", "day04's v13 GEMM, RoPE and the scatter in its epilogue: one kernel",
       false, qkv_rope_wgmma, qkv_rope_wgmma_refusal, "qkv_cublas_gemm", ArchNeed::kSm90a},
      {"block_unfused", "the eager block: qkv_unfused, flash, O transposed back, output projection",
       true, block_unfused, runs_all, "", ArchNeed::kSm80},
      {"block_fused",
       "fused QKV + RoPE, flash writing O token-major, output projection (3 kernels)", true,
       block_fused, runs_all, "block_unfused", ArchNeed::kSm80},
  };
  return kVariants;
}

// ---- CPU reference and checks
// --------------------------------------------------------------------

BlockInputs make_block_inputs(const BlockShape& s, uint64_t seed) {
  BlockInputs in;
  const size_t t = size_t(s.tokens()), hd = size_t(s.hd()), dm = size_t(s.d_model);
  const double wq = 1.0 / std::sqrt(double(dm)), wo = 1.0 / std::sqrt(double(hd));
  in.x = gpu100::round_trip<bf16>(gpu100::random_vector<float>(t * dm, seed + 11));
  in.w_qkv =
      gpu100::round_trip<bf16>(gpu100::random_vector<float>(dm * 3 * hd, seed + 12, -wq, wq));
  in.w_o = gpu100::round_trip<bf16>(gpu100::random_vector<float>(hd * dm, seed + 13, -wo, wo));
  return in;
}

double qkv_row_cpu(const BlockShape& s, const BlockInputs& in, int64_t row, std::vector<double>& p,
                   std::vector<double>& abs_p, std::vector<double>& qkv) {
  const size_t n = size_t(3 * s.hd()), dm = size_t(s.d_model), hd = size_t(s.hd());
  p.assign(n, 0.0);
  abs_p.assign(n, 0.0);
  const float* x = in.x.data() + size_t(row) * dm;
  for (size_t kk = 0; kk < dm; ++kk) {
    const double xv = x[kk];
    const float* w = in.w_qkv.data() + kk * n;
    for (size_t c = 0; c < n; ++c) {
      p[c] += xv * double(w[c]);
      abs_p[c] += std::fabs(xv * double(w[c]));
    }
  }
  qkv = p;
  day01::RopeParams rp = s.rope();
  rp.batch = rp.seq = 1;
  rp.pos_offset = row % s.s;
  day01::rope_cpu<double>(p.data(), p.data() + hd, qkv.data(), qkv.data() + hd, rp);
  return 2.0 * double(dm) * double(n);
}

namespace {
// The index of element (head, dd) of token `row` in a [B, H, S, D] tensor.
size_t bhsd_index(const BlockShape& s, int64_t row, int head, int dd) {
  const int64_t b = row / s.s, pos = row % s.s;
  return ((size_t(b) * s.h + head) * s.s + pos) * s.d + dd;
}
// The element paired with dd by the rotation (dd itself for V).
int partner(const BlockShape& s, int dd) {
  if (s.style == day01::RopeStyle::kInterleaved) return dd ^ 1;
  return dd < s.d / 2 ? dd + s.d / 2 : dd - s.d / 2;
}
}  // namespace

void check_qkv_row(const BlockShape& s, int64_t row, const std::vector<double>& p,
                   const std::vector<double>& abs_p, const std::vector<double>& qkv,
                   const std::vector<float>& q, const std::vector<float>& k,
                   const std::vector<float>& v, gpu100::CompareResult& r) {
  const size_t hd = size_t(s.hd());
  const std::vector<float>* tensors[3] = {&q, &k, &v};
  for (int which = 0; which < 3; ++which) {
    for (int head = 0; head < s.h; ++head) {
      for (int dd = 0; dd < s.d; ++dd) {
        const size_t c = which * hd + size_t(head) * s.d + dd;
        const size_t cp = which * hd + size_t(head) * s.d + (which < 2 ? partner(s, dd) : dd);
        const double pair = which < 2 ? std::fabs(p[c]) + std::fabs(p[cp]) : std::fabs(p[c]);
        const double acc = which < 2 ? abs_p[c] + abs_p[cp] : abs_p[c];
        const double allowance = std::ldexp(pair, -7) + std::ldexp(acc, -12);
        gpu100::record(r, c, qkv[c], double((*tensors[which])[bhsd_index(s, row, head, dd)]),
                       allowance);
        ++r.count;
      }
    }
  }
}

void check_projection_row(const std::vector<double>& p, const std::vector<double>& abs_p,
                          const std::vector<float>& got, gpu100::CompareResult& r) {
  for (size_t c = 0; c < p.size(); ++c) {
    const double allowance = std::ldexp(std::fabs(p[c]), -8) + std::ldexp(abs_p[c], -12);
    gpu100::record(r, c, p[c], c < got.size() ? double(got[c]) : NAN, allowance);
    ++r.count;
  }
}

double block_row_cpu(const BlockShape& s, const BlockInputs& in, const std::vector<float>& q,
                     const std::vector<float>& k, const std::vector<float>& v, int64_t row,
                     std::vector<double>& y, std::vector<double>& y_abs) {
  const AttentionShape a = s.attention();
  const size_t dm = size_t(s.d_model);
  const int64_t b = row / s.s;
  const int pos = int(row % s.s);
  y.assign(dm, 0.0);
  y_abs.assign(dm, 0.0);
  std::vector<double> o(size_t(s.d)), abs_o(size_t(s.d));
  double lse = 0, flops = 0;
  for (int head = 0; head < s.h; ++head) {
    flops += attention_row_cpu(a, q.data(), k.data(), v.data(), b * s.h + head, pos, o.data(),
                               abs_o.data(), &lse);
    for (int dd = 0; dd < s.d; ++dd) {  // row head D + dd of W_o
      const float* w = in.w_o.data() + (size_t(head) * s.d + dd) * dm;
      for (size_t j = 0; j < dm; ++j) {
        y[j] += o[dd] * double(w[j]);
        y_abs[j] += abs_o[dd] * std::fabs(double(w[j]));
      }
    }
  }
  return flops + 2.0 * double(s.hd()) * double(dm);
}

void check_block_row(const std::vector<double>& y, const std::vector<double>& y_abs,
                     const std::vector<float>& got, gpu100::CompareResult& r) {
  for (size_t j = 0; j < y.size(); ++j) {
    const double allowance = kBf16Tol * y_abs[j] + std::ldexp(std::fabs(y[j]), -8);
    gpu100::record(r, j, y[j], j < got.size() ? double(got[j]) : NAN, allowance);
    ++r.count;
  }
}

}  // namespace day05
