#pragma once
// Internal to the trainer: validation by tiled inference over held-back regions. Only the
// tiles whose inset meets a region run, and tiles are dealt round-robin to replicas, so the
// confusion matrix summed over replicas is that of the whole validation set (exact tiling:
// the same labels `tessera infer` would write there).
#include <vector>

#include <torch/types.h>

#include "tessera/core/trainer.hpp"

namespace tessera::detail {

/// (classes × classes) float64 counts [truth][prediction] of this replica's share.
torch::Tensor validation_confusion(UNet& net, const std::vector<TrainingPair>& validation, const Normalization& norm,
                                   int64_t tile, int replica, int replicas);

/// Dice per class from a confusion matrix: 2·TP / (2·TP + FP + FN); NaN for a class absent
/// from both truth and prediction.
std::vector<double> dice_from_confusion(const torch::Tensor& confusion);

}  // namespace tessera::detail
