// day08: shapes, argument checks, the registries and the call-by-name API (conv2d_forward).
#include <cuda_runtime.h>
#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <map>
#include <mutex>
#include <stdexcept>

#include "common/arch.hpp"
#include "common/cuda_check.hpp"
#include "common/learner.hpp"
#include "common/math.hpp"
#include "common/occupancy.hpp"
#include "conv_day.hpp"

namespace day08 {

namespace {
int64_t out_extent(int64_t in, int64_t pad, int64_t dilation, int64_t taps, int64_t stride) {
  const int64_t span = dilation * (taps - 1) + 1;
  if (in + 2 * pad < span) return 0;
  return (in + 2 * pad - span) / stride + 1;
}
}  // namespace

int ConvShape::p() const {
  return static_cast<int>(out_extent(h, pad, dilation, r, stride));
}
int ConvShape::q() const {
  return static_cast<int>(out_extent(w, pad, dilation, s, stride));
}

void check_conv_args(const ConvShape& s) {
  const auto positive = [](int v, const char* what) {
    if (v < 1) throw std::invalid_argument(fmt::format("conv2d: {} = {} must be >= 1", what, v));
  };
  positive(s.n, "n");
  positive(s.c, "c");
  positive(s.h, "h");
  positive(s.w, "w");
  positive(s.k, "k");
  positive(s.r, "r");
  positive(s.s, "s");
  positive(s.stride, "stride");
  positive(s.dilation, "dilation");
  if (s.pad < 0) throw std::invalid_argument(fmt::format("conv2d: pad = {} must be >= 0", s.pad));
  if (int64_t(s.pad) > (int64_t(1) << 20) || int64_t(s.dilation) * s.r > (int64_t(1) << 24) ||
      int64_t(s.dilation) * s.s > (int64_t(1) << 24)) {
    throw std::invalid_argument("conv2d: pad or dilated filter extent too large");
  }
  const int64_t p = out_extent(s.h, s.pad, s.dilation, s.r, s.stride);
  const int64_t q = out_extent(s.w, s.pad, s.dilation, s.s, s.stride);
  if (p < 1 || q < 1) {
    throw std::invalid_argument(fmt::format(
        "conv2d: empty output ({} x {}): the dilated {}x{} filter does not fit the padded {}x{} "
        "input",
        p, q, s.r, s.s, s.h + 2 * s.pad, s.w + 2 * s.pad));
  }
  const int64_t x_elems = int64_t(s.n) * s.c * s.h * s.w;
  const int64_t w_elems = int64_t(s.k) * s.c * s.r * s.s;
  const int64_t y_elems = int64_t(s.n) * s.k * p * q;
  const int64_t padded = (int64_t(s.h) + 2 * s.pad) * (int64_t(s.w) + 2 * s.pad);
  if (x_elems > INT_MAX || w_elems > INT_MAX || y_elems > INT_MAX || padded > INT_MAX) {
    throw std::invalid_argument(
        fmt::format("conv2d: {} elements overflow the int32 indices of the kernels (max {})",
                    std::max({x_elems, w_elems, y_elems, padded}), INT_MAX));
  }
}

double conv2d_flops(const ConvShape& s) {
  return 2.0 * s.n * s.k * double(s.p()) * s.q() * s.c * s.r * s.s;
}
double conv2d_bytes(const ConvShape& s, bool bias) {
  return 4.0 * (double(s.n) * s.c * s.h * s.w + double(s.k) * s.c * s.r * s.s + (bias ? s.k : 0) +
                double(s.n) * s.k * s.p() * s.q());
}
double conv2d_bytes_bf16(const ConvShape& s, bool bias, bool y_bf16) {
  return 2.0 * (double(s.n) * s.c * s.h * s.w + double(s.k) * s.c * s.r * s.s) +
         4.0 * (bias ? s.k : 0) + (y_bf16 ? 2.0 : 4.0) * double(s.n) * s.k * s.p() * s.q();
}

std::string v6_refusal(const ConvShape& s, bool /*bias*/) {
  if (s.c % 8 != 0) {
    return fmt::format(
        "C = {} is not a multiple of 8 (v6 copies 8 channels, 16 bytes, per cp.async; pad C with "
        "zero channels)",
        s.c);
  }
  return "";
}

std::string v9_refusal(const ConvShape& s, bool /*bias*/) {
  // C = 4 with S even: a 16-byte chunk of the tile holds taps (r, s) and (r, s + 1), copied as two
  // 8-byte halves (a 3- or 1-channel stem input padded to 4 channels, its filter width to 8).
  if (s.c % 8 != 0 && !(s.c == 4 && s.s % 2 == 0)) {
    return fmt::format(
        "C = {} with S = {}: v9 needs C % 8 == 0 (8 channels, 16 bytes, per cp.async; TMA needs "
        "16-byte filter rows) or C = 4 with S even (two taps per 16 bytes); pad C with zero "
        "channels",
        s.c, s.s);
  }
  return "";
}

std::string cudnn_bf16_refusal(const ConvShape& /*s*/, bool bias) {
  if (bias) return "no bias in the bf16 cuDNN row (its bias add would need a bf16 bias tensor)";
  return "";
}

std::string to_string(const ConvShape& s) {
  std::string out = fmt::format("N={} C={} {}x{} K={} {}x{}", s.n, s.c, s.h, s.w, s.k, s.r, s.s);
  if (s.stride != 1) out += fmt::format(" stride {}", s.stride);
  out += fmt::format(" pad {}", s.pad);
  if (s.dilation != 1) out += fmt::format(" dil {}", s.dilation);
  return out;
}

void check_conv1d_args(int64_t n, int mask_width) {
  if (n < 1 || n > kMaxN1d) {
    throw std::invalid_argument(fmt::format("conv1d: n = {} must be in [1, 2^30]", n));
  }
  if (mask_width < 1 || mask_width % 2 == 0 || mask_width > kMaxMask1d) {
    throw std::invalid_argument(
        fmt::format("conv1d: mask width {} must be odd, in [1, {}]", mask_width, kMaxMask1d));
  }
}

void check_filter2d_args(int h, int w, int mask_width) {
  if (h < 1 || w < 1) {
    throw std::invalid_argument(
        fmt::format("filter2d: image {} x {} must be at least 1 x 1", h, w));
  }
  if (int64_t(h) * w > INT_MAX) {
    throw std::invalid_argument(fmt::format("filter2d: {} x {} overflows int32 indices", h, w));
  }
  if (mask_width < 1 || mask_width % 2 == 0 || mask_width > kMaxFilter2d) {
    throw std::invalid_argument(
        fmt::format("filter2d: mask width {} must be 1, 3, 5 or 7", mask_width));
  }
}

const std::vector<Conv1dVariant>& conv1d_variants() {
  static const std::vector<Conv1dVariant> v = {
      {"c1_naive", "one thread per output, mask read from global memory", conv1d_v1_naive},
      {"c2_constant_mask", "the mask in constant memory (broadcast to the warp)",
       conv1d_v2_constant_mask},
      {"c3_smem_halo", "1024-output tile + halo staged in shared memory, 4 outputs per thread",
       conv1d_v3_smem_halo},
  };
  return v;
}

const std::vector<Filter2dVariant>& filter2d_variants() {
  static const std::vector<Filter2dVariant> v = {
      {"f1_naive", "one thread per output, mask read from global memory", filter2d_f1_naive},
      {"f2_constant_mask", "the mask in constant memory", filter2d_f2_constant_mask},
      {"f3_in_tile", "PMPP IN_TILE: 32 x 32 blocks load the input tile, inner threads compute",
       filter2d_f3_in_tile},
      {"f4_cached_halo", "PMPP cached halo: tile in shared memory, halo read through L1",
       filter2d_f4_cached_halo},
      {"f5_register_tiled",
       "4 x 8 outputs per thread, float4 loads and stores, tile + halo in shared memory",
       filter2d_f5_register_tiled},
      {"f6_pipelined",
       "f5 in persistent blocks, input tile double-buffered by cp.async (load t+1 || compute t; "
       "below sm_80 plain loads)",
       filter2d_f6_pipelined},
  };
  return v;
}

namespace {
// The registry's NHWC entries: y is fp32 NKPQ for v6, v9, v10, v11 and v12, bf16 NPQK for cuDNN
// (y_bf16_npqk).
void v6_bf16_nhwc(const ConvShape& s, const __nv_bfloat16* x, const __nv_bfloat16* w,
                  const float* bias, void* y, cudaStream_t stream) {
  conv2d_v6_implicit_gemm_bf16_nhwc(s, x, w, bias, static_cast<float*>(y), stream);
}
void v9_bf16_nhwc(const ConvShape& s, const __nv_bfloat16* x, const __nv_bfloat16* w,
                  const float* bias, void* y, cudaStream_t stream) {
  conv2d_v9_implicit_gemm_wgmma_bf16_nhwc(s, x, w, bias, static_cast<float*>(y), stream);
}
void v10_bf16_nhwc(const ConvShape& s, const __nv_bfloat16* x, const __nv_bfloat16* w,
                   const float* bias, void* y, cudaStream_t stream) {
  conv2d_v10_tma_im2col_wgmma_bf16_nhwc(s, x, w, bias, static_cast<float*>(y), stream);
}
void v12_bf16_nhwc(const ConvShape& s, const __nv_bfloat16* x, const __nv_bfloat16* w,
                   const float* bias, void* y, cudaStream_t stream) {
  conv2d_v12_halo_wgmma_bf16_nhwc(s, x, w, bias, static_cast<float*>(y), stream);
}
void v11_f32_nhwc(const ConvShape& s, const float* x, const float* w, const float* bias, float* y,
                  cudaStream_t stream) {
  conv2d_v11_tma_im2col_wgmma_tf32_nhwc(s, x, w, bias, y, stream);
}
void v13_f32_nhwc(const ConvShape& s, const float* x, const float* w, const float* bias, float* y,
                  cudaStream_t stream) {
  conv2d_v13_halo_wgmma_tf32_nhwc(s, x, w, bias, y, stream);
}
void cudnn_tf32_nhwc(const ConvShape& s, const float* x, const float* w, const float* bias,
                     float* y, cudaStream_t stream) {
  conv2d_cudnn_tf32_nhwc(s, x, w, bias, y, stream);
}
void cudnn_bf16_nhwc(const ConvShape& s, const __nv_bfloat16* x, const __nv_bfloat16* w,
                     const float* bias, void* y, cudaStream_t stream) {
  conv2d_cudnn_bf16_nhwc(s, x, w, bias, static_cast<__nv_bfloat16*>(y), stream);
}
}  // namespace

namespace {
struct LearnerTag;  // this registry's list of learner entries (common/learner.hpp)
}

void add_learner_conv2d(const Conv2dVariant& v) {
  gpu100::learner_entries<Conv2dVariant, LearnerTag>().push_back(v);
}

const std::vector<Conv2dVariant>& conv2d_variants() {
  using P = ConvPrecision;
  static const std::vector<Conv2dVariant> v = gpu100::with_learner<Conv2dVariant>(
      {
          {"v1_direct", "one thread per output, loops over c, r, s", P::kFp32, conv2d_v1_direct,
           false, "cudnn_fp32"},
          {"v2_smem_tiled", "16x16 output tile x 8 filters: input halo tile and weights in shared",
           P::kFp32, conv2d_v2_smem_tiled, false, "cudnn_fp32"},
          {"v3_im2col_gemm", "im2col into a scratch matrix, then day04's v7_warptile SGEMM",
           P::kFp32, conv2d_v3_im2col_gemm, false, "cudnn_fp32"},
          {"v4_implicit_gemm",
           "implicit GEMM 128x64x16, 3-stage cp.async gather (below sm_80: plain loads), day04 "
           "WarpTile, 8x8 per thread",
           P::kFp32, conv2d_v4_implicit_gemm, false, "cudnn_fp32"},
          {"v15_implicit_gemm_crsk",
           "v4 on filters transposed to CRSK: B in 16-byte cp.async copies; 128x128 tiles, 8 "
           "warps, where K > 64",
           P::kFp32, conv2d_v15_implicit_gemm_crsk, false, "cudnn_fp32"},
          {"v5_implicit_gemm_tf32",
           "implicit GEMM 128x64x32 on mma.sync m16n8k8 TF32, 3-stage cp.async gather", P::kTf32,
           conv2d_v5_implicit_gemm_tf32, false, "cudnn_tf32", nullptr, false, nullptr, 1,
           gpu100::ArchNeed::kSm80},
          {"v6_implicit_gemm_bf16_nhwc",
           "implicit GEMM 128x64x32 on mma.sync m16n8k16 bf16, NHWC/KRSC, 16-byte cp.async, "
           "ldmatrix",
           P::kBf16, nullptr, false, "cudnn_bf16_nhwc", v6_bf16_nhwc, false, v6_refusal, 1,
           gpu100::ArchNeed::kSm80},
          {"v7_winograd",
           "Winograd F(2x2,3x3): filter transform, then 32 tiles x 64 filters per block, 16 GEMMs "
           "in "
           "registers",
           P::kFp32, conv2d_v7_winograd, false, "cudnn_fp32", nullptr, false, v7_refusal, 4},
          {"v8_winograd_tf32", "v7 with each chunk's 16 point products on mma.sync m16n8k8 TF32",
           P::kTf32, conv2d_v8_winograd_tf32, false, "cudnn_tf32", nullptr, false, v7_refusal, 4,
           gpu100::ArchNeed::kSm80},
          {"v14_winograd_f4",
           "v7 in Winograd F(4x4,3x3): 6x6 patches, 36 GEMMs of 32 tiles x 32 filters per block, "
           "1.78x fewer FMAs than v7",
           P::kFp32, conv2d_v14_winograd_f4, false, "cudnn_fp32", nullptr, false, v14_refusal, 16},
          {"v16_winograd_f4_gemm",
           "v14 in three kernels: input transform, 36 point GEMMs on day04's SGEMM v8 (batched, "
           "128x128 tiles), output transform",
           P::kFp32, conv2d_v16_winograd_f4_gemm, false, "cudnn_fp32", nullptr, false, v16_refusal,
           16},
          {"v9_implicit_gemm_wgmma_bf16_nhwc",
           "implicit GEMM 128x(64|128)x64 on wgmma bf16: a producer warpgroup gathers A "
           "(cp.async) and loads the filters (TMA), 2 consumer warpgroups, 4 mbarrier stages",
           P::kBf16, nullptr, false, "cudnn_bf16_nhwc", v9_bf16_nhwc, false, v9_refusal, 1,
           gpu100::ArchNeed::kSm90a},
          {"v10_tma_im2col_wgmma_bf16_nhwc",
           "v9 with A brought by TMA in im2col mode: one copy per slab (a tap x 64 channels), "
           "the copy engine walks the window; a one-warp producer",
           P::kBf16, nullptr, false, "cudnn_bf16_nhwc", v10_bf16_nhwc, false, v10_refusal, 1,
           gpu100::ArchNeed::kSm90a},
          {"v11_tma_im2col_wgmma_tf32_nhwc",
           "v10 on fp32 NHWC operands as TF32: wgmma m64nNk8.tf32, a slab is a tap x 32 channels",
           P::kTf32, nullptr, false, "cudnn_tf32_nhwc", nullptr, false, v11_refusal, 1,
           gpu100::ArchNeed::kSm90a, "", v11_f32_nhwc},
          {"v12_halo_wgmma_bf16_nhwc",
           "v10 for 3x3 layers of C, K <= 64: filters resident in shared memory, one TMA halo per "
           "8x8 tile read in place by the 9 taps (shifted swizzled descriptors), 3 consumer "
           "warpgroups",
           P::kBf16, nullptr, false, "cudnn_bf16_nhwc", v12_bf16_nhwc, false, v12_refusal, 1,
           gpu100::ArchNeed::kSm90a},
          {"v13_halo_wgmma_tf32_nhwc",
           "v12 on fp32 NHWC as TF32: 147 KB of resident filters, each halo in two 32-channel TMA "
           "copies, one stage per consumer warpgroup, each half handed back once its multiplies "
           "are done; the fused epilogue 16 bytes a thread after a pair swap by shuffle",
           P::kTf32, nullptr, false, "cudnn_tf32_nhwc", nullptr, false, v13_refusal, 1,
           gpu100::ArchNeed::kSm90a, "", v13_f32_nhwc},
          // cuDNN's Find may pick a Winograd or FFT algorithm, whose fp32 error is about 10x that
          // of a direct sum (measured on the H100: 6e-5 absolute at C = 16, 3x3; 2.8e-4 at the
          // ResNet layer when it picked a 0.36 ms algorithm instead of FFT_TILING): tolerance x10.
          {"cudnn_fp32", "library: cuDNN forward, FMA math, algorithm from Find", P::kFp32,
           conv2d_cudnn_fp32, true, "", nullptr, false, nullptr, 10},
          {"cudnn_tf32", "library: cuDNN forward, tensor-op math (TF32), algorithm from Find",
           P::kTf32, conv2d_cudnn_tf32, true, "", nullptr, false, nullptr, 10},
          {"cudnn_tf32_nhwc",
           "library: cuDNN forward, fp32 NHWC in and out, tensor-op math (TF32), Find", P::kTf32,
           nullptr, true, "", nullptr, false, nullptr, 10, gpu100::ArchNeed::kAny, "",
           cudnn_tf32_nhwc, true},
          {"cudnn_bf16_nhwc", "library: cuDNN forward, bf16 NHWC in and out, tensor-op math, Find",
           P::kBf16, nullptr, true, "", cudnn_bf16_nhwc, true, cudnn_bf16_refusal},
      },
      gpu100::learner_entries<Conv2dVariant, LearnerTag>());
  return v;
}

const Conv2dVariant* find_conv2d_variant(const std::string& name) {
  const std::string key = name == "best_fp32" ? std::string(kBestFp32) : name;
  for (const auto& v : conv2d_variants()) {
    if (key == v.name) return &v;
  }
  return nullptr;
}

void conv2d_forward(const std::string& variant, const ConvShape& s, const float* x, const float* w,
                    const float* bias, float* y, cudaStream_t stream) {
  const Conv2dVariant* v = find_conv2d_variant(variant);
  if (v == nullptr) {
    throw std::invalid_argument("conv2d_forward: unknown variant '" + variant + "'");
  }
  if (v->launch == nullptr) {
    throw std::invalid_argument("conv2d_forward: '" + variant +
                                "' takes NHWC inputs (conv_day.hpp), not fp32 NCHW");
  }
  v->launch(s, x, w, bias, y, stream);
}

std::vector<std::string> conv2d_variant_names() {
  std::vector<std::string> names;
  for (const auto& v : conv2d_variants()) {
    if (v.launch == nullptr) continue;  // NHWC: not callable through conv2d_forward
    if (!v.is_library || have_cudnn()) names.emplace_back(v.name);
  }
  names.emplace_back("best_fp32");
  return names;
}

namespace {
// Device buffers, one per stream: two layers running at once on two streams (the capstone's two
// trunks) must not share one, or one trunk's im2col matrix, filters or partial sums overwrite the
// other's. A buffer grows on demand; the smaller one is kept, never freed, since a CUDA graph
// captured before may still use it. `zeroed`: a new buffer is cleared on its stream (a plain
// cudaMemset goes to the legacy default stream, which a non-blocking stream does not wait for).
class PerStreamBuffers {
 public:
  void* get(size_t bytes, cudaStream_t stream, bool zeroed) {
    std::lock_guard<std::mutex> lock(mutex_);
    Buffer& b = buffers_[stream];
    if (bytes > b.capacity) {
      b = Buffer{};
      CUDA_CHECK(cudaMalloc(&b.ptr, bytes));
      if (zeroed) CUDA_CHECK(cudaMemsetAsync(b.ptr, 0, bytes, stream));
      b.capacity = bytes;
    }
    return b.ptr;
  }

