// Modality-aware normalisation: CT statistics over a training set's foreground (nnU-Net's
// percentiles and clipped moments), per-image MR z-scores, and their refusals.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "../core/memory_image.hpp"
#include "tessera/core/error.hpp"
#include "tessera/io/normalization.hpp"

namespace tessera::io {
namespace {

using testing::MemoryImage;

// Voxel i of a 10 × 10 × 10 volume has value `value(i)`; labels mark the foreground.
MemoryImage volume(std::function<float(int64_t)> value) {
  return MemoryImage(Index{10, 10, 10}, 1,
                     [value](int, const Index& at) { return value((at[0] * 10 + at[1]) * 10 + at[2]); });
}

// The reference, written independently of the implementation: numpy's default percentile
// (linear between order statistics) and the population moments of the clipped values.
double reference_percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  const double rank = p / 100 * double(v.size() - 1);
  const size_t lo = size_t(rank), hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (rank - double(lo)) * (v[hi] - v[lo]);
}

TEST(CtNormalization, PercentilesAndClippedMomentsOfTheForegroundOverEveryCase) {
  // Case A: foreground = first 300 voxels with values i²/100 (skewed); case B: 200 voxels,
  // values 1000 − i. Background voxels carry huge values that must not count.
  MemoryImage a = volume([](int64_t i) { return i < 300 ? float(i * i) / 100.f : 5e4f; });
  MemoryImage la = volume([](int64_t i) { return i < 300 ? 1.f : 0.f; });
  MemoryImage b = volume([](int64_t i) { return i < 200 ? 1000.f - float(i) : -5e4f; });
  MemoryImage lb = volume([](int64_t i) { return i < 200 ? 2.f : 0.f; });
  const Box whole{{0, 0, 0}, {10, 10, 10}};
  const auto stats = foreground_statistics({{&a, &la, whole}, {&b, &lb, whole}});
  ASSERT_EQ(stats.size(), 1u);

  std::vector<double> fg;
  // The image holds float32: the reference takes the very values stored.
  for (int64_t i = 0; i < 300; ++i) fg.push_back(double(float(i * i) / 100.f));
  for (int64_t i = 0; i < 200; ++i) fg.push_back(double(1000.f - float(i)));
  const double lo = reference_percentile(fg, 0.5), hi = reference_percentile(fg, 99.5);
  double sum = 0, sum2 = 0;
  for (double v : fg) {
    const double c = std::clamp(v, lo, hi);
    sum += c;
    sum2 += c * c;
  }
  const double mean = sum / double(fg.size()), sd = std::sqrt(sum2 / double(fg.size()) - mean * mean);
  EXPECT_NEAR(stats[0].low, lo, 1e-7 * std::abs(lo) + 1e-9);
  EXPECT_NEAR(stats[0].high, hi, 1e-6 * hi);
  EXPECT_NEAR(stats[0].mean, mean, 1e-6 * mean);
  EXPECT_NEAR(stats[0].std, sd, 1e-6 * sd);
  EXPECT_EQ(stats[0].voxels, 500);
  EXPECT_EQ(stats[0].images, 2);

  const Normalization n = ct_normalization(stats);
  EXPECT_EQ(n.kind, "ct");
  EXPECT_FLOAT_EQ(n.clip_low[0], float(lo));
  EXPECT_FLOAT_EQ(n.clip_high[0], float(hi));
  EXPECT_FLOAT_EQ(n.offset[0], float(mean));
  EXPECT_FLOAT_EQ(n.scale[0], float(sd));
  EXPECT_TRUE(n.resolved());
}

TEST(CtNormalization, AWindowReplacesThePercentilesAndARegionHidesTheRest) {
  MemoryImage a = volume([](int64_t i) { return float(i) - 500.f; });  // −500 … 499
  MemoryImage la = volume([](int64_t) { return 1.f; });
  ForegroundStatisticsOptions o;
  o.window = std::make_pair(-100.0, 100.0);
  // Only the first two slices (z < 2): values −500 … −301, all clipped to −100.
  const auto s = foreground_statistics({{&a, &la, Box{{0, 0, 0}, {2, 10, 10}}}}, o);
  EXPECT_EQ(s[0].low, -100);
  EXPECT_EQ(s[0].high, 100);
  EXPECT_EQ(s[0].voxels, 200);
  EXPECT_NEAR(s[0].mean, -100, 1e-9);
  EXPECT_EQ(s[0].std, 1);  // a constant clipped foreground is centred, not divided by ~0
}

TEST(CtNormalization, NoForegroundAnywhereIsRefusedNamingTheLabels) {
  MemoryImage a = volume([](int64_t i) { return float(i); });
  MemoryImage none = volume([](int64_t) { return 0.f; });
  try {
    foreground_statistics({{&a, &none, Box{{0, 0, 0}, {10, 10, 10}}}});
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("memory: no foreground"), std::string::npos) << e.what();
  }
}

TEST(MrNormalization, EachImageIsZScoredByItsOwnStatisticsInsideItsMask) {
  // Two "scans" of the same anatomy at different gains: after resolving, equal inputs.
  MemoryImage a = volume([](int64_t i) { return i % 3 == 0 ? 0.f : float(100 + i % 17); });
  MemoryImage b = volume([](int64_t i) { return i % 3 == 0 ? 0.f : 2.5f * float(100 + i % 17); });
  Normalization spec;
  spec.kind = "mr";
  spec.mask = true;
  EXPECT_FALSE(spec.resolved());
  const Normalization na = resolve_normalization(spec, a), nb = resolve_normalization(spec, b);
  ASSERT_TRUE(na.resolved());
  std::vector<double> body;
  for (int64_t i = 0; i < 1000; ++i)
    if (i % 3) body.push_back(100.0 + double(i % 17));
  const double mean = std::accumulate(body.begin(), body.end(), 0.0) / double(body.size());
  double var = 0;
  for (double v : body) var += (v - mean) * (v - mean);
  const double sd = std::sqrt(var / double(body.size()));
  EXPECT_NEAR(na.offset[0], mean, 1e-4);
  EXPECT_NEAR(na.scale[0], sd, 1e-4);
  EXPECT_NEAR(nb.offset[0], 2.5 * mean, 1e-3);
  EXPECT_NEAR(nb.scale[0], 2.5 * sd, 1e-3);
  // Without the mask the zeros count.
  spec.mask = false;
  EXPECT_LT(resolve_normalization(spec, a).offset[0], na.offset[0]);
  // A constant image has nothing to scale by.
  MemoryImage flat = volume([](int64_t) { return 7.f; });
  EXPECT_THROW(resolve_normalization(spec, flat), Error);
  // CT and affine descriptions are already concrete.
  Normalization ct{{1.f}, {2.f}, "ct", {-5.f}, {5.f}};
  EXPECT_EQ(resolve_normalization(ct, a), ct);
}

}  // namespace
}  // namespace tessera::io
