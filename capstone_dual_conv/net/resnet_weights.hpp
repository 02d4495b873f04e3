#pragma once
// The networks' weights, inputs and outputs as tensor files (common/tensor_file.hpp).
//
// Weights carry torchvision's state_dict names: "conv1.weight", "bn1.running_var",
// "layer2.0.downsample.0.weight", ..., "fc.weight", "fc.bias" for ResNet-18; the trunk names with
// the prefix "rgb." and "depth." for MC-ResNet18, then its "fc.weight" [classes, 1024] and
// "fc.bias". num_batches_tracked is not written. A file exported from PyTorch loads as it is.
// Inputs: "rgb" [N, 3, H, W] and "depth" [N, 1, H, W] (MC-ResNet18) or "image" [N, 3, H, W].
// Outputs: "logits" [N, classes].
//
// Every problem is a gpu100::TensorFileError (exit status 2) with one line naming the file and
// the first problem found.
#include <string>
#include <vector>

#include "common/tensor_file.hpp"
#include "resnet.hpp"

namespace capstone::resnet {

// The weights as named tensors, in the state_dict's order. Throws std::invalid_argument (from
// check_net_weights) when a size does not match the model.
std::vector<gpu100::Tensor> net_weight_tensors(const NetWeights& w);

// Reads weights for `model`: the file must hold exactly the model's names (any order), each with
// its shape, and no negative BN variance. The number of classes is fc.bias's length.
NetWeights load_net_weights(const std::string& path, Model model);
// The same checks on named tensors from elsewhere (a PyTorch state_dict, in the PyTorch
// extension): `origin` begins each error's line in place of the file's path.
NetWeights net_weights_from_tensors(std::vector<gpu100::Tensor> tensors, Model model,
                                    const std::string& origin);
void save_net_weights(const std::string& path, const NetWeights& w);

// The input tensor names of `model`, one per trunk: {"rgb", "depth"} or {"image"}.
std::vector<std::string> input_names(Model model);

// Reads one input per trunk ([n, trunk_channels(model)[i], h, w]) and their common n, h, w.
std::vector<std::vector<float>> load_net_inputs(const std::string& path, Model model, int* n,
                                                int* h, int* w);
void save_net_inputs(const std::string& path, Model model,
                     const std::vector<std::vector<float>>& inputs, int n, int h, int w);

// Writes "logits" [n, classes].
void save_logits(const std::string& path, const std::vector<float>& logits, int n, int classes);

}  // namespace capstone::resnet
