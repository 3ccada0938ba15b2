#include "tessera/core/dsn_losses.hpp"

#include <cmath>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "tessera/core/error.hpp"

namespace tessera {
namespace {

// Every expected number below is worked out by hand from the formulas in dsn_losses.hpp; the
// working is in the comments. Tensors are double so the comparisons can be tight.
const auto kF64 = torch::TensorOptions().dtype(torch::kFloat64);

torch::Tensor doubles(const std::vector<double>& v, at::IntArrayRef shape) {
  return torch::tensor(v, kF64).view(shape);
}

double value(const torch::Tensor& t) { return t.item<double>(); }

// ---- simse ----------------------------------------------------------------------------------

// Two samples of 1×2×2 (k = 4), laid out row by row.
//   sample 0: x = [1 2; 3 4], x̂ = 0          d = [1, 2, 3, 4]:  Σd² = 30, Σd = 10
//             simse = 30/4 − 10²/16 = 7.5 − 6.25 = 1.25
//   sample 1: x = [0 1; 0 1], x̂ = [1 1; −1 0] d = [−1, 0, 1, 1]: Σd² = 3, Σd = 1
//             simse = 3/4 − 1/16 = 0.6875
torch::Tensor simse_x() { return doubles({1, 2, 3, 4, 0, 1, 0, 1}, {2, 1, 2, 2}); }
torch::Tensor simse_r() { return doubles({0, 0, 0, 0, 1, 1, -1, 0}, {2, 1, 2, 2}); }

TEST(DsnLosses, SimseOfTwoHandWorkedSamples) {
  const auto s = simse_per_sample(simse_x(), simse_r());
  ASSERT_EQ(s.sizes(), at::IntArrayRef({2}));
  EXPECT_NEAR(value(s[0]), 30.0 / 4 - 100.0 / 16, 1e-12);
  EXPECT_NEAR(value(s[1]), 3.0 / 4 - 1.0 / 16, 1e-12);
}

TEST(DsnLosses, SimseIgnoresAConstantOffsetOfOneSample) {
  // Shift sample 0's reconstruction by 3: d = [−2, −1, 0, 1], Σd² = 6, Σd = −2,
  //   simse = 6/4 − 4/16 = 1.25 as before, though its plain MSE drops from 30/4 to 6/4.
  auto r = simse_r().clone();
  r[0] += 3.0;
  const auto before = simse_per_sample(simse_x(), simse_r());
  auto after = simse_per_sample(simse_x(), r);
  EXPECT_NEAR(value(after[0]), 6.0 / 4 - 4.0 / 16, 1e-12);
  EXPECT_NEAR(value(after[0]), value(before[0]), 1e-12);
  EXPECT_NEAR(value((simse_x() - r)[0].square().mean()), 6.0 / 4, 1e-12);
  EXPECT_NEAR(value(after[1]), value(before[1]), 1e-12);  // the other sample is untouched
  // Shift sample 1's by 5: d = [−6, −5, −4, −4], Σd² = 93, Σd = −19, simse = 93/4 − 361/16 = 0.6875.
  r[1] += 5.0;
  after = simse_per_sample(simse_x(), r);
  EXPECT_NEAR(value(after[1]), 93.0 / 4 - 361.0 / 16, 1e-12);
  EXPECT_NEAR(value(after[1]), value(before[1]), 1e-12);
}

TEST(DsnLosses, SimseGradientIsTwoOverKTimesTheCentredError) {
  // ∂simse/∂x_j = (2/k)(d_j − mean d) and ∂/∂x̂_j = −(2/k)(d_j − mean d). With k = 4:
  //   sample 0: d − 2.5  = [−1.5, −0.5, 0.5, 1.5]   → ∂/∂x = [−0.75, −0.25, 0.25, 0.75]
  //   sample 1: d − 0.25 = [−1.25, −0.25, 0.75, 0.75] → ∂/∂x = [−0.625, −0.125, 0.375, 0.375]
  auto x = simse_x().requires_grad_(true);
  auto r = simse_r().requires_grad_(true);
  simse_per_sample(x, r).sum().backward();
  const auto expected = doubles({-0.75, -0.25, 0.25, 0.75, -0.625, -0.125, 0.375, 0.375}, {2, 1, 2, 2});
  EXPECT_TRUE(torch::allclose(x.grad(), expected, 0, 1e-12)) << x.grad();
  EXPECT_TRUE(torch::allclose(r.grad(), -expected, 0, 1e-12)) << r.grad();
}

TEST(DsnLosses, SimseGradientMatchesFiniteDifferences) {
  torch::manual_seed(3);
  const auto x = torch::randn({3, 2, 3}, kF64);
  auto r = torch::randn({3, 2, 3}, kF64).requires_grad_(true);
  const auto weights = doubles({1.0, -2.0, 0.5}, {3});  // a different weight per sample
  (simse_per_sample(x, r) * weights).sum().backward();
  const double h = 1e-6;
  auto flat = r.detach().clone().view({-1});
  for (int64_t j = 0; j < flat.numel(); ++j) {
    auto plus = flat.clone(), minus = flat.clone();
    plus[j] += h;
    minus[j] -= h;
    const double numeric = (value((simse_per_sample(x, plus.view({3, 2, 3})) * weights).sum()) -
                            value((simse_per_sample(x, minus.view({3, 2, 3})) * weights).sum())) /
                           (2 * h);
    EXPECT_NEAR(value(r.grad().view({-1})[j]), numeric, 1e-7) << "element " << j;
  }
}

TEST(DsnLosses, SimseRejectsDifferentShapes) {
  EXPECT_THROW(simse_per_sample(torch::zeros({2, 1, 2, 2}), torch::zeros({2, 1, 2, 3})), Error);
  EXPECT_THROW(simse_per_sample(torch::zeros({2, 0}), torch::zeros({2, 0})), Error);
}

// ---- difference -----------------------------------------------------------------------------

// Codes (1, 2, 1, 2): two channels, two positions; channel-major layout [c0 p0, c0 p1, c1 p0, c1 p1].
//   shared  at p0 (3, 4) → (0.6, 0.8);   at p1 (1, 0) → (1, 0)
//   private at p0 (0, 2) → (0, 1);       at p1 (1, 1) → (s, s), s = 1/√2
//   G = (0.6, 0.8)ᵀ(0, 1) + (1, 0)ᵀ(s, s) = [0 0.6; 0 0.8] + [s s; 0 0] = [s  0.6+s; 0  0.8]
//   L = ‖G / 2‖²_F = (s² + (0.6 + s)² + 0.8²) / 4
torch::Tensor shared_example() { return doubles({3, 1, 4, 0}, {1, 2, 1, 2}); }
torch::Tensor private_example() { return doubles({0, 1, 2, 1}, {1, 2, 1, 2}); }

TEST(DsnLosses, DifferenceOfAHandWorkedExample) {
  const double s = 1 / std::sqrt(2.0);
  const auto g = difference_statistics(shared_example(), private_example());
  const auto expected = doubles({s, 0.6 + s, 0.0, 0.8}, {2, 2});
  EXPECT_TRUE(torch::allclose(g, expected, 0, 1e-12)) << g;
  const auto loss = difference_loss(g, 2);
  EXPECT_EQ(loss.dim(), 0);
  EXPECT_NEAR(value(loss), (s * s + (0.6 + s) * (0.6 + s) + 0.8 * 0.8) / 4, 1e-12);
  EXPECT_THROW(difference_loss(g, 0), Error);
}

TEST(DsnLosses, OrthogonalCodesHaveNoDifferenceLoss) {
  // Shared channel 0 is 1 at both positions (channel 1 is 0); the single private channel is
  // +1 then −1: the columns (1, 1) and (1, −1) are orthogonal, G = 1·1 + 1·(−1) = 0 (shape 2×1).
  const auto shared = doubles({1, 1, 0, 0}, {1, 2, 1, 2});
  auto priv = doubles({1, -1}, {1, 1, 1, 2}).requires_grad_(true);
  const auto g = difference_statistics(shared, priv);
  ASSERT_EQ(g.sizes(), at::IntArrayRef({2, 1}));
  EXPECT_NEAR(value(g.abs().max()), 0.0, 1e-12);
  const auto loss = difference_loss(g, 2);
  EXPECT_NEAR(value(loss), 0.0, 1e-12);
  // An all-zero position stays zero instead of dividing by 0: gradients finite.
  auto zero_shared = torch::zeros({1, 2, 1, 2}, kF64).requires_grad_(true);
  difference_loss(difference_statistics(zero_shared, priv), 2).backward();
  EXPECT_TRUE(torch::isfinite(zero_shared.grad()).all().item<bool>());
}

TEST(DsnLosses, DifferenceStatisticsOfABatchAreTheSumOfItsParts) {
  torch::manual_seed(7);
  const auto shared = torch::randn({4, 3, 2, 2, 3}, kF64);  // NCDHW
  const auto priv = torch::randn({4, 2, 2, 2, 3}, kF64);
  const auto whole = difference_statistics(shared, priv);
  ASSERT_EQ(whole.sizes(), at::IntArrayRef({3, 2}));
  const auto parts = difference_statistics(shared.narrow(0, 0, 1), priv.narrow(0, 0, 1)) +
                     difference_statistics(shared.narrow(0, 1, 3), priv.narrow(0, 1, 3));
  EXPECT_TRUE(torch::allclose(whole, parts, 0, 1e-12));
  // And the loss from the summed parts with the summed row counts (12 + 36) is the whole's.
  EXPECT_NEAR(value(difference_loss(parts, 12 + 36)), value(difference_loss(whole, 4 * 12)), 1e-14);
}

TEST(DsnLosses, DifferenceIgnoresTheLengthOfEachPositionsVector) {
  // Scale shared at p0 by 7 and private at p1 by 0.1: the unit vectors and so G are unchanged.
  const auto shared = shared_example() * doubles({7, 1, 7, 1}, {1, 2, 1, 2});
  const auto priv = private_example() * doubles({1, 0.1, 1, 0.1}, {1, 2, 1, 2});
  const double s = 1 / std::sqrt(2.0);
  const auto expected = doubles({s, 0.6 + s, 0.0, 0.8}, {2, 2});
  EXPECT_TRUE(torch::allclose(difference_statistics(shared, priv), expected, 0, 1e-12));
}

TEST(DsnLosses, DifferenceRejectsMismatchedCodes) {
  EXPECT_THROW(difference_statistics(torch::zeros({2, 3, 4, 4}), torch::zeros({1, 3, 4, 4})), Error);
  EXPECT_THROW(difference_statistics(torch::zeros({2, 3, 4, 4}), torch::zeros({2, 3, 4, 5})), Error);
  EXPECT_THROW(difference_statistics(torch::zeros({2, 3, 4, 4}), torch::zeros({2, 3, 4, 4, 1})), Error);
}

// ---- gradient reversal ----------------------------------------------------------------------

TEST(DsnLosses, GradientReversalIsIdentityForwardAndScalesGradientByMinusLambda) {
  auto x = doubles({1.5, -2.0, 3.0}, {3}).requires_grad_(true);
  const auto w = doubles({1.0, -2.0, 3.0}, {3});
  const auto y = gradient_reversal(x, 0.5);
  EXPECT_TRUE(torch::equal(y, x.detach()));
  EXPECT_TRUE(y.requires_grad());
  (y * w).sum().backward();
  // ∂/∂x of Σ y·w is w; reversed and scaled: −0.5·(1, −2, 3) = (−0.5, 1, −1.5).
  EXPECT_TRUE(torch::allclose(x.grad(), doubles({-0.5, 1.0, -1.5}, {3}), 0, 1e-15)) << x.grad();
}

TEST(DsnLosses, DannLambdaFollowsItsSchedule) {
  // 2/(1 + e^(−10p)) − 1 = (1 − e^(−10p)) / (1 + e^(−10p)) = tanh(5p).
  EXPECT_EQ(dann_lambda(0.0), 0.0);
  EXPECT_NEAR(dann_lambda(1.0), (1 - std::exp(-10.0)) / (1 + std::exp(-10.0)), 1e-15);
  EXPECT_NEAR(dann_lambda(0.5), std::tanh(2.5), 1e-15);
  EXPECT_EQ(dann_lambda(-3.0), dann_lambda(0.0));  // clamped to [0, 1]
  EXPECT_EQ(dann_lambda(4.0), dann_lambda(1.0));
  for (int i = 1; i <= 100; ++i) EXPECT_GT(dann_lambda(i / 100.0), dann_lambda((i - 1) / 100.0)) << i;
}

// ---- MMD ------------------------------------------------------------------------------------

TEST(DsnLosses, MmdOfIdenticalSamplesIsZero) {
  torch::manual_seed(11);
  const auto a = torch::randn({5, 4}, kF64);
  EXPECT_NEAR(value(mmd2(a, a.clone(), {0.5, 1.0, 4.0})), 0.0, 1e-12);
}

TEST(DsnLosses, MmdOfHandWorkedSamples) {
  // {0} vs {1}, σ = 1: k(0,0) = 1, k(0,1) = e^(−1/2) → 1 + 1 − 2e^(−1/2).
  EXPECT_NEAR(value(mmd2(doubles({0}, {1, 1}), doubles({1}, {1, 1}), {1.0})), 2 - 2 * std::exp(-0.5), 1e-12);
  // σ ∈ {1, 2}: k(0,0) = 2, k(0,1) = e^(−1/2) + e^(−1/8) → 2 + 2 − 2(e^(−1/2) + e^(−1/8)).
  EXPECT_NEAR(value(mmd2(doubles({0}, {1, 1}), doubles({1}, {1, 1}), {1.0, 2.0})),
              4 - 2 * (std::exp(-0.5) + std::exp(-0.125)), 1e-12);
  // a = {(0,0), (1,0)}, b = {(0,1)}, σ = 1 (n = 2, m = 1; ‖a0−a1‖² = 1, ‖a0−b0‖² = 1, ‖a1−b0‖² = 2):
  //   mean k(a,a) = (1 + 1 + 2e^(−1/2)) / 4,  mean k(b,b) = 1,  mean k(a,b) = (e^(−1/2) + e^(−1)) / 2
  const auto a = doubles({0, 0, 1, 0}, {2, 2});
  const auto b = doubles({0, 1}, {1, 2});
  const double expected = (2 + 2 * std::exp(-0.5)) / 4 + 1 - (std::exp(-0.5) + std::exp(-1.0));
  EXPECT_NEAR(value(mmd2(a, b, {1.0})), expected, 1e-12);
}

TEST(DsnLosses, MmdIsSymmetric) {
  torch::manual_seed(13);
  const auto a = torch::randn({6, 3}, kF64), b = torch::randn({4, 3}, kF64) + 0.5;
  const double ab = value(mmd2(a, b, {1.0, 3.0})), ba = value(mmd2(b, a, {1.0, 3.0}));
  EXPECT_GT(ab, 0.0);
  EXPECT_NEAR(ab, ba, 1e-12);
}

TEST(DsnLosses, MmdGradientPullsTheSamplesTogether) {
  // MMD²({0}, {b}) = 2 − 2e^(−b²/2), so d/db = 2b e^(−b²/2) = 2e^(−1/2) at b = 1.
  const auto a = doubles({0}, {1, 1});
  auto b = doubles({1}, {1, 1}).requires_grad_(true);
  const auto before = mmd2(a, b, {1.0});
  before.backward();
  EXPECT_NEAR(value(b.grad()), 2 * std::exp(-0.5), 1e-12);
  // One SGD step moves b toward a and lowers the discrepancy.
  const auto stepped = (b - 0.1 * b.grad()).detach();
  EXPECT_LT(value(stepped), 1.0);
  EXPECT_LT(value(mmd2(a, stepped, {1.0})), value(before));
  // The same in several dimensions, with a non-zero gradient on every sample of b.
  torch::manual_seed(17);
  const auto a2 = torch::randn({8, 3}, kF64);
  auto b2 = (torch::randn({5, 3}, kF64) + 1.0).requires_grad_(true);
  const auto loss = mmd2(a2, b2, {0.5, 1.0, 2.0});
  loss.backward();
  EXPECT_TRUE((b2.grad().norm(2, {1}) > 0).all().item<bool>());
  EXPECT_LT(value(mmd2(a2, (b2 - 0.5 * b2.grad()).detach(), {0.5, 1.0, 2.0})), value(loss));
}

TEST(DsnLosses, MmdRejectsBadInputs) {
  const auto a = torch::zeros({3, 2});
  EXPECT_THROW(mmd2(a, torch::zeros({3, 4}), {1.0}), Error);
  EXPECT_THROW(mmd2(a, a, {}), Error);
  EXPECT_THROW(mmd2(a, a, {1.0, 0.0}), Error);
  EXPECT_THROW(mmd2(a, a, {-1.0}), Error);
  EXPECT_THROW(mmd2(a, torch::zeros({3}), {1.0}), Error);
}

}  // namespace
}  // namespace tessera
