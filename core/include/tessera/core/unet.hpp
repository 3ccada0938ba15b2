#pragma once
// The U-Net family as a LibTorch module, one implementation for 2-D and 3-D.
// Input NCHW or NCDHW float, output logits N × classes × spatial. For `valid` padding the
// spatial output is smaller by 2ε (unet_spec.hpp) and the input side must be valid
// (unet_output_size). Parameter names are stable (enc0.conv0.weight …, up0.weight, head.weight)
// so checkpoints and exports keep their meaning. Not thread safe: one forward at a time.
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>
#include <torch/types.h>

#include <functional>

#include "tessera/core/unet_spec.hpp"

namespace tessera {

/// A convolution whose dimension is a runtime field (2 or 3); optionally transposed.
class ConvNdImpl : public torch::nn::Module {
 public:
  ConvNdImpl(int dims, int64_t in, int64_t out, int64_t kernel, int64_t padding,
             int64_t stride = 1, bool transposed = false);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  int dims_;
  int64_t padding_, stride_;
  bool transposed_;
  torch::Tensor weight_, bias_;
};
TORCH_MODULE(ConvNd);

/// In place: element-wise sum of a CPU float tensor over the replicas of a data-parallel
/// job (identity for one process). Used by synchronised batch norm.
using ReplicaSum = std::function<void(torch::Tensor&)>;

/// Batch, group (8 groups or fewer) or instance normalisation over a runtime dimension.
class NormNdImpl : public torch::nn::Module {
 public:
  NormNdImpl(Norm kind, int64_t channels);
  torch::Tensor forward(const torch::Tensor& x);
  /// Synchronised batch norm: training statistics over the whole global batch, through
  /// `sum` (forward) and the same sum of their gradients (backward). Empty disables it.
  void synchronise(ReplicaSum sum) { sync_ = std::move(sum); }

 private:
  torch::Tensor synchronised_forward(const torch::Tensor& x);
  ReplicaSum sync_;
  Norm kind_;
  int64_t groups_;
  torch::Tensor weight_, bias_, running_mean_, running_var_;
};
TORCH_MODULE(NormNd);

/// n_c × (convolution → normalisation → ReLU).
class ConvBlockImpl : public torch::nn::Module {
 public:
  ConvBlockImpl(const UNetOptions& o, int64_t in, int64_t out);
  torch::Tensor forward(torch::Tensor x);

 private:
  std::vector<ConvNd> convs_;
  std::vector<NormNd> norms_;
};
TORCH_MODULE(ConvBlock);

class UNetImpl : public torch::nn::Module {
 public:
  /// Validates the options (throws tessera::Error) and initialises weights (Kaiming normal,
  /// from the current torch seed).
  explicit UNetImpl(UNetOptions options);
  torch::Tensor forward(torch::Tensor x);
  const UNetOptions& options() const { return options_; }
  /// Batch norm layers take their training statistics over all replicas (see NormNdImpl).
  void synchronise_batch_norm(const ReplicaSum& sum);
  /// Stores weights and runs activations channels-last (NHWC / NDHWC), the faster layout for
  /// CPU convolutions here; results are unchanged up to float rounding. For inference.
  void use_channels_last();
  /// Back to the default contiguous (NCHW / NCDHW) layout, e.g. after a validation pass.
  void use_contiguous();

 private:
  UNetOptions options_;
  bool channels_last_ = false;
  std::vector<ConvBlock> encoder_;
  std::vector<ConvNd> up_;
  std::vector<ConvBlock> decoder_;
  ConvNd head_{nullptr};
};
TORCH_MODULE(UNet);

/// Centre crop of x's spatial axes to `like`'s spatial sizes.
torch::Tensor center_crop(const torch::Tensor& x, const torch::Tensor& like);

}  // namespace tessera
