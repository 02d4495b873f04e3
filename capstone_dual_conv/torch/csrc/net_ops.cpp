// The whole MC-ResNet18 forward as PyTorch operators: a network object built once from a
// state_dict (gpu100::mc_resnet18_create returns its handle), its forward on PyTorch's current
// stream, and its release.
//
// Memory. Inside a CUDA graph capture (torch.cuda.graph, torch.compile's "reduce-overhead") the
// forward takes its activations and day08's scratch from PyTorch's allocator, so it allocates
// nothing of its own and the graph owns what it uses. Outside a capture, where the CPU's cost of
// issuing about 120 kernels would decide the time at small batches, it replays a CUDA graph of its
// own (Net::forward_graph) on the current stream: the inputs are copied into the network's
// staging buffers, the graph runs, the logits are copied out. Its activations then live in the
// network's own arena (cudaMalloc'ed once per batch shape, not counted by PyTorch's allocator).
#include <ATen/ATen.h>

#include <array>
#include <map>
#include <memory>
#include <mutex>

#include "common/device_buffer.hpp"
#include "common/precision.hpp"
#include "ops.hpp"
#include "resnet_net.hpp"
#include "resnet_weights.hpp"
#include "torch_util.hpp"

namespace gpu100_torch {
namespace {

using capstone::resnet::Net;

struct NetHandle {
  std::mutex mutex;  // one forward at a time per network (it owns one arena and one graph)
  std::unique_ptr<Net> net;
  c10::Device device = c10::Device(c10::kCUDA, 0);
  bool eager_graph = true;
  // The eager graph's staging buffers, for one batch shape at a time.
  gpu100::DeviceBuffer<float> in[2], logits;
  int n = 0, h = 0, w = 0;
  cudaEvent_t done = nullptr;  // after the last eager replay: the next one waits for it
  ~NetHandle() {
    if (done != nullptr) cudaEventDestroy(done);
  }
};

// The split-K counters one forward may use, cleared once per call: a split-K layer has at most
// as many tiles as the blocks resident at once (a few hundred), and the network has 20 layers.
constexpr size_t kNetCounters = 16384;

std::mutex registry_mutex;
std::map<int64_t, std::shared_ptr<NetHandle>> registry;
std::map<int64_t, int64_t> classes_of;  // kept after release too: the Meta function reads it
int64_t next_handle = 1;

std::shared_ptr<NetHandle> find(const char* op, int64_t handle) {
  const std::lock_guard<std::mutex> lock(registry_mutex);
  const auto it = registry.find(handle);
  TORCH_CHECK(it != registry.end(), op, ": no network with handle ", handle,
              " (released, or never created by gpu100::mc_resnet18_create)");
  return it->second;
}

gpu100::Precision parse_precision(const std::string& p) {
  if (p == "fp32") return gpu100::Precision::kFp32;
  if (p == "tf32") return gpu100::Precision::kTf32;
  TORCH_CHECK(p == "bf16",
              "gpu100::mc_resnet18_create: precision must be \"fp32\", \"tf32\" or "
              "\"bf16\"; got \"",
              p, "\"");
  return gpu100::Precision::kBf16;
}

// The inputs' rules; returns N, H, W.
std::array<int, 3> check_inputs(const char* op, const at::Tensor& rgb, const at::Tensor& depth,
                                c10::Device device) {
  for (const auto& [t, name, c] : {std::tuple{rgb, "rgb", 3}, {depth, "depth", 1}}) {
    TORCH_CHECK(t.dim() == 4 && t.size(1) == c, op, ": ", name, " must be [N, ", c, ", H, W]; got ",
                describe(t));
    TORCH_CHECK(t.scalar_type() == at::kFloat, op, ": ", name,
                " must be float32 (every precision "
                "reads fp32 images and converts them in its first kernel); got ",
                describe(t));
    TORCH_CHECK(t.is_contiguous(), op, ": ", name, " must be contiguous NCHW; got ", describe(t));
    TORCH_CHECK(t.size(0) > 0 && t.size(2) > 0 && t.size(3) > 0, op, ": ", name,
                " is empty: ", describe(t));
    TORCH_CHECK(t.size(0) <= 2147483647 && t.size(2) <= 2147483647 && t.size(3) <= 2147483647, op,
                ": ", name, " ", describe(t), " is over the kernels' 32-bit limits");
  }
  TORCH_CHECK(
      rgb.size(0) == depth.size(0) && rgb.size(2) == depth.size(2) && rgb.size(3) == depth.size(3),
      op, ": rgb and depth must share N, H and W; got ", describe(rgb), " and ", describe(depth));
  if (device.type() == c10::kCUDA) {
    check_same_cuda_device(op, {rgb, depth}, {"rgb", "depth"});
    TORCH_CHECK(rgb.device() == device, op, ": the network lives on ", device.str(),
                "; the inputs are on ", rgb.device().str());
  }
  return {int(rgb.size(0)), int(rgb.size(2)), int(rgb.size(3))};
}

}  // namespace

int64_t mc_resnet18_create(const std::vector<std::string>& names,
                           const std::vector<at::Tensor>& weights, const std::string& precision,
                           const std::string& trunks, bool eager_graph) {
  constexpr const char* op = "gpu100::mc_resnet18_create";
  TORCH_CHECK(names.size() == weights.size(), op, ": ", names.size(), " names for ", weights.size(),
              " tensors");
  const gpu100::Precision prec = parse_precision(precision);
  std::vector<gpu100::Tensor> tensors;
  tensors.reserve(names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    const at::Tensor& t = weights[i];
    TORCH_CHECK(t.is_floating_point(), op, ": '", names[i],
                "' is not floating point: ", describe(t));
    const at::Tensor host = t.detach().to(at::kCPU, at::kFloat).contiguous();
    gpu100::Tensor g;
    g.name = names[i];
    g.shape.assign(host.sizes().begin(), host.sizes().end());
    g.data.assign(host.data_ptr<float>(), host.data_ptr<float>() + host.numel());
    tensors.push_back(std::move(g));
  }
  auto h = std::make_shared<NetHandle>();
  h->eager_graph = eager_graph;
  int device = 0;
  C10_CUDA_CHECK(cudaGetDevice(&device));
  h->device = c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(device));
  translate_errors(op, [&] {
    capstone::resnet::Trunks tr = capstone::resnet::parse_trunks(trunks);
    const capstone::resnet::NetWeights w = capstone::resnet::net_weights_from_tensors(
        std::move(tensors), capstone::resnet::Model::kMcResNet18, "state_dict");
    h->net = std::make_unique<Net>(w, prec, tr);
  });
  const std::lock_guard<std::mutex> lock(registry_mutex);
  const int64_t id = next_handle++;
  classes_of[id] = h->net->classes();
  registry[id] = std::move(h);
  return id;
}

