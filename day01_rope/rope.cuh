#pragma once
// day01_rope: rotary position embedding (RoPE) applied to Q and K.
//
// The host API of the day, exported by the library target day01::rope: the problem description,
// the fp64 CPU reference, the cos/sin table, the launchers of the five variants and the registry
// that drives the binary, the tests and the README.
//
// Layout: Q is [B, S, Hq, D] and K is [B, S, Hkv, D], both contiguous (D fastest). Hq and Hkv may
// differ (grouped-query attention). The token at sequence index s has position m = pos_offset + s,
// so a decode step (S = 1) passes the number of tokens already in the cache as pos_offset.
// Pair i of a head (0 <= i < D/2) is rotated by the angle m * theta_i, theta_i = base^(-2i/D):
//   interleaved (RoFormer, Meta's Llama):    the pair is (x[2i], x[2i+1])
//   half-split  (GPT-NeoX, Llama in HF):     the pair is (x[i],  x[i + D/2])
// (x0, x1) -> (x0 cos - x1 sin, x0 sin + x1 cos), i.e. (x0 + i x1) * exp(i m theta_i).
//
// Every launcher is out of place: q_out and k_out are written, q and k only read. In place is
// allowed (q_out == q, k_out == k: each element is read by the thread that writes it, before it
// writes it); any other overlap between the four tensors is not. Launchers check their launch
// (CUDA_CHECK_LAST) and do not synchronise.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/device_buffer.hpp"
#include "common/precision.hpp"

namespace day01 {

enum class RopeStyle { kInterleaved, kHalfSplit };
const char* style_name(RopeStyle style);  // "interleaved" / "half_dim-split"

struct RopeParams {
  int64_t batch = 1;     // B
  int64_t seq = 1;       // S
  int64_t q_heads = 1;   // Hq
  int64_t kv_heads = 1;  // Hkv
  int64_t dim = 2;       // D, even
  int64_t pos_offset = 0;
  double base = 10000.0;
  RopeStyle style = RopeStyle::kInterleaved;

  int64_t q_elems() const { return batch * seq * q_heads * dim; }
  int64_t k_elems() const { return batch * seq * kv_heads * dim; }
  int64_t positions() const { return pos_offset + seq; }  // rows the cos/sin table needs
};

// Throws std::invalid_argument (one line, naming the field) unless: every size >= 1, D even,
// pos_offset >= 0, pos_offset + S <= 2^24 (positions stay exact in fp32), base finite and > 0,
// B * S < 2^31 (one block row per token) and (Hq + Hkv) * D / 2 <= 65535 * 256 (the pairs of one
// token fit in grid.y).
void validate(const RopeParams& p);

// The largest position of the problem, pos_offset + S - 1.
inline int64_t max_position(const RopeParams& p) {
  return p.pos_offset + p.seq - 1;
}

// ---- CPU reference -------------------------------------------------------------------------

// fp64 reference with std::complex<double>: out = (x0 + i x1) * exp(i m theta_i) for every pair,
// theta_i = pow(base, -2i/D) in double. With `inverse` it rotates by -m theta_i, which undoes the
// forward rotation. One thread. T is float, double or __nv_bfloat16 (read through float).
template <typename T>
void rope_cpu(const T* q, const T* k, double* q_out, double* k_out, const RopeParams& p,
              bool inverse = false);

// ---- The cos/sin table (v2 to v5) ----------------------------------------------------------

// Entry [m * (D/2) + i] = (cos(m theta_i), sin(m theta_i)) for 0 <= m < positions, computed in
// double and rounded to fp32 (so each entry is within half an fp32 ulp of the exact value).
std::vector<float2> rope_table_cpu(int64_t positions, int64_t dim, double base);

// The table on the device, as an inference engine keeps one for its whole context window: built
// on the host once (rope_table_cpu) and uploaded synchronously; the launchers only read it. The
// binary builds it before timing, so its cost is not in any timed row.
class RopeTable {
 public:
  RopeTable(int64_t positions, int64_t dim, double base);
  explicit RopeTable(const RopeParams& p) : RopeTable(p.positions(), p.dim, p.base) {}

  const float2* data() const { return buffer_.data(); }
  int64_t positions() const { return positions_; }
  size_t bytes() const { return buffer_.bytes(); }
  // Throws std::invalid_argument unless the table has p's dim and base and rows for positions
  // 0 .. pos_offset + S - 1.
  void check_covers(const RopeParams& p) const;

 private:
  int64_t positions_, dim_;
  double base_;
  gpu100::DeviceBuffer<float2> buffer_;
};

// ---- The variants --------------------------------------------------------------------------

// v1: one thread per pair, theta by powf and (cos, sin) by sincosf in fp32; Q, then K (2
// launches). The table is not read.
void rope_v1_naive(const float* q, const float* k, float* q_out, float* k_out, const RopeParams& p,
                   const RopeTable& table, cudaStream_t stream);
// v2: as v1, with cos and sin read from the table.
void rope_v2_table(const float* q, const float* k, float* q_out, float* k_out, const RopeParams& p,
                   const RopeTable& table, cudaStream_t stream);
// v3: as v2, Q and K in one launch.
void rope_v3_fused_qk(const float* q, const float* k, float* q_out, float* k_out,
                      const RopeParams& p, const RopeTable& table, cudaStream_t stream);
// v4: as v3, 16-byte loads and stores (falls back to v3 when D or the pointers don't allow them).
void rope_v4_vec16(const float* q, const float* k, float* q_out, float* k_out, const RopeParams& p,
                   const RopeTable& table, cudaStream_t stream);
// v5: as v4, bf16 storage (8 values per 16-byte access) with fp32 math.
void rope_v5_bf16(const __nv_bfloat16* q, const __nv_bfloat16* k, __nv_bfloat16* q_out,
                  __nv_bfloat16* k_out, const RopeParams& p, const RopeTable& table,
                  cudaStream_t stream);

// The day's registry: drives the binary's rows, the tests and the README table.
using gpu100::Precision;  // common/precision.hpp (day01 has fp32 and bf16 variants)

using RopeFp32Fn = void (*)(const float*, const float*, float*, float*, const RopeParams&,
                            const RopeTable&, cudaStream_t);
using RopeBf16Fn = void (*)(const __nv_bfloat16*, const __nv_bfloat16*, __nv_bfloat16*,
                            __nv_bfloat16*, const RopeParams&, const RopeTable&, cudaStream_t);
struct Variant {
  const char* name;
  const char* description;
  Precision precision;
  RopeFp32Fn launch_fp32;  // set when precision == kFp32, else nullptr
  RopeBf16Fn launch_bf16;  // set when precision == kBf16, else nullptr
  bool fp32_angles;        // computes m * theta in fp32 on the fly (v1): a looser tolerance
  const char* tags = "";   // "mine": a learner's variant (common/learner.hpp)
};
const std::vector<Variant>& variants();  // the day's own, then the learner's (mine/*.cu)
// Adds a learner's variant (tagged "mine") from its file in mine/ (common/learner.hpp).
void add_learner_variant(const Variant& v);
const Variant* find_variant(const std::string& name);  // nullptr when unknown

// The pass/fail rule for a variant's output against the fp64 reference:
// |got - ref| <= abs_tol + rel_tol * |ref| per element (gpu100::compare). README.md explains each.
using gpu100::Tolerance;  // |got - ref| <= abs_tol + rel_tol * |ref|
Tolerance tolerance(const Variant& v, const RopeParams& p);

}  // namespace day01
