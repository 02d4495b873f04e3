// day05: the registry, shape checks, workspace sizes, the CPU reference (double) and the checks.
#include "attention.hpp"
#include "common/learner.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "common/math.hpp"

namespace day05 {

void check_shape(const AttentionShape& s) {
  if (s.b < 1 || s.h < 1 || s.s < 1) {
    throw std::invalid_argument(
        fmt::format("attention: B, H and S must be >= 1 (got B={} H={} S={})", s.b, s.h, s.s));
  }
  if (s.s > kMaxS) {
    throw std::invalid_argument(fmt::format("attention: S={} is over the maximum {}", s.s, kMaxS));
  }
  if (s.d < 2 || s.d > kMaxD || s.d % 2 != 0) {
    throw std::invalid_argument(
        fmt::format("attention: D must be even, between 2 and {} (got D={})", kMaxD, s.d));
  }
  if (s.elements() >= (int64_t(1) << 40)) {
    throw std::invalid_argument(
        fmt::format("attention: B H S D = {} elements is too large", s.elements()));
  }
}

std::string shape_label(const AttentionShape& s) {
  return fmt::format("B={} H={} S={} D={}{}", s.b, s.h, s.s, s.d, s.causal ? " causal" : "");
}

double attention_flops(const AttentionShape& s) {
  const double full = 4.0 * double(s.heads()) * double(s.s) * double(s.s) * double(s.d);
  return s.causal ? full / 2 : full;
}

float softmax_scale(int d) {
  return static_cast<float>(1.0 / std::sqrt(double(d)));
}

// ---- workspaces and refusals -----------------------------------------------------------------

namespace {
size_t score_bytes_per_head(const AttentionShape& s) {
  return size_t(s.s) * size_t(s.s) * sizeof(float);
}
std::string gib(double bytes) {
  return fmt::format("{:.2f} GiB", bytes / double(size_t(1) << 30));
}
}  // namespace

size_t v1_workspace_bytes(const AttentionShape& s) {
  // K^T of every head (B H D S floats, rounded up to 256 bytes), then the B H S S scores.
  const size_t kt = gpu100::round_up<size_t>(size_t(s.elements()) * sizeof(float), 256);
  return kt + size_t(s.heads()) * score_bytes_per_head(s);
}

std::string v1_refusal(const AttentionShape& s) {
  const double scores = double(s.heads()) * double(score_bytes_per_head(s));
  if (scores > double(kScoreBudgetBytes)) {
    return fmt::format(
        "v1_naive refuses {}: its B x H x S x S fp32 score matrix would take {}, over its budget "
        "of {} (the flash variants need no S x S matrix)",
        shape_label(s), gib(scores), gib(double(kScoreBudgetBytes)));
  }
  return "";
}

int64_t v2_heads_per_chunk(const AttentionShape& s) {
  const int64_t fit = int64_t(kScoreBudgetBytes / score_bytes_per_head(s));
  return std::max<int64_t>(1, std::min<int64_t>(s.heads(), fit));
}

size_t v2_workspace_bytes(const AttentionShape& s) {
  return size_t(v2_heads_per_chunk(s)) * score_bytes_per_head(s);
}

std::string v2_refusal(const AttentionShape& s) {
  if (score_bytes_per_head(s) > kScoreBudgetBytes) {
    return fmt::format(
        "v2_cublas refuses {}: the S x S scores of one head take {}, over the {} "
        "budget",
        shape_label(s), gib(double(score_bytes_per_head(s))), gib(double(kScoreBudgetBytes)));
  }
  return "";
}

size_t flash_workspace_bytes(const AttentionShape& s) {
  return size_t(s.rows()) * sizeof(float);
}

std::string v3_refusal(const AttentionShape&) {
  return "";
}

std::string v4_refusal(const AttentionShape& s) {
  if (s.d != 64 && s.d != 128) {
    return fmt::format("v4_flash_bf16 is instantiated for D = 64 and D = 128 only (got D = {})",
                       s.d);
  }
  return "";
}

std::string v5_refusal(const AttentionShape& s) {
  if (s.d != 64 && s.d != 128) {
    return fmt::format("v5_flash_wgmma is instantiated for D = 64 and D = 128 only (got D = {})",
                       s.d);
  }
  return "";
}

const char* best_flash_bf16() {
  return gpu100::build_has(gpu100::ArchNeed::kSm90a) ? "v5_flash_wgmma" : "v4_flash_bf16";
}

const char* attention_flash_bf16(const AttentionShape& s, const __nv_bfloat16* q,
                                 const __nv_bfloat16* k, const __nv_bfloat16* v, __nv_bfloat16* o,
                                 OLayout layout, void* workspace, size_t workspace_bytes,
                                 cudaStream_t stream) {
  if (gpu100::build_has(gpu100::ArchNeed::kSm90a)) {
    attention_v5_flash_wgmma(s, q, k, v, o, layout, workspace, workspace_bytes, stream);
    return "v5_flash_wgmma";
  }
  attention_v4_flash_bf16(s, q, k, v, o, layout, workspace, workspace_bytes, stream);
  return "v4_flash_bf16";
}

// ---- registry --------------------------------------------------------------------------------

namespace {
struct LearnerTag;  // this registry's list of learner entries (common/learner.hpp)
}

void add_learner_variant(const AttentionVariant& v) {
  gpu100::learner_entries<AttentionVariant, LearnerTag>().push_back(v);
}

const std::vector<AttentionVariant>& attention_variants() {
  using P = Precision;
  static const std::vector<AttentionVariant> variants = gpu100::with_learner<AttentionVariant>(
      {
          {"v1_naive",
           "three steps: S = Q K^T per head (day04 GEMM, K transposed by day04), a row softmax "
           "kernel (block per row, 3 passes), O = P V per head (day04 GEMM); all S x S scores in "
           "memory",
           P::kFp32, attention_v1_naive, nullptr, v1_workspace_bytes, v1_refusal, false, false},
          {"v2_cublas",
           "cuBLAS strided-batched SGEMMs + one fused scale/mask/softmax kernel (a warp per row, "
           "online max and sum): the library path",
           P::kFp32, attention_v2_cublas, nullptr, v2_workspace_bytes, v2_refusal, false, true},
          {"v3_flash_fp32",
           "flash attention on CUDA cores: a 64-query tile per block, K/V tiles streamed through "
           "shared memory, online softmax, no S x S matrix, causal tiles skipped",
           P::kFp32, attention_v3_flash_fp32, nullptr, flash_workspace_bytes, v3_refusal, true,
           false},
          {"v4_flash_bf16",
           "FlashAttention-2 style on tensor cores: mma.sync m16n8k16 + ldmatrix, Q in registers, "
           "K/V double-buffered with cp.async, P kept in registers, 128 queries per block",
           P::kBf16, nullptr, attention_v4_flash_bf16, flash_workspace_bytes, v4_refusal, true,
           false, gpu100::ArchNeed::kSm80},
          {"v5_flash_wgmma",
           "FlashAttention-3 style on Hopper: wgmma m64n128k16 (S from shared memory, P V with P "
           "in "
           "registers), a TMA producer warp, a K/V ring handed over with mbarriers",
           P::kBf16, nullptr, attention_v5_flash_wgmma, v5_workspace_bytes, v5_refusal, true, false,
           gpu100::ArchNeed::kSm90a},
          {"cudnn_sdpa",
           "cuDNN's fused scaled-dot-product attention (the frontend's graph API; PyTorch's SDPA "
           "backend on Hopper): the bf16 rows' library",
           P::kBf16, nullptr, attention_cudnn_sdpa, cudnn_sdpa_workspace_bytes, cudnn_sdpa_refusal,
           true, true, gpu100::ArchNeed::kSm80},
      },
      gpu100::learner_entries<AttentionVariant, LearnerTag>());
  return variants;
}

const AttentionVariant* find_variant(const std::string& name) {
  for (const auto& v : attention_variants()) {
    if (name == v.name) return &v;
  }
  return nullptr;
}

// ---- CPU reference ---------------------------------------------------------------------------

double attention_probs_cpu(const AttentionShape& s, const float* q, const float* k, int64_t bh,
                           int i, double* p) {
  const int d = s.d;
  const int keys = s.causal ? i + 1 : s.s;
  const size_t base = size_t(bh) * size_t(s.s) * size_t(d);
  const float* qi = q + base + size_t(i) * d;
  const double scale = 1.0 / std::sqrt(double(d));
  double mx = -std::numeric_limits<double>::infinity();
  for (int j = 0; j < keys; ++j) {
    const float* kj = k + base + size_t(j) * d;
    double dot = 0;
    for (int e = 0; e < d; ++e) dot += double(qi[e]) * double(kj[e]);
    p[j] = dot * scale;
    mx = std::max(mx, p[j]);
  }
  double sum = 0;
  for (int j = 0; j < keys; ++j) {
    p[j] = std::exp(p[j] - mx);
    sum += p[j];
  }
  for (int j = 0; j < keys; ++j) p[j] /= sum;
  return mx + std::log(sum);
}

double attention_row_cpu(const AttentionShape& s, const float* q, const float* k, const float* v,
                         int64_t bh, int i, double* o, double* abs_o, double* lse) {
  const int d = s.d;
  const int keys = s.causal ? i + 1 : s.s;
  const size_t base = size_t(bh) * size_t(s.s) * size_t(d);
  std::vector<double> p(static_cast<size_t>(keys));
  *lse = attention_probs_cpu(s, q, k, bh, i, p.data());
  for (int e = 0; e < d; ++e) o[e] = abs_o[e] = 0;
  for (int j = 0; j < keys; ++j) {
    const float* vj = v + base + size_t(j) * d;
    for (int e = 0; e < d; ++e) {
      o[e] += p[j] * double(vj[e]);
      abs_o[e] += p[j] * std::fabs(double(vj[e]));
    }
  }
  return 4.0 * double(d) * double(keys);
}

Reference attention_cpu(const AttentionShape& s, const std::vector<float>& q,
                        const std::vector<float>& k, const std::vector<float>& v) {
  check_shape(s);
  const size_t n = static_cast<size_t>(s.elements());
  if (q.size() != n || k.size() != n || v.size() != n) {
    throw std::invalid_argument("attention_cpu: Q, K and V must have B H S D elements");
  }
  Reference r;
  r.o.resize(n);
  r.abs_o.resize(n);
  r.lse.resize(static_cast<size_t>(s.rows()));
  for (int64_t bh = 0; bh < s.heads(); ++bh) {
    for (int i = 0; i < s.s; ++i) {
      const size_t row = size_t(bh) * s.s + i;
      attention_row_cpu(s, q.data(), k.data(), v.data(), bh, i, &r.o[row * s.d],
                        &r.abs_o[row * s.d], &r.lse[row]);
    }
  }
  return r;
}

// ---- checks ----------------------------------------------------------------------------------

gpu100::CompareResult check_output(const std::vector<double>& ref,
                                   const std::vector<double>& abs_ref,
                                   const std::vector<float>& got, double tol) {
  gpu100::CompareResult r;
  r.count = ref.size();
  if (got.size() != ref.size() || abs_ref.size() != ref.size()) {
    r.ok = false;
    r.num_bad = 1;
    r.first_bad = 0;
    r.max_abs = r.max_rel = std::numeric_limits<double>::infinity();
    return r;
  }
  double err2 = 0, ref2 = 0;
  for (size_t e = 0; e < ref.size(); ++e) {
    gpu100::record(r, e, ref[e], got[e], tol * abs_ref[e]);
    if (std::isfinite(got[e])) {
      err2 += (got[e] - ref[e]) * (got[e] - ref[e]);
      ref2 += ref[e] * ref[e];
    }
  }
  r.rel_l2 = ref2 > 0 ? std::sqrt(err2 / ref2) : std::sqrt(err2);
  if (r.max_abs == std::numeric_limits<double>::infinity()) r.rel_l2 = r.max_abs;
  return r;
}

gpu100::CompareResult check_lse(const std::vector<double>& ref, const std::vector<float>& got,
                                double tol) {
  std::vector<double> scale(ref.size());
  for (size_t i = 0; i < ref.size(); ++i) scale[i] = std::max(1.0, std::fabs(ref[i]));
  return check_output(ref, scale, got, tol);
}

}  // namespace day05
