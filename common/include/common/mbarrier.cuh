#pragma once
// Shared-memory mbarriers and the 1D bulk copy (sm_90: Hopper's copy engine, no tensor map), the
// inline PTX wrappers that day04's TMA GEMMs, day05's wgmma attention and day06's single-pass scan
// share. An mbarrier completes a phase when `count` arrivals and every expected transaction byte
// of the copies that signal it have been seen. Reference: the PTX ISA sections "mbarrier" and
// "cp.async.bulk".
//
// These instructions exist from sm_90 on. In code compiled for an older target, kAvailable is
// false and each wrapper traps: a kernel tests kAvailable (a constant, so the unused path is
// compiled away) and takes its own path there, and the host picks that path from
// gpu100::build_has(ArchNeed::kSm90).
#include <cuda_runtime.h>

#include <cstdint>

#include "common/arch.cuh"

#if GPU100_SM90_CODE
#define GPU100_MBAR_PTX(...) asm volatile(__VA_ARGS__)
#else
#define GPU100_MBAR_PTX(...) __trap()
#endif

namespace gpu100::mbar {

inline constexpr bool kAvailable = GPU100_SM90_CODE;

// A generic pointer to shared memory as the 32-bit shared-window address PTX wants.
__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void init(uint64_t* bar, int count) {
  GPU100_MBAR_PTX("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(count));
}
// Makes the initialisations above visible to the async proxy (the copy engine) and the other
// threads (after the block's next barrier).
__device__ __forceinline__ void fence_init() {
  GPU100_MBAR_PTX("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
// One arrival that also announces `bytes` of copy traffic the phase must wait for.
__device__ __forceinline__ void expect_tx(uint64_t* bar, uint32_t bytes) {
  GPU100_MBAR_PTX("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_addr(bar)),
                  "r"(bytes));
}
// One plain arrival (release: this thread's earlier shared-memory reads are ordered before it).
__device__ __forceinline__ void arrive(uint64_t* bar) {
  GPU100_MBAR_PTX("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_addr(bar)) : "memory");
}
// One arrival on `bar` that the hardware makes once every cp.async (the non-bulk, sm_80 copies)
// this thread has issued so far has landed: .noinc, so it is one of the `count` arrivals the
// barrier was initialised with. The producer does not wait for its own copies; the consumers'
// wait on the barrier sees them complete (day08's v9 gathers its A tiles this way).
__device__ __forceinline__ void cp_async_arrive_noinc(uint64_t* bar) {
  GPU100_MBAR_PTX("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(smem_addr(bar))
                  : "memory");
}
// Spins until the phase with the given parity has completed.
__device__ __forceinline__ void wait(uint64_t* bar, uint32_t parity) {
  GPU100_MBAR_PTX(
      "{\n"
      ".reg .pred done;\n"
      "WAIT_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT_%=;\n"
      "}\n" ::"r"(smem_addr(bar)),
      "r"(parity)
      : "memory");
}
// `bytes` contiguous bytes from global to shared memory by the copy engine, completing on `bar`
// (which must expect them). Both addresses 16-byte aligned, bytes a multiple of 16.
__device__ __forceinline__ void bulk_load(void* dst, const void* src, uint32_t bytes,
                                          uint64_t* bar) {
  GPU100_MBAR_PTX(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::
          "r"(smem_addr(dst)),
      "l"(src), "r"(bytes), "r"(smem_addr(bar))
      : "memory");
}

}  // namespace gpu100::mbar

#undef GPU100_MBAR_PTX
