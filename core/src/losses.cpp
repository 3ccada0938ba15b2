#include "tessera/core/losses.hpp"

#include <torch/torch.h>

namespace tessera {

torch::Tensor soft_dice_loss(const torch::Tensor& logits, const torch::Tensor& target, const LossOptions& o) {
  const int64_t classes = logits.size(1);
  auto valid = (target != o.ignore_index);
  auto safe = target.masked_fill(valid.logical_not(), 0);
  auto probs = torch::softmax(logits, 1);
  // One-hot (N, classes, spatial...) with ignored pixels zeroed in both terms.
  auto onehot = torch::one_hot(safe, classes).movedim(-1, 1).to(probs.dtype());
  auto mask = valid.unsqueeze(1).to(probs.dtype());
  probs = probs * mask;
  onehot = onehot * mask;
  std::vector<int64_t> reduce{0};
  for (int64_t d = 2; d < logits.dim(); ++d) reduce.push_back(d);
  auto inter = (probs * onehot).sum(reduce);
  auto denom = probs.sum(reduce) + onehot.sum(reduce);
  auto dice = (2.0 * inter + o.smooth) / (denom + o.smooth);
  return 1.0 - dice.mean();
}

torch::Tensor dice_ce_loss(const torch::Tensor& logits, const torch::Tensor& target, const LossOptions& o) {
  auto ce = torch::nn::functional::cross_entropy(
      logits, target, torch::nn::functional::CrossEntropyFuncOptions().ignore_index(o.ignore_index));
  return o.ce_weight * ce + o.dice_weight * soft_dice_loss(logits, target, o);
}

}  // namespace tessera
