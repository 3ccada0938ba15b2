#pragma once
// Internal to core: nnU-Net's deep supervision for the plain U-Net (train.deep_supervision).
// Besides the full-resolution output, the decoder's lower levels each predict the labels at
// their own resolution through a 1×1 head of their own, scored against the labels taken at
// that resolution; the losses are summed with weights halving per level, the lowest level's
// 0, normalised to 1 (nnU-Net v2, nnUNetTrainer._build_loss). The heads train with the
// network and live beside it (a checkpoint's extra module): inference runs the U-Net alone.
// Decoder level ℓ of an L-level U-Net is the output of block dec<ℓ>, 2^ℓ times coarser than
// the input; `same` padding only (every level then covers the whole tile).
#include <map>
#include <vector>

#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>
#include <torch/types.h>

#include "tessera/core/unet.hpp"

namespace tessera::detail {

/// The loss weight of each decoder level ℓ = 0 … levels − 2: 2^−ℓ, the lowest 0 when there are
/// two or more, normalised to sum 1. (1) for 2 levels; (1, 0) for 3; (4/7, 2/7, 1/7, 0) for 5.
std::vector<double> deep_supervision_weights(int levels);

/// The 1×1 heads of the decoder levels ℓ ≥ 1 whose weight is not 0 (level 0 is the U-Net's
/// own head); modules "head1", "head2" … Default initialisation from the torch generator.
class DeepSupervisionHeadsImpl : public torch::nn::Module {
 public:
  explicit DeepSupervisionHeadsImpl(const UNetOptions& unet);
  /// The levels with a head, ascending (empty for fewer than 4 levels).
  const std::vector<int>& levels() const { return levels_; }
  /// Logits (N, classes, spatial) of level ℓ from dec<ℓ>'s output.
  torch::Tensor forward(int level, const torch::Tensor& features);

 private:
  std::vector<int> levels_;
  std::map<int, ConvNd> heads_;
};
TORCH_MODULE(DeepSupervisionHeads);

/// The built-in U-Net's forward (`same` padding) keeping the output of dec<ℓ> for each ℓ of
/// `levels` in `features`; returns the logits, exactly net->forward(x)'s.
torch::Tensor forward_keeping_decoder(UNet& net, torch::Tensor x, const std::vector<int>& levels,
                                      std::map<int, torch::Tensor>& features);

/// A target (N, spatial…) at decoder level ℓ: every 2^ℓ-th voxel per spatial axis, from the
/// one nearest each block's centre (nearest neighbour; ignore labels stay ignored).
torch::Tensor target_at_level(const torch::Tensor& target, int level);

}  // namespace tessera::detail
