#pragma once
// day03_vector_add_variants: what makes an elementwise kernel fast.
//
// The host API of the day, exported by the library target day03::variants. The baseline (v1) and
// the library row (CUB) are day02's, linked through day02::vector_add, not copied.
//
// Every launcher below takes any n >= 0 (n == 0 launches nothing; a negative n throws
// std::invalid_argument before any CUDA call), and pointers of any alignment: the 16-byte paths
// fall back to one element per thread when a, b or c is not 16-byte aligned. The output may be
// one of the inputs exactly (in place), but must not partially overlap them. Launchers check their
// launch (CUDA_CHECK_LAST) and do not synchronise.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "common/compare.hpp"
#include "common/half.hpp"
#include "common/random.hpp"
#include "vector_add.cuh"  // day02: vector_add_v1, vector_add_cub, vector_add_cpu, Variant

namespace day03 {

// ---- fp32 C = A + B, one variant per idea ----
// v1_naive is day02::vector_add_v1 and cub_transform is day02::vector_add_cub.
void add_v2_grid_stride(const float* a, const float* b, float* c, int64_t n, cudaStream_t stream);
void add_v3_float4(const float* a, const float* b, float* c, int64_t n, cudaStream_t stream);
// v4 is the one template of the day: fp32 is add_v4_ilp<float>, and the other element types use
// the same kernel. Instantiated for float, __half, __nv_bfloat16, double and int32_t only.
template <typename T>
void add_v4_ilp(const T* a, const T* b, T* c, int64_t n, cudaStream_t stream);
void add_v5_smem_staged(const float* a, const float* b, float* c, int64_t n, cudaStream_t stream);

// The registry of the fp32 variants (day02's Variant: name, description, launcher, is_library,
// tags). Tags: "sweep" (the rows --sweep times), "types" (the kernel the types part runs).
// It drives the binary's rows, the GPU tests and the README table.
using Variant = day02::Variant;
const std::vector<Variant>& variants();  // the day's own, then the learner's (mine/*.cu)
const Variant* find_variant(const std::string& name);  // nullptr when unknown
// Adds a learner's variant (tagged "mine") from its file in mine/ (common/learner.hpp).
void add_learner_variant(const Variant& v);

// ---- other element types ----
// CPU reference for every type: c = a + b. fp16 and bf16 add the (exact) float values of the
// inputs and round the sum once to the type, which is what the GPU's HADD2 does, so the results
// match bit for bit (a float holds 24 >= 2 x 11 + 2 bits, so rounding twice cannot differ).
template <typename T>
void add_cpu(const T* a, const T* b, T* c, int64_t n);

template <typename T>
struct TypeTag {
  using type = T;
};

// The element types of the day, in table order: fp32, fp16, bf16, fp64, int32.
template <typename F>
void for_each_type(F&& f) {
  f(TypeTag<float>{});
  f(TypeTag<__half>{});
  f(TypeTag<__nv_bfloat16>{});
  f(TypeTag<double>{});
  f(TypeTag<int32_t>{});
}

template <typename T>
constexpr const char* precision_name() {
  if constexpr (std::is_same_v<T, float>) {
    return "fp32";
  } else if constexpr (std::is_same_v<T, __half>) {
    return "fp16";
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return "bf16";
  } else if constexpr (std::is_same_v<T, double>) {
    return "fp64";
  } else {
    static_assert(std::is_same_v<T, int32_t>, "day03 instantiates fp32, fp16, bf16, fp64, int32");
    return "int32";
  }
}

// Seeded random inputs of type T: uniform in [-1, 1] rounded to T for the floating types, uniform
// in [-2^30, 2^30] for int32 (so that a + b cannot overflow).
template <typename T>
std::vector<T> random_input(size_t n, uint64_t seed) {
  if constexpr (std::is_same_v<T, int32_t>) {
    return gpu100::random_ints(n, seed, -(1 << 30), 1 << 30);
  } else if constexpr (std::is_arithmetic_v<T>) {
    return gpu100::random_vector<T>(n, seed);
  } else {
    return gpu100::convert_from_float<T>(gpu100::random_vector<float>(n, seed));
  }
}

// ---- SiLU, fused and unfused ----
// silu(x) = x * sigmoid(x) = x / (1 + exp(-x)), with expf (the accurate one, not __expf) on the GPU
// and std::exp on the CPU. The operation is y = silu(a + b * c); every version rounds b * c to
// fp32 before adding a (no FMA), as a chain of separate kernels must, so fused and unfused3 match
// bit for bit and differ from the CPU only by expf's last bits.
float silu_cpu(float x);
void silu_fused_cpu(const float* a, const float* b, const float* c, float* y, int64_t n);

// All three take two scratch arrays t and u of n floats (silu_fused ignores them).
//   silu_fused     one kernel: y = silu(a + b * c)                       reads 3 arrays, writes 1
//   silu_unfused3  t = b * c; u = a + t; y = silu(u)                      3 + 3 + 2 = 8 arrays
//   silu_eager4    t = b * c; u = a + t; t = sigmoid(u); y = u * t        3 + 3 + 2 + 3 = 11 arrays
using SiluFn = void (*)(const float* a, const float* b, const float* c, float* y, float* t,
                        float* u, int64_t n, cudaStream_t stream);
void silu_fused(const float* a, const float* b, const float* c, float* y, float* t, float* u,
                int64_t n, cudaStream_t stream);
void silu_unfused3(const float* a, const float* b, const float* c, float* y, float* t, float* u,
                   int64_t n, cudaStream_t stream);
void silu_eager4(const float* a, const float* b, const float* c, float* y, float* t, float* u,
                 int64_t n, cudaStream_t stream);

struct SiluVariant {
  const char* name;
  const char* description;
  int kernels;       // launches per call
  int arrays_moved;  // arrays of n floats read or written in all, over all its kernels
  SiluFn launch;
};
const std::vector<SiluVariant>& silu_variants();  // fused first

// The tolerance against the CPU: |got - ref| <= 1e-6 + 1e-6 |ref|, at least 8 float ulps for
// |y| <= 2 (y lies in about [-0.28, 1.77] for inputs in [-1, 1]). The GPU's expf is within 2 ulp,
// glibc's within 1, and the division adds half an ulp on each side; eager4's x * sigmoid(x)
// rounds once more.
constexpr double kSiluAbsTol = 1e-6;
constexpr double kSiluRelTol = 1e-6;

// ---- one denoising step of a diffusion sampler, with temporal blending ----
// Elementwise over a frame: x_t is the noisy sample, eps the noise the model predicted, prev the
// previous frame's output.
//   x0  = (x_t - sqrt(1 - abar) * eps) / sqrt(abar)     the predicted clean sample
//   out = clamp(w * x0 + (1 - w) * prev, -1, 1)          blended with the previous frame
// abar (the step's cumulative alpha-bar) must be in (0, 1] and w in [0, 1]: anything else, NaN
// included, throws std::invalid_argument (before any CUDA call, in the launchers).
// Storage type T: float, __half or __nv_bfloat16 (instantiated for those only); the math is fp32
// on the GPU and double on the CPU. fp16 holds at most 65504: for abar below about 1e-9, x0 can
// pass that and the chain's intermediates overflow.
struct DiffusionStep {
  double abar = 0.5;
  double w = 0.8;
};
void check_diffusion_step(const DiffusionStep& step, const char* who);

// The CPU reference: double math on the stored input values, rounded once to T (round to nearest
// even; __double2half and __double2bfloat16 round once, with no detour through float).
template <typename T>
void diffusion_cpu(const T* x_t, const T* eps, const T* prev, T* out, int64_t n,
                   const DiffusionStep& step);

// Every launcher takes two scratch arrays t and u of n elements (diffusion_fused ignores them;
// they must not overlap the other arrays). out may be one of the inputs exactly (in place, e.g.
// out == prev); otherwise the rules of the adds above hold.
template <typename T>
using DiffusionFn = void (*)(const T* x_t, const T* eps, const T* prev, T* out, T* t, T* u,
                             int64_t n, DiffusionStep step, cudaStream_t stream);
//   diffusion_chain  7 kernels, one per operation, each writing its result as T:
//                    t = s eps; u = x_t - t; t = u / r; u = (1 - w) prev; out = w t;
//                    t = out + u; out = clamp(t)  (s = sqrt(1 - abar), r = sqrt(abar))
//                    2 + 3 + 2 + 2 + 2 + 3 + 2 = 16 arrays of n elements moved
//   diffusion_fused  one kernel: reads x_t, eps, prev, writes out: 4 arrays
template <typename T>
void diffusion_chain(const T* x_t, const T* eps, const T* prev, T* out, T* t, T* u, int64_t n,
                     DiffusionStep step, cudaStream_t stream);
template <typename T>
void diffusion_fused(const T* x_t, const T* eps, const T* prev, T* out, T* t, T* u, int64_t n,
                     DiffusionStep step, cudaStream_t stream);

// The storage types of the step, in table order: fp32, fp16, bf16.
template <typename F>
void for_each_diffusion_type(F&& f) {
  f(TypeTag<float>{});
  f(TypeTag<__half>{});
  f(TypeTag<__nv_bfloat16>{});
}

template <typename T>
struct DiffusionVariant {
  const char* name;
  const char* description;
  int kernels;       // launches per call
  int arrays_moved;  // arrays of n elements read or written in all, over all its kernels
  int roundings;     // times a value is rounded to T on its way to out (the tolerance's k)
  DiffusionFn<T> launch;
};
template <typename T>
const std::vector<DiffusionVariant<T>>& diffusion_variants();  // the chain, then the fused kernel

// The tolerance (README.md, "Tolerances", derives it). The blend can cancel (w x0 against
// (1 - w) prev) and at a small abar x0 is large (up to 2 / sqrt(abar) for inputs in [-1, 1]), so
// the roundings scale with the terms out is made of, not with |out|:
//   M = w (|x_t| + sqrt(1 - abar) |eps|) / sqrt(abar) + (1 - w) |prev|    (>= |out| unclamped)
// An element passes when |got - ref| <= 1e-6 (1 + M) + (k + 2) u M, u the unit roundoff of T
// (2^-24 fp32, 2^-11 fp16, 2^-8 bf16) and k the variant's roundings to T. To first order the
// chain's six roundings reach 5 u M and the fused kernel's one u M; the reference, rounded once,
// adds u M; 1e-6 M covers the fp32 math and coefficients (about 9 x 2^-24 M), 1e-6 fp16's
// subnormals (2^-25 per rounding), and the last u M is slack for the second-order terms.
template <typename T>
constexpr double unit_roundoff() {
  if constexpr (std::is_same_v<T, __half>) {
    return 0x1p-11;
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return 0x1p-8;
  } else {
    static_assert(std::is_same_v<T, float>, "the diffusion step is fp32, fp16 or bf16");
    return 0x1p-24;
  }
}
constexpr double kDiffusionTol = 1e-6;
double diffusion_magnitude(double x_t, double eps, double prev, const DiffusionStep& step);
template <typename T>
double diffusion_allowance(double magnitude, int roundings) {
  return kDiffusionTol * (1.0 + magnitude) + (roundings + 2) * unit_roundoff<T>() * magnitude;
}
// got against ref element by element with that allowance (gpu100::record).
template <typename T>
gpu100::CompareResult check_diffusion(const std::vector<T>& x_t, const std::vector<T>& eps,
                                      const std::vector<T>& prev, const std::vector<T>& ref,
                                      const std::vector<T>& got, const DiffusionStep& step,
                                      int roundings);

// ---- transfers ----
// The chunks of a pipeline: `chunks` ranges covering [0, n), each a multiple of 256 elements
// (1 KiB, so every chunk starts 16-byte aligned) except the last; trailing empty chunks are
// dropped. Throws std::invalid_argument for n < 0 or chunks < 1.
struct Chunk {
  int64_t begin = 0, count = 0;
};
std::vector<Chunk> plan_chunks(int64_t n, int chunks);

// C = A + B from host to host, serially: H2D of all of A and B, one kernel (v4), D2H of all of C,
// on one stream. Returns when C is on the host.
void add_serial(const float* h_a, const float* h_b, float* h_c, float* d_a, float* d_b, float* d_c,
                int64_t n, cudaStream_t stream);

// The same, in chunks over k streams: chunk i's H2D of A and B, its kernel and its D2H of C go,
// in that order, on stream i % k, so one chunk's copy-in overlaps another's copy-out. Host
// buffers must be pinned for the copies to be asynchronous (pageable ones give a correct but
// serial result). Each chunk uses its own part of the device buffers, so no chunk waits for
// another's buffer. The streams are created once (they are blocking streams: work on the legacy
// default stream, such as a poison memset, finishes before they start).
class StreamPipeline {
 public:
  explicit StreamPipeline(int streams);  // throws std::invalid_argument for streams < 1
  ~StreamPipeline();
  StreamPipeline(const StreamPipeline&) = delete;
  StreamPipeline& operator=(const StreamPipeline&) = delete;

  // Returns when every chunk's C is on the host (each stream synchronised).
  void run(const float* h_a, const float* h_b, float* h_c, float* d_a, float* d_b, float* d_c,
           int64_t n, int chunks);
  int streams() const { return static_cast<int>(streams_.size()); }

 private:
  std::vector<cudaStream_t> streams_;
};

// Column 0 of a row-major host matrix (rows x cols floats) into d_col[0, rows), two ways:
// one cudaMemcpy of 4 bytes per element, or a single cudaMemcpy2D with the row pitch as the source
// pitch. Both return when the copy is done.
void copy_column_per_element(const float* host, int64_t rows, int64_t cols, float* d_col);
void copy_column_2d(const float* host, int64_t rows, int64_t cols, float* d_col);

}  // namespace day03
