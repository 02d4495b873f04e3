#pragma once
// One Conv2d layer's data on both sides, shared by the binary and the tests: seeded inputs in
// [-1, 1] (x NCHW, w KCRS, a bias), their bf16 NHWC / KRSC copies for the bf16 variants and fp32
// NHWC / KRSC copies for v11 (converted once on the host, outside any timing), the outputs, and the
// CPU reference of any variant at any set of outputs (on the bf16-rounded inputs for the bf16
// variants, which is what they read).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/compare.hpp"
#include "common/device_buffer.hpp"
#include "conv_day.hpp"

namespace day08 {

class ConvLayer {
 public:
  // with_bf16: also the bf16 copies (the bf16 NHWC variants need them); with_f32_nhwc: also the
  // fp32 NHWC copies (v11).
  ConvLayer(const ConvShape& s, uint64_t seed, bool with_bf16, bool with_f32_nhwc = false);

  const ConvShape& shape() const { return s_; }
  bool has_bf16() const { return !x_bf16_.empty(); }
  bool has_f32_nhwc() const { return !d_x32n_.empty(); }
  // Variant v on `stream`, asynchronously, with the bias when with_bias.
  void launch(const Conv2dVariant& v, bool with_bias, cudaStream_t stream = nullptr);
  void poison();                                            // both outputs to NaN
  std::vector<float> output(const Conv2dVariant& v) const;  // v's output as fp32 NKPQ
  // The CPU reference (double) of variant v at the flat NKPQ output indices `idx`.
  std::vector<double> reference_at(const Conv2dVariant& v, bool with_bias,
                                   const std::vector<int64_t>& idx) const;

 private:
  ConvShape s_;
  std::vector<float> x_, w_, bias_, x_bf16_, w_bf16_;  // x_bf16_, w_bf16_: the rounded values
  gpu100::DeviceBuffer<float> d_x_, d_w_, d_b_, d_y_;
  gpu100::DeviceBuffer<float> d_x32n_, d_w32n_;  // fp32 NHWC x, KRSC w
  gpu100::DeviceBuffer<__nv_bfloat16> d_x16_, d_w16_, d_y16_;
};

// Device operands of random values in [-1, 1] for timing a library call at shape s: x and w
// filled (seeds seed and seed + 1), y allocated and not written; bf16 or fp32, in whatever layout
// the call reads them (the values do not depend on it). cuDNN's re-timed candidates
// (CudnnConvPlan), the graph API's engines (cudnn_frontend_conv_best) and the capstone's per-layer
// cuDNN figure time on them.
struct RandomConvOperands {
  gpu100::DeviceBuffer<char> x, w, y;
  RandomConvOperands(const ConvShape& s, bool bf16, uint64_t seed, cudaStream_t stream = nullptr);
};

// The first call of a cuDNN row, synchronised: "" when it ran, else why cuDNN refused (e.g. no
// algorithm for the bf16 NHWC configuration at this shape). CUDA errors still throw.
std::string first_library_call(ConvLayer& layer, const Conv2dVariant& v, bool with_bias);

// The check of a layer's variants, the binary's and the tests': the CPU reference at sampled
// outputs (every output when the layer is small; gpu100::sample_points), then every output against
// cuDNN of the variant's precision (fp32 or bf16) when cuDNN runs the shape, with cuDNN's own
// rounding added to the tolerance. Without either whole-output reference, every output must at
// least be written (no NaN poison left).
class LayerCheck {
 public:
  // Runs the cuDNN references now (the bf16 one when the layer has its bf16 copies).
  LayerCheck(ConvLayer& layer, bool with_bias, uint64_t seed);
  // Checks the output variant v left in the layer.
  gpu100::CompareResult operator()(const Conv2dVariant& v) const;

 private:
  ConvLayer& layer_;
  bool bias_;
  std::vector<int64_t> idx_;
  bool every_output_ = false;
  std::vector<float> cudnn_y_[3];       // by precision (tf32: never)
  const Conv2dVariant* cudnn_[3] = {};  // the row that wrote it
};

}  // namespace day08
