#pragma once
// Building blocks of the shipped plugins beyond core's shared ones (tessera/core/unet_blocks.hpp:
// ConvNd, NormNd, ConvBlock, max_pool2x, compiled into each plugin; plugins never link
// tessera_core). The spatial dimension is a runtime field (1, 2 or 3): tensors are
// N × C × spatial... (NCL, NCHW, NCDHW), float. Errors are std::invalid_argument, which the
// model registry turns into tessera::Error naming the model.
#include <cstdint>
#include <string>

#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>
#include <torch/types.h>

#include "tessera/core/unet_blocks.hpp"
#include "tessera/plugin.hpp"

namespace tessera::plugins {

/// "none", "group" or "instance" (batch norm is not offered: its statistics would couple the
/// tiles of a decomposition); throws std::invalid_argument naming the option `norm`.
Norm parse_norm_kind(const std::string& s);

/// A stride-1 K^D `same` convolution (K odd), as the plugins use them.
ConvNd same_conv(int dims, int64_t in, int64_t out, int64_t kernel);
/// The learned 2× up-sampling of a U-Net decoder: transposed, kernel = stride = 2.
ConvNd transposed_up(int dims, int64_t in, int64_t out);

/// Squeeze-and-Excitation (Hu et al.; AnatomyNet): global average pool over space →
/// FC (C → C/r) → ReLU → FC (C/r → C) → sigmoid gives one weight in (0, 1) per channel,
/// which scales that channel. Parameters fc1.*, fc2.*. A block tail (unet_blocks.hpp), so a
/// pipeline stage can hold a copy.
class SqueezeExcitationImpl : public BlockTailImpl {
 public:
  SqueezeExcitationImpl(int64_t channels, int64_t reduction);
  /// The per-channel weights, N × C, each in (0, 1).
  torch::Tensor excitation(const torch::Tensor& x);
  torch::Tensor forward(const torch::Tensor& x) override;
  std::shared_ptr<BlockTailImpl> fresh() const override;

 private:
  int64_t channels_, reduction_;
  torch::nn::Linear fc1_{nullptr}, fc2_{nullptr};
};
TORCH_MODULE(SqueezeExcitation);

/// core's ConvBlock with 3^D `same` convolutions (convs × conv → norm → ReLU), then an SE
/// block when se_reduction > 0. Submodules conv<i>, norm<i>, se.
class SeConvBlockImpl : public ConvBlockImpl {
 public:
  SeConvBlockImpl(int dims, int64_t in, int64_t out, int convs, Norm norm, int64_t se_reduction);
  torch::Tensor forward(torch::Tensor x);

 private:
  SqueezeExcitation se_{nullptr};
};
TORCH_MODULE(SeConvBlock);

/// core's ConvBlock with 3^D `same` convolutions and no SE (convs × conv → norm → ReLU).
ConvBlock same_conv_block(int dims, int64_t in, int64_t out, int convs, Norm norm);

/// Throws std::invalid_argument unless x is N × channels × (dims spatial axes), each
/// spatial side a multiple of `multiple`.
void check_input(const torch::Tensor& x, int dims, int64_t channels, int64_t multiple, const char* model);

/// ModelEntry::defaults of a U-Net-shaped factory: the common fields, "convs" and "norm".
ModelOptions unet_like_defaults(int dims, int in_channels, int classes, int filters, int levels, int convs,
                                const std::string& norm);

/// The fields every U-Net-shaped factory reads from ModelOptions (dims, in_channels, classes,
/// filters, levels and "convs") into its options struct `o`, which supplies what is not given.
/// Throws std::invalid_argument naming "convs" when it is not an integer.
template <class Options>
void read_unet_like(const ModelOptions& m, Options& o) {
  o.dims = m.dims.value_or(o.dims);
  o.in_channels = m.in_channels.value_or(o.in_channels);
  o.classes = m.classes.value_or(o.classes);
  o.filters = m.filters.value_or(o.filters);
  o.levels = m.levels.value_or(o.levels);
  o.convs = m.get_int("convs", o.convs);
}

}  // namespace tessera::plugins
