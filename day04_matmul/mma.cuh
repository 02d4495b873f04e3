#pragma once
// day04 tensor-core PTX wrappers: the inline __device__ functions that gemm_v10_mma.cu (and the
// fused attention kernels of day05) drive mma.sync, ldmatrix and cp.async with. Header-only, so no
// separable compilation is needed. The fragment layouts are those of the PTX ISA guide, section
// 9.7.14 (warp-level matrix instructions); each wrapper's comment says what it moves.
//
// Architectures: cp.async, and mma.sync on bf16 or tf32, exist from sm_80 on (ldmatrix from
// sm_75). In code compiled for an older target:
//  - the cp.async wrappers become an ordinary load and store (zero-filled when !valid), finished
//    when the call returns, and commit / wait do nothing. A kernel written for cp.async (wait,
//    then __syncthreads, before it reads a stage) stays correct; it only loses the overlap.
//  - the mma.sync and cvt.tf32 wrappers trap. The kernels that call them are refused on the host
//    first (gpu100::require_build(ArchNeed::kSm80, ...)), so they are never launched there.
#include <cuda_runtime.h>

#include <cstdint>

#include "common/arch.cuh"

namespace day04::mma {

// The 32-bit shared-state-space address of a generic pointer into shared memory.
__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16-byte asynchronous copy global -> shared (cache-global: bypasses L1); valid == false writes
// 16 zero bytes and reads nothing (the predicated-off case; src must still be a valid address).
__device__ __forceinline__ void cp_async_16(void* dst, const void* src, bool valid) {
#if GPU100_SM80_CODE
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src),
               "r"(valid ? 16 : 0));
#else
  *static_cast<uint4*>(dst) = valid ? *static_cast<const uint4*>(src) : make_uint4(0, 0, 0, 0);
#endif
}
// The same 16-byte copy through L1 (.ca): for gathers whose neighbouring windows overlap (day08's
// v9 reads each input pixel once per filter tap), so later copies may hit L1 instead of L2.
__device__ __forceinline__ void cp_async_16_ca(void* dst, const void* src, bool valid) {
#if GPU100_SM80_CODE
  asm volatile("cp.async.ca.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src),
               "r"(valid ? 16 : 0)
               : "memory");
#else
  *static_cast<uint4*>(dst) = valid ? *static_cast<const uint4*>(src) : make_uint4(0, 0, 0, 0);
#endif
}
// The 8-byte form of cp_async_16_ca (8-byte aligned src and dst): day08's v9 with C = 4, where a
// 16-byte chunk of its tile is two neighbouring pixels' 4 channels, 8-byte aligned in x.
__device__ __forceinline__ void cp_async_8_ca(void* dst, const void* src, bool valid) {
#if GPU100_SM80_CODE
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(smem_addr(dst)), "l"(src),
               "r"(valid ? 8 : 0)
               : "memory");
#else
  *static_cast<uint2*>(dst) = valid ? *static_cast<const uint2*>(src) : make_uint2(0, 0);
#endif
}
// 4-byte asynchronous copy global -> shared through L1 (.ca: neighbouring windows of a gather
// overlap, so L1 hits are likely); zero-filled when !valid.
__device__ __forceinline__ void cp_async_4(float* dst, const float* src, bool valid) {
#if GPU100_SM80_CODE
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem_addr(dst)), "l"(src),
               "r"(valid ? 4 : 0));
#else
  *dst = valid ? *src : 0.f;
#endif
}
// Closes the group of this thread's cp.async issued since the last commit.
__device__ __forceinline__ void cp_async_commit() {
#if GPU100_SM80_CODE
  asm volatile("cp.async.commit_group;\n" ::);
#endif
}
// Waits until at most N of this thread's committed groups are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
#if GPU100_SM80_CODE
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
#endif
}

// Four 8 x 8 matrices of 16-bit elements: lanes 8q..8q+7 give the row addresses of matrix q;
// register q of lane l receives row l / 4, elements 2 (l % 4) and 2 (l % 4) + 1 of matrix q.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}
// The same, each matrix transposed: register q of lane l receives column l / 4, rows 2 (l % 4)
// and 2 (l % 4) + 1 of matrix q (as addressed by the row pointers).
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}
// The reverse of ldmatrix_x4: four 8 x 8 b16 matrices written to shared memory from the fragment
// layout (lane l: row l / 4, columns 2 (l % 4) and + 1 of each), lanes 8 i .. 8 i + 7 giving the
// row addresses of matrix i (sm_90).
__device__ __forceinline__ void stmatrix_x4(void* p, const uint32_t (&r)[4]) {
  asm volatile(
      "stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(smem_addr(p)),
      "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3])
      : "memory");
}

// d += a * b for one 16 x 8 x 16 tile: bf16 inputs, fp32 accumulators. With g = lane / 4 and
// t = lane % 4: a[0] = A[g][2t, 2t+1], a[1] = A[g+8][2t, 2t+1], a[2] = A[g][2t+8, 2t+9],
// a[3] = A[g+8][2t+8, 2t+9]; b[0] = B[2t, 2t+1][g], b[1] = B[2t+8, 2t+9][g];
// d[0, 1] = D[g][2t, 2t+1], d[2, 3] = D[g+8][2t, 2t+1].
__device__ __forceinline__ void mma_bf16_16816(float (&d)[4], const uint32_t (&a)[4],
                                               const uint32_t (&b)[2]) {
#if GPU100_SM80_CODE
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
  __trap();
#endif
}

// The fp32 bits of x rounded to TF32 (10 mantissa bits, round to nearest, ties away).
__device__ __forceinline__ uint32_t to_tf32(uint32_t bits) {
  uint32_t out = bits;
#if GPU100_SM80_CODE
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(out) : "f"(__uint_as_float(bits)));
#else
  __trap();
#endif
  return out;
}
// An fp32 value as a TF32 layer reads it: rounded to nearest (to_tf32), the low 13 bits cleared
// (cvt leaves them unspecified). Outputs that feed the next TF32 layer are stored this way.
__device__ __forceinline__ float round_tf32(float v) {
  return __uint_as_float(to_tf32(__float_as_uint(v)) & ~0x1FFFu);
}

// d += a * b for one 16 x 8 x 8 tile in TF32 (fp32 registers holding TF32 values), fp32
// accumulators. a[0] = A[g][t], a[1] = A[g+8][t], a[2] = A[g][t+4], a[3] = A[g+8][t+4];
// b[0] = B[t][g], b[1] = B[t+4][g]; d as for the BF16 tile.
__device__ __forceinline__ void mma_tf32_1688(float (&d)[4], const uint32_t (&a)[4],
                                              const uint32_t (&b)[2]) {
#if GPU100_SM80_CODE
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
  __trap();
#endif
}

}  // namespace day04::mma
