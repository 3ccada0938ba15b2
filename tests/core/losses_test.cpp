#include "tessera/core/losses.hpp"

#include <gtest/gtest.h>
#include <torch/torch.h>

namespace tessera {
namespace {

TEST(Losses, SoftDiceOfAHandWorkedExample) {
  // Two pixels, two classes. Logits chosen so softmax gives p = [[0.5,0.5],[0.5,0.5]] → logits 0.
  auto logits = torch::zeros({1, 2, 1, 2});
  auto target = torch::tensor({0, 1}, torch::kInt64).view({1, 1, 2});
  LossOptions o;
  o.smooth = 0.0;
  // Class 0: inter 0.5, denom (0.5+0.5)+1 = 2 → dice 0.5; class 1 the same. Loss 0.5.
  EXPECT_NEAR(soft_dice_loss(logits, target, o).item<double>(), 0.5, 1e-6);
}

TEST(Losses, IgnoredPixelsCountNowhere) {
  auto logits = torch::randn({1, 3, 4, 4});
  auto target = torch::randint(0, 3, {1, 4, 4}, torch::kInt64);
  LossOptions o;
  auto masked = target.clone();
  masked[0][0][0] = o.ignore_index;
  // Changing the logits of an ignored pixel must not change the loss.
  auto logits2 = logits.clone();
  logits2[0][0][0][0] += 5.0;
  logits2[0][2][0][0] -= 3.0;
  EXPECT_NEAR(dice_ce_loss(logits, masked, o).item<double>(), dice_ce_loss(logits2, masked, o).item<double>(), 1e-6);
  EXPECT_NE(dice_ce_loss(logits, target, o).item<double>(), dice_ce_loss(logits2, target, o).item<double>());
}

TEST(Losses, PerfectPredictionHasNearZeroLoss) {
  auto target = torch::randint(0, 3, {2, 8, 8}, torch::kInt64);
  auto logits = torch::one_hot(target, 3).movedim(-1, 1).to(torch::kFloat32) * 50.0;
  LossOptions o;
  EXPECT_LT(dice_ce_loss(logits, target, o).item<double>(), 1e-4);
}

}  // namespace
}  // namespace tessera
