// day03_vector_add_variants: host-device transfers. The chunked multi-stream pipeline against the
// serial H2D-kernel-D2H sequence, and a strided (column) copy done two ways.
#include <stdexcept>
#include <string>

#include "common/cuda_check.hpp"
#include "common/math.hpp"
#include "vector_add_variants.cuh"

namespace day03 {

namespace {

void check_n(int64_t n, const char* who) {
  if (n < 0)
    throw std::invalid_argument(std::string(who) + ": n must be >= 0, got " + std::to_string(n));
}

}  // namespace

std::vector<Chunk> plan_chunks(int64_t n, int chunks) {
  check_n(n, "plan_chunks");
  if (chunks < 1) throw std::invalid_argument("plan_chunks: chunks must be >= 1");
  constexpr int64_t kGranule = 256;  // elements: every chunk starts on a 1 KiB boundary
  const int64_t len = gpu100::round_up<int64_t>(gpu100::ceil_div<int64_t>(n, chunks), kGranule);
  std::vector<Chunk> plan;
  for (int64_t begin = 0; begin < n; begin += len) {
    plan.push_back({begin, std::min(len, n - begin)});
  }
  return plan;
}

void add_serial(const float* h_a, const float* h_b, float* h_c, float* d_a, float* d_b, float* d_c,
                int64_t n, cudaStream_t stream) {
  check_n(n, "add_serial");
  if (n == 0) return;
  const size_t bytes = static_cast<size_t>(n) * sizeof(float);
  CUDA_CHECK(cudaMemcpyAsync(d_a, h_a, bytes, cudaMemcpyHostToDevice, stream));
  CUDA_CHECK(cudaMemcpyAsync(d_b, h_b, bytes, cudaMemcpyHostToDevice, stream));
  add_v4_ilp<float>(d_a, d_b, d_c, n, stream);
  CUDA_CHECK(cudaMemcpyAsync(h_c, d_c, bytes, cudaMemcpyDeviceToHost, stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));
}

StreamPipeline::StreamPipeline(int streams) {
  if (streams < 1) throw std::invalid_argument("StreamPipeline: streams must be >= 1");
  streams_.reserve(streams);
  for (int i = 0; i < streams; ++i) {
    cudaStream_t s = nullptr;
    const cudaError_t err = cudaStreamCreate(&s);
    if (err != cudaSuccess) {
      for (cudaStream_t made : streams_) cudaStreamDestroy(made);
      streams_.clear();
      CUDA_CHECK(err);
    }
    streams_.push_back(s);
  }
}

StreamPipeline::~StreamPipeline() {
  for (cudaStream_t s : streams_) cudaStreamDestroy(s);
}

void StreamPipeline::run(const float* h_a, const float* h_b, float* h_c, float* d_a, float* d_b,
                         float* d_c, int64_t n, int chunks) {
  const std::vector<Chunk> plan = plan_chunks(n, chunks);  // validates n and chunks
  const int k = static_cast<int>(streams_.size());
  // Issue order: chunk by chunk. Within a stream the copy-in, the kernel and the copy-out of a
  // chunk are ordered; across streams the H2D and D2H copy engines and the SMs overlap them.
  for (size_t i = 0; i < plan.size(); ++i) {
    cudaStream_t s = streams_[i % k];
    const int64_t off = plan[i].begin;
    const size_t bytes = static_cast<size_t>(plan[i].count) * sizeof(float);
    CUDA_CHECK(cudaMemcpyAsync(d_a + off, h_a + off, bytes, cudaMemcpyHostToDevice, s));
    CUDA_CHECK(cudaMemcpyAsync(d_b + off, h_b + off, bytes, cudaMemcpyHostToDevice, s));
    add_v4_ilp<float>(d_a + off, d_b + off, d_c + off, plan[i].count, s);
    CUDA_CHECK(cudaMemcpyAsync(h_c + off, d_c + off, bytes, cudaMemcpyDeviceToHost, s));
  }
  // h_c may be read only after every D2H finished: wait for each stream.
  for (cudaStream_t s : streams_) CUDA_CHECK(cudaStreamSynchronize(s));
}

void copy_column_per_element(const float* host, int64_t rows, int64_t cols, float* d_col) {
  if (rows < 0 || cols < 1) throw std::invalid_argument("copy_column_per_element: bad shape");
  for (int64_t r = 0; r < rows; ++r) {
    CUDA_CHECK(cudaMemcpy(d_col + r, host + r * cols, sizeof(float), cudaMemcpyHostToDevice));
  }
  CUDA_CHECK(cudaStreamSynchronize(nullptr));  // from pageable memory cudaMemcpy may return early
}

void copy_column_2d(const float* host, int64_t rows, int64_t cols, float* d_col) {
  if (rows < 0 || cols < 1) throw std::invalid_argument("copy_column_2d: bad shape");
  if (rows == 0) return;
  // Destination: rows rows of 4 bytes, packed (pitch 4). Source: 4 bytes every cols floats.
  CUDA_CHECK(cudaMemcpy2D(d_col, sizeof(float), host, static_cast<size_t>(cols) * sizeof(float),
                          sizeof(float), static_cast<size_t>(rows), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaStreamSynchronize(nullptr));
}

}  // namespace day03
