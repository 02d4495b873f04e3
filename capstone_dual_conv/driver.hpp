#pragma once
// capstone_dual_conv's driver: its options and the rows of one batch size (driver_rows.cpp);
// main.cpp reads the options and writes the summary.
#include <string>
#include <vector>

#include "common/device_buffer.hpp"
#include "common/harness.hpp"
#include "dual_conv.hpp"

namespace capstone {

struct Options {
  DualConvShape shape;
  int h = 416, w = 544, n = 8, samples = 20000;
  Activation act = Activation::kRelu;
  bool sweep = false;
  std::string layer_name;
  gpu100::CommonOptions common;
};

// One batch size's inputs on both sides and its two outputs (fp32-sized; bf16 rows use half).
struct Batch {
  BatchShape b;
  std::vector<float> x[2];
  gpu100::DeviceBuffer<float> d_x[2], d_y[2];
  InputTensor input(const DualConvShape& sh, int s) const {
    return {d_x[s].data(), b.n, sh.c(s), b.h, b.w};
  }
};

// One row to run: the implementation, its output type, the row's name and its library row.
struct RowSpec {
  const ImplInfo* impl;
  OutType out;
  std::string label, library;
};

// "" and the batch allocated, or why it does not fit.
std::string allocate(Batch& batch, const Options& opt, const BatchShape& b);

// The rows of each configuration (plain and with the epilogue), in registry order, with their
// library rows.
void make_specs(const Options& opt, std::vector<RowSpec>& plain, std::vector<RowSpec>& epi);

// The rows of one configuration (plain, or with the epilogue), the bytes floor first.
std::vector<gpu100::ResultRow> run_config(const Options& opt, Batch& batch, bool epilogue,
                                          const std::vector<RowSpec>& specs, gpu100::DayRun& run);

}  // namespace capstone
