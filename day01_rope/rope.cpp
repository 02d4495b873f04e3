// day01_rope: the CPU reference, the cos/sin table, argument validation and the registry.
#include <cmath>
#include <complex>
#include <limits>
#include <stdexcept>
#include <string>

#include "common/compare.hpp"  // gpu100::to_double
#include "common/learner.hpp"
#include "rope.cuh"

namespace day01 {

const char* style_name(RopeStyle style) {
  return style == RopeStyle::kInterleaved ? "interleaved" : "half_dim-split";
}

namespace {

[[noreturn]] void reject(const std::string& what) {
  throw std::invalid_argument("rope: " + what);
}

void require_positive(const char* name, int64_t value, int64_t max_value) {
  if (value < 1) reject(std::string(name) + " must be >= 1, got " + std::to_string(value));
  if (value > max_value) {
    reject(std::string(name) + " must be <= " + std::to_string(max_value) + ", got " +
           std::to_string(value));
  }
}

// The element indices (within one head) of pair i, and the pair count of a head.
struct PairOf {
  int64_t a, b;
};
inline PairOf pair_of(int64_t i, int64_t dim, RopeStyle style) {
  return style == RopeStyle::kInterleaved ? PairOf{2 * i, 2 * i + 1} : PairOf{i, i + dim / 2};
}

}  // namespace

void validate(const RopeParams& p) {
  constexpr int64_t k2p24 = int64_t(1) << 24;
  constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
  require_positive("batch", p.batch, kInt32Max);
  require_positive("seq", p.seq, k2p24);
  require_positive("q_heads", p.q_heads, k2p24);
  require_positive("kv_heads", p.kv_heads, k2p24);
  require_positive("dim", p.dim, k2p24);
  if (p.dim % 2 != 0) reject("dim must be even (RoPE rotates pairs), got " + std::to_string(p.dim));
  if (p.pos_offset < 0) reject("pos_offset must be >= 0, got " + std::to_string(p.pos_offset));
  if (p.pos_offset > k2p24 - p.seq) {
    reject("pos_offset + seq must be <= 2^24 (positions exact in fp32), got " +
           std::to_string(p.pos_offset) + " + " + std::to_string(p.seq));
  }
  if (!std::isfinite(p.base) || p.base <= 0) {
    reject("base must be finite and > 0, got " + std::to_string(p.base));
  }
  // All factors are below 2^31 here, so the products below cannot overflow int64.
  if (p.batch * p.seq > kInt32Max) reject("batch * seq must be < 2^31 (one block row per token)");
  if ((p.q_heads + p.kv_heads) * (p.dim / 2) > int64_t(65535) * 256) {
    reject("(q_heads + kv_heads) * dim / 2 must be <= 65535 * 256 (the pairs of one token)");
  }
}

// ---- CPU reference -------------------------------------------------------------------------

namespace {

// One tensor [B, S, heads, D]. The rotor exp(i m theta_i) of a position is computed once per
// (b, s) and used for every head.
template <typename T>
void rope_tensor_cpu(const T* x, double* out, int64_t heads, const RopeParams& p, bool inverse) {
  const int64_t half_dim = p.dim / 2;
  std::vector<double> theta(half_dim);
  for (int64_t i = 0; i < half_dim; ++i) {
    theta[i] = std::pow(p.base, -2.0 * double(i) / double(p.dim));
  }
  const double sign = inverse ? -1.0 : 1.0;
  std::vector<std::complex<double>> rotor(half_dim);
  for (int64_t b = 0; b < p.batch; ++b) {
    for (int64_t s = 0; s < p.seq; ++s) {
      const double m = double(p.pos_offset + s);
      for (int64_t i = 0; i < half_dim; ++i) rotor[i] = std::polar(1.0, sign * m * theta[i]);
      const int64_t row = (b * p.seq + s) * heads * p.dim;
      for (int64_t h = 0; h < heads; ++h) {
        const int64_t head = row + h * p.dim;
        for (int64_t i = 0; i < half_dim; ++i) {
          const PairOf e = pair_of(i, p.dim, p.style);
          const std::complex<double> z(gpu100::to_double(x[head + e.a]),
                                       gpu100::to_double(x[head + e.b]));
          const std::complex<double> r = z * rotor[i];
          out[head + e.a] = r.real();
          out[head + e.b] = r.imag();
        }
      }
    }
  }
}

}  // namespace

template <typename T>
void rope_cpu(const T* q, const T* k, double* q_out, double* k_out, const RopeParams& p,
              bool inverse) {
  validate(p);
  rope_tensor_cpu(q, q_out, p.q_heads, p, inverse);
  rope_tensor_cpu(k, k_out, p.kv_heads, p, inverse);
}

template void rope_cpu<float>(const float*, const float*, double*, double*, const RopeParams&,
                              bool);
template void rope_cpu<double>(const double*, const double*, double*, double*, const RopeParams&,
                               bool);
template void rope_cpu<__nv_bfloat16>(const __nv_bfloat16*, const __nv_bfloat16*, double*, double*,
                                      const RopeParams&, bool);

// ---- The cos/sin table ---------------------------------------------------------------------

std::vector<float2> rope_table_cpu(int64_t positions, int64_t dim, double base) {
  if (positions < 1 || dim < 2 || dim % 2 != 0 || !std::isfinite(base) || base <= 0) {
    reject("rope_table_cpu: needs positions >= 1, an even dim >= 2 and a base > 0");
  }
  const int64_t half_dim = dim / 2;
  std::vector<double> theta(half_dim);
  for (int64_t i = 0; i < half_dim; ++i) theta[i] = std::pow(base, -2.0 * double(i) / double(dim));
  std::vector<float2> table(static_cast<size_t>(positions * half_dim));
  for (int64_t m = 0; m < positions; ++m) {
    for (int64_t i = 0; i < half_dim; ++i) {
      const double angle = double(m) * theta[i];
      table[m * half_dim + i] =
          make_float2(static_cast<float>(std::cos(angle)), static_cast<float>(std::sin(angle)));
    }
  }
  return table;
}

RopeTable::RopeTable(int64_t positions, int64_t dim, double base)
    : positions_(positions), dim_(dim), base_(base) {
  const std::vector<float2> host = rope_table_cpu(positions, dim, base);
  buffer_ = gpu100::DeviceBuffer<float2>(host.size());
  buffer_.upload(host);
}

void RopeTable::check_covers(const RopeParams& p) const {
  if (p.dim != dim_ || p.base != base_ || p.positions() > positions_) {
    reject("the cos/sin table (" + std::to_string(positions_) + " positions, dim " +
           std::to_string(dim_) + ") does not cover positions 0.." +
           std::to_string(p.positions() - 1) + " at dim " + std::to_string(p.dim) +
           " with the same base");
  }
}

// ---- The registry --------------------------------------------------------------------------

namespace {
struct LearnerTag;  // this registry's list of learner entries (common/learner.hpp)
}

void add_learner_variant(const Variant& v) {
  gpu100::learner_entries<Variant, LearnerTag>().push_back(v);
}

const std::vector<Variant>& variants() {
  static const std::vector<Variant> kVariants = gpu100::with_learner<Variant>(
      {
          {"v1_naive", "one thread per pair, powf + sincosf in fp32, Q then K (2 launches)",
           Precision::kFp32, rope_v1_naive, nullptr, true},
          {"v2_table", "one thread per pair, cos/sin from the fp64-built table, 2 launches",
           Precision::kFp32, rope_v2_table, nullptr, false},
          {"v3_fused_qk", "as v2_table, Q and K in one launch", Precision::kFp32, rope_v3_fused_qk,
           nullptr, false},
          {"v4_vec16", "as v3_fused_qk, 16-byte loads/stores (float4 = 2 or 4 pairs per thread)",
           Precision::kFp32, rope_v4_vec16, nullptr, false},
          {"v5_bf16", "as v4_vec16 on bf16 storage (8 values per 16 bytes), fp32 math",
           Precision::kBf16, nullptr, rope_v5_bf16, false},
      },
      gpu100::learner_entries<Variant, LearnerTag>());
  return kVariants;
}

const Variant* find_variant(const std::string& name) {
  for (const auto& v : variants()) {
    if (name == v.name) return &v;
  }
  return nullptr;
}

Tolerance tolerance(const Variant& v, const RopeParams& p) {
  if (v.precision == Precision::kBf16) {
    // Against the reference computed from the bf16-rounded inputs: the output's rounding to bf16
    // costs at most 2^-9 |out|; 2^-8 leaves room for the fp32 math and table (~1e-7), and the
    // absolute term covers outputs that pass near zero.
    return {1e-5, 1.0 / 256};
  }
  if (v.fp32_angles) {
    // The angle m * theta is formed in fp32: theta from powf (we allow 4 ulp) and the
    // exponent -2i/D rounded, the product rounded (half an ulp of m * theta). Together at most
    // ~5.6e-7 * m rad, which moves a pair of length <= sqrt(2) by <= 8e-7 * m: 4e-3 at m = 5000.
    // A bound, not an estimate; the measured error is reported.
    return {1e-5 + 1e-6 * double(max_position(p)), 1e-5};
  }
  // Table variants: cos and sin within half an fp32 ulp, two fp32 products and a sum.
  return {1e-6, 1e-5};
}

}  // namespace day01
