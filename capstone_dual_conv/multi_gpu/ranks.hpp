#pragma once
// Several GPUs of one machine driven from one process: a rank per GPU (GPU r is rank r), each with
// its stream and its NCCL communicator (ncclCommInitAll). When one thread drives several GPUs,
// NCCL needs every rank's part of a collective issued inside one ncclGroupStart / ncclGroupEnd:
// group() does that.
//
//   Ranks ranks(2);                                   // GPUs 0 and 1
//   ranks.on(1, [&] { ... });                         // with GPU 1 current
//   ranks.group([&] { for (r ...) ncclSend / ncclRecv / ncclAllReduce on ranks.comm(r),
//                                  ranks.stream(r); });
//   ranks.wait("the gather");                         // every stream done, or every rank stopped
//
// Never a hang: wait() polls every stream and each communicator's asynchronous error, and when a
// rank fails, or is not done within the timeout, it aborts every communicator (ncclCommAbort ends
// the collectives the other ranks wait in) and throws one line that names the rank. A failure on
// the host between collectives (an exception in a rank's work) goes through abort() too.
#include <cuda_runtime.h>
#include <nccl.h>

#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/timer.hpp"

namespace capstone::multi {

class NcclError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
void check_nccl(ncclResult_t result, const char* expr, const char* file, int line);

// How many CUDA devices this process sees: 0 without a driver or a device (never throws).
int visible_gpus();

class Ranks {
 public:
  // Ranks on GPUs 0 .. gpus - 1, one non-blocking stream each, peer access enabled between every
  // pair that has it, and the communicators. Throws gpu100::UsageError for more GPUs than the
  // machine has. timeout_s bounds every wait().
  explicit Ranks(int gpus, double timeout_s = 120);
  ~Ranks();
  Ranks(const Ranks&) = delete;
  Ranks& operator=(const Ranks&) = delete;

  int size() const { return int(streams_.size()); }
  cudaStream_t stream(int r) const { return streams_[r]; }
  ncclComm_t comm(int r) const { return comms_[r]; }
  // Whether rank a's kernels can read and write rank b's memory directly (NVLink or PCIe P2P).
  bool peer_access(int a, int b) const { return a == b || peer_[a * size() + b]; }
  std::string links() const;  // "peer access: 0<->1" or "no peer access"

  // Runs f() with GPU r current, then makes the previous device current again.
  void on(int r, const std::function<void()>& f) const;
  // f() issues every rank's part of one or more NCCL calls, between ncclGroupStart and
  // ncclGroupEnd. An exception in f() aborts every communicator before it is rethrown.
  void group(const std::function<void()>& f);
  // Every rank's stream waits for rank 0's stream (fork), and rank 0's for every rank's (join):
  // the work between them, on all GPUs, is then ordered inside rank 0's stream, where events
  // can time it.
  void fork();
  void join();
  // Blocks until every rank's stream is done. A CUDA error, an NCCL asynchronous error or a rank
  // still running after the timeout aborts every communicator and throws one line naming `what`
  // and the rank.
  void wait(const std::string& what);
  // Aborts every communicator (idempotent): the ranks' pending collectives end and no later NCCL
  // call is made on them.
  void abort();
  bool aborted() const { return aborted_; }

  // Times launch() (work issued on every rank between fork() and join(), which this does around
  // it) with events on rank 0's stream: `warmup` untimed runs, then `iters` timed ones, each
  // followed by wait(). No L2 flush: the multi-GPU runs move far more than the L2 holds.
  gpu100::Timing time(const std::function<void()>& launch, int warmup, int iters);

 private:
  std::vector<cudaStream_t> streams_;
  std::vector<ncclComm_t> comms_;
  std::vector<char> peer_;
  std::vector<cudaEvent_t> join_;  // one per rank, on its device
  cudaEvent_t fork_ = nullptr;     // on GPU 0
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
  double timeout_s_;
  bool aborted_ = false;
};

}  // namespace capstone::multi

#define NCCL_CHECK(expr) ::capstone::multi::check_nccl((expr), #expr, __FILE__, __LINE__)
