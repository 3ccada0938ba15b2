// Volume resampling (tessera/io/resample.hpp): nnU-Net's target grid, linear resampling in
// physical space, nearest-neighbour label round trips, and the probability sink that hands
// the input's whole grid on at commit only.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <limits>
#include <numbers>
#include <string>
#include <vector>

#include "error_of.hpp"
#include "tessera/io/resample.hpp"
#include "recording_sink.hpp"

namespace tessera::io {
namespace {
using test::error_of;
using Point = std::array<double, 3>;  // LPS mm, or mm along the grid's axes (x, y, z)

// A CT-like grid: 0.7 × 0.7 × 2.5 mm, unequal sizes, off-origin, rotated about z and tilted
// about x, so a transposed axis, a dropped origin or an ignored direction cannot pass.
VolumeGrid ct_grid() {
  const double a = 30.0 * std::numbers::pi / 180.0, b = 10.0 * std::numbers::pi / 180.0;
  const double ca = std::cos(a), sa = std::sin(a), cb = std::cos(b), sb = std::sin(b);
  VolumeGrid g;
  g.extent = {20, 57, 43};  // (z, y, x)
  g.geo.spacing = {0.7, 0.7, 2.5};
  g.geo.origin = {-120.5, 80.25, -301.0};
  g.geo.direction = {ca, -sa * cb, sa * sb, sa, ca * cb, -ca * sb, 0, sb, cb};  // Rz(30°) · Rx(10°)
  return g;
}

int64_t count(const Index& e) { return e[0] * e[1] * e[2]; }

// Centre of voxel (z, y, x) in LPS mm: origin + direction · (spacing ⊙ (x, y, z)).
Point physical(const VolumeGrid& g, int64_t z, int64_t y, int64_t x) {
  const Point mm{x * g.geo.spacing[0], y * g.geo.spacing[1], z * g.geo.spacing[2]};
  Point p{};
  for (int r = 0; r < 3; ++r) {
    p[r] = g.geo.origin[r];
    for (int c = 0; c < 3; ++c) p[r] += g.geo.direction[3 * r + c] * mm[c];
  }
  return p;
}

// `p` in mm along g's axes from its origin (direction is orthonormal: its transpose inverts it).
Point along_axes(const VolumeGrid& g, const Point& p) {
  Point u{};
  for (int c = 0; c < 3; ++c)
    for (int r = 0; r < 3; ++r) u[c] += g.geo.direction[3 * r + c] * (p[r] - g.geo.origin[r]);
  return u;
}

// Visits every voxel of g with its flat index (x fastest) and physical centre.
void for_each_voxel(const VolumeGrid& g, const std::function<void(int64_t, const Point&)>& f) {
  int64_t i = 0;
  for (int64_t z = 0; z < g.extent[0]; ++z)
    for (int64_t y = 0; y < g.extent[1]; ++y)
      for (int64_t x = 0; x < g.extent[2]; ++x) f(i++, physical(g, z, y, x));
}

// The known shape, fixed in the CT grid's frame: a sphere (label 1, radius 13 mm) with an
// anisotropic box (label 2, half sizes 6 × 8 × 10 mm along x, y, z) at its centre, box on top.
struct Shape {
  VolumeGrid frame = ct_grid();
  Point centre{14.7, 19.6, 23.75};
  double radius = 13.0;
  Point half{6.0, 8.0, 10.0};

