#pragma once
// Which GPU code this build holds, and which of it the running GPU executes.
//
// A kernel that needs newer instructions (cp.async and bf16/tf32 mma.sync from sm_80; bulk copies
// and mbarrier transaction counts from sm_90; wgmma, TMA and setmaxnreg from sm_90a) has its body
// compiled only for targets that have them (`#if __CUDA_ARCH__ >= 800`, or
// `__CUDA_ARCH_FEAT_SM90_ALL` for sm_90a), so every file builds for sm_75 and up. Whether a
// variant can run is then decided from the code the driver actually loaded for this GPU, which a
// one-thread probe kernel reports: an H100 running a build for `80-virtual` executes PTX compiled
// for compute_80 and must take the sm_80 paths, although its compute capability is 9.0.
#include <algorithm>
#include <string>
#include <vector>

namespace gpu100 {

// The least GPU code a variant needs.
enum class ArchNeed { kAny, kSm80, kSm90, kSm90a };

// "needs an sm_80 build", "needs an sm_90 build", "needs an sm_90a build" ("" for kAny).
const char* needs_text(ArchNeed need);

// The CMAKE_CUDA_ARCHITECTURES this build was configured with, e.g. "90a" or "75-virtual".
const char* build_architectures();

// The code the running GPU executes from this build.
struct RunningCode {
  int arch = 0;               // __CUDA_ARCH__ of the loaded image: 900 for sm_90a SASS on an H100,
                              // 800 for compute_80 PTX compiled for it at load time
  bool sm90a = false;         // the architecture-specific sm_90a image (wgmma, setmaxnreg)
  bool jit = false;           // the image was PTX compiled for this GPU at load time
  std::string label() const;  // "sm_90a", "compute_80 PTX, compiled at load time"
};

// Probes the current GPU once (the result is cached). Throws NoGpuError when there is no GPU, or
// when the build holds no code this GPU can run; the message is then rebuild_message()'s line.
const RunningCode& running_code();

// "" when the current GPU can run this build, else the reason in one line: no GPU, or
// rebuild_message()'s line. Never throws; used by the GPU tests to skip.
std::string gpu_unusable_reason();

// Whether this build can run code that needs `need`: from running_code() when a usable GPU is
// present, otherwise from the architectures the build was configured with.
bool build_has(ArchNeed need);

// " (needs an sm_90a build)" when !build_has(need), else "": the suffix of a --list line.
std::string needs_suffix(ArchNeed need);

// Throws ArchUnavailable("<who> needs an sm_90a build ...") when !build_has(need).
void require_build(ArchNeed need, const std::string& who);

// Whether the build's architecture list (no GPU needed) holds any code that has `need`.
bool build_lists(ArchNeed need);
// Throws ArchUnavailable("<who> needs an sm_90a build (this build: CMAKE_CUDA_ARCHITECTURES=75)").
[[noreturn]] void throw_unbuilt(const std::string& who, ArchNeed need);

// For a binary's argument checks, before any GPU call: throws ArchUnavailable when a variant named
// on the command line needs code that no architecture of this build has (an sm_75 build and v10).
template <class Registry>
void refuse_named_not_built(const Registry& registry, const std::vector<std::string>& named) {
  for (const auto& v : registry) {
    if (build_lists(v.needs)) continue;
    if (std::find(named.begin(), named.end(), v.name) != named.end()) {
      throw_unbuilt(v.name, v.needs);
    }
  }
}
// For a binary, after query_device(): throws ArchUnavailable (exit 2, with the reason) when a
// variant named on the command line (`named`) needs code this build lacks for the GPU; otherwise
// returns the line to print about the registry's other variants it lacks ("" when none), e.g.
// "not run in this build: v11_wgmma_bf16 (needs an sm_90a build), ...". The binary then skips
// every variant with !build_has(v.needs).
template <class Registry>
std::string refuse_or_list_lacked(const Registry& registry, const std::vector<std::string>& named) {
  std::string skipped;
  for (const auto& v : registry) {
    if (build_has(v.needs)) continue;
    if (std::find(named.begin(), named.end(), v.name) != named.end()) {
      require_build(v.needs, v.name);  // throws
    }
    skipped +=
        (skipped.empty() ? "" : ", ") + std::string(v.name) + " (" + needs_text(v.needs) + ")";
  }
  return skipped.empty() ? skipped
                         : "not run in this build (CMAKE_CUDA_ARCHITECTURES=" +
                               std::string(build_architectures()) + "): " + skipped;
}

// The architecture to build for a GPU of compute capability major.minor: "90a" for 9.0 (every
// Hopper kernel), "75" for 7.5, "89" for 8.9, ...
std::string recommended_architecture(int cc_major, int cc_minor);

// The one line a binary prints when the build holds no code its GPU can run, e.g.
// "this build holds no code for NVIDIA H100 (sm_90): it was built for
// CMAKE_CUDA_ARCHITECTURES=89-real;
//  rebuild with ./scripts/setup.sh -DCMAKE_CUDA_ARCHITECTURES=90a" (one line).
std::string rebuild_message(const std::string& gpu_name, int cc_major, int cc_minor,
                            const std::string& built_for);

// The largest architecture in a CMAKE_CUDA_ARCHITECTURES list ("75;86-real;90a" -> 900) and
// whether it names sm_90a; for the checks made with no GPU. Exposed for the unit tests.
struct BuiltArchs {
  int max_arch = 0;
  bool sm90a = false;
};
BuiltArchs parse_architectures(const std::string& list);

}  // namespace gpu100
