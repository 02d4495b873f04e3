#pragma once
// The extension's operator implementations (library.cpp registers them in the gpu100 namespace).
#include <ATen/ATen.h>

#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace gpu100_torch {

// conv_ops.cpp
std::tuple<at::Tensor, at::Tensor> dual_conv2d_cuda(
    const at::Tensor& rgb, const at::Tensor& depth, const at::Tensor& w_rgb,
    const at::Tensor& w_depth, const std::optional<at::Tensor>& b_rgb,
    const std::optional<at::Tensor>& b_depth, int64_t stride, int64_t padding,
    const std::optional<at::Tensor>& res_rgb, const std::optional<at::Tensor>& res_depth,
    const std::string& act);
std::tuple<at::Tensor, at::Tensor> dual_conv2d_meta(
    const at::Tensor& rgb, const at::Tensor& depth, const at::Tensor& w_rgb,
    const at::Tensor& w_depth, const std::optional<at::Tensor>& b_rgb,
    const std::optional<at::Tensor>& b_depth, int64_t stride, int64_t padding,
    const std::optional<at::Tensor>& res_rgb, const std::optional<at::Tensor>& res_depth,
    const std::string& act);
at::Tensor conv_bn_act_cuda(const at::Tensor& x, const at::Tensor& w, const at::Tensor& bias,
                            const std::optional<at::Tensor>& residual, const std::string& act,
                            int64_t stride, int64_t padding);
at::Tensor conv_bn_act_meta(const at::Tensor& x, const at::Tensor& w, const at::Tensor& bias,
                            const std::optional<at::Tensor>& residual, const std::string& act,
                            int64_t stride, int64_t padding);

// "" when this build runs `what` ("fp32", "tf32", "bf16", "tf32_nhwc") on the current GPU, else
// the reason, e.g. "bf16 needs an sm_80 build (CMAKE_CUDA_ARCHITECTURES=75-virtual)".
std::string build_lacks(const std::string& what);

// net_ops.cpp
int64_t mc_resnet18_create(const std::vector<std::string>& names,
                           const std::vector<at::Tensor>& weights, const std::string& precision,
                           const std::string& trunks, bool eager_graph);
void mc_resnet18_release(int64_t handle);
at::Tensor mc_resnet18_forward_cuda(int64_t handle, const at::Tensor& rgb, const at::Tensor& depth);
at::Tensor mc_resnet18_forward_meta(int64_t handle, const at::Tensor& rgb, const at::Tensor& depth);

}  // namespace gpu100_torch
