#include "tessera/io/raster.hpp"

#include <gdal.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "tessera/core/error.hpp"
#include "tessera/io/open_image.hpp"

namespace tessera::io {
namespace {

namespace fs = std::filesystem;

std::string shared(const std::string& name) { return std::string(TESSERA_SHARED_DATA) + "/geotiff/" + name; }

#define REQUIRE_SHARED(name)                                                                       \
  if (!fs::exists(shared(name))) GTEST_SKIP() << "shared test data absent: " << shared(name)

fs::path temp_dir(const std::string& name) {
  auto d = fs::temp_directory_path() / ("tessera-raster-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

class RasterWindow : public ::testing::TestWithParam<std::string> {};

TEST_P(RasterWindow, MatchesGdalAndCarriesGeoreference) {
  REQUIRE_SHARED(GetParam());
  const std::string path = shared(GetParam());
  RasterReader r(path);
  GDALDatasetH ds = GDALOpen(path.c_str(), GA_ReadOnly);
  ASSERT_NE(ds, nullptr);
  const int bands = GDALGetRasterCount(ds);
  EXPECT_EQ(r.info().channels, bands);
  EXPECT_EQ(r.info().extent, (Index{GDALGetRasterYSize(ds), GDALGetRasterXSize(ds)}));
  double gt[6];
  ASSERT_EQ(GDALGetGeoTransform(ds, gt), CE_None);
  for (int i = 0; i < 6; ++i) EXPECT_DOUBLE_EQ(r.info().geo.geotransform[i], gt[i]);
  EXPECT_EQ(r.info().geo.crs_wkt, GDALGetProjectionRef(ds));
  const Index e = r.info().extent;
  const int h = static_cast<int>(std::max<int64_t>(1, e[0] / 2)), w = static_cast<int>(std::max<int64_t>(1, e[1] / 2));
  const int y0 = static_cast<int>(e[0] / 4), x0 = static_cast<int>(e[1] / 4);
  const Box box{{y0, x0}, {h, w}};
  const Block<float> b = r.read(box);
  ASSERT_EQ(b.shape, (Index{bands, h, w}));
  for (int c = 0; c < bands; ++c) {
    std::vector<float> ref(h * w);
    ASSERT_EQ(GDALRasterIO(GDALGetRasterBand(ds, c + 1), GF_Read, x0, y0, w, h, ref.data(), w, h, GDT_Float32, 0, 0),
              CE_None);
    std::vector<uint8_t> mask(h * w);
    ASSERT_EQ(GDALRasterIO(GDALGetMaskBand(GDALGetRasterBand(ds, c + 1)), GF_Read, x0, y0, w, h, mask.data(), w, h,
                           GDT_Byte, 0, 0),
              CE_None);
    for (int i = 0; i < h * w; ++i) {
      if (mask[i] == 0) ASSERT_TRUE(std::isnan(b.data[c * h * w + i])) << "nodata pixel " << i << " not NaN";
      else ASSERT_EQ(b.data[c * h * w + i], ref[i]);
    }
  }
  GDALClose(ds);
}

INSTANTIATE_TEST_SUITE_P(SharedData, RasterWindow,
                         ::testing::Values("rgb1_fake_nir_epsg3857.tif", "cogeo.tif", "test_esri_wkt.tif", "byte.tif"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return n;
                         });

TEST(RasterReader, CorruptTileFailsWithTheFileName) {
  REQUIRE_SHARED("corrupt.tif");
  const std::string path = shared("corrupt.tif");
  RasterReader r(path);
  const Index e = r.info().extent;
  try {
    for (int64_t y = 0; y < e[0]; y += 64) r.read(Box{{y, 0}, {std::min<int64_t>(64, e[0] - y), e[1]}});
    FAIL() << "corrupt.tif read to the end";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("corrupt.tif"), std::string::npos) << err.what();
  }
}

TEST(RasterReader, NanAndNodataBecomeNan) {
  REQUIRE_SHARED("float_nan.tif");
  RasterReader nan(shared("float_nan.tif"));
  const Block<float> b = nan.read(Box{{0, 0}, nan.info().extent});
  EXPECT_TRUE(std::any_of(b.data.begin(), b.data.end(), [](float v) { return std::isnan(v); }));
  RasterReader empty(shared("all-nodata.tif"));
  const Block<float> e = empty.read(Box{{0, 0}, empty.info().extent});
  EXPECT_TRUE(std::all_of(e.data.begin(), e.data.end(), [](float v) { return std::isnan(v); }));
  const Normalization n = empty.band_statistics();
  for (float s : n.scale) EXPECT_TRUE(std::isfinite(s) && s > 0);
}

TEST(RasterReader, AlphaBandIsAMaskNotAChannel) {
  REQUIRE_SHARED("alpha.tif");
  init_gdal();
  GDALDatasetH ds = GDALOpen(shared("alpha.tif").c_str(), GA_ReadOnly);
  ASSERT_NE(ds, nullptr);
  const int bands = GDALGetRasterCount(ds);
  GDALClose(ds);
  RasterReader r(shared("alpha.tif"));
  EXPECT_EQ(r.info().channels, bands - 1);
}

TEST(RasterReader, MissingAndNonRasterFilesAreClearErrors) {
  const auto dir = temp_dir("bad");
  EXPECT_THROW(RasterReader((dir / "nope.tif").string()), Error);
  std::ofstream((dir / "text.tif").string()) << "not a tiff";
  try {
    RasterReader r((dir / "text.tif").string());
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("text.tif"), std::string::npos);
  }
}

TEST(LabelRasterWriter, RoundTripKeepsRotatedGeotransformAndCrs) {
  REQUIRE_SHARED("rotated.tif");
  RasterReader src(shared("rotated.tif"));
  const auto dir = temp_dir("write");
  const std::string out = (dir / "labels.tif").string();
  const Index e = src.info().extent;
  {
    LabelRasterWriter w(LabelRasterOptions(out, e, src.info().geo));
    Block<uint8_t> labels({1, e[0], e[1]});
    for (size_t i = 0; i < labels.data.size(); ++i) labels.data[i] = static_cast<uint8_t>(i % 7);
    w.write(Box{{0, 0}, e}, labels);
    EXPECT_FALSE(fs::exists(out)) << "output visible before commit";
    w.commit();
  }
  RasterReader back(out);
  EXPECT_EQ(back.info().geo.geotransform, src.info().geo.geotransform);
  EXPECT_EQ(back.info().geo.crs_wkt, src.info().geo.crs_wkt);
  const Block<float> b = back.read(Box{{0, 0}, e});
  for (size_t i = 0; i < b.data.size(); ++i) ASSERT_EQ(b.data[i], float(i % 7));
}

TEST(LabelRasterWriter, UncommittedLeavesNothingBehind) {
  const auto dir = temp_dir("abandon");
  const std::string out = (dir / "labels.tif").string();
  {
    LabelRasterWriter w(LabelRasterOptions(out, {64, 64}, Georeference{}));
    w.write(Box{{0, 0}, {8, 8}}, Block<uint8_t>({1, 8, 8}));
  }
  EXPECT_TRUE(fs::is_empty(dir));
}

}  // namespace
}  // namespace tessera::io
