// capstone_dual_conv's driver, the rows of one batch size: each implementation runs the layer,
// is checked against the double CPU reference at sampled outputs (gathered on the device) and
// timed with repeats that adapt to its time.
#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/cuda_check.hpp"
#include "common/random.hpp"
#include "common/sample.hpp"
#include "common/tags.hpp"
#include "driver.hpp"
#include "kernels.cuh"

namespace capstone {

namespace {

using gpu100::ResultRow;

// The sampled check of one configuration: the points (on the device too, for the gather) and
// each stream's reference there.
struct Checks {
  std::vector<int64_t> idx;
  gpu100::DeviceBuffer<int64_t> d_idx;
  std::vector<double> ref[2];
};

Checks make_checks(const Options& opt, const Batch& batch, const StreamParams (&prm)[2],
                   Activation act) {
  const DualConvShape& sh = opt.shape;
  const BatchShape& b = batch.b;
  Checks c;
  c.idx = gpu100::sample_points({b.n, sh.k, sh.p(b.h), sh.q(b.w)}, opt.samples, opt.common.seed,
                                int64_t(1) << 20);
  c.d_idx = gpu100::DeviceBuffer<int64_t>(c.idx.size());
  c.d_idx.upload(c.idx);
  for (int s = 0; s < 2; ++s) {
    c.ref[s] = conv_points_cpu(sh, s, b, batch.x[s].data(), prm[s], act, c.idx);
  }
  return c;
}

gpu100::CompareResult check_outputs(const Checks& c, const Batch& batch, OutType t,
                                    const DualConvShape& sh) {
  std::vector<gpu100::CompareResult> parts;
  gpu100::DeviceBuffer<float> got(c.idx.size());
  for (int s = 0; s < 2; ++s) {
    detail::launch_gather(batch.d_y[s].data(), t == OutType::kBf16, c.d_idx.data(), got.data(),
                          static_cast<int>(c.idx.size()), nullptr);
    CUDA_CHECK(cudaDeviceSynchronize());
    parts.push_back(
        gpu100::compare(c.ref[s], got.download(), abs_tolerance(sh, t), rel_tolerance(t)));
  }
  return gpu100::worst_of(parts);
}

// The repeats of a row: --iters, fewer for slow rows (about a second each).
gpu100::TimingOptions timing_for(const Options& opt, double probe_ms) {
  gpu100::TimingOptions t = opt.common.timing;
  t.iters = std::clamp(static_cast<int>(1000.0 / std::max(probe_ms, 1e-3)), 3, t.iters);
  if (probe_ms > 5) t.warmup = std::min(t.warmup, 1);
  return t;
}

ResultRow run_row(const Options& opt, DualConv2d& layer, Batch& batch, const Checks& c,
                  const RowSpec& spec, const std::string& shape, gpu100::DayRun& run) {
  const DualConvShape& sh = opt.shape;
  ResultRow row =
      gpu100::make_row(spec.label, spec.out == OutType::kBf16 ? "fp32->bf16" : "fp32", shape);
  try {
    layer.use_kernel(std::string(spec.impl->name));
    layer.set_output_type(spec.out);
    auto forward = [&] {
      layer.forward(batch.input(sh, 0), batch.input(sh, 1), batch.d_y[0].data(),
                    batch.d_y[1].data(), nullptr);
    };
    // The first call (cuDNN: cudnnFind and the workspace) is the one checked.
    batch.d_y[0].poison();
    batch.d_y[1].poison();
    forward();
    CUDA_CHECK(cudaDeviceSynchronize());
    gpu100::set_check(row, check_outputs(c, batch, spec.out, sh));
    const gpu100::Timing probe = run.time(forward, {0, 1, false, nullptr});
    const gpu100::Timing t = run.time(forward, timing_for(opt, probe.median_ms));
    row.ms = t.median_ms;
    row.ms_min = t.min_ms;
    if (!spec.library.empty()) row.library = spec.library;
  } catch (const NotAvailable& e) {
    row.verified = false;
    row.note = e.what();
  } catch (const std::invalid_argument& e) {
    row.verified = false;
    row.note = std::string("skipped: ") + e.what();
  } catch (const gpu100::CudaError&) {
    throw;
  } catch (const std::runtime_error& e) {  // a cuDNN status error, e.g. a tensor past its limits
    if (!spec.impl->is_library) throw;
    row.verified = false;
    row.note = std::string("skipped: cuDNN refused: ") + e.what();
  }
  return row;
}

}  // namespace

std::string allocate(Batch& batch, const Options& opt, const BatchShape& b) {
  const DualConvShape& sh = opt.shape;
  const size_t in = size_t(b.n) * (sh.c1 + sh.c2) * b.h * b.w;
  const size_t out = size_t(b.n) * sh.k * sh.p(b.h) * sh.q(b.w);
  const size_t need = 4 * (in + 2 * out) + (size_t(1) << 30);  // + 1 GiB for cuDNN
  if (const size_t free_bytes = gpu100::free_device_memory(); need > free_bytes) {
    return fmt::format(
        "N={} needs {:.1f} GiB of device memory (inputs, two fp32 outputs, 1 GiB for cuDNN's "
        "workspace) but {:.1f} GiB is free",
        b.n, need / double(1 << 30), free_bytes / double(1 << 30));
  }
  batch.b = b;
  for (int s = 0; s < 2; ++s) {
    batch.x[s] =
        gpu100::random_vector<float>(size_t(b.n) * sh.c(s) * b.h * b.w, opt.common.seed + s);
    batch.d_x[s] = gpu100::DeviceBuffer<float>(batch.x[s].size());
    batch.d_x[s].upload(batch.x[s]);
    batch.d_y[s] = gpu100::DeviceBuffer<float>(out);
  }
  return "";
}

void make_specs(const Options& opt, std::vector<RowSpec>& plain, std::vector<RowSpec>& epi) {
  std::string baseline;
  for (const auto& i : implementations()) {
    if (gpu100::has_tag(i.tags, "baseline")) baseline = i.name;
  }
  const std::string suffix = std::string("+bn_") + to_string(opt.act);
  for (const auto& i : implementations()) {
    if (!gpu100::selected(opt.common.variants, i.name)) continue;
    const std::string name = i.name;
    const std::string lib = name == baseline ? "" : baseline;
    if (!gpu100::has_tag(i.tags, "fused_only") &&
        (!opt.sweep || gpu100::has_tag(i.tags, "sweep"))) {
      plain.push_back({&i, OutType::kFp32, name, lib});
    }
    if (!gpu100::has_tag(i.tags, "epilogue")) continue;
    if (opt.sweep && !gpu100::has_tag(i.tags, "epilogue_sweep")) continue;
    const std::string label = gpu100::has_tag(i.tags, "fused_only") ? name : name + suffix;
    const std::string epi_lib = name == baseline ? "" : baseline + suffix;
    epi.push_back({&i, OutType::kFp32, label, epi_lib});
    if (i.fused_epilogue && !i.is_library && !opt.sweep) {
      epi.push_back({&i, OutType::kBf16, label + "_bf16", epi_lib});
    }
  }
}

std::vector<ResultRow> run_config(const Options& opt, Batch& batch, bool epilogue,
                                  const std::vector<RowSpec>& specs, gpu100::DayRun& run) {
  const DualConvShape& sh = opt.shape;
  const BatchShape& b = batch.b;
  const Activation act = epilogue ? opt.act : Activation::kNone;
  const StreamParams prm[2] = {random_params(sh, 0, epilogue, epilogue, opt.common.seed + 100),
                               random_params(sh, 1, epilogue, epilogue, opt.common.seed + 200)};
  DualConv2d layer(sh);
  layer.set_params(0, prm[0]);
  layer.set_params(1, prm[1]);
  layer.set_activation(act);
  const Checks checks = make_checks(opt, batch, prm, act);
  const double outputs = 2.0 * b.n * sh.k * sh.p(b.h) * sh.q(b.w);
  const double in_bytes =
      4.0 * b.n * (sh.c1 + sh.c2) * b.h * b.w + 4.0 * sh.k * (sh.c1 + sh.c2) * sh.r * sh.s;
  const double flops = outputs * (sh.c1 + sh.c2) * sh.r * sh.s;
  std::string shape = fmt::format("N={}", b.n);
  if (!opt.sweep) {
    shape += fmt::format(" {}x{} {}+{}->{} {}x{}", b.h, b.w, sh.c1, sh.c2, sh.k, sh.r, sh.s);
    if (sh.stride != 1) shape += fmt::format(" stride {}", sh.stride);
    if (epilogue) shape += std::string(" +bias+BN+") + to_string(opt.act);
  }
  std::vector<ResultRow> rows;
  if (!opt.sweep || !epilogue) {  // the floor: the compulsory bytes at the copy ceiling
    ResultRow floor =
        gpu100::make_row(epilogue ? "bytes_floor+epilogue" : "bytes_floor", "fp32", shape);
    floor.ms = (in_bytes + 4 * outputs) / (run.ceiling_gbps() * 1e6);
    floor.verified = false;
    floor.note = "inputs read once + outputs written once at the copy ceiling (not a kernel)";
    gpu100::derive(floor, in_bytes + 4 * outputs, flops, run.ceiling_gbps(), 0, 0);
    rows.push_back(floor);
  }
  for (const RowSpec& spec : specs) {
    rows.push_back(run_row(opt, layer, batch, checks, spec, shape, run));
    const double bytes = in_bytes + (spec.out == OutType::kBf16 ? 2 : 4) * outputs;
    gpu100::derive(rows.back(), bytes, flops, run.ceiling_gbps(), 0, 0);
  }
  gpu100::link_libraries(rows);
  return rows;
}

}  // namespace capstone
