// Rasters through GDAL: windows equal GDAL's own reads, nodata/NaN/alpha become NaN, damaged
// files fail naming the file (and the tile), labels keep the georeference. Inputs are the
// fixtures the suite writes itself (tests/fixtures), nothing from outside the checkout.
#include "tessera/io/raster.hpp"

#include <cpl_conv.h>
#include <cpl_vsi.h>
#include <gdal.h>
#include <gdal_rat.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "fixtures.hpp"
#include "tessera/core/colors.hpp"
#include "tessera/core/error.hpp"
#include "tessera/io/label_style.hpp"
#include "tessera/io/label_tiles.hpp"
#include "tessera/io/mosaic.hpp"

namespace tessera::io {
namespace {

namespace fs = std::filesystem;

// The path of the fixture `name` (tests/fixtures, written once per process).
std::string path_of(const std::string& name) { return (fixtures::fixtures_for_tests() / name).string(); }

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
                         ::testing::Values("tiled.tif", "striped_4band.tif", "rotated.tif", "one_pixel.tif",
                                           "float_nodata.tif", "float_nan.tif", "cog.tif", "esri_wkt_3857.tif"),
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

INSTANTIATE_TEST_SUITE_P(Inputs, CorruptTile, ::testing::Values("corrupt_tile.tif"), test_name);

TEST(RasterReader, TruncatedFileFailsWhenReadNamingTheFile) {
  const std::string path = path_of("truncated.tif");
  RasterReader r(path);  // the header is intact
  const std::string message = message_of([&] { r.read(Box{{0, 0}, r.info().extent}); });
  EXPECT_NE(message.find(path + ": read failed in window"), std::string::npos) << message;
  EXPECT_NE(message.find("strip"), std::string::npos) << message;
}

TEST(RasterReader, UnreadableFilesAreOneLineErrorsNamingTheFile) {
  for (const std::string name : {"truncated_header.tif", "empty.tif", "not_a_raster.tif", "missing.tif"}) {
    const std::string path = path_of(name);
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
                         ::testing::Values("float_nan.tif", "float_nodata.tif", "all_nan.tif", "all_nodata.tif",
                                           "striped_4band.tif", "cog.tif", "rgba_uint16.tif"),
                         test_name);

TEST(RasterReader, ImagesWithoutDataReadAsAllNan) {
  for (const std::string input : {"all_nan.tif", "all_nodata.tif"}) {
    RasterReader r(path_of(input));
    EXPECT_TRUE(all_nan(r.read(Box{{0, 0}, r.info().extent}))) << input;
  }
}

TEST(RasterReader, NodataCornerIsNanAndTheRestIsData) {
  RasterReader r(path_of("float_nodata.tif"));
  const Block<float> b = r.read(Box{{0, 0}, {12, 12}});
  for (int y = 0; y < 12; ++y)
    for (int x = 0; x < 12; ++x) EXPECT_EQ(std::isnan(b.data[y * 12 + x]), x < 10 && y < 10) << y << "," << x;
}

TEST(RasterReader, AlphaBandIsAMaskNotAChannel) {
  for (const std::string input : {"alpha.tif", "rgba_uint16.tif"}) {
    init_gdal();
    GDALDatasetH ds = GDALOpen(path_of(input).c_str(), GA_ReadOnly);
    ASSERT_NE(ds, nullptr);
    const int bands = GDALGetRasterCount(ds);
    GDALClose(ds);
    RasterReader r(path_of(input));
    EXPECT_EQ(r.info().channels, bands - 1) << input;
  }
  RasterReader r(path_of("alpha.tif"));  // alpha 0 on the left quarter (x < 16)
  const Block<float> b = r.read(Box{{0, 0}, r.info().extent});
  const int64_t w = r.info().extent[1], plane = r.info().extent[0] * w;
  for (int c = 0; c < 3; ++c)
    for (int64_t i = 0; i < plane; ++i) ASSERT_EQ(std::isnan(b.data[c * plane + i]), i % w < 16) << c << " " << i;
}

// init_gdal registers only GeoTIFF, COG, VRT and MEM; a file of another format (here a
// binary PGM, GDAL's PNM driver, written byte by byte) opens through the reader's fallback to
// every driver. Under ctest each test is a process of its own, so nothing else registered them.
TEST(RasterReader, AFormatBeyondTheFourRegisteredDriversOpens) {
  init_gdal();
  const std::string path =
      (std::filesystem::temp_directory_path() / ("tessera-pgm-" + std::to_string(::getpid()) + ".pgm")).string();
  {
    std::ofstream f(path, std::ios::binary);
    f << "P5\n4 3\n255\n";
    for (int i = 0; i < 12; ++i) f.put(char(10 * i));
  }
  RasterReader r(path);
  EXPECT_EQ(r.info().extent, (Index{3, 4}));
  const Block<float> b = r.read(Box{{0, 0}, {3, 4}});
  for (int i = 0; i < 12; ++i) EXPECT_EQ(b.data[size_t(i)], float(10 * i)) << i;
  std::filesystem::remove(path);
}

TEST(RasterReader, OnePixelRasterReads) {
  RasterReader r(path_of("one_pixel.tif"));
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

// The cloud-optimised layout: internal overviews, and the internal mask (a disc of radius 80
// around row 320, column 192) read as NaN in every band; the preview comes from the overviews.
TEST(RasterReader, CogOverviewsAndInternalMaskAreUsed) {
  RasterReader r(path_of("cog.tif"));
  EXPECT_EQ(r.describe().overview_count, 2);  // 256 and 128, down to one 128-pixel tile
  EXPECT_EQ(r.info().channels, 3);
  const Block<float> b = r.read(Box{{0, 0}, r.info().extent});
  for (int c = 0; c < 3; ++c)
    for (int y = 0; y < 512; ++y)
      for (int x = 0; x < 512; ++x) {
        const bool hidden = (y - 320) * (y - 320) + (x - 192) * (x - 192) < 80 * 80;
        ASSERT_EQ(std::isnan(b.data[size_t((c * 512 + y) * 512 + x)]), hidden) << c << " " << y << "," << x;
      }
  const Block<float> preview = r.read_preview(128);
  EXPECT_EQ(preview.shape, (Index{3, 128, 128}));
}

// A CRS written as ESRI WKT (an "ESRI PE String" citation in the file) is understood: its
// pixels map to the lon/lat of Web Mercator's formulas.
TEST(RasterReader, EsriWktCrsGivesTheLonLatOfWebMercator) {
  const std::string path = path_of("esri_wkt_3857.tif");
  std::ifstream file(path, std::ios::binary);
  const std::string bytes{std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>()};
  ASSERT_NE(bytes.find("ESRI PE String = PROJCS[\"WGS_1984_Web_Mercator_Auxiliary_Sphere\""), std::string::npos)
      << "the fixture does not carry ESRI WKT";
  RasterReader r(path);
  const auto& gt = r.info().geo.geotransform;
  ASSERT_EQ(gt.size(), 6u);
  const double x = gt[0] + 30 * gt[1], y = gt[3] + 25 * gt[5];
  const auto ll = map_to_lonlat(r.info().geo.crs_wkt, x, y);
  ASSERT_TRUE(ll.has_value()) << r.info().geo.crs_wkt;
  const double radius = 6378137.0, degrees = 180.0 / M_PI;
  EXPECT_NEAR((*ll)[0], x / radius * degrees, 1e-9);
  EXPECT_NEAR((*ll)[1], (2 * std::atan(std::exp(y / radius)) - M_PI / 2) * degrees, 1e-9);
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

INSTANTIATE_TEST_SUITE_P(Inputs, RotatedRoundTrip, ::testing::Values("rotated.tif"), test_name);

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

// A Float32 raster of `bands` bands, value(b, y, x) from `value`; nodata set when given.
void write_float_raster(const std::string& path, int height, int width, int bands,
                        const std::function<float(int, int, int)>& value, std::optional<double> nodata = {}) {
  init_gdal();
  GDALDatasetH ds = GDALCreate(GDALGetDriverByName("GTiff"), path.c_str(), width, height, bands, GDT_Float32, nullptr);
  ASSERT_NE(ds, nullptr);
  std::vector<float> plane(size_t(width) * height);
  for (int b = 0; b < bands; ++b) {
    for (int y = 0; y < height; ++y)
      for (int x = 0; x < width; ++x) plane[size_t(y) * width + x] = value(b, y, x);
    GDALRasterBandH band = GDALGetRasterBand(ds, b + 1);
    if (nodata) GDALSetRasterNoDataValue(band, *nodata);
    ASSERT_EQ(GDALRasterIO(band, GF_Write, 0, 0, width, height, plane.data(), width, height, GDT_Float32, 0, 0), CE_None);
  }
  GDALClose(ds);
}

float pattern(int b, int y, int x) { return float((y * 7 + x * 3 + b * 11) % 50); }

// The viewer's reduction by 2: each output pixel the mean of its 2 x 2 full-resolution pixels.
float mean_2x2(const Block<float>& full, int b, int y, int x) {
  const int64_t h = full.shape[1], w = full.shape[2];
  const float* p = full.data.data() + b * h * w;
  return (p[(2 * y) * w + 2 * x] + p[(2 * y) * w + 2 * x + 1] + p[(2 * y + 1) * w + 2 * x] +
          p[(2 * y + 1) * w + 2 * x + 1]) / 4.0f;
}

TEST(RasterReader, ReducedWindowIsTheAverageOfTheFullRead) {
  const auto dir = temp_dir("reduced");
  const std::string path = (dir / "image.tif").string();
  write_float_raster(path, 40, 64, 2, pattern);
  RasterReader r(path);
  const Box window{{8, 16}, {16, 32}};
  const Block<float> full = r.read(window);
  const Block<float> half = r.read_resampled(window, {8, 16}, {1, 2}, Resampling::average);
  ASSERT_EQ(half.shape, (Index{2, 8, 16}));
  for (int b = 0; b < 2; ++b)
    for (int y = 0; y < 8; ++y)
      for (int x = 0; x < 16; ++x)
        ASSERT_FLOAT_EQ(half.data[(b * 8 + y) * 16 + x], mean_2x2(full, b, y, x)) << b << " " << y << "," << x;
  // One band, chosen by its 1-based file index.
  const Block<float> second = r.read_resampled(window, {8, 16}, {2}, Resampling::average);
  EXPECT_EQ(second.data, std::vector<float>(half.data.begin() + 8 * 16, half.data.end()));
  EXPECT_THROW(r.read_resampled(Box{{32, 0}, {16, 64}}, {8, 32}, {1}, Resampling::average), Error);
  fs::remove_all(dir);
}

TEST(RasterReader, ReducedReadOfAFileWithOverviewsIsTheAverageOfTheFullRead) {
  const auto dir = temp_dir("overviews");
  const std::string path = (dir / "image.tif").string();
  write_float_raster(path, 256, 256, 1, pattern);
  build_overviews(path, Resampling::average);
  RasterReader r(path);
  EXPECT_EQ(r.describe().overview_count, 1);  // factor 2: 128 px on the longer side
  const Block<float> full = r.read(Box{{0, 0}, {256, 256}});
  const Block<float> half = r.read_resampled(Box{{0, 0}, {256, 256}}, {128, 128}, {1}, Resampling::average);
  for (int y = 0; y < 128; ++y)
    for (int x = 0; x < 128; ++x) ASSERT_FLOAT_EQ(half.data[y * 128 + x], mean_2x2(full, 0, y, x)) << y << "," << x;
  fs::remove_all(dir);
}

// The preview is read a band of rows at a time (one read of the whole image decodes every block
// once per band when GDAL's cache cannot hold them); the bands must add up to GDAL's one read,
// on a size whose rows do not divide evenly (fractional source windows) and several bands.
TEST(RasterReader, PreviewReadInBandsOfRowsEqualsOneWholeRead) {
  const auto dir = temp_dir("preview");
  const std::string path = (dir / "image.tif").string();
  auto value = [](int b, int y, int x) { return float((y * 13 + x * 7 + b * 5) % 97) + 0.25f * float(y % 3); };
  write_float_raster(path, 403, 150, 3, value);
  RasterReader r(path);
  for (const bool nearest : {false, true}) {
    const Block<float> preview = r.read_preview(64, nearest);
    ASSERT_EQ(preview.shape, (Index{3, 64, 24}));
    const Block<float> whole = r.read_resampled(Box{{0, 0}, {403, 150}}, {64, 24}, {1, 2, 3},
                                                nearest ? Resampling::nearest : Resampling::average);
    for (size_t i = 0; i < whole.data.size(); ++i)
      ASSERT_NEAR(preview.data[i], whole.data[i], 1e-3) << (nearest ? "nearest" : "average") << ", value " << i;
  }
  fs::remove_all(dir);
}

TEST(RasterReader, ReducedLabelsPickOnePixelAndNodataIsNan) {
  const auto dir = temp_dir("labels");
  const std::string path = (dir / "labels.tif").string();
  const Index e{32, 48};
  Block<uint8_t> labels({1, e[0], e[1]});
  for (int64_t i = 0; i < labels.numel(); ++i) labels.data[size_t(i)] = uint8_t(i % 251);
  labels.data[0] = kNoDataLabel;
  {
    LabelRasterWriter w(LabelRasterOptions(path, e, Georeference{}));
    w.write(Box{{0, 0}, e}, labels);
    w.commit();
  }
  RasterReader r(path);
  const RasterDescription d = r.describe();
  EXPECT_EQ(d.bands, 1);
  ASSERT_TRUE(d.color_table.has_value());
  EXPECT_EQ(d.nodata, (std::vector<std::optional<double>>{double(kNoDataLabel)}));
  const Block<uint8_t> half = r.read_labels_resampled(Box{{0, 0}, e}, {16, 24});
  ASSERT_EQ(half.shape, (Index{1, 16, 24}));
  for (int y = 0; y < 16; ++y)
    for (int x = 0; x < 24; ++x) {  // nearest: the source pixel under the output pixel's centre
      const uint8_t expect = labels.data[size_t((2 * y + 1) * e[1] + 2 * x + 1)];
      ASSERT_EQ(half.data[size_t(y * 24 + x)], expect) << y << "," << x;
    }
  const Block<float> same = r.read_resampled(Box{{0, 0}, {2, 2}}, {2, 2}, {1}, Resampling::nearest);
  EXPECT_TRUE(std::isnan(same.data[0]));  // the nodata label
  EXPECT_EQ(same.data[1], 1.0f);
  EXPECT_EQ(r.read_pixel(0, 1), std::vector<double>{1.0});
  EXPECT_TRUE(r.read_pixel(32, 0).empty());
  fs::remove_all(dir);
}

// A label image split into tiles by write_label_tile, as a run writes them.
struct TiledLabels {
  ImageInfo like;
  Block<uint8_t> labels;
  std::vector<std::string> tiles;
  std::vector<Box> insets;
};

TiledLabels write_tiles(const fs::path& dir) {
  TiledLabels t;
  t.like.path = (dir / "scene.tif").string();
  t.like.kind = "raster";
  t.like.channels = 1;
  t.like.extent = {40, 56};
  // An origin std::to_string would round (6 decimals): the mosaic must keep the grid exactly.
  t.like.geo.geotransform = {500000.123456789, 0.3, 0, 4000000.987654321, 0, -0.3};
  t.labels = Block<uint8_t>({1, 40, 56});
  for (int64_t i = 0; i < t.labels.numel(); ++i) t.labels.data[size_t(i)] = uint8_t((i / 56 * 5 + i % 56) % 13);
  for (int64_t y = 0; y < 40; y += 16)
    for (int64_t x = 0; x < 56; x += 16) {
      const Box inset = Box{{y, x}, {16, 16}}.clipped(t.like.extent);
      Block<uint8_t> part({1, inset.size[0], inset.size[1]});
      for (int64_t r = 0; r < inset.size[0]; ++r)
        for (int64_t c = 0; c < inset.size[1]; ++c)
          part.data[size_t(r * inset.size[1] + c)] = t.labels.data[size_t((y + r) * 56 + x + c)];
      t.tiles.push_back(label_tile_path(dir.string(), t.like, int64_t(t.tiles.size())));
      t.insets.push_back(inset);
      write_label_tile(t.tiles.back(), t.like, inset, part);
    }
  return t;
}

TEST(Mosaic, VrtOfTheTilesReadsAsTheStitchedLabelsOnTheImageGrid) {
  const auto dir = temp_dir("mosaic");
  const TiledLabels t = write_tiles(dir);
  const std::string vrt = (dir / "mosaic.vrt").string();
  build_mosaic_vrt(vrt, t.tiles, t.like);
  RasterReader m(vrt);
  EXPECT_EQ(m.info().extent, t.like.extent);
  EXPECT_EQ(m.info().geo.geotransform, t.like.geo.geotransform);
  const Block<float> b = m.read(Box{{0, 0}, t.like.extent});
  for (size_t i = 0; i < b.data.size(); ++i) ASSERT_EQ(b.data[i], float(t.labels.data[i])) << i;
  fs::remove_all(dir);
}

TEST(Mosaic, InMemoryMosaicOfSomeTilesIsNodataWhereTilesAreMissing) {
  const auto dir = temp_dir("partial");
  TiledLabels t = write_tiles(dir);
  const Box missing = t.insets[1];
  t.tiles.erase(t.tiles.begin() + 1);
  const std::string vrt = memory_mosaic_path();
  EXPECT_NE(vrt, memory_mosaic_path());
  build_mosaic_vrt(vrt, t.tiles, t.like);
  {
    RasterReader m(vrt);
    const Block<float> b = m.read(Box{{0, 0}, t.like.extent});
    for (int64_t y = 0; y < 40; ++y)
      for (int64_t x = 0; x < 56; ++x) {
        const float v = b.data[size_t(y * 56 + x)];
        if (missing.contains(Box{{y, x}, {1, 1}}))
          ASSERT_TRUE(std::isnan(v)) << y << "," << x;
        else
          ASSERT_EQ(v, float(t.labels.data[size_t(y * 56 + x)])) << y << "," << x;
      }
  }
  release_memory_mosaic(vrt);
  VSIStatBufL stat;
  EXPECT_NE(VSIStatL(vrt.c_str(), &stat), 0) << "released";
  fs::remove_all(dir);
}

TEST(Mosaic, RepeatingVrtTilesTheSourceDownAndAcrossCroppedToTheExtent) {
  const auto dir = temp_dir("repeat");
  const TiledLabels t = write_tiles(dir);  // the first tile: 16 × 16 labels
  const std::string vrt = (dir / "tall.vrt").string();
  write_repeating_vrt(vrt, t.tiles[0], {40, 21});
  RasterReader m(vrt);
  EXPECT_EQ(m.info().extent, (Index{40, 21}));
  const Block<float> b = m.read(Box{{0, 0}, {40, 21}});
  for (int64_t y = 0; y < 40; ++y)
    for (int64_t x = 0; x < 21; ++x)
      ASSERT_EQ(b.data[size_t(y * 21 + x)], float(t.labels.data[size_t((y % 16) * 56 + x % 16)])) << y << "," << x;
  EXPECT_NE(message_of([&] { write_repeating_vrt(vrt, (dir / "absent.tif").string(), {4, 4}); }).find("absent.tif"),
            std::string::npos);
  fs::remove_all(dir);
}

TEST(Mosaic, RotatedGridIsAClearError) {
  ImageInfo like;
  like.path = "rotated.tif";
  like.extent = {4, 4};
  like.geo.geotransform = {0, 1, 0.5, 0, 0.5, -1};
  EXPECT_NE(message_of([&] { build_mosaic_vrt(memory_mosaic_path(), {"a.tif"}, like); }).find("rotated.tif: rotated"),
            std::string::npos);
}

TEST(RasterReader, LonLatOfMapCoordinatesNeedsACrs) {
  EXPECT_FALSE(map_to_lonlat("", 1, 2).has_value());
  const auto ll = map_to_lonlat(R"(PROJCS["WGS 84 / UTM zone 32N",GEOGCS["WGS 84",DATUM["WGS_1984",SPHEROID["WGS 84",6378137,298.257223563]],PRIMEM["Greenwich",0],UNIT["degree",0.0174532925199433]],PROJECTION["Transverse_Mercator"],PARAMETER["latitude_of_origin",0],PARAMETER["central_meridian",9],PARAMETER["scale_factor",0.9996],PARAMETER["false_easting",500000],PARAMETER["false_northing",0],UNIT["metre",1]])",
                                500000, 0);
  ASSERT_TRUE(ll.has_value());
  EXPECT_NEAR((*ll)[0], 9.0, 1e-9);
  EXPECT_NEAR((*ll)[1], 0.0, 1e-9);
}

// ---- Label rasters as GIS analysts open them (names, attribute table, COG, QGIS style) ----

// GDAL with .aux.xml files on for this thread, as gdalinfo and QGIS read a GeoTIFF.
struct GdalAsAnalysts {
  GdalAsAnalysts() { CPLSetThreadLocalConfigOption("GDAL_PAM_ENABLED", "YES"); }
  ~GdalAsAnalysts() { CPLSetThreadLocalConfigOption("GDAL_PAM_ENABLED", nullptr); }
};

std::array<int64_t, 256> histogram(const Block<uint8_t>& labels) {
  std::array<int64_t, 256> h{};
  for (uint8_t v : labels.data) ++h[v];
  return h;
}

// Everything GDAL shows of the classes of `path`: category names, the attribute table rows
// (checked against `names` and `expected` counts), the colour table and nodata.
void expect_classes_in_gdal(const std::string& path, const std::vector<std::string>& names,
                            const std::array<int64_t, 256>& expected) {
  GdalAsAnalysts pam;
  GDALDatasetH ds = GDALOpen(path.c_str(), GA_ReadOnly);
  ASSERT_NE(ds, nullptr) << path;
  GDALRasterBandH band = GDALGetRasterBand(ds, 1);
  int has_nodata = 0;
  EXPECT_EQ(GDALGetRasterNoDataValue(band, &has_nodata), 255.0);
  EXPECT_TRUE(has_nodata);
  char** categories = GDALGetRasterCategoryNames(band);
  ASSERT_NE(categories, nullptr) << "no category names";
  for (size_t id = 0; id < names.size(); ++id) {
    ASSERT_NE(categories[id], nullptr) << id;
    EXPECT_EQ(std::string(categories[id]), names[id]);
  }
  GDALRasterAttributeTableH rat = GDALGetDefaultRAT(band);
  ASSERT_NE(rat, nullptr) << "no raster attribute table";
  const int value = GDALRATGetColOfUsage(rat, GFU_MinMax), name = GDALRATGetColOfUsage(rat, GFU_Name);
  const int count = GDALRATGetColOfUsage(rat, GFU_PixelCount), red = GDALRATGetColOfUsage(rat, GFU_Red);
  const int green = GDALRATGetColOfUsage(rat, GFU_Green), blue = GDALRATGetColOfUsage(rat, GFU_Blue);
  ASSERT_TRUE(value >= 0 && name >= 0 && count >= 0 && red >= 0 && green >= 0 && blue >= 0);
  EXPECT_EQ(std::string(GDALRATGetNameOfCol(rat, count)), "Count");
  EXPECT_EQ(std::string(GDALRATGetNameOfCol(rat, name)), "Class_Name");
  int64_t listed = 0;
  for (int row = 0; row < GDALRATGetRowCount(rat); ++row) {
    const int id = GDALRATGetValueAsInt(rat, row, value);
    ASSERT_TRUE(id >= 0 && id < 255) << "row " << row << " lists " << id;
    EXPECT_EQ(GDALRATGetValueAsString(rat, row, name), id < int(names.size()) ? names[id] : "class " + std::to_string(id));
    EXPECT_EQ(GDALRATGetValueAsDouble(rat, row, count), double(expected[size_t(id)])) << "class " << id;
    const Rgb c = label_color(id);
    EXPECT_EQ(GDALRATGetValueAsInt(rat, row, red), c[0]);
    EXPECT_EQ(GDALRATGetValueAsInt(rat, row, green), c[1]);
    EXPECT_EQ(GDALRATGetValueAsInt(rat, row, blue), c[2]);
    listed += GDALRATGetValueAsDouble(rat, row, count) > 0 ? 1 : 0;
  }
  int64_t present = 0;
  for (int id = 0; id < 255; ++id) present += expected[size_t(id)] > 0 ? 1 : 0;
  EXPECT_EQ(listed, present) << "every class that occurs has a row";
  EXPECT_GE(GDALRATGetRowCount(rat), int(names.size()));
  GDALColorTableH ct = GDALGetRasterColorTable(band);
  ASSERT_NE(ct, nullptr) << "no colour table";
  for (int id = 0; id < int(names.size()); ++id) {
    const GDALColorEntry* e = GDALGetColorEntry(ct, id);
    const Rgb c = label_color(id);
    EXPECT_EQ((std::array<int, 3>{e->c1, e->c2, e->c3}), (std::array<int, 3>{c[0], c[1], c[2]})) << id;
  }
  GDALClose(ds);
}

// The QGIS style beside `raster`: a paletted renderer with each class's value, colour and name.
void expect_qgis_style(const std::string& raster, const std::vector<std::string>& names) {
  const std::string qml = qml_sidecar_path(raster);
  std::ifstream in(qml);
  ASSERT_TRUE(in) << "no QGIS style " << qml;
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("<rasterrenderer type=\"paletted\" band=\"1\""), std::string::npos) << text;
  for (size_t id = 0; id < names.size(); ++id) {
    const Rgb c = label_color(int(id));
    char color[8];
    std::snprintf(color, sizeof color, "#%02x%02x%02x", c[0], c[1], c[2]);
    const std::string label = std::regex_replace(names[id], std::regex("&"), "&amp;");  // XML text
    const std::regex entry("<paletteEntry value=\"" + std::to_string(id) + "\" color=\"" + color +
                           "\" alpha=\"255\" label=\"" + label + "\"/>");
    EXPECT_TRUE(std::regex_search(text, entry)) << "class " << id << " " << names[id] << " in\n" << text;
  }
}

std::vector<std::string> leftovers(const fs::path& dir) {
  std::vector<std::string> found;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().find(".partial") != std::string::npos) found.push_back(e.path().string());
  return found;
}

TEST(LabelRasterWriter, GdalListsClassNamesAttributeTableWithPixelCountsColoursAndNodata) {
  const auto dir = temp_dir("named");
  const std::string out = (dir / "labels.tif").string();
  const std::vector<std::string> names = {"water", "forest", "urban & roads", "class 3"};
  const Index e{40, 56};
  Block<uint8_t> labels({1, e[0], e[1]});
  for (size_t i = 0; i < labels.data.size(); ++i) labels.data[i] = i % 11 == 0 ? kNoDataLabel : uint8_t(i * i % 7 % 3);
  {
    // Classes 0..3 from the model, 3 never predicted; written in two windows, as tiles arrive.
    LabelRasterWriter w(LabelRasterOptions(out, e, Georeference{})
                            .with_style(LabelStyle().with_class_names({"water", "forest", "urban & roads"}).with_classes(4)));
    Block<uint8_t> top({1, 24, 56}), bottom({1, 16, 56});
    std::copy(labels.data.begin(), labels.data.begin() + 24 * 56, top.data.begin());
    std::copy(labels.data.begin() + 24 * 56, labels.data.end(), bottom.data.begin());
    w.write(Box{{24, 0}, {16, 56}}, bottom);
    w.write(Box{{0, 0}, {24, 56}}, top);
    EXPECT_FALSE(fs::exists(out + ".aux.xml")) << "attribute table visible before commit";
    EXPECT_FALSE(fs::exists(qml_sidecar_path(out))) << "style visible before commit";
    w.commit();
  }
  const auto expected = histogram(labels);
  ASSERT_GT(expected[kNoDataLabel], 0);
  expect_classes_in_gdal(out, names, expected);
  expect_qgis_style(out, names);
  // Tessera's own reader (and so the viewer) gets the names without the .aux.xml.
  const RasterDescription d = RasterReader(out).describe();
  for (size_t id = 0; id < names.size(); ++id) EXPECT_EQ(d.class_names[id], names[id]);
  EXPECT_TRUE(d.class_names[4].empty());
  ASSERT_TRUE(d.color_table.has_value());
  EXPECT_EQ(d.nodata.at(0), std::optional<double>(255.0));
  EXPECT_EQ(leftovers(dir), std::vector<std::string>{});
  fs::remove_all(dir);
}

TEST(LabelRasterWriter, CogNameGivesInternalModeOverviewsAndKeepsTheClasses) {
  const auto dir = temp_dir("cog");
  const std::string out = (dir / "labels.cog.tif").string();
  // 2 x 2 blocks of {0, 3, 3, 3}: `mode` gives 3 where nearest gives 0 and average 2.
  const Index e{600, 600};
  Block<uint8_t> labels({1, e[0], e[1]});
  for (int64_t y = 0; y < e[0]; ++y)
    for (int64_t x = 0; x < e[1]; ++x) labels.data[size_t(y * e[1] + x)] = (y % 2 == 0 && x % 2 == 0) ? 0 : 3;
  {
    LabelRasterWriter w(LabelRasterOptions(out, e, Georeference{}).with_style(LabelStyle().with_classes(4)));
    w.write(Box{{0, 0}, e}, labels);
    w.commit();
  }
  const std::vector<std::string> names = {"class 0", "class 1", "class 2", "class 3"};
  expect_classes_in_gdal(out, names, histogram(labels));
  expect_qgis_style(out, names);
  EXPECT_TRUE(fs::exists(dir / "labels.cog.qml"));
  EXPECT_FALSE(fs::exists(out + ".ovr")) << "overviews must be internal";
  {
    GdalAsAnalysts pam;
    GDALDatasetH ds = GDALOpen(out.c_str(), GA_ReadOnly);
    ASSERT_NE(ds, nullptr);
    const char* layout = GDALGetMetadataItem(ds, "LAYOUT", "IMAGE_STRUCTURE");
    EXPECT_EQ(std::string(layout ? layout : "(none)"), "COG");
    GDALRasterBandH band = GDALGetRasterBand(ds, 1);
    ASSERT_GE(GDALGetOverviewCount(band), 1);
    GDALRasterBandH half = GDALGetOverview(band, 0);
    ASSERT_EQ(GDALGetRasterBandXSize(half), 300);
    std::vector<uint8_t> row(300);
    ASSERT_EQ(GDALRasterIO(half, GF_Read, 0, 7, 300, 1, row.data(), 300, 1, GDT_Byte, 0, 0), CE_None);
    EXPECT_EQ(std::count(row.begin(), row.end(), uint8_t{3}), 300) << "overviews are not `mode`";
    GDALClose(ds);
  }
  EXPECT_GE(RasterReader(out).describe().overview_count, 1);
  EXPECT_EQ(leftovers(dir), std::vector<std::string>{});
  fs::remove_all(dir);
}

TEST(LabelRasterWriter, BareStyleWritesNoSidecars) {
  const auto dir = temp_dir("bare");
  const std::string out = (dir / "tile.tif").string();
  {
    LabelRasterWriter w(LabelRasterOptions(out, {8, 8}, Georeference{}).with_style(LabelStyle::bare()));
    w.write(Box{{0, 0}, {8, 8}}, Block<uint8_t>({1, 8, 8}));
    w.commit();
  }
  std::vector<std::string> files;
  for (const auto& f : fs::directory_iterator(dir)) files.push_back(f.path().filename().string());
  EXPECT_EQ(files, std::vector<std::string>{"tile.tif"});
  fs::remove_all(dir);
}

TEST(LabelStyle, DefaultsAreValidAndBadFieldsAreNamed) {
  EXPECT_NO_THROW(LabelStyle().validate());
  EXPECT_NE(message_of([] { LabelStyle().with_classes(300).validate(); }).find("classes"), std::string::npos);
  EXPECT_EQ(LabelStyle().with_class_names({"a", ""}).name(1), "class 1");
  EXPECT_TRUE(wants_cog("x/labels.COG.tif", false));
  EXPECT_FALSE(wants_cog("x/labels.tif", false));
  EXPECT_EQ(qml_sidecar_path("x/labels.cog.tif"), "x/labels.cog.qml");
}

TEST(Mosaic, AssembledRunOutputHasTheNamesAndCountsOfASingleProcess) {
  const auto dir = temp_dir("assembled");
  const TiledLabels t = write_tiles(dir / "tiles");
  const std::string out = (dir / "labels.tif").string();
  std::vector<std::string> names;
  for (int id = 0; id < 13; ++id) names.push_back("c" + std::to_string(id));
  assemble_label_tiles(t.tiles, t.insets, out, t.like, LabelStyle().with_class_names(names).with_classes(13));
  expect_classes_in_gdal(out, names, histogram(t.labels));
  expect_qgis_style(out, names);
  EXPECT_EQ(RasterReader(out).describe().class_names[12], "c12");
  EXPECT_EQ(leftovers(dir), std::vector<std::string>{});
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tessera::io
