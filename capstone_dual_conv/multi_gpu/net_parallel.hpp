#pragma once
// MC-ResNet18 over several GPUs of one machine, through NCCL (ranks.hpp), each GPU running the
// curriculum's own network (net/resnet_net.hpp) replayed as a CUDA graph:
//   BatchParallel: the batch split over the GPUs (split_batch: 33 over 2 is 17 + 16), every GPU
//                  with its own Net (weights, arena, graph) and stream running the whole network
//                  on its share; the logits gathered to GPU 0 by ncclSend / ncclRecv (the shares
//                  may be unequal, which ncclAllGather's equal counts would not allow).
//   TrunkParallel: the RGB trunk on GPU 0 and the depth trunk on GPU 1, each a part of the network
//                  (Net's only_trunk); GPU 1's 512 pooled features per image go to GPU 0 by
//                  ncclSend / ncclRecv, where the FC runs on both trunks' features.
// Both take the batch's inputs on GPU 0 (as a one-GPU run has them) and copy each GPU's part
// there once, in prepare(); forward() then issues one forward on every rank (between the caller's
// ranks.fork() and ranks.join() when timed) and leaves the logits [n, classes] on GPU 0.
#include <memory>
#include <vector>

#include "common/device_buffer.hpp"
#include "common/precision.hpp"
#include "plan.hpp"
#include "ranks.hpp"
#include "resnet.hpp"
#include "resnet_net.hpp"

namespace capstone::multi {

class BatchParallel {
 public:
  // Uploads the weights to every GPU of `ranks` (Net's constructor, which may throw).
  BatchParallel(Ranks& ranks, const resnet::NetWeights& wts, gpu100::Precision precision);
  ~BatchParallel();
  // Splits a batch of n images of h x w, plans every GPU's network for its share (throws
  // gpu100::UsageError for a share too large for a GPU's memory, before anything runs) and copies
  // each GPU's images from `inputs` (one device pointer per trunk, on GPU 0, [n, c, h, w]).
  void prepare(const std::vector<const float*>& inputs, int n, int h, int w);
  // One forward: every GPU its share, then the logits gathered into `logits` ([n, classes] on
  // GPU 0). Asynchronous on the ranks' streams: ranks.wait() (or a timed run) completes it.
  void forward(float* logits);
  const std::vector<Share>& shares() const { return shares_; }

 private:
  struct Rank;
  Ranks& ranks_;
  int classes_;
  std::vector<std::unique_ptr<Rank>> rank_;
  std::vector<Share> shares_;
  int h_ = 0, w_ = 0;
};

class TrunkParallel {
 public:
  // MC-ResNet18 only, on the first two GPUs of `ranks` (throws gpu100::UsageError for a
  // one-trunk model or fewer than 2 ranks).
  TrunkParallel(Ranks& ranks, const resnet::NetWeights& wts, gpu100::Precision precision);
  ~TrunkParallel();
  // Plans both parts for n images of h x w and copies the depth images (the second of `inputs`,
  // on GPU 0) to GPU 1.
  void prepare(const std::vector<const float*>& inputs, int n, int h, int w);
  // One forward: GPU 0 its trunk and GPU 1 its trunk at once, GPU 1's features sent to GPU 0,
  // the FC there, into `logits` ([n, classes] on GPU 0). Asynchronous like BatchParallel's.
  void forward(float* logits);
  // Trunk t's part alone on its GPU (its graph, features only): how long the slower part takes
  // bounds the whole forward from below.
  void forward_part(int t);

 private:
  struct Part;
  Ranks& ranks_;
  std::unique_ptr<Part> part_[2];
  gpu100::DeviceBuffer<float> received_;  // GPU 1's features, on GPU 0: [n, 512]
  const float* rgb_input_ = nullptr;
  int n_ = 0, h_ = 0, w_ = 0;
};

}  // namespace capstone::multi
