// MC-ResNet18 over several GPUs (net_parallel.hpp): the batch split over them, or its two trunks
// on two of them, the results moved by NCCL.
#include "net_parallel.hpp"

#include <fmt/format.h>

#include "common/cuda_check.hpp"
#include "common/errors.hpp"

namespace capstone::multi {

using resnet::Net;
using resnet::Trunks;

// One GPU's network, its images and (off GPU 0) its logits. The destructor makes the GPU current
// first: its buffers and the Net's streams and graph belong to it.
struct BatchParallel::Rank {
  int device = 0;
  std::unique_ptr<Net> net;
  std::vector<gpu100::DeviceBuffer<float>> images;  // off GPU 0: its share of every trunk's input
  std::vector<const float*> inputs;                 // the share's pointers (GPU 0: the caller's)
  gpu100::DeviceBuffer<float> logits;               // off GPU 0: [share, classes]
  ~Rank() {
    int previous = 0;
    cudaGetDevice(&previous);
    cudaSetDevice(device);
    net.reset();
    images.clear();
    logits = gpu100::DeviceBuffer<float>();
    cudaSetDevice(previous);
  }
};

BatchParallel::BatchParallel(Ranks& ranks, const resnet::NetWeights& wts,
                             gpu100::Precision precision)
    : ranks_(ranks), classes_(wts.classes) {
  for (int r = 0; r < ranks_.size(); ++r) {
    auto rank = std::make_unique<Rank>();
    rank->device = r;
    const bool one_trunk = resnet::trunk_channels(wts.model).size() == 1;
    ranks_.on(r, [&] {
      rank->net =
          std::make_unique<Net>(wts, precision, one_trunk ? Trunks::kSequential : Trunks::kDual);
    });
    rank_.push_back(std::move(rank));
  }
}

BatchParallel::~BatchParallel() = default;

void BatchParallel::prepare(const std::vector<const float*>& inputs, int n, int h, int w) {
  try {
    shares_ = split_batch(n, ranks_.size());
  } catch (const std::invalid_argument& e) {
    throw gpu100::UsageError(e.what());
  }
  h_ = h, w_ = w;
  const std::vector<int> channels = resnet::trunk_channels(rank_[0]->net->model());
  for (int r = 0; r < ranks_.size(); ++r) {
    Rank& rank = *rank_[r];
    const Share sh = shares_[r];
    ranks_.on(r, [&] {
      rank.net->plan(sh.count, h, w);  // the memory check first: a share too large is one line
      rank.inputs.clear();
      rank.images.clear();
      for (size_t t = 0; t < channels.size(); ++t) {
        const size_t image = size_t(channels[t]) * h * w;
        const float* first = inputs[t] + image * sh.first;
        if (r == 0) {
          rank.inputs.push_back(first);
          continue;
        }
        rank.images.emplace_back(image * sh.count);
        CUDA_CHECK(cudaMemcpyPeer(rank.images.back().data(), r, first, 0,
                                  image * sh.count * sizeof(float)));
        rank.inputs.push_back(rank.images.back().data());
      }
      if (r > 0) rank.logits = gpu100::DeviceBuffer<float>(size_t(sh.count) * classes_);
    });
  }
}

void BatchParallel::forward(float* logits) {
  // Every GPU its share; GPU 0 writes its logits straight into the first rows of the result.
  for (int r = 0; r < ranks_.size(); ++r) {
    Rank& rank = *rank_[r];
    ranks_.on(r, [&] {
      rank.net->forward_graph(rank.inputs, shares_[r].count, h_, w_,
                              r == 0 ? logits : rank.logits.data(), ranks_.stream(r));
    });
  }
  if (ranks_.size() == 1) return;
  // The gather: GPU r's rows go to rows first_r .. of the result on GPU 0, each after that GPU's
  // forward in its stream's order.
  ranks_.group([&] {
    for (int r = 1; r < ranks_.size(); ++r) {
      const size_t count = size_t(shares_[r].count) * classes_;
      NCCL_CHECK(
          ncclSend(rank_[r]->logits.data(), count, ncclFloat, 0, ranks_.comm(r), ranks_.stream(r)));
      NCCL_CHECK(ncclRecv(logits + size_t(shares_[r].first) * classes_, count, ncclFloat, r,
                          ranks_.comm(0), ranks_.stream(0)));
    }
  });
}

// One trunk's part of the network on its GPU.
struct TrunkParallel::Part {
  int device = 0;
  std::unique_ptr<Net> net;
  gpu100::DeviceBuffer<float> images;  // GPU 1: the depth images
  ~Part() {
    int previous = 0;
    cudaGetDevice(&previous);
    cudaSetDevice(device);
    net.reset();
    images = gpu100::DeviceBuffer<float>();
    cudaSetDevice(previous);
  }
};

TrunkParallel::TrunkParallel(Ranks& ranks, const resnet::NetWeights& wts,
                             gpu100::Precision precision)
    : ranks_(ranks) {
  if (resnet::trunk_channels(wts.model).size() != 2) {
    throw gpu100::UsageError("trunk-parallel runs a two-trunk model (mc_resnet18)");
  }
  if (ranks_.size() < 2) throw gpu100::UsageError("trunk-parallel needs 2 GPUs (--gpus 2)");
  for (int t = 0; t < 2; ++t) {
    part_[t] = std::make_unique<Part>();
    part_[t]->device = t;
    ranks_.on(
        t, [&] { part_[t]->net = std::make_unique<Net>(wts, precision, Trunks::kSequential, t); });
  }
}

TrunkParallel::~TrunkParallel() {
  part_[0].reset();
  part_[1].reset();
  ranks_.on(0, [&] { received_ = gpu100::DeviceBuffer<float>(); });
}

void TrunkParallel::prepare(const std::vector<const float*>& inputs, int n, int h, int w) {
  if (inputs.size() != 2) throw std::invalid_argument("trunk-parallel: an RGB and a depth input");
  n_ = n, h_ = h, w_ = w;
  rgb_input_ = inputs[0];
  ranks_.on(0, [&] {
    part_[0]->net->plan(n, h, w);
    received_ = gpu100::DeviceBuffer<float>(size_t(n) * 512);
  });
  ranks_.on(1, [&] {
    part_[1]->net->plan(n, h, w);
    const size_t bytes = size_t(n) * h * w * sizeof(float);  // one depth channel
    part_[1]->images = gpu100::DeviceBuffer<float>(size_t(n) * h * w);
    CUDA_CHECK(cudaMemcpyPeer(part_[1]->images.data(), 1, inputs[1], 0, bytes));
  });
}

void TrunkParallel::forward_part(int t) {
  ranks_.on(t, [&] {
    part_[t]->net->forward_graph({t == 0 ? rgb_input_ : part_[1]->images.data()}, n_, h_, w_,
                                 nullptr, ranks_.stream(t));
  });
}

void TrunkParallel::forward(float* logits) {
  // Both trunks at once, each replayed as its GPU's graph (features only: a part has no FC).
  ranks_.on(1, [&] {
    part_[1]->net->forward_graph({part_[1]->images.data()}, n_, h_, w_, nullptr, ranks_.stream(1));
  });
  ranks_.on(0, [&] {
    part_[0]->net->forward_graph({rgb_input_}, n_, h_, w_, nullptr, ranks_.stream(0));
  });
  // GPU 1's features to GPU 0: 2 KB per image, after its trunk in its stream's order.
  ranks_.group([&] {
    const size_t count = size_t(n_) * 512;
    NCCL_CHECK(ncclSend(part_[1]->net->features(0), count, ncclFloat, 0, ranks_.comm(1),
                        ranks_.stream(1)));
    NCCL_CHECK(ncclRecv(received_.data(), count, ncclFloat, 1, ranks_.comm(0), ranks_.stream(0)));
  });
  ranks_.on(0, [&] {
    part_[0]->net->fc({part_[0]->net->features(0), received_.data()}, n_, logits, ranks_.stream(0));
  });
}

}  // namespace capstone::multi
