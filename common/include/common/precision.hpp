#pragma once
// The precisions of the variants, and the pass rule of a comparison: one definition for every
// day, its drivers and its tests.
namespace gpu100 {

// fp32: fp32 inputs, FMA math. tf32: fp32 inputs rounded to TF32 (10 mantissa bits) on the tensor
// cores, fp32 accumulation. bf16: bf16 inputs (and often outputs), fp32 accumulation. fp8: e4m3
// inputs with one fp32 scale per tensor, fp32 accumulation, bf16 output (day04's FP8 GEMM).
enum class Precision { kFp32, kTf32, kBf16, kFp8 };

inline const char* to_string(Precision p) {
  switch (p) {
    case Precision::kFp32:
      return "fp32";
    case Precision::kTf32:
      return "tf32";
    case Precision::kBf16:
      return "bf16";
    case Precision::kFp8:
      return "fp8";
  }
  return "?";
}

// An element passes when |got - ref| <= abs_tol + rel_tol * |ref| (gpu100::compare). Each day's
// README says how its tolerances follow from the precision and the problem size.
struct Tolerance {
  double abs_tol = 0, rel_tol = 0;
};

}  // namespace gpu100
