#pragma once
// day05_self_attention's driver: its options and device data (main.cpp fills them), the forward's
// rows of one shape (driver_rows.cpp) and the backward's and the training step's
// (driver_backward.cpp, --backward and --training-step).
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "attention.hpp"
#include "attention_backward.hpp"
#include "common/device_buffer.hpp"
#include "common/harness.hpp"
#include "common/tensor_file.hpp"

namespace day05 {

struct Options {
  gpu100::CommonOptions common;
  std::vector<const AttentionVariant*> variants;
  std::vector<bool> masks;  // causal flags to run
  int check_rows = 64;
  // --backward: the backward registry's rows instead, each checked on --check-heads whole heads.
  bool backward = false;
  std::vector<const AttentionBackwardVariant*> bwd_variants;
  int check_heads = 2;
  // --training-step: the build's own forward + backward and the library's, each timed as one
  // unit, O checked as the forward rows check it and the gradients as the backward rows do.
  bool training_step = false;
  // --save-grads FILE (--backward): the inputs and every row's dQ, dK, dV written to a tensor file,
  // for a check outside the binary (scripts/torch_attention_grads.py, against PyTorch autograd).
  std::string save_grads;
};

// Q, K, V, O on the device in fp32 and in bf16 (converted once, outside any timing), the
// workspace, and the host inputs the CPU reference reads.
struct DeviceData {
  std::vector<float> q, k, v;
  gpu100::DeviceBuffer<float> d_q, d_k, d_v, d_o;
  gpu100::DeviceBuffer<__nv_bfloat16> d_q16, d_k16, d_v16, d_o16;
  gpu100::DeviceBuffer<char> ws;
};

// The backward's tensors in one precision: the inputs Q, K, V, dO; O and the row log-sum-exp of the
// GPU's forward; the outputs dQ, dK, dV. Allocated only for a precision a selected row takes.
template <class T>
struct BackwardSide {
  gpu100::DeviceBuffer<T> q, k, v, dout, o, dq, dk, dv;
  gpu100::DeviceBuffer<float> lse;
  BackwardTensors<T> tensors() {
    BackwardTensors<T> t;
    t.q = q.data(), t.k = k.data(), t.v = v.data(), t.o = o.data(), t.dout = dout.data();
    t.lse = lse.data(), t.dq = dq.data(), t.dk = dk.data(), t.dv = dv.data();
    return t;
  }
};
struct BackwardData {
  std::vector<float> q, k, v, dout;  // the host inputs, fp32 (rounded to bf16 for the bf16 side)
  BackwardSide<float> f32;
  BackwardSide<__nv_bfloat16> b16;
  gpu100::DeviceBuffer<char> ws;
  // --training-step: the forward's workspace, the row log-sum-exp at its start.
  gpu100::DeviceBuffer<char> fwd_ws;
  // --save-grads: each row's dQ, dK, dV ("<variant>.<none|causal>.dq", ...), [B, H, S, D] floats.
  std::vector<gpu100::Tensor> saved;
};

// "1.50 GiB" or "12.00 MiB".
std::string mib(double bytes);

// The forward's check (driver_rows.cpp), which the training step's rows share. The sampled query
// rows: (head, query) pairs, always including the first and the last row.
struct SampleRow {
  int64_t bh;
  int i;
};
std::vector<SampleRow> sample_rows(const AttentionShape& s, int count, uint64_t seed);
// The double CPU reference at the sampled rows: O, sum p |v| and the log-sum-exp, on the host
// inputs q, k, v (rounded to bf16 first for the bf16 rows).
struct SampledReference {
  std::vector<double> o, abs_o, lse;
  double ms = 0, flops = 0;  // CPU time and FLOPs of computing it
};
SampledReference reference_rows(const AttentionShape& s, const std::vector<SampleRow>& rows,
                                const std::vector<float>& q, const std::vector<float>& k,
                                const std::vector<float>& v, bool round_to_bf16);
// The three checks of the forward `var`'s output `out` (every element, as floats): the sampled
// rows against `ref`, the log-sum-exp (the first B H S floats at `lse_device`) when the variant
// writes it, and the whole output against the library row of its precision in `library_out`
// (else any), where a library row stores its own. Each failing check adds a labelled note.
gpu100::CompareResult check_forward(const AttentionShape& s, const AttentionVariant& var,
                                    const std::vector<SampleRow>& rows, const SampledReference& ref,
                                    const std::vector<float>& out, const void* lse_device,
                                    std::map<Precision, std::vector<float>>& library_out,
                                    std::vector<std::string>& notes);

// Runs every selected variant at one shape (one mask): check, time, one row each, in registry
// order; the bf16 rows' TFLOP/s go to `verdict`.
void run_shape(const AttentionShape& s, const Options& opt, double fp32_peak, DeviceData& dev,
               gpu100::DayRun& run, std::string& verdict);

// The backward's rows at one shape (one mask): the GPU forward for O and the log-sum-exp, the CPU
// reference of the checked heads, then check and time each selected backward variant.
void run_backward_shape(const AttentionShape& s, const Options& opt, double fp32_peak,
                        BackwardData& dev, gpu100::DayRun& run, std::string& verdict);

// The training step's rows at one shape (one mask): the library's step, then the build's own
// (attention_backward.hpp), each checked (O at the sampled rows and against the library's O, the
// gradients on --check-heads whole heads) and then timed as one unit, forward and backward.
void run_training_step_shape(const AttentionShape& s, const Options& opt, BackwardData& dev,
                             gpu100::DayRun& run, std::string& verdict);

}  // namespace day05
