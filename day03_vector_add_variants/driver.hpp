#pragma once
// day03_vector_add_variants' driver: its options (main.cpp reads them), the rows of the fusion
// parts, silu and diffusion (driver_fusion.cpp), and the transfer part's (driver_transfers.cpp);
// the add and types parts are in main.cpp.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "common/harness.hpp"
#include "vector_add_variants.cuh"

namespace day03 {

struct Options {
  std::vector<const Variant*> variants;
  std::vector<std::string> parts;
  std::vector<int> streams;
  int chunks = 16;
  int64_t n = 0, transfer_n = 0, matrix = 0;
  DiffusionStep step;  // --abar, --w
  gpu100::CommonOptions common;

  bool has(const std::string& part) const {
    return std::find(parts.begin(), parts.end(), part) != parts.end();
  }
};

// Wall time of a CPU reference: the median of a few runs, fewer at large n, where one run takes a
// good part of a second.
template <typename F>
double time_cpu_ms(int64_t n, F&& run) {
  const int reps = n >= (int64_t(1) << 26) ? 1 : (n >= (int64_t(1) << 22) ? 3 : 11);
  return gpu100::time_host_ms(run, reps);
}

// The fusion part: the rows of silu_variants() at n elements.
void run_silu(int64_t n, const Options& opt, gpu100::DayRun& run);

// The diffusion part: the rows of diffusion_variants<T>() at n elements, for fp32, fp16 and bf16,
// with opt.step's abar and w.
void run_diffusion(int64_t n, const Options& opt, gpu100::DayRun& run);

// The transfer part: pageable and pinned copies, the host-to-host trip C = A + B serial and over
// k streams, and a strided column copy (one cudaMemcpy per element against one cudaMemcpy2D).
void run_transfers(const Options& opt, gpu100::ResultTable& table);

}  // namespace day03
