// day08 CPU references, all accumulating in double: 1D convolution, 2D filter (one output row at
// a time, so the binary can check sampled rows of an 8192 x 8192 image), Conv2d (whole output, or
// one element for sampled checks of the large layers); the layout conversions of the bf16 NHWC
// variants; the comparison tolerances.
#include <cmath>
#include <stdexcept>

#include "conv_day.hpp"

namespace day08 {

void conv1d_cpu(const float* x, const float* mask, int64_t n, int mask_width, double* y) {
  const int r = mask_width / 2;
  for (int64_t i = 0; i < n; ++i) {
    double acc = 0;
    for (int j = 0; j < mask_width; ++j) {
      const int64_t src = i + j - r;
      if (src >= 0 && src < n) acc += double(x[src]) * double(mask[j]);
    }
    y[i] = acc;
  }
}

void filter2d_cpu_row(const float* x, int h, int w, const float* mask, int mask_width, int row,
                      double* y_row) {
  const int r = mask_width / 2;
  for (int col = 0; col < w; ++col) {
    double acc = 0;
    for (int a = 0; a < mask_width; ++a) {
      const int iy = row + a - r;
      if (iy < 0 || iy >= h) continue;
      for (int b = 0; b < mask_width; ++b) {
        const int ix = col + b - r;
        if (ix >= 0 && ix < w) {
          acc += double(x[size_t(iy) * w + ix]) * double(mask[a * mask_width + b]);
        }
      }
    }
    y_row[col] = acc;
  }
}

double conv2d_cpu_at(const ConvShape& s, const float* x, const float* w, const float* bias, int n,
                     int k, int p, int q) {
  double acc = bias != nullptr ? double(bias[k]) : 0.0;
  for (int c = 0; c < s.c; ++c) {
    const float* plane = x + (size_t(n) * s.c + c) * s.h * s.w;
    const float* filt = w + (size_t(k) * s.c + c) * s.r * s.s;
    for (int r = 0; r < s.r; ++r) {
      const int ih = p * s.stride - s.pad + r * s.dilation;
      if (ih < 0 || ih >= s.h) continue;
      for (int t = 0; t < s.s; ++t) {
        const int iw = q * s.stride - s.pad + t * s.dilation;
        if (iw >= 0 && iw < s.w)
          acc += double(plane[size_t(ih) * s.w + iw]) * double(filt[r * s.s + t]);
      }
    }
  }
  return acc;
}

gpu100::Dims4 output_dims(const ConvShape& s) {
  return {s.n, s.k, s.p(), s.q()};
}

std::vector<double> conv2d_cpu_at_points(const ConvShape& s, const float* x, const float* w,
                                         const float* bias, const std::vector<int64_t>& idx) {
  const gpu100::Dims4 d = output_dims(s);
  std::vector<double> ref(idx.size());
  for (size_t j = 0; j < idx.size(); ++j) {
    const gpu100::Index4 o = gpu100::unflatten(d, idx[j]);
    ref[j] = conv2d_cpu_at(s, x, w, bias, int(o.n), int(o.c), int(o.h), int(o.w));
  }
  return ref;
}

void conv2d_cpu(const ConvShape& s, const float* x, const float* w, const float* bias, double* y) {
  const int P = s.p(), Q = s.q();
  size_t i = 0;
  for (int n = 0; n < s.n; ++n)
    for (int k = 0; k < s.k; ++k)
      for (int p = 0; p < P; ++p)
        for (int q = 0; q < Q; ++q) y[i++] = conv2d_cpu_at(s, x, w, bias, n, k, p, q);
}

namespace {
// out[a][i][b] = T(in[a][b][i]): the middle axis (channels) moved innermost, padded with zeros
// from `channels` to `out_channels` (bf16: each value rounded to nearest).
template <class T>
std::vector<T> channels_last(const std::vector<float>& in, size_t outer, size_t channels,
                             size_t inner, size_t out_channels) {
  if (in.size() != outer * channels * inner) {
    throw std::invalid_argument("channels_last: the vector does not match the shape");
  }
  if (out_channels < channels) throw std::invalid_argument("channels_last: c_pad < C");
  std::vector<T> out(outer * inner * out_channels, T(0.f));
  for (size_t a = 0; a < outer; ++a)
    for (size_t b = 0; b < channels; ++b)
      for (size_t i = 0; i < inner; ++i) {
        out[(a * inner + i) * out_channels + b] = T(in[(a * channels + b) * inner + i]);
      }
  return out;
}
size_t padded(const ConvShape& s, int c_pad) {
  return size_t(c_pad > 0 ? c_pad : s.c);
}
}  // namespace

std::vector<__nv_bfloat16> to_nhwc_bf16(const ConvShape& s, const std::vector<float>& x_nchw,
                                        int c_pad) {
  return channels_last<__nv_bfloat16>(x_nchw, size_t(s.n), size_t(s.c), size_t(s.h) * s.w,
                                      padded(s, c_pad));
}

std::vector<__nv_bfloat16> to_krsc_bf16(const ConvShape& s, const std::vector<float>& w_kcrs,
                                        int c_pad) {
  return channels_last<__nv_bfloat16>(w_kcrs, size_t(s.k), size_t(s.c), size_t(s.r) * s.s,
                                      padded(s, c_pad));
}

std::vector<float> to_nhwc_f32(const ConvShape& s, const std::vector<float>& x_nchw) {
  return channels_last<float>(x_nchw, size_t(s.n), size_t(s.c), size_t(s.h) * s.w, size_t(s.c));
}

std::vector<float> to_krsc_f32(const ConvShape& s, const std::vector<float>& w_kcrs) {
  return channels_last<float>(w_kcrs, size_t(s.k), size_t(s.c), size_t(s.r) * s.s, size_t(s.c));
}

namespace {
template <class T>
std::vector<float> channels_first(const ConvShape& s, const std::vector<T>& y_npqk) {
  const size_t pq = size_t(s.p()) * s.q(), k = size_t(s.k);
  if (y_npqk.size() != size_t(s.n) * pq * k) {
    throw std::invalid_argument("npqk_to_nkpq: the vector does not match the shape");
  }
  std::vector<float> out(y_npqk.size());
  for (size_t n = 0; n < size_t(s.n); ++n)
    for (size_t i = 0; i < pq; ++i)
      for (size_t f = 0; f < k; ++f)
        out[(n * k + f) * pq + i] = float(y_npqk[(n * pq + i) * k + f]);
  return out;
}
}  // namespace

std::vector<float> npqk_to_nkpq(const ConvShape& s, const std::vector<__nv_bfloat16>& y_npqk) {
  return channels_first(s, y_npqk);
}

std::vector<float> npqk_to_nkpq(const ConvShape& s, const std::vector<float>& y_npqk) {
  return channels_first(s, y_npqk);
}

Tolerance conv2d_tolerance(const ConvShape& s, ConvPrecision p) {
  const double scale = std::sqrt(double(s.c) * s.r * s.s);
  switch (p) {
    case ConvPrecision::kFp32:
      return {2e-6 * scale, 1e-5};
    case ConvPrecision::kTf32:
      return {2e-3 * scale, 2e-3};
    case ConvPrecision::kBf16:
    default:
      // Against the reference on the bf16-rounded inputs: fp32 accumulation as TF32's bound
      // allows, and 4e-3 relative for cuDNN's bf16 output (rounding is at most 2^-9 = 1.95e-3).
      return {2e-3 * scale, 4e-3};
  }
}

Tolerance conv2d_tolerance(const ConvShape& s, const Conv2dVariant& v) {
  const Tolerance t = conv2d_tolerance(s, v.precision);
  return {t.abs_tol * v.tol_scale, t.rel_tol * v.tol_scale};
}

Tolerance filter_tolerance(int taps) {
  return {2e-6 * std::sqrt(double(taps)), 1e-5};
}

}  // namespace day08
