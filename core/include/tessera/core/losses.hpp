#pragma once
// Segmentation losses on logits (N, C, spatial...) float and integer targets (N, spatial...)
// int64, 2-D (NCHW) and 3-D (NCDHW) alike. A target equal to `ignore_index` marks a pixel
// that counts nowhere: not in the pixel count, not in any sum, not in any gradient.
//
// Every loss is a function of per-batch SUMS (its sufficient statistics), so the loss of a
// global batch split over data-parallel replicas or micro-batches is exact: sum the
// statistics of the parts (allreduce), then call loss_from_statistics. Nothing is averaged
// before the sums are complete, and adaptive class weights are computed from the summed
// counts too, so they are the same however the batch is split.
//
// Notation (sums over the labelled pixels i of the batch; y_i the true class, p_ic the
// softmax probability, g_ic = [y_i == c], w_c the class weight, K the classes in the Dice
// mean: all, or all but class 0 when include_background is false):
//   G_c = Σ_i g_ic                       labelled pixels of class c
//   W   = Σ_c w_c G_c                    class-weighted labelled pixels
//   E_c = Σ_i g_ic (−log p_ic)           cross-entropy summed over the pixels of class c
//   F_c = Σ_i g_ic (1 − p_ic)^γ (−log p_ic)   focal term summed over the pixels of class c
//   I_c = Σ_i p_ic g_ic,  S_c = Σ_i p_ic       soft intersection and soft predicted volume
//   D_c = (2 I_c + s) / (S_c + G_c + s)        soft Dice, s = smooth
//
// The losses:
//   ce     CE    = Σ_c w_c E_c / W            (= PyTorch's cross_entropy with `weight`, mean)
//   dice   Dice  = 1 − Σ_{c∈K} w_c D_c / Σ_{c∈K} w_c
//   dice_ce       ce_weight · CE + dice_weight · Dice
//   focal  Focal = Σ_c w_c F_c / W            (class weights act as the focal α; γ = 0 gives CE)
//   adaptive_dice_focal (AnatomyNet-style hybrid loss for small organs)
//                 dice_weight · Dice + focal_weight · AFocal, where
//          AFocal = Σ_i a_{y_i} f_i / Σ_i a_{y_i} with adaptive weights a_c = w_c · n / (|P| G_c)
//                   for the classes P present in the (global) batch's target (G_c > 0; n = Σ_c G_c),
//                   i.e. inverse class frequency, scaled so a balanced batch gives a_c = w_c.
//                 Written with the sums: AFocal = Σ_{c∈P} w_c (F_c / G_c) / Σ_{c∈P} w_c — the
//                 w-weighted mean over present classes of each class's mean focal term, so a
//                 100-voxel organ pulls as hard as the background. The Dice term already
//                 weighs every class equally whatever its size.
// Empty classes: with smooth > 0 a class absent from both target and prediction has
// D_c = s / (S_c + s) → 1 (exactly 1 when its probabilities underflow to 0). With
// smooth = 0 and S_c + G_c = 0 (no labelled pixel at all) D_c is defined as 1. A batch
// with no labelled pixel has CE = Focal = AFocal = 0 (and stays differentiable).
// Cross-entropy and focal terms always cover every class; include_background only
// affects the Dice mean (as nnU-Net does).
#include <cstdint>
#include <string>
#include <vector>

#include <torch/types.h>

namespace tessera {

enum class LossKind { kCrossEntropy, kDice, kDiceCrossEntropy, kFocal, kAdaptiveDiceFocal };

/// "ce", "dice", "dice_ce", "focal", "adaptive_dice_focal"; throws tessera::Error listing them.
LossKind parse_loss_kind(const std::string& name);
/// The name parse_loss_kind accepts for `kind`.
std::string loss_kind_name(LossKind kind);

struct LossOptions {
  LossKind kind = LossKind::kDiceCrossEntropy;
  double dice_weight = 1.0;    ///< weight of the Dice term (dice_ce, adaptive_dice_focal)
  double ce_weight = 1.0;      ///< weight of the cross-entropy term (dice_ce)
  double focal_weight = 1.0;   ///< weight of the focal term (adaptive_dice_focal)
  double focal_gamma = 2.0;    ///< focusing exponent γ >= 0 (focal, adaptive_dice_focal)
  double smooth = 1.0;         ///< Dice smoothing s added to numerator and denominator, >= 0
  bool include_background = true;  ///< class 0 in the Dice mean
  int64_t ignore_index = -100;     ///< target value of pixels that count nowhere
  std::vector<double> class_weights;  ///< w_c per class, >= 0; empty = all 1

  LossOptions& with_kind(LossKind v) { kind = v; return *this; }
  LossOptions& with_dice_weight(double v) { dice_weight = v; return *this; }
  LossOptions& with_ce_weight(double v) { ce_weight = v; return *this; }
  LossOptions& with_focal_weight(double v) { focal_weight = v; return *this; }
  LossOptions& with_focal_gamma(double v) { focal_gamma = v; return *this; }
  LossOptions& with_smooth(double v) { smooth = v; return *this; }
  LossOptions& with_include_background(bool v) { include_background = v; return *this; }
  LossOptions& with_ignore_index(int64_t v) { ignore_index = v; return *this; }
  LossOptions& with_class_weights(std::vector<double> v) { class_weights = std::move(v); return *this; }

  /// Throws tessera::Error naming the bad field (e.g. "loss.class_weights: ...").
  void validate(int64_t classes) const;
};

/// Length of the statistics vector for `classes` classes: 1 + 5·classes. Layout (every
/// entry a sum over pixels; entries a kind does not use are 0):
///   [0] W, [1, 1+C) G_c, [1+C, 1+2C) E_c, [1+2C, 1+3C) F_c, [1+3C, 1+4C) I_c, [1+4C, 1+5C) S_c.
int64_t loss_statistics_size(int64_t classes);

/// Sufficient statistics of one batch: a 1-D float tensor of sums over its pixels (with
/// autograd graph to `logits`). Entry 0 is the class-weighted number of labelled pixels W.
/// Statistics of several batches/replicas ADD. Throws tessera::Error when the shapes of
/// logits (N, C, spatial...) and target (N, spatial...) do not match.
torch::Tensor loss_statistics(const torch::Tensor& logits, const torch::Tensor& target, const LossOptions& o);

/// Entry 0 of loss_statistics from the labels alone: the class-weighted number of pixels
/// labelled 0 … classes − 1 in `target` (the ignore label and other values count 0).
double weighted_label_count(const torch::Tensor& target, const LossOptions& o, int64_t classes);

/// The loss from (possibly summed) statistics: a 0-dim tensor, differentiable through `stats`.
torch::Tensor loss_from_statistics(const torch::Tensor& stats, const LossOptions& o, int64_t classes);

/// loss_from_statistics(loss_statistics(logits, target, o), o, logits.size(1)).
torch::Tensor segmentation_loss(const torch::Tensor& logits, const torch::Tensor& target, const LossOptions& o);

/// The Dice loss of `o` (kind ignored): 1 − weighted mean over classes of soft Dice, over the whole batch.
torch::Tensor soft_dice_loss(const torch::Tensor& logits, const torch::Tensor& target, const LossOptions& o);
/// ce_weight · CE + dice_weight · soft Dice (kind ignored).
torch::Tensor dice_ce_loss(const torch::Tensor& logits, const torch::Tensor& target, const LossOptions& o);

}  // namespace tessera
