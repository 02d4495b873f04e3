#include "conv_layer.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>

#include "common/cuda_check.hpp"
#include "common/device_random.hpp"
#include "common/errors.hpp"
#include "common/half.hpp"
#include "common/random.hpp"

namespace day08 {

ConvLayer::ConvLayer(const ConvShape& s, uint64_t seed, bool with_bf16, bool with_f32_nhwc)
    : s_(s),
      x_(gpu100::random_vector<float>(size_t(s.n) * s.c * s.h * s.w, seed)),
      w_(gpu100::random_vector<float>(size_t(s.k) * s.c * s.r * s.s, seed + 1)),
      bias_(gpu100::random_vector<float>(size_t(s.k), seed + 2)),
      d_x_(x_.size()),
      d_w_(w_.size()),
      d_b_(bias_.size()),
      d_y_(size_t(output_dims(s).size())) {
  d_x_.upload(x_);
  d_w_.upload(w_);
  d_b_.upload(bias_);
  if (with_f32_nhwc) {
    d_x32n_ = gpu100::DeviceBuffer<float>(x_.size());
    d_w32n_ = gpu100::DeviceBuffer<float>(w_.size());
    d_x32n_.upload(to_nhwc_f32(s, x_));
    d_w32n_.upload(to_krsc_f32(s, w_));
  }
  if (!with_bf16) return;
  x_bf16_ = gpu100::round_trip<__nv_bfloat16>(x_);
  w_bf16_ = gpu100::round_trip<__nv_bfloat16>(w_);
  d_x16_ = gpu100::DeviceBuffer<__nv_bfloat16>(x_.size());
  d_w16_ = gpu100::DeviceBuffer<__nv_bfloat16>(w_.size());
  d_y16_ = gpu100::DeviceBuffer<__nv_bfloat16>(d_y_.size());
  d_x16_.upload(to_nhwc_bf16(s, x_));
  d_w16_.upload(to_krsc_bf16(s, w_));
}

void ConvLayer::launch(const Conv2dVariant& v, bool with_bias, cudaStream_t stream) {
  const float* bias = with_bias ? d_b_.data() : nullptr;
  if (v.takes_f32_nhwc()) {
    if (d_x32n_.empty()) throw std::logic_error("ConvLayer: built without the fp32 NHWC copies");
    v.launch_f32_nhwc(s_, d_x32n_.data(), d_w32n_.data(), bias, d_y_.data(), stream);
    return;
  }
  if (!v.takes_bf16_nhwc()) {
    v.launch(s_, d_x_.data(), d_w_.data(), bias, d_y_.data(), stream);
    return;
  }
  if (d_x16_.empty()) throw std::logic_error("ConvLayer: built without the bf16 copies");
  void* y = v.y_bf16_npqk ? static_cast<void*>(d_y16_.data()) : d_y_.data();
  v.launch_bf16_nhwc(s_, d_x16_.data(), d_w16_.data(), bias, y, stream);
}

void ConvLayer::poison() {
  d_y_.poison();
  d_y16_.poison();
}

std::vector<float> ConvLayer::output(const Conv2dVariant& v) const {
  if (v.y_f32_npqk) return npqk_to_nkpq(s_, d_y_.download());
  return v.y_bf16_npqk ? npqk_to_nkpq(s_, d_y16_.download()) : d_y_.download();
}

std::vector<double> ConvLayer::reference_at(const Conv2dVariant& v, bool with_bias,
                                            const std::vector<int64_t>& idx) const {
  const bool bf16 = v.takes_bf16_nhwc();
  if (bf16 && x_bf16_.empty()) throw std::logic_error("ConvLayer: built without the bf16 copies");
  return conv2d_cpu_at_points(s_, bf16 ? x_bf16_.data() : x_.data(),
                              bf16 ? w_bf16_.data() : w_.data(), with_bias ? bias_.data() : nullptr,
                              idx);
}

RandomConvOperands::RandomConvOperands(const ConvShape& s, bool bf16, uint64_t seed,
                                       cudaStream_t stream) {
  const size_t elem = bf16 ? 2 : 4;
  const size_t xn = size_t(s.n) * s.c * s.h * s.w, wn = size_t(s.k) * s.c * s.r * s.s;
  x = gpu100::DeviceBuffer<char>(xn * elem);
  w = gpu100::DeviceBuffer<char>(wn * elem);
  y = gpu100::DeviceBuffer<char>(size_t(s.n) * s.k * s.p() * s.q() * elem);
  if (bf16) {
    gpu100::fill_uniform_device(reinterpret_cast<__nv_bfloat16*>(x.data()), xn, seed, stream);
    gpu100::fill_uniform_device(reinterpret_cast<__nv_bfloat16*>(w.data()), wn, seed + 1, stream);
  } else {
    gpu100::fill_uniform_device(reinterpret_cast<float*>(x.data()), xn, seed, stream);
    gpu100::fill_uniform_device(reinterpret_cast<float*>(w.data()), wn, seed + 1, stream);
  }
}

std::string first_library_call(ConvLayer& layer, const Conv2dVariant& v, bool with_bias) {
  try {
    layer.launch(v, with_bias);
    CUDA_CHECK(cudaDeviceSynchronize());
    return "";
  } catch (const gpu100::CudaError&) {
    throw;
  } catch (const std::runtime_error& e) {
    return e.what();
  }
}

LayerCheck::LayerCheck(ConvLayer& layer, bool with_bias, uint64_t seed)
    : layer_(layer), bias_(with_bias) {
  const ConvShape& s = layer.shape();
  const int64_t full_limit = int64_t(2e8) / (int64_t(s.c) * s.r * s.s);  // CPU multiply-adds
  idx_ = gpu100::sample_points(output_dims(s), 16384, seed, full_limit);
  every_output_ = int64_t(idx_.size()) == output_dims(s).size();
  if (!have_cudnn()) return;
  for (const auto& v : conv2d_variants()) {
    if (!v.is_library || v.precision == ConvPrecision::kTf32) continue;
    if (v.takes_bf16_nhwc() &&
        (!layer.has_bf16() || (v.refusal && !v.refusal(s, with_bias).empty()))) {
      continue;
    }
    layer.poison();
    if (first_library_call(layer, v, with_bias).empty()) {
      cudnn_y_[int(v.precision)] = layer.output(v);
      cudnn_[int(v.precision)] = &v;
    }
  }
}

gpu100::CompareResult LayerCheck::operator()(const Conv2dVariant& v) const {
  const ConvShape& s = layer_.shape();
  const std::vector<float> got = layer_.output(v);
  const gpu100::Tolerance tol = conv2d_tolerance(s, v);
  const gpu100::CompareResult cmp = gpu100::compare(
      layer_.reference_at(v, bias_, idx_), gpu100::gather(got, idx_), tol.abs_tol, tol.rel_tol);
  const ConvPrecision lib_p = v.takes_bf16_nhwc() ? ConvPrecision::kBf16 : ConvPrecision::kFp32;
  if (const std::vector<float>& lib_y = cudnn_y_[int(lib_p)]; !lib_y.empty()) {
    // cuDNN's own rounding is in this reference: the variant's tolerance plus the larger of its
    // own and cuDNN's (its row's tolerance: x10, since Find may pick a Winograd or FFT algorithm).
    const gpu100::Tolerance tl = conv2d_tolerance(s, *cudnn_[int(lib_p)]);
    return gpu100::worst_of(
        {cmp, gpu100::compare(lib_y, got, tol.abs_tol + std::max(tol.abs_tol, tl.abs_tol),
                              tol.rel_tol + std::max(tol.rel_tol, tl.rel_tol))});
  }
  if (every_output_) return cmp;
  const double inf = std::numeric_limits<double>::infinity();
  return gpu100::worst_of({cmp, gpu100::compare(std::vector<float>(got.size()), got, inf, 0)});
}

}  // namespace day08
