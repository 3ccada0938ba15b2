#include "tessera/io/probability_raster.hpp"

#include <gdal.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>

#include "tessera/core/error.hpp"
#include "tessera/io/raster.hpp"

namespace tessera::io {
namespace {

namespace fs = std::filesystem;

fs::path temp_dir(const std::string& name) {
  auto d = fs::temp_directory_path() / ("tessera-probs-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// A value per (class, y, x) that no two positions share within a band.
float value(int c, int y, int x) { return float(c) + float(y * 1000 + x) / 1e6f; }

TEST(ProbabilityRaster, WindowsLandWhereTheyBelongWithGeoreference) {
  init_gdal();
  const fs::path dir = temp_dir("windows");
  const std::string path = (dir / "probs.tif").string();
  const int h = 300, w = 270, classes = 3;
  Georeference geo;
  geo.geotransform = {1000, 0.5, 0, 2000, 0, -0.5};
  {
    ProbabilityRasterWriter writer(ProbabilityRasterOptions(path, {h, w}, geo, classes).with_class_names({"a", "b"}));
    for (int y0 = 0; y0 < h; y0 += 64)
      for (int x0 = 0; x0 < w; x0 += 96) {  // windows straddling the 256 blocks
        const int bh = std::min(64, h - y0), bw = std::min(96, w - x0);
        Block<float> b({classes, bh, bw});
        for (int c = 0; c < classes; ++c)
          for (int y = 0; y < bh; ++y)
            for (int x = 0; x < bw; ++x) b.data[(c * bh + y) * bw + x] = value(c, y0 + y, x0 + x);
        writer.write(Box{{y0, x0}, {bh, bw}}, b);
      }
    EXPECT_FALSE(fs::exists(path)) << "visible before commit";
    writer.commit();
  }
  GDALDatasetH ds = GDALOpen(path.c_str(), GA_ReadOnly);
  ASSERT_NE(ds, nullptr);
  EXPECT_EQ(GDALGetRasterCount(ds), classes);
  EXPECT_EQ(GDALGetRasterXSize(ds), w);
  EXPECT_EQ(GDALGetRasterYSize(ds), h);
  double gt[6];
  ASSERT_EQ(GDALGetGeoTransform(ds, gt), CE_None);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(gt[i], geo.geotransform[i]);
  const char* names[] = {"a", "b", "class 2"};
  for (int c = 0; c < classes; ++c) {
    GDALRasterBandH band = GDALGetRasterBand(ds, c + 1);
    EXPECT_EQ(GDALGetRasterDataType(band), GDT_Float32);
    EXPECT_STREQ(GDALGetDescription(band), names[c]);
    int has = 0;
    EXPECT_TRUE(std::isnan(GDALGetRasterNoDataValue(band, &has)));
    EXPECT_TRUE(has);
    int bx = 0, by = 0;
    GDALGetBlockSize(band, &bx, &by);
    EXPECT_EQ(bx, 256);
    std::vector<float> got(h * w);
    ASSERT_EQ(GDALRasterIO(band, GF_Read, 0, 0, w, h, got.data(), w, h, GDT_Float32, 0, 0), CE_None);
    for (int y = 0; y < h; ++y)
      for (int x = 0; x < w; ++x) ASSERT_EQ(got[y * w + x], value(c, y, x)) << c << " " << y << " " << x;
  }
  const char* compression = GDALGetMetadataItem(ds, "COMPRESSION", "IMAGE_STRUCTURE");
  EXPECT_STREQ(compression, "DEFLATE");
  GDALClose(ds);
  fs::remove_all(dir);
}

TEST(ProbabilityRaster, UncommittedLeavesNothingAndBadOptionsNameTheField) {
  init_gdal();
  const fs::path dir = temp_dir("uncommitted");
  const std::string path = (dir / "probs.tif").string();
  {
    ProbabilityRasterWriter writer(ProbabilityRasterOptions(path, {10, 10}, {}, 2));
    writer.write(Box{{0, 0}, {10, 10}}, Block<float>({2, 10, 10}));
  }
  EXPECT_TRUE(fs::is_empty(dir)) << "a temporary survived";
  EXPECT_NO_THROW(ProbabilityRasterOptions(path, {10, 10}, {}, 2).validate());
  try {
    ProbabilityRasterOptions(path, {10, 10, 10}, {}, 2).validate();
    FAIL() << "a 3-D extent accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("extent"), std::string::npos) << e.what();
  }
  try {
    ProbabilityRasterOptions(path, {10, 10}, {}, 0).validate();
    FAIL() << "zero classes accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("classes"), std::string::npos) << e.what();
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tessera::io
