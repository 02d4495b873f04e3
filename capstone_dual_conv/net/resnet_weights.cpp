// The networks' weights, inputs and logits as tensor files: the state_dict names of each layer,
// and the checks that turn a file into NetWeights (exact name set, shapes, BN variances >= 0).
#include "resnet_weights.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <type_traits>
#include <unordered_map>
#include <utility>

namespace capstone::resnet {
namespace {

using gpu100::shape_string;
using gpu100::Tensor;

constexpr int64_t kMaxClasses = int64_t(1) << 24;

[[noreturn]] void fail(const std::string& path, const std::string& problem) {
  throw gpu100::TensorFileError(path + ": " + problem);
}

// One tensor of the state_dict: its name, its shape and the vector of a NetWeights holding it.
// Values is std::vector<float>, const for writing a file and not for reading one.
template <class Values>
struct Slot {
  std::string name;
  std::vector<int64_t> shape;
  Values* values;
  bool variance;  // a BN running_var, refused when negative
};

// Calls fn(conv_name, bn_name, spec, layer) for each convolution + BN of a trunk, in the
// state_dict's order. ResNet-18 has two blocks per stage: block b is "layer{b/2+1}.{b%2}".
template <class TW, class Fn>
void for_each_layer(const Trunk& t, TW& tw, Fn fn) {
  fn("conv1", "bn1", t.stem, tw.stem);
  for (size_t b = 0; b < t.blocks.size(); ++b) {
    const BasicBlock& blk = t.blocks[b];
    const std::string p = "layer" + std::to_string(b / 2 + 1) + "." + std::to_string(b % 2) + ".";
    fn(p + "conv1", p + "bn1", blk.conv1, tw.conv1[b]);
    fn(p + "conv2", p + "bn2", blk.conv2, tw.conv2[b]);
    if (blk.downsample) fn(p + "downsample.0", p + "downsample.1", blk.shortcut, tw.shortcut[b]);
  }
}

std::vector<std::string> trunk_prefixes(Model m) {
  return m == Model::kMcResNet18 ? std::vector<std::string>{"rgb.", "depth."}
                                 : std::vector<std::string>{""};
}

// Every tensor of `w` in the state_dict's order; w.trunks must hold the model's layers.
template <class Net, class Values = std::conditional_t<
                         std::is_const_v<Net>, const std::vector<float>, std::vector<float>>>
std::vector<Slot<Values>> slots(Net& w) {
  std::vector<Slot<Values>> out;
  const std::vector<int> channels = trunk_channels(w.model);
  const std::vector<std::string> prefixes = trunk_prefixes(w.model);
  for (size_t i = 0; i < channels.size(); ++i) {
    const std::string& p = prefixes[i];
    auto add = [&](const std::string& conv, const std::string& bn, const ConvSpec& s, auto& l) {
      out.push_back({p + conv + ".weight", {s.c_out, s.c_in, s.r, s.r}, &l.w, false});
      out.push_back({p + bn + ".weight", {s.c_out}, &l.gamma, false});
      out.push_back({p + bn + ".bias", {s.c_out}, &l.beta, false});
      out.push_back({p + bn + ".running_mean", {s.c_out}, &l.mean, false});
      out.push_back({p + bn + ".running_var", {s.c_out}, &l.var, true});
    };
    for_each_layer(resnet18_trunk(channels[i]), w.trunks[i], add);
  }
  out.push_back({"fc.weight", {w.classes, w.features()}, &w.fc_w, false});
  out.push_back({"fc.bias", {w.classes}, &w.fc_b, false});
  return out;
}

// NetWeights of `model` with every layer's spec set and no values, ready to be filled.
NetWeights skeleton(Model model, int classes) {
  NetWeights w;
  w.model = model;
  w.classes = classes;
  for (int c : trunk_channels(model)) {
    const Trunk t = resnet18_trunk(c);
    TrunkWeights tw;
    tw.conv1.resize(t.blocks.size());
    tw.conv2.resize(t.blocks.size());
    tw.shortcut.resize(t.blocks.size());  // blocks without a downsample keep an empty ConvBn
    for_each_layer(t, tw, [](const std::string&, const std::string&, const ConvSpec& s, ConvBn& l) {
      l.spec = s;
    });
    w.trunks.push_back(std::move(tw));
  }
  return w;
}

// The class count: fc.bias's length when the file has a 1-D fc.bias, else the model's default
// (and the shape check then reports fc.bias).
int classes_in(const std::string& path, const std::vector<Tensor>& file, Model model) {
  for (const Tensor& t : file) {
    if (t.name != "fc.bias" || t.shape.size() != 1) continue;
    if (t.shape[0] > kMaxClasses) {
      fail(path, "fc.bias has " + std::to_string(t.shape[0]) + " classes (at most 2^24)");
    }
    return int(t.shape[0]);
  }
  return default_classes(model);
}

std::string unknown_name(const std::string& name, Model model) {
  const Model other = model == Model::kMcResNet18 ? Model::kResNet18 : Model::kMcResNet18;
  const NetWeights o = skeleton(other, 1);
  for (const auto& s : slots(o)) {
    if (s.name == name) {
      return "tensor '" + name + "' is not a weight of " + to_string(model) + " but of " +
             to_string(other) + " (check --model)";
    }
  }
  return "unknown tensor '" + name + "' (not a weight of " + to_string(model) + ")";
}

void check_variance(const std::string& path, const Tensor& t) {
  for (size_t k = 0; k < t.data.size(); ++k) {
    if (t.data[k] >= 0) continue;  // also refuses NaN
    char value[32];
    std::snprintf(value, sizeof value, "%g", double(t.data[k]));
    fail(path, "tensor '" + t.name + "' holds a negative variance: channel " + std::to_string(k) +
                   " is " + value + " (running_var must be >= 0)");
  }
}

}  // namespace

std::vector<Tensor> net_weight_tensors(const NetWeights& w) {
  check_net_weights(w);
  std::vector<Tensor> out;
  for (const auto& s : slots(w)) out.push_back({s.name, s.shape, *s.values});
  return out;
}

NetWeights load_net_weights(const std::string& path, Model model) {
  return net_weights_from_tensors(gpu100::read_tensor_file(path), model, path);
}

NetWeights net_weights_from_tensors(std::vector<Tensor> file, Model model,
                                    const std::string& path) {
  NetWeights w = skeleton(model, classes_in(path, file, model));
  const auto want = slots(w);
  std::unordered_map<std::string, size_t> index;
  for (size_t i = 0; i < want.size(); ++i) index[want[i].name] = i;
  std::vector<size_t> found_at(want.size(), file.size());  // file.size(): not found yet
  for (size_t i = 0; i < file.size(); ++i) {
    Tensor& t = file[i];
    const auto it = index.find(t.name);
    if (it == index.end()) fail(path, unknown_name(t.name, model));
    const auto& slot = want[it->second];
    if (found_at[it->second] != file.size()) {
      fail(path, "tensor '" + t.name + "' appears twice (tensors " +
                     std::to_string(found_at[it->second]) + " and " + std::to_string(i) + ")");
    }
    found_at[it->second] = i;
    if (t.shape != slot.shape) {
      fail(path, "tensor '" + t.name + "' has the wrong shape: " + shape_string(slot.shape) +
                     " expected, " + shape_string(t.shape) + " found");
    }
    if (slot.variance) check_variance(path, t);
    *slot.values = std::move(t.data);
  }
  for (size_t i = 0; i < want.size(); ++i) {
    if (found_at[i] != file.size()) continue;
    fail(path, "tensor '" + want[i].name + "' is missing (" + to_string(model) + " has " +
                   std::to_string(want.size()) + " weight tensors)");
  }
  try {
    check_net_weights(w);
  } catch (const std::invalid_argument& e) {
    fail(path, e.what());
  }
  return w;
}

void save_net_weights(const std::string& path, const NetWeights& w) {
  gpu100::write_tensor_file(path, net_weight_tensors(w));
}

std::vector<std::string> input_names(Model model) {
  return model == Model::kMcResNet18 ? std::vector<std::string>{"rgb", "depth"}
                                     : std::vector<std::string>{"image"};
}

namespace {

// "'rgb' [N, 3, H, W] and 'depth' [N, 1, H, W]": what `model` reads.
std::string inputs_wanted(Model model) {
  const std::vector<std::string> names = input_names(model);
  const std::vector<int> channels = trunk_channels(model);
  std::string s;
  for (size_t i = 0; i < names.size(); ++i) {
    s += (i ? " and '" : "'") + names[i] + "' [N, " + std::to_string(channels[i]) + ", H, W]";
  }
  return s;
}

// The input tensors of `model` in trunk order, each present exactly once and nothing else.
std::vector<Tensor*> pick_inputs(const std::string& path, std::vector<Tensor>& file, Model model) {
  const std::vector<std::string> names = input_names(model);
  std::vector<Tensor*> picked(names.size(), nullptr);
  for (Tensor& t : file) {
    const size_t k = size_t(std::find(names.begin(), names.end(), t.name) - names.begin());
    if (k == names.size()) {
      fail(path, "unknown tensor '" + t.name + "' (" + to_string(model) + " reads " +
                     inputs_wanted(model) + ")");
    }
    if (picked[k] != nullptr) fail(path, "tensor '" + t.name + "' appears twice");
    picked[k] = &t;
  }
  for (size_t k = 0; k < names.size(); ++k) {
    if (picked[k] == nullptr) {
      fail(path, "no tensor '" + names[k] + "' (" + to_string(model) + " reads " +
                     inputs_wanted(model) + ")");
    }
  }
  return picked;
}

}  // namespace

std::vector<std::vector<float>> load_net_inputs(const std::string& path, Model model, int* n,
                                                int* h, int* w) {
  std::vector<Tensor> file = gpu100::read_tensor_file(path);
  const std::vector<Tensor*> in = pick_inputs(path, file, model);
  const std::vector<int> channels = trunk_channels(model);
  const std::vector<int64_t>& first = in[0]->shape;
  std::vector<std::vector<float>> out;
  for (size_t k = 0; k < in.size(); ++k) {
    const std::vector<int64_t>& s = in[k]->shape;
    const std::string named = "tensor '" + in[k]->name + "' has shape " + shape_string(s);
    if (s.size() != 4 || s[1] != channels[k]) {
      fail(path, named + ", " + to_string(model) + " reads " + inputs_wanted(model));
    }
    if (s[0] != first[0] || s[2] != first[2] || s[3] != first[3]) {
      fail(path, named + " and '" + in[0]->name + "' " + shape_string(first) +
                     ": N, H and W must be the same");
    }
    if (std::max({s[0], s[2], s[3]}) > int64_t(INT32_MAX)) fail(path, named + ": too large");
    out.push_back(std::move(in[k]->data));
  }
  if (n != nullptr) *n = int(first[0]);
  if (h != nullptr) *h = int(first[2]);
  if (w != nullptr) *w = int(first[3]);
  return out;
}

void save_net_inputs(const std::string& path, Model model,
                     const std::vector<std::vector<float>>& inputs, int n, int h, int w) {
  const std::vector<std::string> names = input_names(model);
  const std::vector<int> channels = trunk_channels(model);
  if (inputs.size() != names.size()) {
    throw std::invalid_argument(std::string(to_string(model)) + " has " +
                                std::to_string(names.size()) + " inputs, " +
                                std::to_string(inputs.size()) + " given");
  }
  std::vector<Tensor> tensors;
  for (size_t k = 0; k < names.size(); ++k) {
    tensors.push_back({names[k], {n, channels[k], h, w}, inputs[k]});
  }
  gpu100::write_tensor_file(path, tensors);
}

void save_logits(const std::string& path, const std::vector<float>& logits, int n, int classes) {
  gpu100::write_tensor_file(path, {{"logits", {n, classes}, logits}});
}

}  // namespace capstone::resnet