 private:
  struct Buffer {
    void* ptr = nullptr;
    size_t capacity = 0;
  };
  std::mutex mutex_;
  std::map<cudaStream_t, Buffer> buffers_;
};

thread_local ScratchSource* scratch_source = nullptr;  // the open ScratchScope's, if any
}  // namespace

ScratchScope::ScratchScope(ScratchSource* source) : previous_(scratch_source) {
  scratch_source = source;
}
ScratchScope::~ScratchScope() {
  scratch_source = previous_;
}

void* conv_scratch(size_t bytes, cudaStream_t stream) {
  if (scratch_source != nullptr) return scratch_source->get(bytes, stream);
  static PerStreamBuffers scratch;
  return scratch.get(bytes, stream, false);
}

int* ScratchSource::counters(size_t count, cudaStream_t stream) {
  // Fresh memory each call: cleared on the stream that uses it.
  void* p = get(count * sizeof(int), stream);
  CUDA_CHECK(cudaMemsetAsync(p, 0, count * sizeof(int), stream));
  return static_cast<int*>(p);
}

int* conv_counters(size_t count, cudaStream_t stream) {
  if (scratch_source != nullptr) return scratch_source->counters(count, stream);
  static PerStreamBuffers counters;  // the kernels leave them zero
  return static_cast<int*>(counters.get(count * sizeof(int), stream, true));
}

namespace {
template <class T, class Y>
void check_group(const char* what, const ConvShape& s, const ConvGroup<T, Y>& g) {
  check_conv_args(s);
  if (g.count < 1 || g.count > kMaxConvGroup) {
    throw std::invalid_argument(
        fmt::format("{}: {} convolutions in one launch (1 or 2)", what, g.count));
  }
  for (int i = 0; i < g.count; ++i) {
    if (g.op[i].x == nullptr || g.op[i].w == nullptr || g.op[i].y == nullptr) {
      throw std::invalid_argument(fmt::format("{}: a null x, w or y", what));
    }
  }
}
}  // namespace

void conv2d_fused(gpu100::Precision precision, const ConvShape& s, const ConvGroup<float>& g,
                  cudaStream_t stream) {
  check_group("conv2d_fused", s, g);
  if (precision == gpu100::Precision::kFp32) {
    detail::conv2d_v4_group(s, g, stream);
  } else if (precision == gpu100::Precision::kTf32) {
    detail::conv2d_v5_group(s, g, stream);
  } else {
    throw std::invalid_argument("conv2d_fused: bf16 takes NHWC operands (conv2d_fused_bf16_nhwc)");
  }
}

size_t crsk_filter_floats(const ConvShape& s) {
  check_conv_args(s);
  return detail::v15_filter_floats(s);
}

void crsk_transform_filters(const ConvShape& s, const float* w, float* wt, cudaStream_t stream) {
  check_conv_args(s);
  if (w == nullptr || wt == nullptr) {
    throw std::invalid_argument("crsk_transform_filters: a null w or wt");
  }
  detail::v15_transform_filters(s, w, wt, stream);
}

void conv2d_fused_crsk(const ConvShape& s, const ConvGroup<float>& g, cudaStream_t stream) {
  check_group("conv2d_fused_crsk", s, g);
  detail::conv2d_v15_group(s, g, stream);
}

bool conv2d_fused_tf32_nhwc_takes(const ConvShape& s) {
  return gpu100::build_has(gpu100::ArchNeed::kSm90a) && v11_refusal(s, false).empty() &&
         s.k % 2 == 0;
}

void conv2d_fused_tf32_nhwc(const ConvShape& s, const ConvGroup<float>& g, cudaStream_t stream) {
  check_group("conv2d_fused_tf32_nhwc", s, g);
  // Their checks: the shape, K even, alignment, the build.
  if (conv2d_fused_tf32_runs_v13(s)) {
    detail::conv2d_v13_group(s, g, stream);
  } else {
    detail::conv2d_v11_group(s, g, stream);
  }
}

namespace detail {
int sm_count() {
  static gpu100::PerDevice<int> per_gpu;
  return per_gpu.get([] {
    int dev = 0, n = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev));
    return n;
  });
}
}  // namespace detail

