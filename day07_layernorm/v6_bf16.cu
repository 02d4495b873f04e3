// v6_bf16: v5 with bf16 storage and fp32 math.
//
// What changed from v5: x, gamma, beta and y are bf16, so the row and the output move half the
// bytes; a 16-byte vector now carries 8 elements, kept packed in registers (32 elements in 16
// registers) and widened to fp32 only in arithmetic; y is rounded to bf16 once, at the store.
// mean and rstd stay fp32. The cost: y carries bf16's 2^-8 relative rounding (the tolerance).
// Same kernel as v5 (norm_registers.cuh), instantiated for __nv_bfloat16.
#include "norm_registers.cuh"

namespace day07 {

void layernorm_v6_bf16(const bf16* x, const bf16* gamma, const bf16* beta, bf16* y, float* mean,
                       float* rstd, int64_t rows, int64_t dim, float eps, cudaStream_t stream) {
  detail::launch_norm_rows<bf16, false>(x, gamma, beta, y, mean, rstd, rows, dim, eps, stream);
}

}  // namespace day07
