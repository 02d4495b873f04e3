// The gpu100 operator library: schemas, CUDA kernels and Meta (shape) functions. Load it with
// torch.ops.load_library(path) (the gpu100_torch package does), then call torch.ops.gpu100.<name>.
// None has a backward; the package registers one that says so.
#include <torch/library.h>

#include "ops.hpp"

TORCH_LIBRARY(gpu100, m) {
  m.def(
      "dual_conv2d(Tensor rgb, Tensor depth, Tensor w_rgb, Tensor w_depth, Tensor? b_rgb=None, "
      "Tensor? b_depth=None, int stride=1, int padding=0, Tensor? res_rgb=None, "
      "Tensor? res_depth=None, str act=\"none\") -> (Tensor, Tensor)");
  m.def(
      "conv_bn_act(Tensor x, Tensor w, Tensor bias, Tensor? residual=None, str act=\"relu\", "
      "int stride=1, int padding=0) -> Tensor");
  // The network's weights are copied to the GPU once, at creation; the handle names it.
  m.def(
      "mc_resnet18_create(str[] names, Tensor[] weights, str precision=\"bf16\", "
      "str trunks=\"streams\", bool eager_graph=True) -> int",
      &gpu100_torch::mc_resnet18_create);
  m.def("mc_resnet18_release(int net) -> ()", &gpu100_torch::mc_resnet18_release);
  // What this build cannot run on the current GPU ("" when it can): the tests skip on it.
  m.def("build_lacks(str what) -> str", &gpu100_torch::build_lacks);
  m.def("mc_resnet18_forward(int net, Tensor rgb, Tensor depth) -> Tensor");
}

TORCH_LIBRARY_IMPL(gpu100, CUDA, m) {
  m.impl("dual_conv2d", &gpu100_torch::dual_conv2d_cuda);
  m.impl("conv_bn_act", &gpu100_torch::conv_bn_act_cuda);
  m.impl("mc_resnet18_forward", &gpu100_torch::mc_resnet18_forward_cuda);
}

TORCH_LIBRARY_IMPL(gpu100, Meta, m) {
  m.impl("dual_conv2d", &gpu100_torch::dual_conv2d_meta);
  m.impl("conv_bn_act", &gpu100_torch::conv_bn_act_meta);
  m.impl("mc_resnet18_forward", &gpu100_torch::mc_resnet18_forward_meta);
}

// A CPU tensor reaches the CUDA functions' own checks, which refuse it in one line, instead of
// the dispatcher's message about a missing CPU kernel.
TORCH_LIBRARY_IMPL(gpu100, CPU, m) {
  m.impl("dual_conv2d", &gpu100_torch::dual_conv2d_cuda);
  m.impl("conv_bn_act", &gpu100_torch::conv_bn_act_cuda);
  m.impl("mc_resnet18_forward", &gpu100_torch::mc_resnet18_forward_cuda);
}