bool winograd_takes(const ConvShape& s) {
  return v7_refusal(s, false).empty();
}

bool winograd_has_f4(const ConvShape& s) {
  return winograd_takes(s);
}

namespace {
// The 4x4 output tiles of a layer: the column count of v16's point GEMMs.
int64_t v16_tiles(const ConvShape& s) {
  return int64_t(s.n) * gpu100::ceil_div(s.p(), 4) * gpu100::ceil_div(s.q(), 4);
}
}  // namespace

WinogradForm winograd_form(const ConvShape& s) {
  if (!winograd_has_f4(s)) return WinogradForm::kF2x2;
  if (s.c >= 128 && s.k >= 128 && v16_tiles(s) >= 512) return WinogradForm::kF4x4Gemm;
  const int p = s.p(), q = s.q();
  const int64_t padded4 = int64_t(gpu100::round_up(p, 4)) * gpu100::round_up(q, 4);
  const int64_t padded2 = int64_t(gpu100::round_up(p, 2)) * gpu100::round_up(q, 2);
  if (20 * padded4 > 21 * padded2) return WinogradForm::kF2x2;
  return detail::v14_blocks(s) >= 2 * int64_t(detail::sm_count()) ? WinogradForm::kF4x4
                                                                  : WinogradForm::kF2x2;
}
void conv2d_fused_winograd(const ConvShape& s, const ConvGroup<float>& g, cudaStream_t stream,
                           WinogradForm form) {
  check_group("conv2d_fused_winograd", s, g);
  if (form == WinogradForm::kAuto) form = winograd_form(s);
  if (form == WinogradForm::kF2x2) {
    detail::conv2d_v7_group(s, g, stream);
    return;
  }
  if (!winograd_has_f4(s)) {
    throw std::invalid_argument(fmt::format(
        "conv2d_fused_winograd: no F(4x4) filters at C = {}, K = {} (kept for C, K <= 128)", s.c,
        s.k));
  }
  ConvGroup<float> g4 = g;  // the F(4x4) filters follow the F(2x2) ones in each U
  for (int i = 0; i < g.count; ++i) g4.op[i].w = g.op[i].w + winograd_f2_floats(s);
  if (form == WinogradForm::kF4x4Gemm) {
    detail::conv2d_v16_group(s, g4, stream);
  } else {
    detail::conv2d_v14_group(s, g4, stream);
  }
}
namespace {
// Whether v12's 8 x 8-pixel tiles give each of its consumer warpgroups (3 per SM) two tiles or
// more. With fewer (a batch of one: 221 tiles at the network's first stage) v10 is faster: it
// splits the few tiles' work along GEMM_K (measured at N = 1: 0.124 ms for l1's 8 convolutions on
// v12 against 0.102 on v10).
bool v12_fills_gpu(const ConvShape& s) {
  const int64_t tiles = int64_t(s.n) * gpu100::ceil_div(s.p(), 8) * gpu100::ceil_div(s.q(), 8);
  return tiles >= 2 * 3 * int64_t(detail::sm_count());
}
}  // namespace

