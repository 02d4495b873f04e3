#pragma once
// cuDNN's graph API (the cuDNN frontend) on one NHWC convolution, every engine it offers timed: the
// other half of "cuDNN at its best". CudnnConvPlan (cudnn_conv_plan.hpp) re-times what the legacy
// cudnnFindConvolutionForwardAlgorithm lists, at most eight algorithms, each mapped by cuDNN to one
// engine; the graph API lists the engine configurations its heuristics rank (modes A and
// FALLBACK), which is where PyTorch's cudnn.benchmark picks from. The capstone's per-layer cuDNN
// figure keeps the faster of the two.
#include <string>

#include "conv.hpp"

namespace day08 {

struct CudnnFrontendTiming {
  double ms = 0;       // the fastest engine configuration's median time (0 when none ran)
  std::string engine;  // its name, as the frontend gives it
  int timed = 0;       // how many configurations ran and were timed
  std::string error;   // why none ran ("" when one did)
};

// x NHWC [n][h][w][c], w KRSC, y NPQK, in bf16 (bf16 = true) or fp32 multiplied as TF32; compute
// in fp32. Every configuration of heuristics modes A and FALLBACK that builds is run once, then
// timed with gpu100::GpuTimer (2 warm-ups, median of 7, the L2 flushed and the GPU held before
// each) on random operands of its own; the fastest is returned. Without the frontend in this build
// (GPU100_HAVE_CUDNN_FRONTEND) the error says so. Slow (it builds every plan): outside timed loops.
CudnnFrontendTiming cudnn_frontend_conv_best(const ConvShape& s, bool bf16);

}  // namespace day08
