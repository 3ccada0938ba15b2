// Rasters through GDAL: windows equal GDAL's own reads, nodata/NaN/alpha become NaN, damaged
// files fail naming the file (and the tile), labels keep the georeference. Inputs are the
// fixtures the suite writes itself (tests/fixtures); the real GeoTIFFs in ../shared/data are
// an extra corpus, tested as well when present and never required.
#include "tessera/io/raster.hpp"

#include <gdal.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "fixtures.hpp"
#include "tessera/core/error.hpp"

namespace tessera::io {
namespace {

namespace fs = std::filesystem;

const fs::path kShared = fs::path(TESSERA_SHARED_DATA) / "geotiff";

// A test input: "fixture:NAME" (always there) or "shared:NAME" (only when present).
std::string path_of(const std::string& input) {
  const auto colon = input.find(':');
  const std::string where = input.substr(0, colon), name = input.substr(colon + 1);
  return ((where == "shared" ? kShared : fixtures::fixtures_for_tests()) / name).string();
}

// `fixture_names` as inputs, plus `shared_names` found in the shared corpus.
std::vector<std::string> inputs(const std::vector<std::string>& fixture_names,
                                const std::vector<std::string>& shared_names) {
  std::vector<std::string> out;
  for (const auto& n : fixture_names) out.push_back("fixture:" + n);
  for (const auto& n : shared_names)
    if (fs::exists(kShared / n)) out.push_back("shared:" + n);
  return out;
}

std::string test_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string n = info.param;
  for (char& c : n)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return n;
}

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

fs::path temp_dir(const std::string& name) {
  auto d = fs::temp_directory_path() / ("tessera-raster-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

bool all_nan(const Block<float>& b) {
  return std::all_of(b.data.begin(), b.data.end(), [](float v) { return std::isnan(v); });
}

class RasterWindow : public ::testing::TestWithParam<std::string> {};

TEST_P(RasterWindow, MatchesGdalAndCarriesGeoreference) {
  const std::string path = path_of(GetParam());
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
      if (mask[i] == 0 || std::isnan(ref[i])) ASSERT_TRUE(std::isnan(b.data[c * h * w + i])) << "nodata pixel " << i;
      else ASSERT_EQ(b.data[c * h * w + i], ref[i]);
    }
  }
  GDALClose(ds);
}

INSTANTIATE_TEST_SUITE_P(Inputs, RasterWindow,
                         ::testing::ValuesIn(inputs({"tiled.tif", "striped_4band.tif", "rotated.tif", "one_pixel.tif",
                                                     "float_nodata.tif", "float_nan.tif"},
                                                    {"rgb1_fake_nir_epsg3857.tif", "cogeo.tif", "test_esri_wkt.tif",
                                                     "byte.tif"})),
                         test_name);

class CorruptTile : public ::testing::TestWithParam<std::string> {};

// Tile 3 (rows and columns 512-1023) is damaged: rows above it read, the preview and the
// statistics (from overviews) work, and reading it names the file, the window and the tile.
TEST_P(CorruptTile, FailsWhenReadNamingTheFileAndTheTile) {
  const std::string path = path_of(GetParam());
  RasterReader r(path);
  const Index e = r.info().extent;
  ASSERT_EQ(e, (Index{1024, 1024}));
  EXPECT_NO_THROW(r.read(Box{{0, 0}, {512, 1024}}));
  EXPECT_NO_THROW(r.read(Box{{512, 0}, {512, 512}}));
  EXPECT_NO_THROW(r.read_preview(256));
  EXPECT_NO_THROW(r.band_statistics());
  const std::string message = message_of([&] {
    for (int64_t y = 0; y < e[0]; y += 64) r.read(Box{{y, 0}, {64, e[1]}});
  });
  EXPECT_NE(message.find(path + ": read failed in window"), std::string::npos) << message;
  EXPECT_NE(message.find("tile 3 (rows 512-1023, columns 512-1023)"), std::string::npos) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
}

INSTANTIATE_TEST_SUITE_P(Inputs, CorruptTile, ::testing::ValuesIn(inputs({"corrupt_tile.tif"}, {"corrupt.tif"})),
                         test_name);

TEST(RasterReader, TruncatedFileFailsWhenReadNamingTheFile) {
  const std::string path = path_of("fixture:truncated.tif");
  RasterReader r(path);  // the header is intact
  const std::string message = message_of([&] { r.read(Box{{0, 0}, r.info().extent}); });
  EXPECT_NE(message.find(path + ": read failed in window"), std::string::npos) << message;
  EXPECT_NE(message.find("strip"), std::string::npos) << message;
}

TEST(RasterReader, UnreadableFilesAreOneLineErrorsNamingTheFile) {
  for (const std::string name : {"truncated_header.tif", "empty.tif", "not_a_raster.tif", "missing.tif"}) {
    const std::string path = path_of("fixture:" + name);
    const std::string message = message_of([&] { RasterReader r(path); });
    EXPECT_EQ(message.rfind(path + ": ", 0), 0u) << name << ": " << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
}

class NodataRaster : public ::testing::TestWithParam<std::string> {};

// Nodata, NaN and masked pixels come out as NaN; an image without any data still has
// finite, positive normalisation (never NaN or a division by zero).
TEST_P(NodataRaster, NodataBecomesNanAndStatisticsStayFinite) {
  RasterReader r(path_of(GetParam()));
  const Block<float> b = r.read(Box{{0, 0}, r.info().extent});
  EXPECT_TRUE(std::any_of(b.data.begin(), b.data.end(), [](float v) { return std::isnan(v); }));
  const Normalization n = r.band_statistics();
  ASSERT_EQ(n.scale.size(), size_t(r.info().channels));
  for (size_t c = 0; c < n.scale.size(); ++c) {
    EXPECT_TRUE(std::isfinite(n.scale[c]) && n.scale[c] > 0);
    EXPECT_TRUE(std::isfinite(n.offset[c]));
  }
}

INSTANTIATE_TEST_SUITE_P(Inputs, NodataRaster,
                         ::testing::ValuesIn(inputs({"float_nan.tif", "float_nodata.tif", "all_nan.tif",
                                                     "all_nodata.tif", "striped_4band.tif"},
                                                    {"float_nan.tif", "all-nodata.tif", "float_raster_with_nodata.tif"})),
                         test_name);

TEST(RasterReader, ImagesWithoutDataReadAsAllNan) {
  for (const std::string& input : inputs({"all_nan.tif", "all_nodata.tif"}, {"all-nodata.tif"})) {
    RasterReader r(path_of(input));
    EXPECT_TRUE(all_nan(r.read(Box{{0, 0}, r.info().extent}))) << input;
  }
}

TEST(RasterReader, NodataCornerIsNanAndTheRestIsData) {
  RasterReader r(path_of("fixture:float_nodata.tif"));
  const Block<float> b = r.read(Box{{0, 0}, {12, 12}});
  for (int y = 0; y < 12; ++y)
    for (int x = 0; x < 12; ++x) EXPECT_EQ(std::isnan(b.data[y * 12 + x]), x < 10 && y < 10) << y << "," << x;
}

TEST(RasterReader, AlphaBandIsAMaskNotAChannel) {
  for (const std::string& input : inputs({"alpha.tif"}, {"alpha.tif", "RGBA.uint16.tif"})) {
    init_gdal();
    GDALDatasetH ds = GDALOpen(path_of(input).c_str(), GA_ReadOnly);
    ASSERT_NE(ds, nullptr);
    const int bands = GDALGetRasterCount(ds);
    GDALClose(ds);
    RasterReader r(path_of(input));
    EXPECT_EQ(r.info().channels, bands - 1) << input;
  }
  RasterReader r(path_of("fixture:alpha.tif"));  // alpha 0 on the left quarter (x < 16)
  const Block<float> b = r.read(Box{{0, 0}, r.info().extent});
  const int64_t w = r.info().extent[1], plane = r.info().extent[0] * w;
  for (int c = 0; c < 3; ++c)
    for (int64_t i = 0; i < plane; ++i) ASSERT_EQ(std::isnan(b.data[c * plane + i]), i % w < 16) << c << " " << i;
}

TEST(RasterReader, OnePixelRasterReads) {
  RasterReader r(path_of("fixture:one_pixel.tif"));
  EXPECT_EQ(r.info().extent, (Index{1, 1}));
  EXPECT_EQ(r.read(Box{{0, 0}, {1, 1}}).data, std::vector<float>{42.0f});
  EXPECT_EQ(r.read_preview(256).data, std::vector<float>{42.0f});
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
  fs::remove_all(dir);
}

class RotatedRoundTrip : public ::testing::TestWithParam<std::string> {};

TEST_P(RotatedRoundTrip, KeepsRotatedGeotransformAndCrs) {
  RasterReader src(path_of(GetParam()));
  ASSERT_EQ(src.info().geo.geotransform.size(), 6u);
  EXPECT_TRUE(src.info().geo.geotransform[2] != 0 || src.info().geo.geotransform[4] != 0) << "not rotated";
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
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Inputs, RotatedRoundTrip, ::testing::ValuesIn(inputs({"rotated.tif"}, {"rotated.tif"})),
                         test_name);

TEST(LabelRasterWriter, UncommittedLeavesNothingBehind) {
  const auto dir = temp_dir("abandon");
  const std::string out = (dir / "labels.tif").string();
  {
    LabelRasterWriter w(LabelRasterOptions(out, {64, 64}, Georeference{}));
    w.write(Box{{0, 0}, {8, 8}}, Block<uint8_t>({1, 8, 8}));
  }
  EXPECT_TRUE(fs::is_empty(dir));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tessera::io