// The bf16 fused form's kernel, where the running GPU executes this build's sm_90a code
// (gpu100::build_has asks the code the driver loaded, not the compute capability: an H100 running
// an sm_80 build must take v6) and the pointers are 16-byte aligned: v12 (resident filters, TMA
// halo) for the 3x3 layers of C = 64 and K <= 64 it takes, when they have tiles enough for it
// (v12_fills_gpu); v10 (TMA im2col) when C is a multiple
// of 64 (no slab half empty), else v9 (its gather) where it takes the shape; v6 (mma.sync)
// otherwise.
FusedBf16Kernel conv2d_fused_bf16_kernel(const ConvShape& s, const ConvGroup<__nv_bfloat16>& g) {
  if (!gpu100::build_has(gpu100::ArchNeed::kSm90a)) return FusedBf16Kernel::kV6;
  for (int i = 0; i < g.count; ++i) {
    if (!gpu100::aligned16(g.op[i].x) || !gpu100::aligned16(g.op[i].w)) return FusedBf16Kernel::kV6;
  }
  if (s.c == 64 && v12_refusal(s, false).empty() && v12_fills_gpu(s)) return FusedBf16Kernel::kV12;
  if (s.c % 64 == 0 && v10_refusal(s, false).empty()) return FusedBf16Kernel::kV10;
  return v9_refusal(s, false).empty() ? FusedBf16Kernel::kV9 : FusedBf16Kernel::kV6;
}

