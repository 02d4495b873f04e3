#pragma once
// day08_convolution's driver: its options (main.cpp reads them) and the Conv2d layer's rows
// (driver_layer.cpp); the 1D and 2D filter rows are in main.cpp.
#include <cstdint>
#include <string>
#include <vector>

#include "common/harness.hpp"
#include "conv_day.hpp"

namespace day08 {

struct Options {
  bool filters = true, conv = true;
  int64_t n1d = 0;
  int mask1d = 7, img_h = 0, img_w = 0;
  std::vector<int> filter_sizes;
  ConvShape shape;
  bool bias = false;
  gpu100::CommonOptions common;
  bool selected(const char* name) const { return gpu100::selected(common.variants, name); }
};

// The Conv2d layer's rows (every selected variant, cuDNN's included) added to the run's table;
// returns the best own variant per precision for the verdict line.
std::string run_conv2d(const Options& opt, gpu100::DayRun& run);

}  // namespace day08
