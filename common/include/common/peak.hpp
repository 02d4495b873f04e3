#pragma once
// Compute ceilings measured in the same run, for the compute-bound days (GEMM, convolution).

namespace gpu100 {

// fp32 FMA throughput of this GPU now, in TFLOP/s (2 FLOPs per FMA), from a kernel of independent
// FMA chains on every SM. It reflects the clock the GPU actually sustains, not the datasheet's.
double measure_fp32_peak_tflops();

}  // namespace gpu100
