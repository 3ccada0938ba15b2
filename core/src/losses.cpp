#include "tessera/core/losses.hpp"

#include <cmath>
#include <utility>

#include <torch/torch.h>

#include "tessera/core/error.hpp"

namespace tessera {
namespace {

constexpr std::pair<LossKind, const char*> kKindNames[] = {
    {LossKind::kCrossEntropy, "ce"},
    {LossKind::kDice, "dice"},
    {LossKind::kDiceCrossEntropy, "dice_ce"},
    {LossKind::kFocal, "focal"},
    {LossKind::kAdaptiveDiceFocal, "adaptive_dice_focal"},
};

bool uses_dice(LossKind k) {
  return k == LossKind::kDice || k == LossKind::kDiceCrossEntropy || k == LossKind::kAdaptiveDiceFocal;
}
bool uses_ce(LossKind k) { return k == LossKind::kCrossEntropy || k == LossKind::kDiceCrossEntropy; }
bool uses_focal(LossKind k) { return k == LossKind::kFocal || k == LossKind::kAdaptiveDiceFocal; }

void require_non_negative(double v, const char* field) {
  if (!std::isfinite(v) || v < 0) throw Error(std::string("loss.") + field + ": must be finite and >= 0, got " + std::to_string(v));
}

double class_weight(const LossOptions& o, int64_t c) {
  return o.class_weights.empty() ? 1.0 : o.class_weights[static_cast<size_t>(c)];
}

torch::Tensor weight_tensor(const LossOptions& o, int64_t classes, const torch::TensorOptions& like) {
  std::vector<double> w(static_cast<size_t>(classes));
  for (int64_t c = 0; c < classes; ++c) w[static_cast<size_t>(c)] = class_weight(o, c);
  return torch::tensor(w, torch::kFloat64).to(like);
}

// num / den where den > 0, `otherwise` elsewhere; gradients stay finite on both branches.
torch::Tensor ratio_or(const torch::Tensor& num, const torch::Tensor& den, double otherwise) {
  auto positive = den > 0;
  auto safe = torch::where(positive, den, torch::ones_like(den));
  return torch::where(positive, num / safe, torch::full_like(num, otherwise));
}

}  // namespace

LossKind parse_loss_kind(const std::string& name) {
  std::string valid;
  for (const auto& [kind, n] : kKindNames) {
    if (name == n) return kind;
    valid += valid.empty() ? n : std::string(", ") + n;
  }
  throw Error("loss.kind: unknown loss '" + name + "' (valid: " + valid + ")");
}

std::string loss_kind_name(LossKind kind) {
  for (const auto& [k, n] : kKindNames)
    if (k == kind) return n;
  TESSERA_CHECK(false);
  return {};
}

void LossOptions::validate(int64_t classes) const {
  if (classes < 1) throw Error("loss: the model must have at least one class, got " + std::to_string(classes));
  loss_kind_name(kind);  // an out-of-range enum is a programmer error
  require_non_negative(dice_weight, "dice_weight");
  require_non_negative(ce_weight, "ce_weight");
  require_non_negative(focal_weight, "focal_weight");
  require_non_negative(focal_gamma, "focal_gamma");
  require_non_negative(smooth, "smooth");
  if (!class_weights.empty() && static_cast<int64_t>(class_weights.size()) != classes)
    throw Error("loss.class_weights: " + std::to_string(class_weights.size()) + " weights for " +
                std::to_string(classes) + " classes");
  for (double w : class_weights) require_non_negative(w, "class_weights");
  double all = 0, in_dice = 0;
  for (int64_t c = 0; c < classes; ++c) {
    all += class_weight(*this, c);
    if (include_background || c > 0) in_dice += class_weight(*this, c);
  }
  if (!(all > 0)) throw Error("loss.class_weights: at least one class needs a weight > 0");
  if (uses_dice(kind)) {
    if (!include_background && classes < 2)
      throw Error("loss.include_background: false leaves no class in the Dice mean of a 1-class model");
    if (!(in_dice > 0)) throw Error("loss.class_weights: every class in the Dice mean has weight 0");
  }
}

int64_t loss_statistics_size(int64_t classes) { return 1 + 5 * classes; }

torch::Tensor loss_statistics(const torch::Tensor& logits, const torch::Tensor& target, const LossOptions& o) {
  if (logits.dim() < 3 || target.dim() != logits.dim() - 1)
    throw Error("loss: logits must be (N, C, spatial...) and target (N, spatial...), got logits of " +
                std::to_string(logits.dim()) + " and target of " + std::to_string(target.dim()) + " dimensions");
  for (int64_t d = 0; d < target.dim(); ++d)
    if (target.size(d) != logits.size(d == 0 ? 0 : d + 1))
      throw Error("loss: target size " + std::to_string(target.size(d)) + " on axis " + std::to_string(d) +
                  " differs from the logits'");
  const int64_t classes = logits.size(1);
  o.validate(classes);
  const auto valid = target != o.ignore_index;
  const auto safe = target.masked_fill(valid.logical_not(), 0);
  const auto mask = valid.unsqueeze(1).to(logits.scalar_type());
  // g_ic, zero on ignored pixels; one_hot checks that the labels lie in [0, classes).
  const auto onehot = torch::one_hot(safe, classes).movedim(-1, 1).to(logits.scalar_type()) * mask;
  std::vector<int64_t> reduce{0};
  for (int64_t d = 2; d < logits.dim(); ++d) reduce.push_back(d);

  const auto zeros = torch::zeros({classes}, logits.options());
  const auto g = onehot.sum(reduce);
  const auto w = (g * weight_tensor(o, classes, logits.options())).sum().reshape({1});
  torch::Tensor e = zeros, f = zeros, inter = zeros, s = zeros;
  if (uses_ce(o.kind) || uses_focal(o.kind)) {
    const auto logp = torch::log_softmax(logits, 1);
    const auto nll = -logp * onehot;  // −log p_ic on the true class, 0 elsewhere
    if (uses_ce(o.kind)) e = nll.sum(reduce);
    if (uses_focal(o.kind)) {
      // (1 − p)^γ; the floor keeps d/dp finite at p == 1 for γ < 1 (the term is 0 there anyway).
      const auto modulation = (1.0 - logp.exp()).clamp_min(1e-30).pow(o.focal_gamma);
      f = (modulation * nll).sum(reduce);
    }
  }
  if (uses_dice(o.kind)) {
    const auto probs = torch::softmax(logits, 1) * mask;
    inter = (probs * onehot).sum(reduce);
    s = probs.sum(reduce);
  }
  return torch::cat({w, g, e, f, inter, s});
}

torch::Tensor loss_from_statistics(const torch::Tensor& stats, const LossOptions& o, int64_t classes) {
  o.validate(classes);
  if (stats.dim() != 1 || stats.numel() != loss_statistics_size(classes))
    throw Error("loss: statistics of " + std::to_string(stats.numel()) + " entries, expected " +
                std::to_string(loss_statistics_size(classes)) + " for " + std::to_string(classes) + " classes");
  const auto w_total = stats.narrow(0, 0, 1).squeeze(0);
  const auto g = stats.narrow(0, 1, classes);
  const auto e = stats.narrow(0, 1 + classes, classes);
  const auto f = stats.narrow(0, 1 + 2 * classes, classes);
  const auto inter = stats.narrow(0, 1 + 3 * classes, classes);
  const auto s = stats.narrow(0, 1 + 4 * classes, classes);
  const auto w = weight_tensor(o, classes, stats.options());

  auto dice_loss = [&] {
    auto dice = ratio_or(2.0 * inter + o.smooth, s + g + o.smooth, 1.0);
    auto in_mean = w.clone();
    if (!o.include_background) in_mean[0] = 0.0;
    return 1.0 - (in_mean * dice).sum() / in_mean.sum();
  };
  auto ce_loss = [&] { return ratio_or((w * e).sum(), w_total, 0.0); };
  auto focal_loss = [&] { return ratio_or((w * f).sum(), w_total, 0.0); };
  auto adaptive_focal_loss = [&] {
    // Class counts carry no gradient: the adaptive weights are constants of the labels.
    const auto counts = g.detach();
    const auto present_w = w * (counts > 0).to(w.scalar_type());
    return ratio_or((present_w * ratio_or(f, counts, 0.0)).sum(), present_w.sum(), 0.0);
  };

  switch (o.kind) {
    case LossKind::kCrossEntropy: return ce_loss();
    case LossKind::kDice: return dice_loss();
    case LossKind::kDiceCrossEntropy: return o.ce_weight * ce_loss() + o.dice_weight * dice_loss();
    case LossKind::kFocal: return focal_loss();
    case LossKind::kAdaptiveDiceFocal: return o.dice_weight * dice_loss() + o.focal_weight * adaptive_focal_loss();
  }
  TESSERA_CHECK(false);
  return {};
}

torch::Tensor segmentation_loss(const torch::Tensor& logits, const torch::Tensor& target, const LossOptions& o) {
  return loss_from_statistics(loss_statistics(logits, target, o), o, logits.size(1));
}

torch::Tensor soft_dice_loss(const torch::Tensor& logits, const torch::Tensor& target, const LossOptions& o) {
  return segmentation_loss(logits, target, LossOptions(o).with_kind(LossKind::kDice));
}

torch::Tensor dice_ce_loss(const torch::Tensor& logits, const torch::Tensor& target, const LossOptions& o) {
  return segmentation_loss(logits, target, LossOptions(o).with_kind(LossKind::kDiceCrossEntropy));
}

double weighted_label_count(const torch::Tensor& target, const LossOptions& o, int64_t classes) {
  double w = 0;
  for (int64_t c = 0; c < classes; ++c)
    w += (o.class_weights.empty() ? 1.0 : o.class_weights[size_t(c)]) * double((target == c).sum().item<int64_t>());
  return w;
}

}  // namespace tessera
