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
class TorchScratch final : public day08::ScratchSource {
 public:
  explicit TorchScratch(c10::Device device) : device_(device) {}
  void* get(size_t bytes, cudaStream_t) override {
    blocks_.push_back(at::empty({static_cast<int64_t>(bytes)},
                                at::TensorOptions().dtype(at::kByte).device(device_)));
    return blocks_.back().data_ptr();
  }

 private:
  c10::Device device_;
  std::vector<at::Tensor> blocks_;
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
