#pragma once
// capstone_mc_resnet18's driver pieces (mc_resnet18.cpp is its main): the rows, the inputs, the
// CPU reference of the checked images, and one row's check-then-time run.
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/arch.hpp"
#include "common/device_buffer.hpp"
#include "common/harness.hpp"
#include "resnet.hpp"
#include "resnet_net.hpp"

namespace capstone::resnet {

// How a row spreads over GPUs (--gpus, multi_gpu/net_parallel.hpp): not at all; GPU 0 alone,
// timed as the multi-GPU rows are (their baseline); the batch split over the GPUs; the two trunks
// on two GPUs.
enum class Multi { kNone, kOneGpu, kBatch, kTrunks };

// One row of the binary: the network on the curriculum's kernels in a precision and trunks mode,
// or the library network (cuDNN convolutions, cuBLAS FC) in a precision.
struct NetRow {
  const char* name;
  const char* description;
  gpu100::Precision precision;
  Trunks trunks;
  bool library;
  // Replayed as one CUDA graph (Net::forward_graph), the trunks dual (sequential for one trunk).
  bool graph = false;
  // The GPU code the row needs: net_needs(precision) for the own rows; cuDNN brings its own.
  gpu100::ArchNeed needs = gpu100::ArchNeed::kAny;
  Multi multi = Multi::kNone;
};
const std::vector<NetRow>& net_rows();

struct NetOptions {
  Model model = Model::kMcResNet18;
  std::vector<int> batches;
  int h = 0, w = 0;
  std::vector<std::string> rows;  // the rows to run, in net_rows() order
  // The rows asked for by --variant, and the own rows of a precision --precision names: a build
  // without their code refuses them (exit 2); the other rows it lacks are shown as not run.
  std::vector<std::string> named;
  std::string weights, input, output;
  int gpus = 1;  // --gpus: the GPUs of the multi-GPU rows
  gpu100::CommonOptions common;
};

// The images of a run: random ones from the seed (image i of trunk t is the same at every batch
// size) or the --input file's.
class Images {
 public:
  Images(const NetOptions& opt, const NetWeights& wts);
  int h() const { return h_; }
  int w() const { return w_; }
  int file_batch() const { return file_n_; }  // the --input file's N (0 without one)
  // Uploads images 0 .. n-1 of every trunk: one device buffer per trunk, [n, c, h, w].
  std::vector<gpu100::DeviceBuffer<float>> upload(int n) const;
  // The CPU reference's logits of image i (computed once, then cached) and the time it took.
  const std::vector<float>& reference(int i);
  double cpu_ms() const { return cpu_ms_; }

 private:
  std::vector<float> image(int trunk, int i) const;
  Model model_;
  const NetWeights& wts_;
  uint64_t seed_;
  int h_, w_, file_n_ = 0;
  std::vector<std::vector<float>> file_;  // the --input file's tensors, one per trunk
  std::map<int, std::vector<float>> refs_;
  double cpu_ms_ = 0;
};

// Runs one row at batch n on the uploaded images `inputs` (one device pointer per trunk): plans (a
// batch over memory becomes a refused row, unless `strict`), checks images 0 and n - 1 against
// the CPU reference, times the forward. Writes the logits of the check run to `logits_out` when
// it is not null. A row whose code this build lacks for the GPU comes back unrun, with the build
// it needs as its note.
gpu100::ResultRow run_net_row(const NetRow& row, const NetOptions& opt, const NetWeights& wts,
                              Images& images, const std::vector<const float*>& inputs, int n,
                              gpu100::DayRun& run, bool strict, std::vector<float>* logits_out);

// Images 0 and n - 1 of `got` (logits [n, classes]) against the CPU reference: relative L2 error
// over the precision's bound; every logit must be finite.
gpu100::CompareResult check_logits(const std::vector<float>& got, int n, int classes,
                                   Images& images, gpu100::Precision p);
std::string shape_label(int n, int h, int w);  // "N=32 416x544"

// The start of every row's run: whether it can run at all. A build without the row's GPU code, or
// a network the layer library does not have (NotAvailable), leaves `r` unrun with the reason as
// its note; a shape `build` refuses (gpu100::UsageError: a batch over memory, ...) does the same,
// or is rethrown when `strict` (one batch size: the refusal is the run's answer, exit 2). `build`
// makes and plans the row's network(s).
bool prepare_row(gpu100::ResultRow& r, const NetRow& row, bool strict,
                 const std::function<void()>& build);
// A row's timed repeats: about kRowBudgetMs of them from one run's time `once_ms`, at least 3 (or
// the --iters asked for, if fewer), at most --iters; at most 2 warm-ups.
constexpr double kRowBudgetMs = 3000;
gpu100::TimingOptions row_timing(gpu100::TimingOptions t, double once_ms);

// The multi-GPU rows (multi_rows.cpp): the ranks and their NCCL communicators, made once for the
// run. A build without NCCL has none: its constructor throws gpu100::UsageError.
class MultiGpuRows {
 public:
  explicit MultiGpuRows(int gpus);
  ~MultiGpuRows();
  // Runs one row of Multi other than kNone at batch n: checks the logits against the CPU
  // reference (images 0 and n - 1) and, for the batch and trunk rows, against GPU 0's own
  // forward of the whole batch; times it with events across the GPUs. `one_gpu` is the kOneGpu
  // row of this batch (the ratio's and the scaling's base), or null.
  gpu100::ResultRow run(const NetRow& row, const NetOptions& opt, const NetWeights& wts,
                        Images& images, const std::vector<const float*>& inputs, int n, bool strict,
                        const gpu100::ResultRow* one_gpu);
  std::string describe() const;  // "2 GPUs, peer access: 0<->1"

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};
// Whether this build has the multi-GPU rows (NCCL was found when it was configured).
bool multi_gpu_built();

// --layers: for each selected precision, sequential forwards of our network with an event
// between steps (the median of 5 for each step), summed per layer kind: printed (count, ms, share
// of the forward, TFLOP/s, GB/s of its compulsory bytes and % of the copy ceiling) and returned
// as unverified rows "layers_<precision>: <kind>", the last "layers_<precision>: total". A
// precision this build lacks is left out with one line.
std::vector<gpu100::ResultRow> layer_rows(const NetOptions& opt, const NetWeights& wts,
                                          const std::vector<const float*>& inputs, int n, int h,
                                          int w, double ceiling_gbps);

}  // namespace capstone::resnet
