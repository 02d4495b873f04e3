// What this build holds for the running GPU: a one-thread probe kernel, compiled for the same
// CMAKE_CUDA_ARCHITECTURES as every day, reports the __CUDA_ARCH__ of the image the driver loaded.
// Every kernel of the program gets an image of the same target, so the probe's answer is theirs.
#include <cuda_runtime.h>
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include "common/arch.hpp"
#include "common/cuda_check.hpp"
#include "common/device_info.hpp"
#include "common/errors.hpp"

#ifndef GPU100_CUDA_ARCHITECTURES
#define GPU100_CUDA_ARCHITECTURES "unknown"
#endif

namespace gpu100 {

namespace {

// 10 x __CUDA_ARCH__, plus 1 in the architecture-specific sm_90a image.
__global__ void arch_probe_kernel(int* out) {
#if defined(__CUDA_ARCH__)
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  *out = __CUDA_ARCH__ * 10 + 1;
#else
  *out = __CUDA_ARCH__ * 10;
#endif
#endif
}

// The errors that mean "no image in this build for this GPU" (as opposed to a broken driver).
bool is_missing_image(cudaError_t err) {
  return err == cudaErrorNoKernelImageForDevice || err == cudaErrorInvalidDeviceFunction ||
         err == cudaErrorInvalidPtx || err == cudaErrorInvalidKernelImage ||
         err == cudaErrorSharedObjectSymbolNotFound;
}

struct Probe {
  RunningCode code;
  std::string unusable;  // why the GPU cannot be used ("" when it can)
};

Probe probe_now() {
  Probe p;
  if (!gpu_available()) {
    p.unusable = "no CUDA-capable GPU found (this binary needs an NVIDIA GPU and driver)";
    return p;
  }
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  cudaFuncAttributes attr{};
  const cudaError_t err = cudaFuncGetAttributes(&attr, arch_probe_kernel);
  if (err != cudaSuccess) {
    cudaGetLastError();  // not sticky: clear it
    if (is_missing_image(err)) {
      p.unusable = rebuild_message(prop.name, prop.major, prop.minor, GPU100_CUDA_ARCHITECTURES);
      return p;
    }
    check_cuda(err, "cudaFuncGetAttributes(arch probe)", __FILE__, __LINE__);
  }
  int* d_out = nullptr;
  CUDA_CHECK(cudaMalloc(&d_out, sizeof(int)));
  arch_probe_kernel<<<1, 1>>>(d_out);
  int value = 0;
  const cudaError_t launch = cudaGetLastError();
  const cudaError_t copy = launch == cudaSuccess
                               ? cudaMemcpy(&value, d_out, sizeof(int), cudaMemcpyDeviceToHost)
                               : launch;
  cudaFree(d_out);
  if (copy != cudaSuccess) {
    if (is_missing_image(copy)) {
      p.unusable = rebuild_message(prop.name, prop.major, prop.minor, GPU100_CUDA_ARCHITECTURES);
      return p;
    }
    check_cuda(copy, "arch probe launch", __FILE__, __LINE__);
  }
  p.code.arch = value / 10;
  p.code.sm90a = value % 10 == 1;
  p.code.jit = attr.binaryVersion != attr.ptxVersion;
  return p;
}

const Probe& probe() {
  static const Probe p = probe_now();
  return p;
}

}  // namespace

const char* needs_text(ArchNeed need) {
  switch (need) {
    case ArchNeed::kSm80:
      return "needs an sm_80 build";
    case ArchNeed::kSm90:
      return "needs an sm_90 build";
    case ArchNeed::kSm90a:
      return "needs an sm_90a build";
    case ArchNeed::kAny:
      break;
  }
  return "";
}

const char* build_architectures() {
  return GPU100_CUDA_ARCHITECTURES;
}

std::string RunningCode::label() const {
  if (sm90a) return "sm_90a code";
  if (jit) return fmt::format("compute_{} PTX compiled at load time", arch / 10);
  return fmt::format("sm_{} code", arch / 10);
}

const RunningCode& running_code() {
  const Probe& p = probe();
  if (!p.unusable.empty()) throw NoGpuError(p.unusable);
  return p.code;
}

std::string gpu_unusable_reason() {
  try {
    return probe().unusable;
  } catch (const std::exception& e) {
    return e.what();
  }
}

BuiltArchs parse_architectures(const std::string& list) {
  BuiltArchs b;
  size_t i = 0;
  while (i < list.size()) {
    if (!std::isdigit(static_cast<unsigned char>(list[i]))) {
      ++i;
      continue;
    }
    int value = 0;
    while (i < list.size() && std::isdigit(static_cast<unsigned char>(list[i]))) {
      value = value * 10 + (list[i] - '0');
      ++i;
    }
    const bool specific = i < list.size() && list[i] == 'a';
    if (value >= 10 && value < 1000) {
      b.max_arch = std::max(b.max_arch, value * 10);
      if (value == 90 && specific) b.sm90a = true;
    }
  }
  return b;
}

namespace {
bool arch_has(ArchNeed need, int arch, bool sm90a) {
  switch (need) {
    case ArchNeed::kSm80:
      return arch >= 800;
    case ArchNeed::kSm90:
      return arch >= 900;
    case ArchNeed::kSm90a:
      return sm90a;
    case ArchNeed::kAny:
      break;
  }
  return true;
}
}  // namespace

bool build_lists(ArchNeed need) {
  const BuiltArchs b = parse_architectures(GPU100_CUDA_ARCHITECTURES);
  return arch_has(need, b.max_arch, b.sm90a);
}

bool build_has(ArchNeed need) {
  if (need == ArchNeed::kAny) return true;
  if (!probe().unusable.empty()) return build_lists(need);  // no usable GPU: what was built
  return arch_has(need, probe().code.arch, probe().code.sm90a);
}

void throw_unbuilt(const std::string& who, ArchNeed need) {
  throw ArchUnavailable(fmt::format("{} {} (this build: CMAKE_CUDA_ARCHITECTURES={})", who,
                                    needs_text(need), GPU100_CUDA_ARCHITECTURES));
}

std::string needs_suffix(ArchNeed need) {
  return build_has(need) ? std::string() : fmt::format(" ({})", needs_text(need));
}

void require_build(ArchNeed need, const std::string& who) {
  if (build_has(need)) return;
  std::string running = "no GPU";
  if (probe().unusable.empty()) running = probe().code.label();
  throw ArchUnavailable(fmt::format("{} {} (this build runs {}; CMAKE_CUDA_ARCHITECTURES={})", who,
                                    needs_text(need), running, GPU100_CUDA_ARCHITECTURES));
}

std::string recommended_architecture(int cc_major, int cc_minor) {
  if (cc_major == 9 && cc_minor == 0) return "90a";
  return fmt::format("{}{}", cc_major, cc_minor);
}

std::string rebuild_message(const std::string& gpu_name, int cc_major, int cc_minor,
                            const std::string& built_for) {
  return fmt::format(
      "this build holds no code for the {} (sm_{}{}): it was built for "
      "CMAKE_CUDA_ARCHITECTURES={}; rebuild with ./scripts/setup.sh "
      "-DCMAKE_CUDA_ARCHITECTURES={}",
      gpu_name, cc_major, cc_minor, built_for, recommended_architecture(cc_major, cc_minor));
}

}  // namespace gpu100