void mc_resnet18_release(int64_t handle) {
  const std::lock_guard<std::mutex> lock(registry_mutex);
  registry.erase(handle);  // the last call using it holds its own reference
}

at::Tensor mc_resnet18_forward_cuda(int64_t handle, const at::Tensor& rgb,
                                    const at::Tensor& depth) {
  constexpr const char* op = "gpu100::mc_resnet18_forward";
  const std::shared_ptr<NetHandle> h = find(op, handle);
  const auto [n, ht, wd] = check_inputs(op, rgb, depth, h->device);
  const c10::cuda::CUDAGuard guard(h->device);
  const std::lock_guard<std::mutex> lock(h->mutex);
  const cudaStream_t stream = current_stream(rgb);
  at::Tensor logits = at::empty({n, h->net->classes()}, rgb.options());
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  C10_CUDA_CHECK(cudaStreamIsCapturing(stream, &capture));
  translate_errors(op, [&] {
    const std::vector<const float*> inputs = {rgb.data_ptr<float>(), depth.data_ptr<float>()};
    if (capture != cudaStreamCaptureStatusNone || !h->eager_graph) {
      // Everything from PyTorch's allocator, on the current stream.
      const size_t bytes = h->net->prepare(n, ht, wd);
      const at::Tensor ws =
          at::empty({static_cast<int64_t>(bytes)}, rgb.options().dtype(at::kByte));
      TorchScratch scratch(rgb.device());
      scratch.reserve_counters(kNetCounters, stream);
      const day08::ScratchScope scope(&scratch);
      h->net->forward(inputs, n, ht, wd, logits.data_ptr<float>(), ws.data_ptr(), bytes, stream);
      return;
    }
    // Eager: the network's own graph, on staging buffers fixed per shape.
    if (h->n != n || h->h != ht || h->w != wd) {
      if (h->done != nullptr) C10_CUDA_CHECK(cudaEventSynchronize(h->done));
      h->in[0] = gpu100::DeviceBuffer<float>(size_t(rgb.numel()));
      h->in[1] = gpu100::DeviceBuffer<float>(size_t(depth.numel()));
      h->logits = gpu100::DeviceBuffer<float>(size_t(n) * h->net->classes());
      h->n = n, h->h = ht, h->w = wd;
    }
    if (h->done == nullptr) {
      C10_CUDA_CHECK(cudaEventCreateWithFlags(&h->done, cudaEventDisableTiming));
    } else {
      C10_CUDA_CHECK(cudaStreamWaitEvent(stream, h->done, 0));  // the last replay, any stream
    }
    C10_CUDA_CHECK(cudaMemcpyAsync(h->in[0].data(), inputs[0], h->in[0].bytes(),
                                   cudaMemcpyDeviceToDevice, stream));
    C10_CUDA_CHECK(cudaMemcpyAsync(h->in[1].data(), inputs[1], h->in[1].bytes(),
                                   cudaMemcpyDeviceToDevice, stream));
    h->net->forward_graph({h->in[0].data(), h->in[1].data()}, n, ht, wd, h->logits.data(), stream);
    C10_CUDA_CHECK(cudaMemcpyAsync(logits.data_ptr<float>(), h->logits.data(), h->logits.bytes(),
                                   cudaMemcpyDeviceToDevice, stream));
    C10_CUDA_CHECK(cudaEventRecord(h->done, stream));
  });
  return logits;
}

at::Tensor mc_resnet18_forward_meta(int64_t handle, const at::Tensor& rgb,
                                    const at::Tensor& depth) {
  constexpr const char* op = "gpu100::mc_resnet18_forward";
  check_inputs(op, rgb, depth, rgb.device());
  int64_t classes = 0;
  {
    const std::lock_guard<std::mutex> lock(registry_mutex);
    const auto it = classes_of.find(handle);
    TORCH_CHECK(it != classes_of.end(), op, ": no network with handle ", handle);
    classes = it->second;
  }
  return at::empty({rgb.size(0), classes}, rgb.options());
}

}  // namespace gpu100_torch
