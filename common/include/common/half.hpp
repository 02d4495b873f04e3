#pragma once
// Host-side helpers for the 16-bit floating-point types (__half, __nv_bfloat16) and TF32:
// conversion of whole vectors, for uploading inputs and checking outputs. compare() already
// accepts them.
//
// bf16 keeps fp32's 8 exponent bits and 7 mantissa bits (relative spacing 2^-8 = 0.0039);
// fp16 has 5 exponent bits and 10 mantissa bits (2^-11), with a maximum of 65504.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <cstring>
#include <vector>

namespace gpu100 {

// Rounds each value to the nearest representable T (round-to-nearest-even).
template <typename T>
std::vector<T> convert_from_float(const std::vector<float>& in) {
  std::vector<T> out(in.size());
  for (size_t i = 0; i < in.size(); ++i) out[i] = static_cast<T>(in[i]);
  return out;
}

template <typename T>
std::vector<float> convert_to_float(const std::vector<T>& in) {
  std::vector<float> out(in.size());
  for (size_t i = 0; i < in.size(); ++i) out[i] = static_cast<float>(in[i]);
  return out;
}

// The values a T actually holds after rounding, as floats: the exact input a reference should
// use when the GPU reads T.
template <typename T>
std::vector<float> round_trip(const std::vector<float>& in) {
  return convert_to_float(convert_from_float<T>(in));
}

// Each value rounded to TF32 (fp32's 8 exponent bits and 10 of its 23 mantissa bits; the low 13
// bits zero), to nearest with ties away from zero, as the GPU's cvt.rna.tf32.f32 does: the value
// a TF32 tensor core reads exactly (it truncates any other). Infinities and NaNs pass unchanged.
inline std::vector<float> round_to_tf32(const std::vector<float>& in) {
  std::vector<float> out(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    uint32_t bits = 0;
    std::memcpy(&bits, &in[i], sizeof bits);
    if ((bits & 0x7F800000u) != 0x7F800000u) bits = (bits + 0x1000u) & ~0x1FFFu;
    std::memcpy(&out[i], &bits, sizeof bits);
  }
  return out;
}

}  // namespace gpu100
