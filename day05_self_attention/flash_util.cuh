#pragma once
// day05 device helpers shared by the tensor-core flash kernels (v4, v5): the base-2 exponential of
// the log2-domain softmax and the fp32 -> bf16 pair packing that turns score accumulators into
// A-operand fragments.
#include <cuda_bf16.h>

#include <cstdint>
#include <cstring>

namespace day05::flash {

constexpr float kLog2e = 1.4426950408889634f, kLn2 = 0.6931471805599453f;

// 2^x with one MUFU instruction (ex2.approx, flush-to-zero); exp2(-inf) = +0.
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// Two floats rounded to bf16 (nearest even) in one 32-bit register: lo in the low 16 bits.
__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  uint32_t r;
  memcpy(&r, &v, sizeof r);
  return r;
}

}  // namespace day05::flash
