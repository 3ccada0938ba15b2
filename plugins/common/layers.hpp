#pragma once
// Building blocks shared by the shipped plugins (compiled into each plugin; plugins see only
// the plugin API and LibTorch, never tessera_core). The spatial dimension is a runtime field
// (1, 2 or 3): tensors are N × C × spatial... (NCL, NCHW, NCDHW), float.
#include <cstdint>
#include <string>
#include <vector>

#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/pimpl.h>
#include <torch/types.h>

namespace tessera::plugins {

/// Convolution with kernel K and stride 1, `same` padding (K odd); or, transposed, the
/// learned 2× upsampling of a U-Net decoder (kernel = stride = 2). Kaiming-normal weights.
class ConvNdImpl : public torch::nn::Module {
 public:
  ConvNdImpl(int dims, int64_t in, int64_t out, int64_t kernel, bool transposed_up = false);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  int dims_;
  int64_t kernel_;
  bool transposed_;
  torch::Tensor weight_, bias_;
};
TORCH_MODULE(ConvNd);

enum class NormKind { kNone, kGroup, kInstance };
/// "none", "group" or "instance"; throws std::invalid_argument naming the option `norm`.
NormKind parse_norm_kind(const std::string& s);

/// Squeeze-and-Excitation (Hu et al.; AnatomyNet): global average pool over space →
/// FC (C → C/r) → ReLU → FC (C/r → C) → sigmoid gives one weight in (0, 1) per channel,
/// which scales that channel. Parameters fc1.*, fc2.*.
class SqueezeExcitationImpl : public torch::nn::Module {
 public:
  SqueezeExcitationImpl(int64_t channels, int64_t reduction);
  /// The per-channel weights, N × C, each in (0, 1).
  torch::Tensor excitation(const torch::Tensor& x);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  torch::nn::Linear fc1_{nullptr}, fc2_{nullptr};
};
TORCH_MODULE(SqueezeExcitation);

/// convs × (3^D `same` convolution → normalisation → ReLU), then an SE block when
/// se_reduction > 0. Submodules conv<i>, norm<i>, se.
class ConvBlockImpl : public torch::nn::Module {
 public:
  ConvBlockImpl(int dims, int64_t in, int64_t out, int convs, NormKind norm, int64_t se_reduction = 0);
  torch::Tensor forward(torch::Tensor x);

 private:
  std::vector<ConvNd> convs_;
  std::vector<torch::nn::GroupNorm> norms_;
  SqueezeExcitation se_{nullptr};
};
TORCH_MODULE(ConvBlock);

/// 2^D max pooling with stride 2.
torch::Tensor max_pool2x(const torch::Tensor& x, int dims);

/// Throws std::invalid_argument unless x is N × channels × (dims spatial axes), each
/// spatial side a multiple of `multiple`.
void check_input(const torch::Tensor& x, int dims, int64_t channels, int64_t multiple, const char* model);

}  // namespace tessera::plugins
