#pragma once
// Segmentation losses on logits (N, classes, spatial...) and integer targets
// (N, spatial...) int64, where `ignore_index` marks pixels that count nowhere.
#include <torch/types.h>

namespace tessera {

struct LossOptions {
  double dice_weight = 1.0;   ///< weight of the soft Dice term in Dice + CE
  double ce_weight = 1.0;     ///< weight of the cross-entropy term
  double smooth = 1.0;        ///< Dice smoothing added to numerator and denominator
  int64_t ignore_index = -100;
};

/// 1 − mean over classes of soft Dice, computed over the whole batch.
torch::Tensor soft_dice_loss(const torch::Tensor& logits, const torch::Tensor& target, const LossOptions& o);
/// ce_weight · CE + dice_weight · soft Dice.
torch::Tensor dice_ce_loss(const torch::Tensor& logits, const torch::Tensor& target, const LossOptions& o);

}  // namespace tessera
