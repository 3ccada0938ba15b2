#include "layers.hpp"

#include <cmath>
#include <numeric>
#include <stdexcept>

#include <torch/torch.h>

namespace tessera::plugins {

ConvNdImpl::ConvNdImpl(int dims, int64_t in, int64_t out, int64_t kernel, bool transposed_up)
    : dims_(dims), kernel_(transposed_up ? 2 : kernel), transposed_(transposed_up) {
  if (!transposed_ && kernel % 2 == 0) throw std::invalid_argument("kernel must be odd, got " + std::to_string(kernel));
  std::vector<int64_t> shape = transposed_ ? std::vector<int64_t>{in, out} : std::vector<int64_t>{out, in};
  for (int d = 0; d < dims; ++d) shape.push_back(kernel_);
  weight_ = register_parameter("weight", torch::empty(shape));
  bias_ = register_parameter("bias", torch::zeros({out}));
  // Kaiming normal for ReLU networks: fan-in of one output pixel.
  const double fan_in = double(in) * std::pow(double(kernel_), dims) / (transposed_ ? std::pow(2.0, dims) : 1.0);
  torch::NoGradGuard no_grad;
  weight_.normal_(0.0, std::sqrt(2.0 / fan_in));
}

torch::Tensor ConvNdImpl::forward(const torch::Tensor& x) {
  const std::vector<int64_t> one(dims_, 1), zero(dims_, 0);
  if (transposed_) {
    const std::vector<int64_t> two(dims_, 2);
    return torch::convolution(x, weight_, bias_, two, zero, one, true, zero, 1);
  }
  const std::vector<int64_t> pad(dims_, kernel_ / 2);
  return torch::convolution(x, weight_, bias_, one, pad, one, false, zero, 1);
}

NormKind parse_norm_kind(const std::string& s) {
  if (s == "none") return NormKind::kNone;
  if (s == "group") return NormKind::kGroup;
  if (s == "instance") return NormKind::kInstance;
  throw std::invalid_argument("norm: '" + s + "' is not one of none, group, instance");
}

SqueezeExcitationImpl::SqueezeExcitationImpl(int64_t channels, int64_t reduction) {
  if (reduction < 1) throw std::invalid_argument("reduction must be >= 1, got " + std::to_string(reduction));
  const int64_t hidden = std::max<int64_t>(1, channels / reduction);
  fc1_ = register_module("fc1", torch::nn::Linear(channels, hidden));
  fc2_ = register_module("fc2", torch::nn::Linear(hidden, channels));
}

torch::Tensor SqueezeExcitationImpl::excitation(const torch::Tensor& x) {
  // Squeeze: one number per channel from the whole field of view (global context that the
  // local convolutions cannot see); excite: a gate per channel.
  const auto squeezed = x.flatten(2).mean(2);
  return torch::sigmoid(fc2_->forward(torch::relu(fc1_->forward(squeezed))));
}

torch::Tensor SqueezeExcitationImpl::forward(const torch::Tensor& x) {
  std::vector<int64_t> shape(x.dim(), 1);
  shape[0] = x.size(0);
  shape[1] = x.size(1);
  return x * excitation(x).view(shape);
}

ConvBlockImpl::ConvBlockImpl(int dims, int64_t in, int64_t out, int convs, NormKind norm, int64_t se_reduction) {
  for (int i = 0; i < convs; ++i) {
    convs_.push_back(register_module("conv" + std::to_string(i), ConvNd(dims, i == 0 ? in : out, out, 3)));
    if (norm != NormKind::kNone) {
      const int64_t groups = norm == NormKind::kInstance ? out : std::gcd<int64_t>(8, out);
      norms_.push_back(register_module("norm" + std::to_string(i),
                                       torch::nn::GroupNorm(torch::nn::GroupNormOptions(groups, out))));
    }
  }
  if (se_reduction > 0) se_ = register_module("se", SqueezeExcitation(out, se_reduction));
}

torch::Tensor ConvBlockImpl::forward(torch::Tensor x) {
  for (size_t i = 0; i < convs_.size(); ++i) {
    x = convs_[i]->forward(x);
    if (!norms_.empty()) x = norms_[i]->forward(x);
    x = torch::relu(x);
  }
  return se_ ? se_->forward(x) : x;
}

torch::Tensor max_pool2x(const torch::Tensor& x, int dims) {
  switch (dims) {
    case 1: return torch::max_pool1d(x, 2);
    case 2: return torch::max_pool2d(x, 2);
    default: return torch::max_pool3d(x, 2);
  }
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

}  // namespace tessera::plugins
