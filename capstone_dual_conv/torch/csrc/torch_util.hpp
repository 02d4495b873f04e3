#pragma once
// What the extension's operators share: PyTorch's stream, PyTorch's allocator for day08's scratch,
// and the checks that turn a bad tensor into one clear Python exception (TORCH_CHECK) before any
// launch.
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime.h>

#include <exception>
#include <string>
#include <vector>

#include "conv_day.hpp"  // day08::ScratchSource

namespace gpu100_torch {

// day08's split-K scratch and counters from PyTorch's caching allocator, on the caller's device:
// nothing is cudaMalloc'ed, so a call inside a CUDA graph capture allocates from the graph's pool.
// The blocks live until this object dies, at the end of the operator; every stream that used them
// has joined the current one by then, and PyTorch reuses a freed block only for work queued on the
// current stream after that point.
//
// Split-K counters: by default each layer's are cleared by a memset of their own. A call that
// runs many layers (the whole network) reserves one block with reserve_counters() instead,
// cleared once on the stream every later layer follows; counters() hands out pieces of it (a
// graph node per layer less: about 30 us of a 0.36 ms network at N = 1) and falls back to the
// default when it is used up.
class TorchScratch final : public day08::ScratchSource {
 public:
  explicit TorchScratch(c10::Device device) : device_(device) {}
  void* get(size_t bytes, cudaStream_t) override {
    blocks_.push_back(at::empty({static_cast<int64_t>(bytes)},
                                at::TensorOptions().dtype(at::kByte).device(device_)));
    return blocks_.back().data_ptr();
  }
  void reserve_counters(size_t count, cudaStream_t stream) {
    counters_ = static_cast<int*>(get(count * sizeof(int), stream));
    counters_left_ = count;
    C10_CUDA_CHECK(cudaMemsetAsync(counters_, 0, count * sizeof(int), stream));
  }
  int* counters(size_t count, cudaStream_t stream) override {
    const size_t take = (count + 63) / 64 * 64;  // keeps each piece 256-byte aligned
    if (take > counters_left_) return ScratchSource::counters(count, stream);
    int* p = counters_;
    counters_ += take;
    counters_left_ -= take;
    return p;
  }

 private:
  c10::Device device_;
  std::vector<at::Tensor> blocks_;
  int* counters_ = nullptr;
  size_t counters_left_ = 0;
};

// The current PyTorch stream of `t`'s device, as a CUDA stream.
inline cudaStream_t current_stream(const at::Tensor& t) {
  return at::cuda::getCurrentCUDAStream(t.device().index()).stream();
}

inline bool channels_last(const at::Tensor& t) {
  return t.dim() == 4 && t.is_contiguous(at::MemoryFormat::ChannelsLast);
}

// "[2, 3, 37, 53] bfloat16 cuda:0 (channels_last)": what a message says about a tensor.
std::string describe(const at::Tensor& t);

// One CUDA device for every tensor given (undefined ones are skipped). `names` match `tensors`.
void check_same_cuda_device(const char* op, const std::vector<at::Tensor>& tensors,
                            const std::vector<const char*>& names);

// Runs `body`; an exception of the project's own (std::invalid_argument, gpu100::UsageError,
// gpu100::ArchUnavailable, a CUDA error) becomes a c10::Error, that is a Python RuntimeError, with
// the operator's name and the message on one line.
template <class Fn>
auto translate_errors(const char* op, Fn&& body) -> decltype(body()) {
  try {
    return body();
  } catch (const c10::Error&) {
    throw;
  } catch (const std::exception& e) {
    TORCH_CHECK(false, op, ": ", e.what());
  }
}

}  // namespace gpu100_torch
