#include "layers.hpp"

#include <stdexcept>

#include <torch/torch.h>

#include "tessera/core/decomposition.hpp"

namespace tessera::plugins {

ConvNd same_conv(int dims, int64_t in, int64_t out, int64_t kernel) {
  if (kernel % 2 == 0) throw std::invalid_argument("kernel must be odd, got " + std::to_string(kernel));
  return ConvNd(dims, in, out, kernel, conv_padding(Padding::kSame, kernel));
}

ConvNd transposed_up(int dims, int64_t in, int64_t out) {
  return ConvNd(dims, in, out, /*kernel=*/2, /*padding=*/0, /*stride=*/2, /*transposed=*/true);
}

Norm parse_norm_kind(const std::string& s) {
  if (s == "none") return Norm::kNone;
  if (s == "group") return Norm::kGroup;
  if (s == "instance") return Norm::kInstance;
  throw std::invalid_argument("norm: '" + s + "' is not one of none, group, instance");
}

SqueezeExcitationImpl::SqueezeExcitationImpl(int64_t channels, int64_t reduction)
    : channels_(channels), reduction_(reduction) {
  if (reduction < 1) throw std::invalid_argument("reduction must be >= 1, got " + std::to_string(reduction));
  const int64_t hidden = std::max<int64_t>(1, channels / reduction);
  fc1_ = register_module("fc1", torch::nn::Linear(channels, hidden));
  fc2_ = register_module("fc2", torch::nn::Linear(hidden, channels));
}

torch::Tensor SqueezeExcitationImpl::excitation(const torch::Tensor& x) {
  // Squeeze: one number per channel from the whole field of view (global context that the
  // local convolutions cannot see; the whole image's under a spatial decomposition); excite:
  // a gate per channel.
  const auto squeezed = global_average_pool(x);
  return torch::sigmoid(fc2_->forward(torch::relu(fc1_->forward(squeezed))));
}

torch::Tensor SqueezeExcitationImpl::forward(const torch::Tensor& x) {
  std::vector<int64_t> shape(x.dim(), 1);
  shape[0] = x.size(0);
  shape[1] = x.size(1);
  return x * excitation(x).view(shape);
}

std::shared_ptr<BlockTailImpl> SqueezeExcitationImpl::fresh() const {
  return std::make_shared<SqueezeExcitationImpl>(channels_, reduction_);
}

ConvBlock same_conv_block(int dims, int64_t in, int64_t out, int convs, Norm norm) {
  return ConvBlock(ConvBlockOptions(dims, in, out).with_convs(convs).with_padding(Padding::kSame).with_norm(norm));
}

SeConvBlockImpl::SeConvBlockImpl(int dims, int64_t in, int64_t out, int convs, Norm norm, int64_t se_reduction)
    : ConvBlockImpl(ConvBlockOptions(dims, in, out).with_convs(convs).with_padding(Padding::kSame).with_norm(norm)) {
  if (se_reduction > 0) se_ = register_module("se", SqueezeExcitation(out, se_reduction));
}

torch::Tensor SeConvBlockImpl::forward(torch::Tensor x) {
  x = ConvBlockImpl::forward(std::move(x));
  return se_ ? se_->forward(x) : x;
}

void check_input(const torch::Tensor& x, int dims, int64_t channels, int64_t multiple, const char* model) {
  const std::string name = model;
  if (x.dim() != dims + 2)
    throw std::invalid_argument(name + ": input must have " + std::to_string(dims + 2) + " axes (N, C, " +
                                std::to_string(dims) + " spatial), got " + std::to_string(x.dim()));
  if (x.size(1) != channels)
    throw std::invalid_argument(name + ": input has " + std::to_string(x.size(1)) + " channels, the model expects " +
                                std::to_string(channels));
  for (int d = 0; d < dims; ++d)
    if (x.size(2 + d) % multiple != 0)
      throw std::invalid_argument(name + ": spatial side " + std::to_string(x.size(2 + d)) +
                                  " is not a multiple of " + std::to_string(multiple));
}

ModelOptions unet_like_defaults(int dims, int in_channels, int classes, int filters, int levels, int convs,
                                const std::string& norm) {
  return ModelOptions{}
      .with_dims(dims)
      .with_in_channels(in_channels)
      .with_classes(classes)
      .with_filters(filters)
      .with_levels(levels)
      .with("convs", std::to_string(convs))
      .with("norm", norm);
}

}  // namespace tessera::plugins
