// hausdorff_distance against (1) ITK's own HausdorffDistanceImageFilter applied to surfaces
// extracted here by a plain loop, (2) a brute-force all-pairs percentile, (3) shapes worked
// out by hand. Spacing is anisotropic throughout, so an axis-order mistake shows.
#include "tessera/io/hausdorff.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <limits>
#include <vector>

#include <gtest/gtest.h>
#include <itkHausdorffDistanceImageFilter.h>
#include <itkImage.h>
#include <ogr_spatialref.h>

#include "tessera/core/error.hpp"

namespace tessera::io {
namespace {

using Shape = std::function<bool(int64_t z, int64_t y, int64_t x)>;

// A (1, [z,] y, x) label block: `c` where the shape says so, 0 elsewhere.
Block<uint8_t> labels(const Index& extent, const Shape& inside, uint8_t c = 1) {
  Index shape{1};
  shape.insert(shape.end(), extent.begin(), extent.end());
  Block<uint8_t> b(shape);
  const bool three = extent.size() == 3;
  const int64_t nz = three ? extent[0] : 1, ny = extent[three ? 1 : 0], nx = extent[three ? 2 : 1];
  size_t i = 0;
  for (int64_t z = 0; z < nz; ++z)
    for (int64_t y = 0; y < ny; ++y)
      for (int64_t x = 0; x < nx; ++x) b.data[i++] = inside(z, y, x) ? c : 0;
  return b;
}

// Surface voxels, computed independently of the library: voxels of class c with a
// face-neighbour outside the class or outside the image. Indices (z, y, x), z = 0 in 2-D.
std::vector<std::array<int64_t, 3>> surface_voxels(const Block<uint8_t>& b, uint8_t c) {
  const bool three = b.shape.size() == 4;
  const int64_t nz = three ? b.shape[1] : 1, ny = b.shape[three ? 2 : 1], nx = b.shape[three ? 3 : 2];
  auto at = [&](int64_t z, int64_t y, int64_t x) {
    if (z < 0 || y < 0 || x < 0 || z >= nz || y >= ny || x >= nx) return false;
    return b.data[size_t((z * ny + y) * nx + x)] == c;
  };
  std::vector<std::array<int64_t, 3>> out;
  for (int64_t z = 0; z < nz; ++z)
    for (int64_t y = 0; y < ny; ++y)
      for (int64_t x = 0; x < nx; ++x) {
        if (!at(z, y, x)) continue;
        bool edge = !at(z, y - 1, x) || !at(z, y + 1, x) || !at(z, y, x - 1) || !at(z, y, x + 1);
        if (three) edge = edge || !at(z - 1, y, x) || !at(z + 1, y, x);
        if (edge) out.push_back({z, y, x});
      }
  return out;
}

// The same in physical coordinates (z, y, x); spacing in Block axis order.
std::vector<std::array<double, 3>> surface(const Block<uint8_t>& b, uint8_t c, const std::vector<double>& spacing) {
  const bool three = b.shape.size() == 4;
  const double sz = three ? spacing[0] : 0, sy = spacing[three ? 1 : 0], sx = spacing[three ? 2 : 1];
  std::vector<std::array<double, 3>> out;
  for (const auto& v : surface_voxels(b, c)) out.push_back({double(v[0]) * sz, double(v[1]) * sy, double(v[2]) * sx});
  return out;
}

std::vector<double> brute_directed(const std::vector<std::array<double, 3>>& from,
                                   const std::vector<std::array<double, 3>>& to) {
  std::vector<double> d;
  for (const auto& a : from) {
    double best = std::numeric_limits<double>::infinity();
    for (const auto& b : to)
      best = std::min(best, std::hypot(a[0] - b[0], a[1] - b[1], a[2] - b[2]));
    d.push_back(best);
  }
  return d;
}

// numpy.percentile (linear) by sorting.
double numpy_percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  const double pos = (double(v.size()) - 1) * p / 100;
  const size_t lo = size_t(pos);
  return lo + 1 < v.size() ? v[lo] + (v[lo + 1] - v[lo]) * (pos - double(lo)) : v[lo];
}

// ITK's Hausdorff distance between the surface voxel sets (as 0/1 images).
template <unsigned D>
double itk_hausdorff_of_surfaces(const Block<uint8_t>& a, const Block<uint8_t>& b, uint8_t c,
                                 const std::vector<double>& spacing) {
  using Image = itk::Image<uint8_t, D>;
  auto to_itk = [&](const Block<uint8_t>& blk) {
    auto img = Image::New();
    typename Image::SizeType size;
    typename Image::SpacingType sp;
    for (unsigned d = 0; d < D; ++d) {
      size[d] = itk::SizeValueType(blk.shape[D - d]);  // ITK is (x, y[, z])
      sp[d] = spacing[D - 1 - d];
    }
    img->SetRegions(typename Image::RegionType(size));
    img->SetSpacing(sp);
    img->Allocate(true);
    for (const auto& v : surface_voxels(blk, c)) {
      typename Image::IndexType idx;
      idx[0] = v[2];
      idx[1] = v[1];
      if constexpr (D == 3) idx[2] = v[0];
      img->SetPixel(idx, 1);
    }
    return img;
  };
  auto f = itk::HausdorffDistanceImageFilter<Image, Image>::New();
  f->SetInput1(to_itk(a));
  f->SetInput2(to_itk(b));
  f->SetUseImageSpacing(true);
  f->Update();
  return f->GetHausdorffDistance();
}

struct Case {
  const char* name;
  Index extent;
  std::vector<double> spacing;
  Shape pred, truth;
};

std::vector<Case> cases() {
  auto sq = [](double v) { return v * v; };
  return {
      {"disc vs shifted ellipse", {48, 40}, {0.7, 1.9},
       [=](int64_t, int64_t y, int64_t x) { return sq(y - 20) + sq(x - 20) <= 81; },
       [=](int64_t, int64_t y, int64_t x) { return sq((y - 23) / 7.0) + sq((x - 18) / 12.0) <= 1; }},
      {"shapes touching the border", {30, 25}, {1.3, 0.4},
       [](int64_t, int64_t y, int64_t x) { return y < 12 && x + y < 30; },
       [](int64_t, int64_t y, int64_t x) { return y >= 3 && y < 20 && x >= 2; }},
      {"ball vs box", {24, 20, 22}, {2.5, 0.8, 0.6},
       [=](int64_t z, int64_t y, int64_t x) { return sq((z - 11) * 2.5) + sq((y - 9) * 0.8) + sq((x - 10) * 0.6) <= 49; },
       [](int64_t z, int64_t y, int64_t x) { return z >= 6 && z < 15 && y >= 4 && y < 17 && x >= 2 && x < 20; }},
      {"two blobs vs one, at the faces", {10, 16, 18}, {3.0, 0.9, 1.1},
       [](int64_t z, int64_t y, int64_t x) { return (z < 4 && y < 6 && x < 5) || (z > 6 && y > 9 && x > 11); },
       [](int64_t z, int64_t y, int64_t x) { return z >= 2 && z < 8 && y >= 3 && y < 12 && x >= 4; }},
  };
}

TEST(Hausdorff, Percentile100EqualsItkHausdorffDistanceOfTheSurfaces) {
  for (const auto& k : cases()) {
    SCOPED_TRACE(k.name);
    const auto p = labels(k.extent, k.pred), t = labels(k.extent, k.truth);
    const double ours = hausdorff_distance(p, t, 1, k.spacing, 100.0);
    const double itk = k.extent.size() == 2 ? itk_hausdorff_of_surfaces<2>(p, t, 1, k.spacing)
                                            : itk_hausdorff_of_surfaces<3>(p, t, 1, k.spacing);
    EXPECT_GT(itk, 0);
    EXPECT_NEAR(ours, itk, 1e-6 * itk);
    // Symmetric: swapping prediction and truth changes nothing.
    EXPECT_NEAR(hausdorff_distance(t, p, 1, k.spacing, 100.0), itk, 1e-6 * itk);
  }
}

TEST(Hausdorff, PercentilesMatchBruteForceInBothConventions) {
  for (const auto& k : cases()) {
    SCOPED_TRACE(k.name);
    const auto p = labels(k.extent, k.pred, 3), t = labels(k.extent, k.truth, 3);
    const auto sp = surface(p, 3, k.spacing), st = surface(t, 3, k.spacing);
    const auto d_pt = brute_directed(sp, st), d_tp = brute_directed(st, sp);
    std::vector<double> pooled = d_pt;
    pooled.insert(pooled.end(), d_tp.begin(), d_tp.end());
    for (double q : {50.0, 95.0, 99.0}) {
      const double monai = std::max(numpy_percentile(d_pt, q), numpy_percentile(d_tp, q));
      EXPECT_NEAR(hausdorff_distance(p, t, 3, k.spacing, q), monai, 1e-9 * (1 + monai)) << q;
      EXPECT_NEAR(hausdorff_distance(p, t, 3, k.spacing,
                                     HausdorffOptions().with_percentile(q).with_pooling(HausdorffPooling::kPooled)),
                  numpy_percentile(pooled, q), 1e-9 * (1 + monai))
          << q;
    }
  }
}

TEST(Hausdorff, HD95OfTwoSegmentsWorkedOutByHand) {
  // Truth: row 0, columns 0..9. Prediction: row 3, columns 0..19. Spacing y 2.0, x 0.5.
  // One pixel thick, so every pixel is a surface pixel.
  //  truth→pred: every truth pixel has a prediction pixel 3 rows below: 6, ten times.
  //  pred→truth: columns 0..9 are 6 away; column 9 + m (m = 1..10) is sqrt(6² + (0.5 m)²).
  //  Sorted pred→truth: ten 6's, then sqrt(36.25), ..., sqrt(56.25) = 7.5 (m = 9), sqrt(61).
  //  Its 95th percentile: position 0.95 · 19 = 18.05 → 7.5 + 0.05 (sqrt(61) − 7.5).
  const auto truth = labels({6, 25}, [](int64_t, int64_t y, int64_t x) { return y == 0 && x < 10; }, 2);
  const auto pred = labels({6, 25}, [](int64_t, int64_t y, int64_t x) { return y == 3 && x < 20; }, 2);
  const std::vector<double> spacing{2.0, 0.5};
  const double hd95 = 7.5 + 0.05 * (std::sqrt(61.0) - 7.5);
  EXPECT_NEAR(hausdorff_distance(pred, truth, 2, spacing), hd95, 1e-9);
  EXPECT_NEAR(hausdorff_distance(pred, truth, 2, spacing, 100.0), std::sqrt(61.0), 1e-9);
  // Pooled: 30 distances, twenty 6's then m = 1..10; position 0.95 · 29 = 27.55 lies between
  // m = 8 (sqrt(52)) and m = 9 (7.5).
  EXPECT_NEAR(hausdorff_distance(pred, truth, 2, spacing,
                                 HausdorffOptions().with_pooling(HausdorffPooling::kPooled)),
              std::sqrt(52.0) + 0.55 * (7.5 - std::sqrt(52.0)), 1e-9);
}

TEST(Hausdorff, SingleVoxelsIn3DUseSpacingInZYXOrder) {
  // One voxel each, offset (dz, dy, dx) = (1, 2, 3), spacing (z 2.5, y 0.7, x 1.2).
  const auto truth = labels({4, 5, 6}, [](int64_t z, int64_t y, int64_t x) { return z == 0 && y == 1 && x == 1; });
  const auto pred = labels({4, 5, 6}, [](int64_t z, int64_t y, int64_t x) { return z == 1 && y == 3 && x == 4; });
  const double expected = std::sqrt(2.5 * 2.5 + 1.4 * 1.4 + 3.6 * 3.6);
  EXPECT_NEAR(hausdorff_distance(pred, truth, 1, {2.5, 0.7, 1.2}), expected, 1e-9);
}

TEST(Hausdorff, EmptyMasksFollowMonai) {
  const auto none = labels({8, 8}, [](int64_t, int64_t, int64_t) { return false; });
  const auto some = labels({8, 8}, [](int64_t, int64_t y, int64_t x) { return y > 2 && x > 3; });
  EXPECT_TRUE(std::isnan(hausdorff_distance(none, none, 1, {1.0, 1.0})));
  EXPECT_EQ(hausdorff_distance(none, some, 1, {1.0, 1.0}), std::numeric_limits<double>::infinity());
  EXPECT_EQ(hausdorff_distance(some, none, 1, {1.0, 1.0}), std::numeric_limits<double>::infinity());
  EXPECT_EQ(hausdorff_distance(some, some, 1, {1.0, 1.0}), 0.0);
}

TEST(Hausdorff, BadInputsAreNamed) {
  const auto a = labels({8, 8}, [](int64_t, int64_t y, int64_t) { return y > 2; });
  const auto b = labels({8, 9}, [](int64_t, int64_t y, int64_t) { return y > 2; });
  EXPECT_THROW(hausdorff_distance(a, b, 1, {1.0, 1.0}), Error);
  EXPECT_THROW(hausdorff_distance(a, a, 1, {1.0}), Error);
  EXPECT_THROW(hausdorff_distance(a, a, 1, {1.0, 0.0}), Error);
  EXPECT_THROW(hausdorff_distance(a, a, 1, {1.0, 1.0}, 101.0), Error);
}

TEST(Hausdorff, GridSpacingFromGeotransformAndVolumeSpacing) {
  ImageInfo raster;
  raster.kind = "raster";
  raster.extent = {100, 200};
  raster.geo.geotransform = {500000, 10, 0, 4000000, 0, -20};
  OGRSpatialReference utm;
  ASSERT_EQ(utm.importFromEPSG(32633), OGRERR_NONE);
  char* wkt = nullptr;
  utm.exportToWkt(&wkt);
  raster.geo.crs_wkt = wkt;
  CPLFree(wkt);
  const GridSpacing r = grid_spacing(raster);
  EXPECT_EQ(r.step, (std::vector<double>{20, 10}));  // (y, x)
  EXPECT_EQ(r.unit, "metre");

  ImageInfo volume;
  volume.kind = "volume";
  volume.extent = {40, 64, 64};
  volume.geo.spacing = {0.8, 0.7, 2.5};  // ITK order x, y, z
  const GridSpacing v = grid_spacing(volume);
  EXPECT_EQ(v.step, (std::vector<double>{2.5, 0.7, 0.8}));  // (z, y, x)
  EXPECT_EQ(v.unit, "mm");
}

}  // namespace
}  // namespace tessera::io
