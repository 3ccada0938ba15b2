#include "tessera/core/losses.hpp"

#include <cmath>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "tessera/core/error.hpp"

namespace tessera {
namespace {

// Hand-worked examples: the probabilities are chosen explicitly, the logits are their logs
// (softmax(log p) = p when p sums to 1), and the expected numbers follow the formulas in
// losses.hpp written out with plain doubles.
using Probs = std::vector<std::vector<double>>;  // [pixel][class]

// Logits (1, C, 1, P) whose softmax over C is `p`; pixels laid out along x.
torch::Tensor logits_of(const Probs& p) {
  const int64_t pixels = static_cast<int64_t>(p.size()), classes = static_cast<int64_t>(p[0].size());
  auto t = torch::empty({1, classes, 1, pixels}, torch::kFloat32);
  for (int64_t i = 0; i < pixels; ++i)
    for (int64_t c = 0; c < classes; ++c) t[0][c][0][i] = std::log(p[size_t(i)][size_t(c)]);
  return t;
}

torch::Tensor target_of(const std::vector<int64_t>& y) {
  return torch::tensor(y, torch::kInt64).view({1, 1, static_cast<int64_t>(y.size())});
}

double value(const torch::Tensor& t) { return t.item<double>(); }

// Soft Dice per class by hand, skipping pixels labelled `ignore`.
std::vector<double> hand_dice(const Probs& p, const std::vector<int64_t>& y, double smooth, int64_t ignore = -100) {
  const size_t classes = p[0].size();
  std::vector<double> d(classes);
  for (size_t c = 0; c < classes; ++c) {
    double inter = 0, pred = 0, truth = 0;
    for (size_t i = 0; i < p.size(); ++i) {
      if (y[i] == ignore) continue;
      inter += y[i] == int64_t(c) ? p[i][c] : 0.0;
      pred += p[i][c];
      truth += y[i] == int64_t(c) ? 1.0 : 0.0;
    }
    d[c] = (2 * inter + smooth) / (pred + truth + smooth);
  }
  return d;
}

// Three pixels, three classes.
const Probs kThree = {{0.7, 0.2, 0.1}, {0.1, 0.6, 0.3}, {0.2, 0.2, 0.6}};
const std::vector<int64_t> kThreeY = {0, 1, 2};

// A 2×2 image (laid out as four pixels), class 2 absent from the target.
const Probs kFour = {{0.8, 0.1, 0.1}, {0.3, 0.6, 0.1}, {0.2, 0.7, 0.1}, {0.5, 0.25, 0.25}};
const std::vector<int64_t> kFourY = {0, 1, 1, 0};

TEST(Losses, SoftDiceOfAHandWorkedExample) {
  // Two pixels, two classes. Logits chosen so softmax gives p = [[0.5,0.5],[0.5,0.5]] → logits 0.
  auto logits = torch::zeros({1, 2, 1, 2});
  auto target = torch::tensor({0, 1}, torch::kInt64).view({1, 1, 2});
  LossOptions o;
  o.smooth = 0.0;
  // Class 0: inter 0.5, denom (0.5+0.5)+1 = 2 → dice 0.5; class 1 the same. Loss 0.5.
  EXPECT_NEAR(soft_dice_loss(logits, target, o).item<double>(), 0.5, 1e-6);
}

TEST(Losses, CrossEntropyByHand) {
  const auto logits = logits_of(kThree);
  LossOptions o = LossOptions().with_kind(LossKind::kCrossEntropy);
  const double expected = (-std::log(0.7) - std::log(0.6) - std::log(0.6)) / 3;
  EXPECT_NEAR(value(segmentation_loss(logits, target_of(kThreeY), o)), expected, 1e-6);
  // Ignore the third pixel: mean over the two labelled ones.
  EXPECT_NEAR(value(segmentation_loss(logits, target_of({0, 1, -100}), o)), (-std::log(0.7) - std::log(0.6)) / 2,
              1e-6);
  // Class weights (2, 1, 0.5): weighted sum over the weighted count.
  o.with_class_weights({2.0, 1.0, 0.5});
  const double weighted = (2 * -std::log(0.7) + 1 * -std::log(0.6) + 0.5 * -std::log(0.6)) / (2 + 1 + 0.5);
  const auto loss = segmentation_loss(logits, target_of(kThreeY), o);
  EXPECT_NEAR(value(loss), weighted, 1e-6);
  // And PyTorch's own weighted cross-entropy agrees (an independent implementation).
  const auto torch_ce = torch::nn::functional::cross_entropy(
      logits, target_of(kThreeY),
      torch::nn::functional::CrossEntropyFuncOptions().weight(torch::tensor({2.0f, 1.0f, 0.5f})));
  EXPECT_NEAR(value(loss), value(torch_ce), 1e-6);
}

TEST(Losses, DiceByHandWithEmptyClassBackgroundAndWeights) {
  const auto logits = logits_of(kFour);
  const auto target = target_of(kFourY);
  LossOptions o = LossOptions().with_kind(LossKind::kDice).with_smooth(1.0);
  const auto d = hand_dice(kFour, kFourY, 1.0);
  // By hand: D0 = (2·1.3 + 1)/(1.8 + 2 + 1) = 0.75, D1 = 3.6/4.65, D2 (empty) = 1/(0.55 + 1).
  EXPECT_NEAR(d[0], 0.75, 1e-12);
  EXPECT_NEAR(d[1], 3.6 / 4.65, 1e-12);
  EXPECT_NEAR(d[2], 1 / 1.55, 1e-12);
  EXPECT_NEAR(value(segmentation_loss(logits, target, o)), 1 - (d[0] + d[1] + d[2]) / 3, 1e-6);
  o.with_include_background(false);
  EXPECT_NEAR(value(segmentation_loss(logits, target, o)), 1 - (d[1] + d[2]) / 2, 1e-6);
  o.with_include_background(true).with_class_weights({1.0, 2.0, 3.0});
  EXPECT_NEAR(value(segmentation_loss(logits, target, o)), 1 - (d[0] + 2 * d[1] + 3 * d[2]) / 6, 1e-6);
  // soft_dice_loss is the same loss whatever kind the options name.
  EXPECT_NEAR(value(soft_dice_loss(logits, target, o.with_kind(LossKind::kCrossEntropy))),
              1 - (d[0] + 2 * d[1] + 3 * d[2]) / 6, 1e-6);
}

TEST(Losses, DiceIgnoresIgnoredPixels) {
  const auto logits = logits_of(kFour);
  const std::vector<int64_t> y = {0, 1, 1, 7};  // last pixel ignored
  LossOptions o = LossOptions().with_kind(LossKind::kDice).with_ignore_index(7);
  const auto d = hand_dice(kFour, y, 1.0, 7);
  // Without the last pixel: D0 = (1.6 + 1)/(1.3 + 1 + 1) = 2.6/3.3.
  EXPECT_NEAR(d[0], 2.6 / 3.3, 1e-12);
  EXPECT_NEAR(value(segmentation_loss(logits, target_of(y), o)), 1 - (d[0] + d[1] + d[2]) / 3, 1e-6);
}

TEST(Losses, EmptyClassScoresOneWithSmoothing) {
  // Class 2 is absent from the target and its probability underflows to exactly 0, so its
  // Dice is (0 + 1)/(0 + 0 + 1) = 1; classes 0 and 1 by hand from the two-class probabilities.
  const Probs two = {{0.8, 0.2}, {0.4, 0.6}};
  const std::vector<int64_t> y = {0, 1};
  auto logits = torch::full({1, 3, 1, 2}, -1e4f);
  for (int i = 0; i < 2; ++i)
    for (int c = 0; c < 2; ++c) logits[0][c][0][i] = std::log(two[size_t(i)][size_t(c)]);
  const auto d = hand_dice(two, y, 1.0);
  LossOptions o = LossOptions().with_kind(LossKind::kDice);
  EXPECT_NEAR(value(segmentation_loss(logits, target_of(y), o)), 1 - (d[0] + d[1] + 1.0) / 3, 1e-6);
  // With smooth = 0 an all-ignored batch is defined (Dice 1, loss 0) and has finite gradients.
  auto leaf = logits.clone().requires_grad_(true);
  auto loss = segmentation_loss(leaf, target_of({-100, -100}), o.with_smooth(0.0));
  EXPECT_EQ(value(loss), 0.0);
  loss.backward();
  EXPECT_TRUE(torch::isfinite(leaf.grad()).all().item<bool>());
}

TEST(Losses, FocalByHand) {
  const auto logits = logits_of(kThree);
  LossOptions o = LossOptions().with_kind(LossKind::kFocal).with_focal_gamma(2.0);
  auto term = [](double p) { return (1 - p) * (1 - p) * -std::log(p); };
  // p on the true class: 0.7, 0.6, 0.6.
  EXPECT_NEAR(value(segmentation_loss(logits, target_of(kThreeY), o)), (term(0.7) + term(0.6) + term(0.6)) / 3, 1e-6);
  // Class weights act as α, normalised by the weighted count; ignored pixels drop out.
  o.with_class_weights({0.25, 1.0, 4.0});
  EXPECT_NEAR(value(segmentation_loss(logits, target_of({0, 1, -100}), o)),
              (0.25 * term(0.7) + 1.0 * term(0.6)) / (0.25 + 1.0), 1e-6);
  // γ = 0 is cross-entropy.
  o = LossOptions().with_kind(LossKind::kFocal).with_focal_gamma(0.0);
  EXPECT_NEAR(value(segmentation_loss(logits, target_of(kThreeY), o)),
              (-std::log(0.7) - std::log(0.6) - std::log(0.6)) / 3, 1e-6);
}

TEST(Losses, DiceCrossEntropyByHand) {
  const auto logits = logits_of(kFour);
  const auto target = target_of(kFourY);
  LossOptions o = LossOptions().with_ce_weight(0.5).with_dice_weight(2.0).with_include_background(false);
  const auto d = hand_dice(kFour, kFourY, 1.0);
  const double ce = (-std::log(0.8) - std::log(0.6) - std::log(0.7) - std::log(0.5)) / 4;
  const double dice = 1 - (d[1] + d[2]) / 2;
  EXPECT_NEAR(value(segmentation_loss(logits, target, o)), 0.5 * ce + 2.0 * dice, 1e-6);
  EXPECT_NEAR(value(dice_ce_loss(logits, target, o)), 0.5 * ce + 2.0 * dice, 1e-6);
}

TEST(Losses, AdaptiveDiceFocalByHand) {
  // 2×2 image: class 0 on three pixels, class 1 on one, class 2 absent.
  const Probs p = {{0.8, 0.1, 0.1}, {0.3, 0.6, 0.1}, {0.6, 0.2, 0.2}, {0.5, 0.25, 0.25}};
  const std::vector<int64_t> y = {0, 1, 0, 0};
  auto logits = logits_of(p).view({1, 3, 2, 2});
  auto target = target_of(y).view({1, 2, 2});
  LossOptions o = LossOptions()
                      .with_kind(LossKind::kAdaptiveDiceFocal)
                      .with_focal_gamma(2.0)
                      .with_dice_weight(1.0)
                      .with_focal_weight(3.0)
                      .with_class_weights({1.0, 2.0, 5.0});
  auto term = [](double q) { return (1 - q) * (1 - q) * -std::log(q); };
  // Mean focal term per present class, weighted by w over present classes (class 2 absent).
  const double f0 = (term(0.8) + term(0.6) + term(0.5)) / 3, f1 = term(0.6) / 1;
  const double afocal = (1.0 * f0 + 2.0 * f1) / (1.0 + 2.0);
  // The same number as a per-pixel weighted mean with a_c = w_c · n / (|P| G_c): n = 4, |P| = 2.
  const double a0 = 1.0 * 4 / (2 * 3), a1 = 2.0 * 4 / (2 * 1);
  const double afocal_pixels = (a0 * (term(0.8) + term(0.6) + term(0.5)) + a1 * term(0.6)) / (3 * a0 + a1);
  EXPECT_NEAR(afocal, afocal_pixels, 1e-12);
  const auto d = hand_dice(p, y, 1.0);
  const double dice = 1 - (1.0 * d[0] + 2.0 * d[1] + 5.0 * d[2]) / 8.0;
  EXPECT_NEAR(value(segmentation_loss(logits, target, o)), dice + 3.0 * afocal, 1e-6);
}

// Statistics of two unequal parts of a batch, summed, give the loss and the gradient of the
// whole batch: the contract data parallelism and micro-batching rely on.
void expect_split_equals_whole(const LossOptions& o, std::vector<int64_t> shape) {
  torch::manual_seed(7);
  const int64_t classes = shape[1];
  auto logits = (2.0 * torch::randn(shape)).requires_grad_(true);
  std::vector<int64_t> tshape = shape;
  tshape.erase(tshape.begin() + 1);
  // Class 0 dominates; class `classes − 1` is rare; about 10% ignored.
  auto r = torch::rand(tshape);
  auto target = torch::where(r < 0.6, torch::zeros_like(r), torch::floor(r * classes).clamp(0, classes - 1))
                    .to(torch::kInt64);
  target.masked_fill_(torch::rand(tshape) < 0.1, o.ignore_index);

  auto whole = segmentation_loss(logits, target, o);
  whole.backward();
  auto grad_whole = logits.grad().clone();
  logits.grad().zero_();

  const int64_t n = shape[0], first = 1;
  auto a = loss_statistics(logits.narrow(0, 0, first), target.narrow(0, 0, first), o);
  auto b = loss_statistics(logits.narrow(0, first, n - first), target.narrow(0, first, n - first), o);
  auto split = loss_from_statistics(a + b, o, classes);
  split.backward();
  SCOPED_TRACE(loss_kind_name(o.kind));
  EXPECT_NEAR(value(split), value(whole), 1e-5 * std::max(1.0, std::abs(value(whole))));
  EXPECT_TRUE(torch::allclose(logits.grad(), grad_whole, 1e-4, 1e-7));
  EXPECT_GT(grad_whole.abs().max().item<double>(), 1e-6);  // the comparison is not between zeros
  // Entry 0 is the class-weighted labelled count.
  double expected_w = 0;
  auto flat = target.flatten();
  for (int64_t i = 0; i < flat.numel(); ++i) {
    const int64_t y = flat[i].item<int64_t>();
    if (y != o.ignore_index) expected_w += o.class_weights.empty() ? 1.0 : o.class_weights[size_t(y)];
  }
  EXPECT_NEAR((a + b)[0].item<double>(), expected_w, 1e-3);
}

TEST(Losses, SummedStatisticsOfSplitBatchGiveWholeBatchLossAndGradient) {
  for (auto kind : {LossKind::kCrossEntropy, LossKind::kDice, LossKind::kDiceCrossEntropy, LossKind::kFocal,
                    LossKind::kAdaptiveDiceFocal}) {
    expect_split_equals_whole(LossOptions().with_kind(kind), {4, 3, 6, 5});
    expect_split_equals_whole(
        LossOptions().with_kind(kind).with_class_weights({0.5, 1.0, 3.0, 2.0}).with_include_background(false),
        {3, 4, 3, 4, 5});
  }
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
  // Nor does any loss send gradient to it.
  for (auto kind : {LossKind::kCrossEntropy, LossKind::kDice, LossKind::kDiceCrossEntropy, LossKind::kFocal,
                    LossKind::kAdaptiveDiceFocal}) {
    auto leaf = logits.clone().requires_grad_(true);
    segmentation_loss(leaf, masked, LossOptions().with_kind(kind)).backward();
    EXPECT_EQ(leaf.grad().select(2, 0).select(2, 0).abs().max().item<double>(), 0.0) << loss_kind_name(kind);
    EXPECT_GT(leaf.grad().abs().max().item<double>(), 0.0) << loss_kind_name(kind);
  }
}

TEST(Losses, PerfectPredictionHasNearZeroLoss) {
  auto target = torch::randint(0, 3, {2, 8, 8}, torch::kInt64);
  auto logits = torch::one_hot(target, 3).movedim(-1, 1).to(torch::kFloat32) * 50.0;
  LossOptions o;
  EXPECT_LT(dice_ce_loss(logits, target, o).item<double>(), 1e-4);
}

TEST(Losses, KindNamesRoundTripAndUnknownNamesListTheValidOnes) {
  for (auto kind : {LossKind::kCrossEntropy, LossKind::kDice, LossKind::kDiceCrossEntropy, LossKind::kFocal,
                    LossKind::kAdaptiveDiceFocal})
    EXPECT_EQ(parse_loss_kind(loss_kind_name(kind)), kind);
  EXPECT_EQ(parse_loss_kind("adaptive_dice_focal"), LossKind::kAdaptiveDiceFocal);
  try {
    parse_loss_kind("tversky");
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string m = e.what();
    for (const char* n : {"tversky", "ce", "dice", "dice_ce", "focal", "adaptive_dice_focal"})
      EXPECT_NE(m.find(n), std::string::npos) << m;
  }
}

std::string validation_error(const LossOptions& o, int64_t classes) {
  try {
    o.validate(classes);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Losses, DefaultsAreValidAndBadFieldsAreNamed) {
  EXPECT_EQ(validation_error(LossOptions(), 2), "");
  EXPECT_EQ(validation_error(LossOptions(), 1), "");
  EXPECT_NE(validation_error(LossOptions().with_focal_gamma(-1), 3).find("loss.focal_gamma"), std::string::npos);
  EXPECT_NE(validation_error(LossOptions().with_smooth(NAN), 3).find("loss.smooth"), std::string::npos);
  EXPECT_NE(validation_error(LossOptions().with_ce_weight(-1), 3).find("loss.ce_weight"), std::string::npos);
  EXPECT_NE(validation_error(LossOptions().with_class_weights({1, 2}), 3).find("loss.class_weights"), std::string::npos);
  EXPECT_NE(validation_error(LossOptions().with_class_weights({1, -2, 1}), 3).find("loss.class_weights"),
            std::string::npos);
  EXPECT_NE(validation_error(LossOptions().with_class_weights({1, 0, 0}).with_include_background(false), 3)
                .find("loss.class_weights"),
            std::string::npos);
  EXPECT_NE(validation_error(LossOptions().with_include_background(false), 1).find("loss.include_background"),
            std::string::npos);
  // Cross-entropy alone has no Dice mean to empty.
  EXPECT_EQ(validation_error(LossOptions().with_kind(LossKind::kCrossEntropy).with_include_background(false), 1), "");
  // Mismatched shapes and statistics are named too.
  EXPECT_THROW(loss_statistics(torch::zeros({1, 2, 3, 3}), torch::zeros({1, 3, 4}, torch::kInt64), LossOptions()),
               Error);
  EXPECT_THROW(loss_from_statistics(torch::zeros({7}), LossOptions(), 3), Error);
}

}  // namespace
}  // namespace tessera
