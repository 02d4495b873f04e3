#pragma once
// day05_self_attention's driver: its options and device data (main.cpp fills them), and the rows
// of one shape (driver_rows.cpp).
#include <string>
#include <vector>

#include "attention.hpp"
#include "common/device_buffer.hpp"
#include "common/harness.hpp"

namespace day05 {

struct Options {
  gpu100::CommonOptions common;
  std::vector<const AttentionVariant*> variants;
  std::vector<bool> masks;  // causal flags to run
  int check_rows = 64;
};

// Q, K, V, O on the device in fp32 and in bf16 (converted once, outside any timing), the
// workspace, and the host inputs the CPU reference reads.
struct DeviceData {
  std::vector<float> q, k, v;
  gpu100::DeviceBuffer<float> d_q, d_k, d_v, d_o;
  gpu100::DeviceBuffer<__nv_bfloat16> d_q16, d_k16, d_v16, d_o16;
  gpu100::DeviceBuffer<char> ws;
};

// "1.50 GiB" or "12.00 MiB".
std::string mib(double bytes);

// Runs every selected variant at one shape (one mask): check, time, one row each, in registry
// order; the bf16 rows' TFLOP/s go to `verdict`.
void run_shape(const AttentionShape& s, const Options& opt, double fp32_peak, DeviceData& dev,
               gpu100::DayRun& run, std::string& verdict);

}  // namespace day05
