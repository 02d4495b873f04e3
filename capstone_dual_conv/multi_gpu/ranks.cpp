// Ranks (ranks.hpp): one process, one rank per GPU, NCCL communicators, and waits that cannot hang.
#include "ranks.hpp"

#include <fmt/format.h>

#include <chrono>
#include <thread>

#include "common/cuda_check.hpp"
#include "common/errors.hpp"
#include "plan.hpp"

namespace capstone::multi {

void check_nccl(ncclResult_t result, const char* expr, const char* file, int line) {
  if (result != ncclSuccess && result != ncclInProgress) {
    throw NcclError(fmt::format("{}:{}: {} failed: {} ({})", file, line, expr,
                                ncclGetErrorString(result), ncclGetLastError(nullptr)));
  }
}

int visible_gpus() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // no driver or no device: not an error here
    return 0;
  }
  return count;
}

Ranks::Ranks(int gpus, double timeout_s) : timeout_s_(timeout_s) {
  try {
    check_gpu_count(gpus, visible_gpus());
  } catch (const std::invalid_argument& e) {
    throw gpu100::UsageError(e.what());
  }
  int previous = 0;
  CUDA_CHECK(cudaGetDevice(&previous));
  streams_.resize(gpus, nullptr);
  join_.resize(gpus, nullptr);
  peer_.assign(size_t(gpus) * gpus, 0);
  for (int r = 0; r < gpus; ++r) {
    CUDA_CHECK(cudaSetDevice(r));
    CUDA_CHECK(cudaStreamCreateWithFlags(&streams_[r], cudaStreamNonBlocking));
    CUDA_CHECK(cudaEventCreateWithFlags(&join_[r], cudaEventDisableTiming));
    for (int p = 0; p < gpus; ++p) {
      int can = 0;
      if (p == r) continue;
      CUDA_CHECK(cudaDeviceCanAccessPeer(&can, r, p));
      if (!can) continue;
      const cudaError_t err = cudaDeviceEnablePeerAccess(p, 0);
      if (err == cudaErrorPeerAccessAlreadyEnabled) {
        cudaGetLastError();
      } else {
        CUDA_CHECK(err);
      }
      peer_[size_t(r) * gpus + p] = 1;
    }
  }
  CUDA_CHECK(cudaSetDevice(0));
  CUDA_CHECK(cudaEventCreateWithFlags(&fork_, cudaEventDisableTiming));
  CUDA_CHECK(cudaEventCreate(&start_));
  CUDA_CHECK(cudaEventCreate(&stop_));
  comms_.resize(gpus, nullptr);
  std::vector<int> devices(gpus);
  for (int r = 0; r < gpus; ++r) devices[r] = r;
  NCCL_CHECK(ncclCommInitAll(comms_.data(), gpus, devices.data()));
  CUDA_CHECK(cudaSetDevice(previous));
}

Ranks::~Ranks() {
  int previous = 0;
  cudaGetDevice(&previous);
  for (int r = 0; r < size(); ++r) {
    cudaSetDevice(r);
    if (comms_.size() > size_t(r) && comms_[r] != nullptr) {
      // A communicator left mid-collective cannot be destroyed cleanly: abort() already ended it.
      if (aborted_) {
        ncclCommAbort(comms_[r]);
      } else {
        cudaStreamSynchronize(streams_[r]);
        ncclCommDestroy(comms_[r]);
      }
    }
    if (join_[r] != nullptr) cudaEventDestroy(join_[r]);
    if (streams_[r] != nullptr) cudaStreamDestroy(streams_[r]);
  }
  cudaSetDevice(0);
  if (fork_ != nullptr) cudaEventDestroy(fork_);
  if (start_ != nullptr) cudaEventDestroy(start_);
  if (stop_ != nullptr) cudaEventDestroy(stop_);
  cudaSetDevice(previous);
}

std::string Ranks::links() const {
  std::string out;
  for (int a = 0; a < size(); ++a) {
    for (int b = a + 1; b < size(); ++b) {
      if (peer_access(a, b) && peer_access(b, a))
        out += fmt::format("{}{}<->{}", out.empty() ? "" : " ", a, b);
    }
  }
  return out.empty() ? "no peer access" : "peer access: " + out;
}

