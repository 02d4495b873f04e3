#pragma once
// The exceptions a binary turns into exit statuses, and the main() wrapper that does it.
//
//   exit 0  every variant passed verification
//   exit 1  a variant failed verification, or a CUDA / library call failed
//   exit 2  bad command-line arguments (reported before any GPU call) or a problem too large
//   exit 3  no usable GPU: none on this machine, or the build holds no code it can run
#include <stdexcept>

namespace gpu100 {

// Bad arguments or an impossible problem size: a one-line message, exit status 2.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A variant whose code this build lacks for the running GPU ("needs an sm_90a build"): exit 2.
class ArchUnavailable : public UsageError {
 public:
  using UsageError::UsageError;
};

// No GPU, no driver, or a build that holds no code the GPU can run: a one-line message, exit
// status 3.
class NoGpuError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum ExitStatus : int { kExitOk = 0, kExitFailed = 1, kExitUsage = 2, kExitNoGpu = 3 };

// Runs body(argc, argv) and turns every exception into a one-line message on stderr and the exit
// status above, so no binary ever ends in an uncaught exception or a core dump.
int guarded_main(int argc, char** argv, int (*body)(int, char**));

// Throws UsageError when `bytes` of device memory are more than the GPU has free (with a margin).
void require_device_memory(size_t bytes, const char* what);

}  // namespace gpu100
