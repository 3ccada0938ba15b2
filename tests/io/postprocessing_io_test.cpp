// Class probabilities back onto a case's own grid (io::argmax_resampled, nnU-Net's way: each
// class's probability interpolated linearly, argmax there) against nearest-neighbour labels,
// which widen a structure; and the largest connected component of a class
// (io::keep_largest_component, io::LargestComponentSink).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "tessera/io/components.hpp"
#include "tessera/io/resample.hpp"
#include "recording_sink.hpp"

namespace tessera::io {
namespace {

VolumeGrid line_grid(int64_t nx, double spacing) {
  VolumeGrid g;
  g.extent = {2, 2, nx};  // (z, y, x)
  g.geo.spacing = {spacing, spacing, spacing};
  g.geo.origin = {0, 0, 0};
  g.geo.direction = {1, 0, 0, 0, 1, 0, 0, 0, 1};
  return g;
}

// A structure x ∈ (11.2, 46.2) mm seen by a network on a 3 mm grid as a soft probability (a
// logistic of the signed distance to its border, 1 mm wide), written back onto a 1 mm grid.
// The 3 mm voxel at 12 mm is inside (p 0.69), so nearest neighbour paints the 1 mm voxel at
// 11 mm (outside) as well: one voxel wider. Linear probabilities put the border where they cross.
TEST(ProbabilityResampling, KeepsTheBorderWhereNearestLabelsWidenIt) {
  const VolumeGrid coarse = line_grid(20, 3.0), fine = line_grid(60, 1.0);
  const double a = 11.2, b = 46.2;
  auto signed_distance = [&](double x) { return std::min(x - a, b - x); };
  const int64_t n = 2 * 2 * 20;
  std::vector<float> probabilities(2 * n);
  std::vector<uint8_t> coarse_labels(n);
  for (int64_t i = 0; i < n; ++i) {
    const double p = 1 / (1 + std::exp(-signed_distance(3.0 * double(i % 20))));
    probabilities[size_t(i)] = float(1 - p), probabilities[size_t(n + i)] = float(p);
    coarse_labels[size_t(i)] = p > 0.5;
  }
  std::vector<uint8_t> truth(2 * 2 * 60);
  for (size_t i = 0; i < truth.size(); ++i) truth[i] = signed_distance(double(i % 60)) > 0;
  const auto from_probabilities = argmax_resampled(probabilities, 2, coarse, fine, 255);
  const auto nearest = resample_labels(coarse_labels, coarse, fine);
  auto volume = [](const std::vector<uint8_t>& l) { return std::count(l.begin(), l.end(), 1); };
  EXPECT_EQ(volume(truth), 4 * 35);
  EXPECT_EQ(volume(nearest), 4 * 36) << "nearest neighbour widens the structure by one 1 mm voxel";
  EXPECT_EQ(from_probabilities, truth);
}

// NaN (nodata) probabilities reach the labels as the nodata label where they are interpolated.
TEST(ProbabilityResampling, NodataSpreadsAsTheNodataLabel) {
  const VolumeGrid coarse = line_grid(4, 2.0), fine = line_grid(8, 1.0);
  std::vector<float> probabilities(2 * 16, 0.25f);
  for (int64_t i = 0; i < 16; ++i) probabilities[size_t(16 + i)] = 0.75f;
  for (int64_t i = 0; i < 16; ++i)
    if (i % 4 == 3) probabilities[size_t(i)] = probabilities[size_t(16 + i)] = NAN;
  const auto labels = argmax_resampled(probabilities, 2, coarse, fine, 255);
  for (size_t i = 0; i < labels.size(); ++i) {
    if (i % 8 <= 3) {
      EXPECT_EQ(labels[i], 1) << i;
    } else if (i % 8 >= 5) {
      EXPECT_EQ(labels[i], 255) << i;  // 4 mm: on a valid voxel's centre, either
    }
  }
}

// A class with an island: the island goes to background; another class is left alone.
TEST(LargestComponent, RemovesTheIslandsOfOneClassOnly) {
  const Index extent{4, 10, 12};
  std::vector<uint8_t> labels(4 * 10 * 12, 0);
  auto at = [&](int64_t z, int64_t y, int64_t x) -> uint8_t& { return labels[size_t((z * 10 + y) * 12 + x)]; };
  for (int64_t z = 1; z < 4; ++z)
    for (int64_t y = 0; y < 5; ++y)
      for (int64_t x = 0; x < 5; ++x) at(z, y, x) = 1;  // 75 voxels
  at(0, 9, 11) = at(0, 9, 10) = 1;                      // an island of 2, first in memory order
  at(0, 9, 0) = 2, at(0, 7, 0) = 2;                     // class 2 in two pieces
  std::vector<uint8_t> expected = labels;
  expected[size_t(9 * 12 + 11)] = expected[size_t(9 * 12 + 10)] = 0;
  EXPECT_EQ(keep_largest_component(labels, extent, 1), 2);
  EXPECT_EQ(labels, expected);
  EXPECT_EQ(keep_largest_component(labels, extent, 1), 0) << "one piece: nothing to do";
  EXPECT_EQ(keep_largest_component(labels, extent, 3), 0) << "absent";
  // Diagonal neighbours are separate components (face connectivity, as nnU-Net's).
  std::vector<uint8_t> diagonal(8, 0);
  diagonal[0] = diagonal[3] = 1;  // (0,0,0) and (0,1,1) of a 2 × 2 × 2 volume
  EXPECT_EQ(keep_largest_component(diagonal, Index{2, 2, 2}, 1), 1);
}

using test_sinks::RecordingSink;

TEST(LargestComponent, SinkReducesTheWholeVolumeOnCommit) {
  auto recording = std::make_unique<RecordingSink>();
  RecordingSink* inner = recording.get();
  LargestComponentSink sink(std::move(recording), Index{2, 1, 8}, {1});
  Block<uint8_t> left(Index{1, 2, 1, 4}), right(Index{1, 2, 1, 4});
  left.data = {1, 1, 1, 0, 1, 1, 1, 0};   // 6 voxels of class 1
  right.data = {0, 2, 1, 0, 0, 2, 0, 0};  // an island of 1 voxel, and class 2
  sink.write(Box{{0, 0, 0}, {2, 1, 4}}, left);
  sink.write(Box{{0, 0, 4}, {2, 1, 4}}, right);
  EXPECT_TRUE(inner->boxes.empty());
  sink.commit();
  ASSERT_EQ(inner->boxes.size(), 1u);
  EXPECT_TRUE(inner->committed);
  EXPECT_EQ(inner->last.data, (std::vector<uint8_t>{1, 1, 1, 0, 0, 2, 0, 0, 1, 1, 1, 0, 0, 2, 0, 0}));
}

}  // namespace
}  // namespace tessera::io