void Ranks::on(int r, const std::function<void()>& f) const {
  int previous = 0;
  CUDA_CHECK(cudaGetDevice(&previous));
  CUDA_CHECK(cudaSetDevice(r));
  try {
    f();
  } catch (...) {
    cudaSetDevice(previous);
    throw;
  }
  CUDA_CHECK(cudaSetDevice(previous));
}

void Ranks::abort() {
  if (aborted_) return;
  aborted_ = true;
  for (int r = 0; r < size(); ++r) {
    cudaSetDevice(r);
    if (comms_[r] != nullptr) ncclCommAbort(comms_[r]);
    comms_[r] = nullptr;
  }
  cudaSetDevice(0);
}

void Ranks::group(const std::function<void()>& f) {
  if (aborted_) throw NcclError("the communicators were aborted after an earlier failure");
  NCCL_CHECK(ncclGroupStart());
  try {
    f();
  } catch (...) {
    ncclGroupEnd();
    abort();
    throw;
  }
  const ncclResult_t end = ncclGroupEnd();
  if (end != ncclSuccess && end != ncclInProgress) {
    abort();
    NCCL_CHECK(end);
  }
}

void Ranks::fork() {
  on(0, [&] { CUDA_CHECK(cudaEventRecord(fork_, streams_[0])); });
  for (int r = 1; r < size(); ++r) {
    on(r, [&] { CUDA_CHECK(cudaStreamWaitEvent(streams_[r], fork_, 0)); });
  }
}

void Ranks::join() {
  for (int r = 1; r < size(); ++r) {
    on(r, [&] { CUDA_CHECK(cudaEventRecord(join_[r], streams_[r])); });
    on(0, [&] { CUDA_CHECK(cudaStreamWaitEvent(streams_[0], join_[r], 0)); });
  }
}

void Ranks::wait(const std::string& what) {
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  std::vector<char> done(size(), 0);
  for (;;) {
    int pending = -1;
    for (int r = 0; r < size(); ++r) {
      if (done[r]) continue;
      cudaError_t err = cudaSuccess;
      on(r, [&] { err = cudaStreamQuery(streams_[r]); });
      if (err == cudaSuccess) {
        done[r] = 1;
        continue;
      }
      if (err != cudaErrorNotReady) {
        cudaGetLastError();
        abort();
        throw gpu100::CudaError(
            err, fmt::format("{}: rank {} (GPU {}) failed: {} ({}); every "
                             "rank was stopped (ncclCommAbort)",
                             what, r, r, cudaGetErrorName(err), cudaGetErrorString(err)));
      }
      if (!aborted_) {
        ncclResult_t async = ncclSuccess;
        NCCL_CHECK(ncclCommGetAsyncError(comms_[r], &async));
        if (async != ncclSuccess && async != ncclInProgress) {
          abort();
          throw NcclError(
              fmt::format("{}: rank {} (GPU {}): NCCL error {}; every rank was "
                          "stopped (ncclCommAbort)",
                          what, r, r, ncclGetErrorString(async)));
        }
      }
      if (pending < 0) pending = r;
    }
    if (pending < 0) return;
    const double waited = std::chrono::duration<double>(clock::now() - start).count();
    if (waited > timeout_s_) {
      abort();
      throw NcclError(
          fmt::format("{}: rank {} (GPU {}) not done after {:.0f} s; every rank was "
                      "stopped (ncclCommAbort)",
                      what, pending, pending, timeout_s_));
    }
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

gpu100::Timing Ranks::time(const std::function<void()>& launch, int warmup, int iters) {
  std::vector<float> samples;
  for (int i = 0; i < warmup + iters; ++i) {
    on(0, [&] { CUDA_CHECK(cudaEventRecord(start_, streams_[0])); });
    fork();
    launch();
    join();
    on(0, [&] { CUDA_CHECK(cudaEventRecord(stop_, streams_[0])); });
    wait("a timed run");
    if (i < warmup) continue;
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
    samples.push_back(ms);
  }
  return gpu100::summarize(samples);
}

}  // namespace capstone::multi
