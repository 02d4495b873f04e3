#pragma once
// What GPU are we on? Used by every binary's header line, the JSON results and the GPU tests.
#include <cstddef>
#include <string>

namespace gpu100 {

struct DeviceSummary {
  int index = 0;
  std::string name;
  int cc_major = 0, cc_minor = 0;  // compute capability, e.g. 9.0 for the H100
  int sm_count = 0;
  size_t l2_bytes = 0;
  size_t global_mem_bytes = 0;
  size_t smem_per_block_optin = 0;  // the most shared memory one block may ask for
  int runtime_version = 0;          // CUDA runtime, e.g. 13000
  int driver_version = 0;           // the newest CUDA version the driver supports
  std::string code;                 // the build's code it runs: "sm_90a code", "compute_80 PTX..."

  std::string compute_capability() const;
  std::string cuda_versions() const;  // "runtime 13.0, driver 13.0"
  std::string one_line() const;       // name, SMs, L2, memory, compute capability
};

// True when a CUDA device can be used. Never throws: on a machine with no GPU (or no driver) it
// returns false, and clears the error the runtime left behind.
bool gpu_available();

// The summary of the current device. Throws gpu100::NoGpuError when there is none, or when this
// build holds no code it can run (the message then says how to rebuild): every binary calls it
// before its first kernel.
DeviceSummary query_device();

// Bytes of device memory free right now (cudaMemGetInfo).
size_t free_device_memory();

// The most shared memory one block may ask for on the current device (99 KB on sm_86 and sm_89,
// 163 KB on sm_80, 227 KB on sm_90); 0 when no GPU can be used. Never throws: a variant's refusal
// calls it to say, before any launch, that a tiling does not fit this GPU.
size_t smem_per_block_optin();

}  // namespace gpu100
