#pragma once
// Device-side architecture tests for code that needs newer instructions than sm_75 has. Each is 1
// in the host pass and in device passes whose target has the feature, 0 elsewhere:
//   GPU100_SM80_CODE   cp.async, bf16/tf32 mma.sync, cvt.rna.tf32 (sm_80 and newer)
//   GPU100_SM90_CODE   cp.async.bulk, mbarrier transaction counts, clusters (sm_90 and newer)
//   GPU100_SM90A_CODE  wgmma, TMA tensor copies, setmaxnreg (the sm_90a target only)
// A kernel compiles its body under the test it needs, and its launcher calls
// gpu100::require_build (common/arch.hpp), which decides from the code the GPU actually runs.
//
// A pass that compiles a kernel body out leaves constants only that body used unreferenced
// (nvcc warning #177). A file with such bodies silences that one warning in those passes only:
//   #if !GPU100_SM80_CODE
//   #pragma nv_diag_suppress 177
//   #endif
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#define GPU100_SM80_CODE 0
#else
#define GPU100_SM80_CODE 1
#endif

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#define GPU100_SM90_CODE 0
#else
#define GPU100_SM90_CODE 1
#endif

#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define GPU100_SM90A_CODE 0
#else
#define GPU100_SM90A_CODE 1
#endif
