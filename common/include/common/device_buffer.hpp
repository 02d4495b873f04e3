#pragma once
// RAII owners for device memory and pinned host memory.
//
//   DeviceBuffer<float> d_x(n);        // cudaMalloc; freed when d_x goes out of scope
//   d_x.upload(h_x);                   // host vector -> device
//   d_x.poison();                      // every byte 0xFF: NaN for float/bf16, -1 for ints
//   std::vector<float> y = d_y.download();
//
// Buffers are move-only: a copy would double-free. Allocation failures (out of memory) throw
// gpu100::CudaError with the requested size in the message.
#include <cuda_runtime.h>

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "common/cuda_check.hpp"

namespace gpu100 {

namespace detail {
[[noreturn]] inline void throw_alloc_failure(cudaError_t err, const char* what, size_t bytes) {
  cudaGetLastError();  // an allocation failure is not sticky: clear it
  throw CudaError(err, std::string(what) + " of " + std::to_string(bytes) + " bytes failed: " +
                           cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")");
}
}  // namespace detail

template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t count) : count_(count) {
    if (count_ == 0) return;
    cudaError_t err = cudaMalloc(reinterpret_cast<void**>(&ptr_), bytes());
    if (err != cudaSuccess) {
      ptr_ = nullptr;
      detail::throw_alloc_failure(err, "cudaMalloc", bytes());
    }
  }
  ~DeviceBuffer() { release(); }

  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& other) noexcept
      : ptr_(std::exchange(other.ptr_, nullptr)), count_(std::exchange(other.count_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    if (this != &other) {
      release();
      ptr_ = std::exchange(other.ptr_, nullptr);
      count_ = std::exchange(other.count_, 0);
    }
    return *this;
  }

  T* data() { return ptr_; }
  const T* data() const { return ptr_; }
  size_t size() const { return count_; }
  size_t bytes() const { return count_ * sizeof(T); }
  bool empty() const { return count_ == 0; }

  void upload(const T* host, size_t count, cudaStream_t stream = nullptr) {
    check_count(count);
    CUDA_CHECK(cudaMemcpyAsync(ptr_, host, count * sizeof(T), cudaMemcpyHostToDevice, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
  }
  void upload(const std::vector<T>& host, cudaStream_t stream = nullptr) {
    upload(host.data(), host.size(), stream);
  }
  void download(T* host, size_t count, cudaStream_t stream = nullptr) const {
    check_count(count);
    CUDA_CHECK(cudaMemcpyAsync(host, ptr_, count * sizeof(T), cudaMemcpyDeviceToHost, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
  }
  std::vector<T> download(cudaStream_t stream = nullptr) const {
    std::vector<T> host(count_);
    download(host.data(), count_, stream);
    return host;
  }
  // Fills every byte with 0xFF: NaN for float, double and bf16, -1 for signed integers. Outputs
  // are poisoned before each launch so that an element the kernel forgot to write is caught.
  void poison(cudaStream_t stream = nullptr) {
    if (count_ == 0) return;
    CUDA_CHECK(cudaMemsetAsync(ptr_, 0xFF, bytes(), stream));
  }

 private:
  void check_count(size_t count) const {
    if (count > count_) {
      throw std::out_of_range("DeviceBuffer: copy of " + std::to_string(count) +
                              " elements into a buffer of " + std::to_string(count_));
    }
  }
  void release() noexcept {
    if (ptr_ != nullptr) cudaFree(ptr_);  // never throws from a destructor
    ptr_ = nullptr;
    count_ = 0;
  }

  T* ptr_ = nullptr;
  size_t count_ = 0;
};

// Page-locked ("pinned") host memory: the DMA engines read it directly, so transfers from it run
// at the PCIe/NVLink rate and can be asynchronous; pageable memory is staged through a bounce
// buffer.
template <typename T>
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  explicit PinnedBuffer(size_t count) : count_(count) {
    if (count_ == 0) return;
    cudaError_t err = cudaMallocHost(reinterpret_cast<void**>(&ptr_), count_ * sizeof(T));
    if (err != cudaSuccess) {
      ptr_ = nullptr;
      detail::throw_alloc_failure(err, "cudaMallocHost", count_ * sizeof(T));
    }
  }
  ~PinnedBuffer() { release(); }

  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  PinnedBuffer(PinnedBuffer&& other) noexcept
      : ptr_(std::exchange(other.ptr_, nullptr)), count_(std::exchange(other.count_, 0)) {}
  PinnedBuffer& operator=(PinnedBuffer&& other) noexcept {
    if (this != &other) {
      release();
      ptr_ = std::exchange(other.ptr_, nullptr);
      count_ = std::exchange(other.count_, 0);
    }
    return *this;
  }

  T* data() { return ptr_; }
  const T* data() const { return ptr_; }
  size_t size() const { return count_; }
  T& operator[](size_t i) { return ptr_[i]; }
  const T& operator[](size_t i) const { return ptr_[i]; }

 private:
  void release() noexcept {
    if (ptr_ != nullptr) cudaFreeHost(ptr_);
    ptr_ = nullptr;
    count_ = 0;
  }

  T* ptr_ = nullptr;
  size_t count_ = 0;
};

}  // namespace gpu100
