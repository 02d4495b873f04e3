// capstone_mc_resnet18's multi-GPU rows (--gpus; resnet_driver.hpp): MC-ResNet18 over several GPUs
// through NCCL (multi_gpu/net_parallel.hpp), checked against the CPU and against GPU 0 alone,
// timed with events across the GPUs. A build without NCCL has no such rows.
#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "common/errors.hpp"
#include "resnet_driver.hpp"

#if GPU100_HAVE_NCCL
#include "net_parallel.hpp"
#include "ranks.hpp"
#endif

namespace capstone::resnet {

#if GPU100_HAVE_NCCL

bool multi_gpu_built() {
  return true;
}

struct MultiGpuRows::Impl {
  multi::Ranks ranks;
  std::map<int, std::vector<float>> one_gpu_logits;  // per batch: GPU 0's logits of the whole batch
  explicit Impl(int gpus) : ranks(gpus) {}
};

MultiGpuRows::MultiGpuRows(int gpus) : impl_(std::make_unique<Impl>(gpus)) {}
MultiGpuRows::~MultiGpuRows() = default;

std::string MultiGpuRows::describe() const {
  const int g = impl_->ranks.size();
  return fmt::format("{} GPU{}, {}", g, g == 1 ? "" : "s", impl_->ranks.links());
}

gpu100::ResultRow MultiGpuRows::run(const NetRow& row, const NetOptions& opt, const NetWeights& wts,
                                    Images& images, const std::vector<const float*>& inputs, int n,
                                    bool strict, const gpu100::ResultRow* one_gpu) {
  multi::Ranks& ranks = impl_->ranks;
  const int h = images.h(), w = images.w();
  gpu100::ResultRow r =
      gpu100::make_row(row.name, gpu100::to_string(row.precision), shape_label(n, h, w));
  const bool one_trunk = trunk_channels(opt.model).size() == 1;
  std::unique_ptr<Net> alone;
  std::unique_ptr<multi::BatchParallel> batch;
  std::unique_ptr<multi::TrunkParallel> trunks;
  int used = 1;  // the GPUs the row runs on
  const bool ready = prepare_row(r, row, strict, [&] {
    if (row.multi == Multi::kOneGpu) {
      alone = std::make_unique<Net>(wts, row.precision,
                                    one_trunk ? Trunks::kSequential : Trunks::kDual);
      alone->plan(n, h, w);
    } else if (row.multi == Multi::kBatch) {
      batch = std::make_unique<multi::BatchParallel>(ranks, wts, row.precision);
      batch->prepare(inputs, n, h, w);
      used = ranks.size();
    } else {
      trunks = std::make_unique<multi::TrunkParallel>(ranks, wts, row.precision);
      trunks->prepare(inputs, n, h, w);
      used = 2;
    }
  });
  if (!ready) return r;
  gpu100::DeviceBuffer<float> logits(size_t(n) * wts.classes);  // on GPU 0
  const auto launch = [&] {
    if (alone) {
      alone->forward_graph(inputs, n, h, w, logits.data(), ranks.stream(0));
    } else if (batch) {
      batch->forward(logits.data());
    } else {
      trunks->forward(logits.data());
    }
  };
  logits.poison();
  launch();
  ranks.wait(fmt::format("{} N={}", row.name, n));
  const std::vector<float> got = logits.download();
  gpu100::CompareResult cmp = check_logits(got, n, wts.classes, images, row.precision);
  const double tol = logits_tolerance(row.precision);
  if (alone) {
    impl_->one_gpu_logits[n] = got;
  } else {
    // Against GPU 0's forward of the whole batch: the same network, so within the precision's
    // bound of it at every image, not only the two the CPU checks.
    auto it = impl_->one_gpu_logits.find(n);
    if (it == impl_->one_gpu_logits.end()) {
      Net net(wts, row.precision, one_trunk ? Trunks::kSequential : Trunks::kDual);
      gpu100::DeviceBuffer<float> ref(size_t(n) * wts.classes);
      net.forward(inputs, n, h, w, ref.data(), ranks.stream(0));
      ranks.wait("GPU 0's forward of the whole batch");
      it = impl_->one_gpu_logits.emplace(n, ref.download()).first;
    }
    const gpu100::CompareResult vs = gpu100::compare(it->second, got, 1e30, 0);
    r.note = fmt::format("all {} images vs GPU 0 alone: relative L2 {:.2e}", n, vs.rel_l2);
    cmp.err_over_tol = std::max(cmp.err_over_tol, vs.rel_l2 / tol);
    cmp.ok = cmp.ok && vs.rel_l2 <= tol;
  }
  gpu100::set_check(r, cmp);
  // Timing: one forward to estimate, then repeats for about kRowBudgetMs.
  const double once = ranks.time(launch, 0, 1).median_ms;
  const gpu100::TimingOptions t = row_timing(opt.common.timing, once);
  const gpu100::Timing tm = ranks.time(launch, t.warmup, t.iters);
  r.ms = tm.median_ms, r.ms_min = tm.min_ms;
  gpu100::derive(r, 0, net_flops(opt.model, h, w, wts.classes) * n, 0, images.cpu_ms() * n, 0);
  r.metrics = {{"images/s", n / (tm.median_ms * 1e-3)}, {"GPUs", double(used)}};
  if (trunks) {
    // Each trunk's part alone on its GPU, timed the same way: the slower one is the floor of
    // this row's time (the rest is the features' transfer and the FC).
    for (int part = 0; part < 2; ++part) {
      const double alone_ms =
          ranks.time([&] { trunks->forward_part(part); }, t.warmup, t.iters).median_ms;
      r.metrics.push_back({part == 0 ? "RGB trunk alone ms" : "depth trunk alone ms", alone_ms});
    }
  }
  if (one_gpu != nullptr && one_gpu->ms && !alone) {
    // "x library": GPU 0 alone's time over this row's; for the batch, the scaling efficiency is
    // that speed-up over the GPUs used.
    r.library = one_gpu->variant;
    r.ratio_vs_library = *one_gpu->ms / tm.median_ms;
    if (batch) r.metrics.push_back({"scaling %", 100 * *r.ratio_vs_library / used});
  }
  return r;
}

#else  // no NCCL in this build

bool multi_gpu_built() {
  return false;
}

struct MultiGpuRows::Impl {};

MultiGpuRows::MultiGpuRows(int) {
  throw gpu100::UsageError(
      "--gpus: this build has no multi-GPU rows (NCCL was not found when it was configured; "
      "pip install nvidia-nccl-cu13 or set NCCL_ROOT, then configure again)");
}
MultiGpuRows::~MultiGpuRows() = default;
std::string MultiGpuRows::describe() const {
  return "";
}
gpu100::ResultRow MultiGpuRows::run(const NetRow&, const NetOptions&, const NetWeights&, Images&,
                                    const std::vector<const float*>&, int, bool,
                                    const gpu100::ResultRow*) {
  throw gpu100::UsageError("--gpus: this build has no multi-GPU rows (no NCCL)");
}

#endif

}  // namespace capstone::resnet
