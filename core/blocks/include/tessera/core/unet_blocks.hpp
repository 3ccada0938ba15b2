#pragma once
// The building blocks of Tessera's U-Nets, shared by core (UNetImpl, UNetStageImpl) and the
// shipped plugins: a convolution and a normalisation whose spatial dimension is a runtime
// field (1, 2 or 3), the n_c × (conv → norm → ReLU) block, and 2× pooling / up-sampling.
// Tensors are N × C × spatial... (NCL, NCHW, NCDHW), float. Parameter names are stable
// (conv<i>.weight, norm<i>.bias …): checkpoints and exports depend on them.
//
// This library needs only LibTorch (and core_base's torch-free enums) and is compiled
// position-independent, so a plugin links it without linking tessera_core. Not thread safe:
// one forward at a time per module.
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>
#include <torch/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "tessera/core/unet_spec.hpp"

namespace tessera {

class Decomposition;  // decomposition.hpp

/// A convolution whose dimension is a runtime field; optionally transposed. Weights are
/// Kaiming normal (fan-in of the forward convolution) from the current torch seed, bias 0.
/// Under a DecompositionScope a K > 1 convolution exchanges halos instead of padding.
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

/// In place: element-wise sum of a CPU float tensor over a group of ranks (identity for one
/// process): the replicas of a data-parallel job (synchronised batch norm), the blocks of a
/// decomposed image (parallel/spatial.hpp).
using ReplicaSum = std::function<void(torch::Tensor&)>;

/// y = `sum` of a copy of x, differentiable: backward is the same sum of the incoming
/// gradients, since every rank consumes y (each needs the derivative of every rank's loss,
/// not only its own share). `sum` is kept by address until backward: it must outlive the graph.
torch::Tensor sum_across_ranks(const torch::Tensor& x, const ReplicaSum& sum);

/// Batch, group (8 groups or fewer) or instance normalisation over a runtime dimension.
/// Under a DecompositionScope (decomposition.hpp) the statistics span the whole image.
/// Parameters weight, bias; batch norm also the buffers running_mean, running_var.
class NormNdImpl : public torch::nn::Module {
 public:
  NormNdImpl(Norm kind, int64_t channels);
  torch::Tensor forward(const torch::Tensor& x);
  /// Synchronised batch norm: training statistics over the whole global batch, through
  /// `sum` (forward) and the same sum of their gradients (backward). Empty disables it.
  void synchronise(ReplicaSum sum) { sync_ = std::move(sum); }

 private:
  torch::Tensor synchronised_forward(const torch::Tensor& x);
  torch::Tensor decomposed_forward(const torch::Tensor& x, const Decomposition& d);
  ReplicaSum sync_;
  Norm kind_;
  int64_t groups_;
  torch::Tensor weight_, bias_, running_mean_, running_var_;
};
TORCH_MODULE(NormNd);

/// Padding of a stride-1 K^D convolution: 0 for `valid`, (K−1)/2 for `same`.
int64_t conv_padding(Padding padding, int64_t kernel);

/// What a ConvBlock is made of: `convs` convolutions K^D from in_channels to out_channels
/// (then out → out), stride 1, `valid` (no padding) or `same` ((K−1)/2) padding.
struct ConvBlockOptions {
  ConvBlockOptions(int dims, int64_t in_channels, int64_t out_channels)
      : dims(dims), in_channels(in_channels), out_channels(out_channels) {}
  ConvBlockOptions& with_convs(int v) { convs = v; return *this; }
  ConvBlockOptions& with_kernel(int64_t v) { kernel = v; return *this; }
  ConvBlockOptions& with_padding(Padding v) { padding = v; return *this; }
  ConvBlockOptions& with_norm(Norm v) { norm = v; return *this; }

  int dims;              ///< spatial dimensions, 1 … 3
  int64_t in_channels;
  int64_t out_channels;
  int convs = 2;         ///< n_c
  int64_t kernel = 3;    ///< K, odd
  Padding padding = Padding::kValid;
  Norm norm = Norm::kNone;

  /// dims 1 … 3, channels >= 1, convs >= 1, an odd kernel >= 1. Throws tessera::Error naming the field.
  void validate() const;
};

/// n_c × (convolution → normalisation → ReLU). Submodules conv<i> and, unless the norm is
/// none, norm<i>, registered in that order.
class ConvBlockImpl : public torch::nn::Module {
 public:
  explicit ConvBlockImpl(const ConvBlockOptions& o);
  torch::Tensor forward(torch::Tensor x);

 private:
  std::vector<ConvNd> convs_;
  std::vector<NormNd> norms_;
};
TORCH_MODULE(ConvBlock);

/// A shape-preserving layer a plugin model runs after the last activation of a convolution
/// block (a Squeeze-and-Excitation block): N × C × spatial... in, the same shape out. A model
/// that declares its layer sequence (plugin.hpp, LayerLayout::block_tail) makes its tails of
/// this type, so a pipeline stage (unet_stages.hpp) can hold its own copy: fresh() builds one
/// of the same shape, whose parameters the stage then copies by name. Under a
/// DecompositionScope a tail takes whatever it needs of the whole image itself
/// (global_average_pool, decomposition.hpp) or refuses the scope naming itself.
class BlockTailImpl : public torch::nn::Module {
 public:
  virtual torch::Tensor forward(const torch::Tensor& x) = 0;
  /// A new tail of the same shape (its parameters initialised anew; the caller copies them).
  virtual std::shared_ptr<BlockTailImpl> fresh() const = 0;
};

/// 2^D max pooling, kernel and stride 2, over the x.dim() − 2 spatial axes (1 … 3).
torch::Tensor max_pool2x(const torch::Tensor& x);
/// Nearest-neighbour 2× up-sampling over the x.dim() − 2 spatial axes (2 or 3).
torch::Tensor upsample_nearest2x(const torch::Tensor& x);

}  // namespace tessera
