#include <cmath>
#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

#include "tessera/core/error.hpp"
#include "tessera/core/metrics.hpp"

namespace tessera {
namespace {

// Ten pixels, three classes, 255 = ignore.
//   truth: 0 0 0 1 1 1 1 2 255 0
//   pred : 0 0 1 1 1 2 0 2 1   255
// Counted by hand, pixel by pixel (truth→pred): 0→0, 0→0, 0→1 (FN0 FP1), 1→1, 1→1,
// 1→2 (FN1 FP2), 1→0 (FN1 FP0), 2→2, ignored, 0→255 (a prediction that is no class: FN0 only).
//   class 0: TP 2, FP 1, FN 2     class 1: TP 2, FP 1, FN 2     class 2: TP 1, FP 1, FN 0
const std::vector<uint8_t> kTruth = {0, 0, 0, 1, 1, 1, 1, 2, 255, 0};
const std::vector<uint8_t> kPred = {0, 0, 1, 1, 1, 2, 0, 2, 1, 255};

TEST(ConfusionCounts, CountsByHandWithIgnoreAndNodataPrediction) {
  ConfusionCounts k(3);
  k.add(kPred.data(), kTruth.data(), int64_t(kTruth.size()), uint8_t{255});
  const int64_t tp[] = {2, 2, 1}, fp[] = {1, 1, 1}, fn[] = {2, 2, 0};
  for (int c = 0; c < 3; ++c) {
    EXPECT_EQ(k.true_positives(c), tp[c]) << c;
    EXPECT_EQ(k.false_positives(c), fp[c]) << c;
    EXPECT_EQ(k.false_negatives(c), fn[c]) << c;
  }
  const ClassScores s0 = k.scores(0), s2 = k.scores(2);
  EXPECT_DOUBLE_EQ(s0.dice, 4.0 / 7.0);  // 2·2 / (2·2 + 1 + 2)
  EXPECT_DOUBLE_EQ(s0.iou, 2.0 / 5.0);
  EXPECT_DOUBLE_EQ(s0.precision, 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(s0.recall, 2.0 / 4.0);
  EXPECT_EQ(s0.truth_pixels, 4);
  EXPECT_EQ(s0.predicted_pixels, 3);
  EXPECT_DOUBLE_EQ(s2.dice, 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(s2.recall, 1.0);
  EXPECT_DOUBLE_EQ(s2.precision, 0.5);
}

TEST(ConfusionCounts, FloatLabelsSkipNonFiniteTruthAndMatchIntegerLabels) {
  std::vector<float> truth(kTruth.begin(), kTruth.end()), pred(kPred.begin(), kPred.end());
  truth[8] = NAN;  // instead of the ignore value
  pred[9] = NAN;   // a prediction that is no class
  ConfusionCounts f(3), u(3);
  f.add(pred.data(), truth.data(), int64_t(truth.size()), -1.0f);
  u.add(kPred.data(), kTruth.data(), int64_t(kTruth.size()), uint8_t{255});
  EXPECT_EQ(f.as_vector(), u.as_vector());
}

TEST(ConfusionCounts, EmptyClassesAreNaNAsInNnUNet) {
  const std::vector<int32_t> truth = {0, 0, 1}, pred = {0, 1, 1};
  ConfusionCounts k(4);
  k.add(pred.data(), truth.data(), 3, int32_t{-1});
  // Class 2: in neither → every ratio undefined.
  const ClassScores s2 = k.scores(2);
  EXPECT_TRUE(std::isnan(s2.dice) && std::isnan(s2.iou) && std::isnan(s2.precision) && std::isnan(s2.recall));
  // A class predicted but absent from the truth scores Dice 0 (nnU-Net), recall NaN.
  const std::vector<int32_t> t2 = {0}, p2 = {3};
  k.add(p2.data(), t2.data(), 1, int32_t{-1});
  const ClassScores s3 = k.scores(3);
  EXPECT_EQ(s3.dice, 0.0);
  EXPECT_EQ(s3.precision, 0.0);
  EXPECT_TRUE(std::isnan(s3.recall));  // no truth pixel
  EXPECT_DOUBLE_EQ(nan_mean({k.scores(0).dice, k.scores(1).dice, s2.dice}),
                   (k.scores(0).dice + k.scores(1).dice) / 2);
  EXPECT_TRUE(std::isnan(nan_mean({NAN, NAN})));
}

TEST(ConfusionCounts, TruthOutsideTheClassesIsAnError) {
  const std::vector<uint8_t> truth = {0, 5}, pred = {0, 0};
  ConfusionCounts k(3);
  EXPECT_THROW(k.add(pred.data(), truth.data(), 2, uint8_t{255}), Error);
  const std::vector<float> ft = {0.5f}, fp = {0.0f};
  EXPECT_THROW(k.add(fp.data(), ft.data(), 1, -1.0f), Error);
}

TEST(ConfusionCounts, MergeAndVectorSumEqualCountingEverythingAtOnce) {
  // Split the pixels as two ranks would; their counts merge to the whole, and the element-wise
  // sum of as_vector() (what an allreduce does) rebuilds the same counts.
  ConfusionCounts whole(3), a(3), b(3);
  whole.add(kPred.data(), kTruth.data(), 10, uint8_t{255});
  a.add(kPred.data(), kTruth.data(), 4, uint8_t{255});
  b.add(kPred.data() + 4, kTruth.data() + 4, 6, uint8_t{255});
  auto va = a.as_vector(), vb = b.as_vector();
  ASSERT_EQ(va.size(), 9u);
  for (size_t i = 0; i < va.size(); ++i) va[i] += vb[i];
  EXPECT_EQ(ConfusionCounts::from_vector(va).as_vector(), whole.as_vector());
  a.merge(b);
  EXPECT_EQ(a.as_vector(), whole.as_vector());
  EXPECT_THROW(a.merge(ConfusionCounts(4)), Error);
  EXPECT_THROW(ConfusionCounts::from_vector({1, 2}), Error);
}

}  // namespace
}  // namespace tessera