  uint8_t label(const Point& p) const {
    const Point d = offset(p);
    if (std::abs(d[0]) <= half[0] && std::abs(d[1]) <= half[1] && std::abs(d[2]) <= half[2]) return 2;
    return std::hypot(d[0], d[1], d[2]) <= radius ? 1 : 0;
  }
  // A lower bound of the distance (mm) from p to the nearest boundary of either part.
  double margin(const Point& p) const {
    const Point d = offset(p);
    double inside = std::numeric_limits<double>::infinity(), outside = 0;
    for (int a = 0; a < 3; ++a) {
      inside = std::min(inside, half[a] - std::abs(d[a]));
      outside = std::max(outside, std::abs(d[a]) - half[a]);
    }
    const double to_box = inside >= 0 ? inside : outside;
    return std::min(to_box, std::abs(std::hypot(d[0], d[1], d[2]) - radius));
  }
  Point offset(const Point& p) const {
    Point u = along_axes(frame, p);
    for (int a = 0; a < 3; ++a) u[a] -= centre[a];
    return u;
  }
};

std::vector<uint8_t> shape_labels(const VolumeGrid& g) {
  const Shape shape;
  std::vector<uint8_t> labels(static_cast<size_t>(count(g.extent)));
  for_each_voxel(g, [&](int64_t i, const Point& p) { labels[i] = shape.label(p); });
  return labels;
}

// Labels on g that differ from the shape's where the shape is clear (margin > `clear` mm);
// `checked` counts the voxels looked at.
int64_t mismatches(const std::vector<uint8_t>& labels, const VolumeGrid& g, double clear, int64_t& checked) {
  const Shape shape;
  int64_t bad = 0;
  checked = 0;
  for_each_voxel(g, [&](int64_t i, const Point& p) {
    if (shape.margin(p) <= clear) return;
    ++checked;
    if (labels[i] != shape.label(p)) ++bad;
  });
  return bad;
}

TEST(Resample, GridKeepsPhysicalExtentOriginAndDirection) {
  const VolumeGrid g = ct_grid();
  const VolumeGrid iso = resampled_grid(g, {1.0, 1.0, 1.0});
  // z: 2.5 · 20 = 50, y: 0.7 · 57 = 39.9 → 40, x: 0.7 · 43 = 30.1 → 30.
  EXPECT_EQ(iso.extent, (Index{50, 40, 30}));
  EXPECT_EQ(iso.geo.spacing, (std::vector<double>{1.0, 1.0, 1.0}));
  EXPECT_EQ(iso.geo.origin, g.geo.origin);
  EXPECT_EQ(iso.geo.direction, g.geo.direction);
  // Unequal target spacing: each axis from its own spacing (x 60.2 → 60, y 19.95 → 20,
  // z 16.7 → 17); and an axis coarser than the volume keeps one voxel.
  EXPECT_EQ(resampled_grid(g, {0.5, 2.0, 3.0}).extent, (Index{17, 20, 60}));
  EXPECT_EQ(resampled_grid(g, {1000.0, 1.0, 1.0}).extent, (Index{50, 40, 1}));
  EXPECT_TRUE(resampled_grid(g, {0.7, 0.7, 2.5}) == g);
  // A half voxel rounds to even, as Python's round in nnU-Net: 5 × 1 mm at 2 mm is 2 voxels (2.5).
  VolumeGrid five = g;
  five.extent = {5, 5, 5};
  five.geo.spacing = {1.0, 1.0, 1.0};
  EXPECT_EQ(resampled_grid(five, {2.0, 2.0, 2.0}).extent, (Index{2, 2, 2}));
}

TEST(Resample, RefusesBadSpacingNamingTheValue) {
  const VolumeGrid g = ct_grid();
  const auto message = [&](std::vector<double> s) { return error_of([&] { resampled_grid(g, s); }); };
  EXPECT_NE(message({0.0, 1.0, 1.0}).find("spacing 0 (x)"), std::string::npos) << message({0.0, 1.0, 1.0});
  EXPECT_NE(message({1.0, -2.0, 1.0}).find("spacing -2 (y)"), std::string::npos) << message({1.0, -2.0, 1.0});
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  EXPECT_NE(message({1.0, 1.0, nan}).find("spacing nan (z)"), std::string::npos) << message({1.0, 1.0, nan});
  EXPECT_NE(message({inf, 1.0, 1.0}).find("spacing inf (x)"), std::string::npos) << message({inf, 1.0, 1.0});
  EXPECT_NE(message({1.0, 1.0}).find("(1, 1): 2 values, expected 3"), std::string::npos) << message({1.0, 1.0});
  EXPECT_NE(message({1e-300, 1e-300, 1e-300}).find("too many voxels"), std::string::npos);
}

TEST(Resample, GridOfRefusesWhatIsNotAVolumeNamingThePath) {
  ImageInfo info;
  info.path = "scene.tif";
  info.kind = "raster";
  info.extent = {10, 10};
  EXPECT_NE(error_of([&] { grid_of(info); }).find("scene.tif: not a volume"), std::string::npos);
  info.kind = "volume";
  info.extent = {2, 10, 10};
  EXPECT_NE(error_of([&] { grid_of(info); }).find("scene.tif: volume geometry incomplete"), std::string::npos);
  info.geo = ct_grid().geo;
  EXPECT_TRUE(grid_of(info) == (VolumeGrid{{2, 10, 10}, ct_grid().geo}));
}

TEST(Resample, GridsEqualWithinFloatHeaderPrecisionOnly) {
  const VolumeGrid g = ct_grid();
  VolumeGrid near = g, far = g, other = g;
  near.geo.origin[2] += 1e-5;     // 3e-8 relative to 301 mm: a float32 header's rounding
  far.geo.origin[2] += 1e-2;      // 3e-5 relative: another grid
  other.extent = {20, 57, 44};
  EXPECT_TRUE(near == g);
  EXPECT_FALSE(far == g);
  EXPECT_FALSE(other == g);
}

TEST(Resample, InterpolationNamesRoundTripAndUnknownIsRefused) {
  for (Interpolation i : {Interpolation::kNearest, Interpolation::kLinear}) EXPECT_EQ(parse_interpolation(to_string(i)), i);
  EXPECT_EQ(error_of([] { parse_interpolation("cubic"); }), "interpolation 'cubic': expected nearest or linear");
}

// Two channels, each an affine function of LPS position (different ones, so a channel mix-up shows).
double affine(int c, const Point& p) {
  return c == 0 ? 0.5 * p[0] - 0.25 * p[1] + 0.125 * p[2] + 3.0 : -0.2 * p[0] + 0.3 * p[1] + 0.05 * p[2] - 7.0;
}

MemoryVolume affine_volume(const VolumeGrid& g) {
  ImageInfo info;
  info.path = "memory.nii.gz";
  info.kind = "volume";
  info.format = "NIfTI";
  info.data_type = "Int16";
  info.extent = g.extent;
  info.channels = 2;
  info.nodata = {std::nullopt, -1024.0};
  info.geo = g.geo;
  const int64_t n = count(g.extent);
  std::vector<float> voxels(static_cast<size_t>(2 * n));
  for (int c = 0; c < 2; ++c) for_each_voxel(g, [&](int64_t i, const Point& p) { voxels[c * n + i] = static_cast<float>(affine(c, p)); });
  return MemoryVolume(info, std::move(voxels));
}

TEST(Resample, LinearReproducesAnAffineFunctionOfPhysicalPosition) {
  const VolumeGrid g = ct_grid();
  const MemoryVolume input = affine_volume(g);
  const VolumeGrid iso = resampled_grid(g, {1.0, 1.0, 1.0});
  const auto out = resample_volume(input, iso, Interpolation::kLinear);
  EXPECT_EQ(out->info().path, "memory.nii.gz");
  EXPECT_EQ(out->info().format, "NIfTI");
  EXPECT_EQ(out->info().data_type, "Float32");
  EXPECT_EQ(out->info().channels, 2);
  EXPECT_EQ(out->info().nodata, input.info().nodata);
  EXPECT_TRUE(grid_of(out->info()) == iso);
  const int64_t n = count(iso.extent);
  ASSERT_EQ(static_cast<int64_t>(out->voxels().size()), 2 * n);
  int64_t interior = 0, worst_index = -1;
  double worst = 0;
  for_each_voxel(iso, [&](int64_t i, const Point& p) {
    const Point u = along_axes(g, p);  // continuous index · spacing in the input
    for (int a = 0; a < 3; ++a)
      if (u[a] < -1e-9 || u[a] > (g.extent[2 - a] - 1) * g.geo.spacing[a] + 1e-9) return;
    ++interior;
    for (int c = 0; c < 2; ++c) {
      const double error = std::abs(out->voxels()[c * n + i] - affine(c, p));
      if (error > worst) {
        worst = error;
        worst_index = c * n + i;
      }
    }
  });
  EXPECT_GT(interior, n / 2);
  EXPECT_LT(worst, 1e-3) << "at flat index " << worst_index;
}

TEST(Resample, OutsideTheInputTakesTheEdgeValueNotZero) {
  VolumeGrid g = ct_grid();
  g.extent = {6, 9, 7};
  ImageInfo info;
  info.path = "constant";
  info.kind = "volume";
  info.extent = g.extent;
  info.nodata = {std::nullopt};
  info.geo = g.geo;
  const MemoryVolume input(info, std::vector<float>(static_cast<size_t>(count(g.extent)), 7.0f));
  // 3 mm before the input's first voxel and beyond its last on every axis.
  VolumeGrid wider = resampled_grid(g, {1.0, 1.0, 1.0});
  wider.extent = {25, 16, 15};
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 3; ++c) wider.geo.origin[r] -= 3.0 * g.geo.direction[3 * r + c];
  for (Interpolation how : {Interpolation::kLinear, Interpolation::kNearest}) {
    const auto out = resample_volume(input, wider, how);
    for (float v : out->voxels()) ASSERT_EQ(v, 7.0f) << to_string(how);
  }
  const std::vector<uint8_t> labels = resample_labels(std::vector<uint8_t>(count(g.extent), 3), g, wider);
  for (uint8_t v : labels) ASSERT_EQ(v, 3);
}

TEST(Resample, NearestRoundTripKeepsAShapeAwayFromItsBoundary) {
  const VolumeGrid g = ct_grid();
  const VolumeGrid iso = resampled_grid(g, {1.0, 1.0, 1.0});
  const std::vector<uint8_t> original = shape_labels(g);
  const std::vector<uint8_t> coarse = resample_labels(original, g, iso);
  ASSERT_EQ(static_cast<int64_t>(coarse.size()), count(iso.extent));
  int64_t checked = 0;
  // On the 1 mm grid already: the shape in place, not transposed or shifted.
  EXPECT_EQ(mismatches(coarse, iso, 2.5, checked), 0);
  EXPECT_GT(checked, count(iso.extent) / 2);

  const std::vector<uint8_t> back = resample_labels(coarse, iso, g);
  ASSERT_EQ(back.size(), original.size());
  EXPECT_EQ(mismatches(back, g, 2.5, checked), 0);
  EXPECT_GT(checked, count(g.extent) / 2);
  std::array<int64_t, 3> before{}, after{};
  for (size_t i = 0; i < back.size(); ++i) ++before.at(original[i]), ++after.at(back[i]);
  for (int label = 0; label < 3; ++label) {
    EXPECT_GT(before[label], 1000) << "label " << label;
    EXPECT_NEAR(after[label], before[label], 0.03 * before[label]) << "label " << label;
  }
}

TEST(Resample, AxisAlignedGridOfFlipsAndPermutationsKeepsEveryVoxelCentre) {
  VolumeGrid g;
  g.extent = {7, 5, 9};  // (z, y, x)
  g.geo.spacing = {0.8, 1.1, 3.0};
  g.geo.origin = {12.0, -4.0, 30.0};
  // Index x runs towards LPS −y, index y towards +x, index z towards −z.
  g.geo.direction = {0, 1, 0, -1, 0, 0, 0, 0, -1};
  const VolumeGrid a = axis_aligned_grid(g);
  EXPECT_EQ(a.geo.direction, (std::vector<double>{1, 0, 0, 0, 1, 0, 0, 0, 1}));
  EXPECT_EQ(a.extent, (Index{7, 9, 5}));
  EXPECT_EQ(a.geo.spacing, (std::vector<double>{1.1, 0.8, 3.0}));
  // Every voxel centre of g is one of a's, and each of a's is hit once.
  std::vector<int> hits(static_cast<size_t>(count(a.extent)), 0);
  for_each_voxel(g, [&](int64_t, const Point& p) {
    int64_t index[3];
    for (int r = 0; r < 3; ++r) {
      const double at = (p[r] - a.geo.origin[r]) / a.geo.spacing[r];
      ASSERT_NEAR(at, std::round(at), 1e-9);
      index[r] = std::llround(at);
      ASSERT_GE(index[r], 0);
      ASSERT_LT(index[r], a.extent[2 - r]);
    }
    ++hits[size_t((index[2] * a.extent[1] + index[1]) * a.extent[2] + index[0])];
  });
  for (int h : hits) ASSERT_EQ(h, 1);
  // So labels go there and back unchanged.
  std::vector<uint8_t> labels(static_cast<size_t>(count(g.extent)));
  for (size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<uint8_t>(i % 251);
  EXPECT_EQ(resample_labels(resample_labels(labels, g, a), a, g), labels);
  EXPECT_TRUE(axis_aligned_grid(a) == a);
}

TEST(Resample, BoxFromAxisAlignedCoversTheSameVoxels) {
  VolumeGrid g;
  g.extent = {7, 5, 9};  // (z, y, x)
  g.geo.spacing = {0.8, 1.1, 3.0};
  g.geo.origin = {12.0, -4.0, 30.0};
  g.geo.direction = {0, 1, 0, -1, 0, 0, 0, 0, -1};  // index x towards −y, y towards +x, z towards −z
  const VolumeGrid a = axis_aligned_grid(g);
  const Box on_a{{1, 2, 1}, {3, 4, 2}};
  std::vector<uint8_t> marked(static_cast<size_t>(count(a.extent)), 0);
  for (int64_t z = 0; z < on_a.size[0]; ++z)
    for (int64_t y = 0; y < on_a.size[1]; ++y)
      for (int64_t x = 0; x < on_a.size[2]; ++x)
        marked[size_t(((on_a.origin[0] + z) * a.extent[1] + on_a.origin[1] + y) * a.extent[2] + on_a.origin[2] + x)] = 1;
  const std::vector<uint8_t> on_g = resample_labels(marked, a, g);  // a reordering (test above)
  const Box box = box_from_axis_aligned(g, on_a);
  EXPECT_EQ(box.size[0] * box.size[1] * box.size[2], on_a.size[0] * on_a.size[1] * on_a.size[2]);
  int64_t wrong = 0;
  for (int64_t z = 0; z < g.extent[0]; ++z)
    for (int64_t y = 0; y < g.extent[1]; ++y)
      for (int64_t x = 0; x < g.extent[2]; ++x) {
        const bool inside = z >= box.origin[0] && z < box.origin[0] + box.size[0] && y >= box.origin[1] &&
                            y < box.origin[1] + box.size[1] && x >= box.origin[2] && x < box.origin[2] + box.size[2];
        wrong += inside != (on_g[size_t((z * g.extent[1] + y) * g.extent[2] + x)] == 1);
      }
  EXPECT_EQ(wrong, 0);
}

using test_sinks::RecordingSink;

TEST(Resample, ProbabilitySinkPassesNothingOnBeforeCommitThenTheWholeTargetOnce) {
  const VolumeGrid g = ct_grid(), iso = resampled_grid(g, {1.0, 1.0, 1.0});
  auto recording = std::make_unique<RecordingSink>();
  RecordingSink* inner = recording.get();
  ResamplingProbabilitySink sink(std::move(recording), 2, iso, g, 255);
  // Class 1 certain on iso's slices 10..14, the rest never written (nodata).
  const Index window{5, 40, 30};
  Block<float> certain(Index{2, window[0], window[1], window[2]});
  const size_t half = certain.data.size() / 2;
  std::fill(certain.data.begin() + long(half), certain.data.end(), 1.f);
  sink.write(Box{{10, 0, 0}, window}, certain);
  EXPECT_TRUE(inner->boxes.empty());
  EXPECT_FALSE(inner->committed);
  sink.commit();
  ASSERT_EQ(inner->boxes.size(), 1u);
  EXPECT_EQ(inner->boxes[0], (Box{{0, 0, 0}, g.extent}));
  EXPECT_TRUE(inner->committed);
  const int64_t n = count(iso.extent), plane = iso.extent[1] * iso.extent[2];
  std::vector<float> on_iso(static_cast<size_t>(2 * n), std::numeric_limits<float>::quiet_NaN());
  for (int64_t z = 10; z < 15; ++z)
    for (int64_t y = 0; y < window[1]; ++y)
      for (int64_t x = 0; x < window[2]; ++x) {
        const int64_t at = z * plane + y * iso.extent[2] + x;
        on_iso[size_t(at)] = 0.f;
        on_iso[size_t(n + at)] = 1.f;
      }
  const std::vector<uint8_t> expected = argmax_resampled(on_iso, 2, iso, g, 255);
  EXPECT_GT(std::count(expected.begin(), expected.end(), uint8_t{1}), 1000);
  EXPECT_EQ(inner->last.data, expected);
}

}  // namespace
}  // namespace tessera::io