bool conv2d_fused_tf32_runs_v13(const ConvShape& s) {
  return gpu100::build_has(gpu100::ArchNeed::kSm90a) && s.c == 64 &&
         v13_refusal(s, false).empty() && v12_fills_gpu(s);
}

bool conv2d_fused_bf16_takes(const ConvShape& s) {
  if (gpu100::build_has(gpu100::ArchNeed::kSm90a)) return v9_refusal(s, false).empty();
  return v6_refusal(s, false).empty();
}

void conv2d_fused_bf16_nhwc(const ConvShape& s, const ConvGroup<__nv_bfloat16>& g,
                            cudaStream_t stream) {
  check_group("conv2d_fused_bf16_nhwc", s, g);
  if (s.k % 2 != 0) {
    throw std::invalid_argument(fmt::format(
        "conv2d_fused_bf16_nhwc: K = {} must be even (two channels per bf16x2 store)", s.k));
  }
  switch (conv2d_fused_bf16_kernel(s, g)) {
    case FusedBf16Kernel::kV12:
      detail::conv2d_v12_group(s, g, stream);
      break;
    case FusedBf16Kernel::kV10:
      detail::conv2d_v10_group(s, g, stream);
      break;
    case FusedBf16Kernel::kV9:
      detail::conv2d_v9_group(s, g, stream);
      break;
    case FusedBf16Kernel::kV6:
      detail::conv2d_v6_group(s, g, stream);
      break;
  }
}

}  // namespace day08
