// capstone CPU tests of the networks' files (resnet_weights.hpp): weights, inputs and logits
// round trip bit for bit, and every kind of bad weights or inputs file is refused with one line
// naming the first problem.
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/catch.hpp"
#include "common/random.hpp"
#include "common/temp_dir.hpp"
#include "common/tensor_file.hpp"
#include "resnet.hpp"
#include "resnet_weights.hpp"

namespace fs = std::filesystem;
using namespace capstone::resnet;
using gpu100::Tensor;
using gpu100::TensorFileError;

namespace {

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

bool same_spec(const ConvSpec& a, const ConvSpec& b) {
  return a.c_in == b.c_in && a.c_out == b.c_out && a.r == b.r && a.stride == b.stride &&
         a.pad == b.pad;
}

// Same model, classes, layer specs, and every tensor's name, shape and bits.
void check_same(const NetWeights& a, const NetWeights& b) {
  CHECK(a.model == b.model);
  CHECK(a.classes == b.classes);
  REQUIRE(a.trunks.size() == b.trunks.size());
  for (size_t i = 0; i < a.trunks.size(); ++i) {
    const TrunkWeights &x = a.trunks[i], &y = b.trunks[i];
    CHECK(same_spec(x.stem.spec, y.stem.spec));
    REQUIRE(x.shortcut.size() == y.shortcut.size());
    for (size_t k = 0; k < x.shortcut.size(); ++k) {
      CHECK(same_spec(x.conv1[k].spec, y.conv1[k].spec));
      CHECK(same_spec(x.conv2[k].spec, y.conv2[k].spec));
      CHECK(same_spec(x.shortcut[k].spec, y.shortcut[k].spec));
    }
  }
  const std::vector<Tensor> ta = net_weight_tensors(a), tb = net_weight_tensors(b);
  REQUIRE(ta.size() == tb.size());
  for (size_t i = 0; i < ta.size(); ++i) {
    INFO(ta[i].name);
    CHECK(ta[i].name == tb[i].name);
    CHECK(ta[i].shape == tb[i].shape);
    CHECK(same_bits(ta[i].data, tb[i].data));
  }
}

const Tensor* named(const std::vector<Tensor>& ts, const std::string& name) {
  for (const Tensor& t : ts) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

Tensor& named_mut(std::vector<Tensor>& ts, const std::string& name) {
  for (Tensor& t : ts) {
    if (t.name == name) return t;
  }
  throw std::logic_error("test: no tensor " + name);
}

// The loader's message for `path`, checked to be one line that starts with the file's name.
template <class Load>
std::string error_of(const std::string& path, Load load) {
  try {
    load();
  } catch (const TensorFileError& e) {
    const std::string msg = e.what();
    CHECK(msg.rfind(path + ": ", 0) == 0);
    CHECK(msg.find('\n') == std::string::npos);
    return msg.substr(path.size() + 2);
  }
  return "(loaded without an error)";
}

std::string weights_error(const std::string& path, Model model) {
  return error_of(path, [&] { load_net_weights(path, model); });
}

// MC-ResNet18's weights from seed 3, made once: several test cases corrupt copies of them.
const NetWeights& mc_weights() {
  static const NetWeights w = random_net_weights(Model::kMcResNet18, 3);
  return w;
}

}  // namespace

TEST_CASE("resnet: the weight names and shapes follow torchvision's state_dict", "[cpu]") {
  const std::vector<Tensor> mc = net_weight_tensors(mc_weights());
  // Per trunk 20 convolutions with their BN (3 of them downsamples), 5 tensors each; the FC.
  REQUIRE(mc.size() == 202);
  CHECK(mc[0].name == "rgb.conv1.weight");
  CHECK(mc[0].shape == std::vector<int64_t>{64, 3, 7, 7});
  CHECK(mc[4].name == "rgb.bn1.running_var");
  CHECK(mc[5].name == "rgb.layer1.0.conv1.weight");
  CHECK(mc[100].name == "depth.conv1.weight");
  CHECK(mc[100].shape == std::vector<int64_t>{64, 1, 7, 7});
  CHECK(mc[200].name == "fc.weight");
  CHECK(mc[200].shape == std::vector<int64_t>{15, 1024});
  CHECK(mc[201].name == "fc.bias");
  const Tensor* ds = named(mc, "depth.layer2.0.downsample.0.weight");
  REQUIRE(ds != nullptr);
  CHECK(ds->shape == std::vector<int64_t>{128, 64, 1, 1});
  CHECK(named(mc, "rgb.layer4.0.downsample.1.running_mean") != nullptr);
  CHECK(named(mc, "rgb.layer1.0.downsample.0.weight") == nullptr);  // layer1 keeps its channels
  CHECK(named(mc, "rgb.layer4.1.bn2.bias")->shape == std::vector<int64_t>{512});
}

TEST_CASE("resnet: weights round trip through a file bit for bit, in any order", "[cpu]") {
  gpu100::TempDir tmp("gpu100_resnet_files");
  const std::string path = tmp.file("mc.g100");
  save_net_weights(path, mc_weights());
  check_same(load_net_weights(path, Model::kMcResNet18), mc_weights());

  std::vector<Tensor> reversed = net_weight_tensors(mc_weights());
  std::reverse(reversed.begin(), reversed.end());
  gpu100::write_tensor_file(path, reversed);
  check_same(load_net_weights(path, Model::kMcResNet18), mc_weights());

  NetWeights r18 = random_net_weights(Model::kResNet18, 3);
  REQUIRE(r18.classes == 1000);
  save_net_weights(path, r18);
  const NetWeights back = load_net_weights(path, Model::kResNet18);
  check_same(back, r18);
  CHECK(named(net_weight_tensors(back), "fc.weight")->shape == std::vector<int64_t>{1000, 512});

  // The class count comes from fc.bias.
  r18.classes = 10;
  r18.fc_w.resize(10 * 512);
  r18.fc_b.resize(10);
  save_net_weights(path, r18);
  check_same(load_net_weights(path, Model::kResNet18), r18);
}

TEST_CASE("resnet: a corrupted weights file is refused naming the first problem", "[cpu]") {
  gpu100::TempDir tmp("gpu100_resnet_files");
  const std::string path = tmp.file("bad.g100");
  const std::vector<Tensor> good = net_weight_tensors(mc_weights());
  auto refused = [&](const std::vector<Tensor>& ts) {
    gpu100::write_tensor_file(path, ts);
    return weights_error(path, Model::kMcResNet18);
  };

  // Cut 1000 bytes: fc.bias (87 bytes) and 913 bytes of fc.weight's 61440 go.
  save_net_weights(path, mc_weights());
  fs::resize_file(path, fs::file_size(path) - 1000);
  CHECK(weights_error(path, Model::kMcResNet18) ==
        "truncated in tensor 200 ('fc.weight'): 61440 bytes of data expected, 60527 present");

  // A renamed tensor is both unknown and missing; the unknown name comes first.
  std::vector<Tensor> ts = good;
  named_mut(ts, "rgb.layer3.1.conv2.weight").name = "rgb.layer3.1.conv3.weight";
  CHECK(refused(ts) == "unknown tensor 'rgb.layer3.1.conv3.weight' (not a weight of mc_resnet18)");

  ts = good;
  Tensor& stem = named_mut(ts, "rgb.conv1.weight");
  stem.shape = {64, 3, 3, 3};
  stem.data.resize(64 * 3 * 3 * 3);
  CHECK(refused(ts) ==
        "tensor 'rgb.conv1.weight' has the wrong shape: [64, 3, 7, 7] expected, [64, 3, 3, 3] "
        "found");

  ts = good;
  ts.erase(ts.begin() + 197);
  const std::string gone = good[197].name;
  CHECK(refused(ts) == "tensor '" + gone + "' is missing (mc_resnet18 has 202 weight tensors)");

  ts = good;
  ts.push_back(good[7]);
  CHECK(refused(ts) == "tensor '" + good[7].name + "' appears twice (tensors 7 and 202)");

  ts = good;
  named_mut(ts, "depth.layer2.0.bn1.running_var").data[5] = -0.25f;
  CHECK(refused(ts) ==
        "tensor 'depth.layer2.0.bn1.running_var' holds a negative variance: channel 5 is -0.25 "
        "(running_var must be >= 0)");

  // fc.bias's length sets the classes, and fc.weight must agree with it.
  ts = good;
  named_mut(ts, "fc.bias") = {"fc.bias", {7}, std::vector<float>(7, 0.5f)};
  CHECK(refused(ts) ==
        "tensor 'fc.weight' has the wrong shape: [7, 1024] expected, [15, 1024] found");
}

TEST_CASE("resnet: a weights file of the other model is refused", "[cpu]") {
  gpu100::TempDir tmp("gpu100_resnet_files");
  const std::string path = tmp.file("other.g100");
  save_net_weights(path, mc_weights());
  CHECK(weights_error(path, Model::kResNet18) ==
        "tensor 'rgb.conv1.weight' is not a weight of resnet18 but of mc_resnet18 (check --model)");
  save_net_weights(path, random_net_weights(Model::kResNet18, 4));
  CHECK(weights_error(path, Model::kMcResNet18) ==
        "tensor 'conv1.weight' is not a weight of mc_resnet18 but of resnet18 (check --model)");
}

TEST_CASE("resnet: inputs and logits round trip; wrong input tensors are refused", "[cpu]") {
  gpu100::TempDir tmp("gpu100_resnet_files");
  const std::string path = tmp.file("in.g100");
  const int n = 2, h = 5, w = 7;
  const std::vector<std::vector<float>> mc_in = {gpu100::random_vector<float>(n * 3 * h * w, 1),
                                                 gpu100::random_vector<float>(n * 1 * h * w, 2)};
  save_net_inputs(path, Model::kMcResNet18, mc_in, n, h, w);
  int gn = 0, gh = 0, gw = 0;
  const auto back = load_net_inputs(path, Model::kMcResNet18, &gn, &gh, &gw);
  CHECK((gn == n && gh == h && gw == w));
  REQUIRE(back.size() == 2);
  CHECK(same_bits(back[0], mc_in[0]));
  CHECK(same_bits(back[1], mc_in[1]));
  auto inputs_error = [&](Model m) {
    return error_of(path, [&] { load_net_inputs(path, m, &gn, &gh, &gw); });
  };
  CHECK(inputs_error(Model::kResNet18) ==
        "unknown tensor 'rgb' (resnet18 reads 'image' [N, 3, H, W])");

  const std::vector<float> image = gpu100::random_vector<float>(1 * 3 * 4 * 3, 3);
  save_net_inputs(path, Model::kResNet18, {image}, 1, 4, 3);
  const auto img = load_net_inputs(path, Model::kResNet18, &gn, &gh, &gw);
  CHECK((gn == 1 && gh == 4 && gw == 3));
  CHECK(same_bits(img.at(0), image));
  const std::string mc_wants = "mc_resnet18 reads 'rgb' [N, 3, H, W] and 'depth' [N, 1, H, W]";
  CHECK(inputs_error(Model::kMcResNet18) == "unknown tensor 'image' (" + mc_wants + ")");

  auto write = [&](std::vector<int64_t> rgb, std::vector<int64_t> depth) {
    std::vector<Tensor> ts = {{"rgb", rgb, {}}, {"depth", depth, {}}};
    for (Tensor& t : ts) t.data.assign(size_t(t.numel()), 0.5f);
    gpu100::write_tensor_file(path, ts);
    return inputs_error(Model::kMcResNet18);
  };
  CHECK(write({2, 4, 5, 7}, {2, 1, 5, 7}) == "tensor 'rgb' has shape [2, 4, 5, 7], " + mc_wants);
  CHECK(write({2, 3, 5, 7}, {2, 3, 5, 7}) == "tensor 'depth' has shape [2, 3, 5, 7], " + mc_wants);
  CHECK(write({2, 3, 35}, {2, 1, 5, 7}) == "tensor 'rgb' has shape [2, 3, 35], " + mc_wants);
  CHECK(
      write({2, 3, 5, 7}, {2, 1, 6, 7}) ==
      "tensor 'depth' has shape [2, 1, 6, 7] and 'rgb' [2, 3, 5, 7]: N, H and W must be the same");
  gpu100::write_tensor_file(path, {{"rgb", {1, 3, 1, 1}, {1, 2, 3}}});
  CHECK(inputs_error(Model::kMcResNet18) == "no tensor 'depth' (" + mc_wants + ")");

  const std::string out = tmp.file("out.g100");
  const std::vector<float> logits = gpu100::random_vector<float>(2 * 15, 4);
  save_logits(out, logits, 2, 15);
  const std::vector<Tensor> got = gpu100::read_tensor_file(out);
  REQUIRE(got.size() == 1);
  CHECK(got[0].name == "logits");
  CHECK(got[0].shape == std::vector<int64_t>{2, 15});
  CHECK(same_bits(got[0].data, logits));
  CHECK_THROWS_AS(save_logits(out, logits, 3, 15), TensorFileError);
}
