// Label rasters warped to another CRS and mosaicked across scenes. The scenes are written here
// by the real LabelRasterWriter (a rectangle, a disc, a block and a nodata corner on a UTM
// grid); every expectation is computed on a second route: pixel centres of the output are
// transformed back with OSR and looked up in the source by hand, the mosaic's pixels are looked
// up in each scene, counts are taken from the pixels GDAL reads back.
#include "tessera/io/reproject.hpp"

#include <cpl_conv.h>
#include <gdal.h>
#include <gdal_rat.h>
#include <gtest/gtest.h>
#include <ogr_srs_api.h>
#include <unistd.h>

#include <array>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <set>
#include <string>
#include <vector>

#include "tessera/core/colors.hpp"
#include "tessera/core/error.hpp"
#include "tessera/io/label_style.hpp"
#include "tessera/io/raster.hpp"

namespace tessera::io {
namespace {

namespace fs = std::filesystem;

const std::vector<std::string> kNames = {"water", "forest", "urban", "bare"};
LabelStyle named_style() { return LabelStyle().with_class_names(kNames).with_classes(4); }

fs::path temp_dir(const std::string& name) {
  auto d = fs::temp_directory_path() / ("tessera-reproject-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

std::string wkt_of_epsg(int code) {
  OGRSpatialReferenceH srs = OSRNewSpatialReference(nullptr);
  EXPECT_EQ(OSRImportFromEPSG(srs, code), OGRERR_NONE);
  char* wkt = nullptr;
  OSRExportToWkt(srs, &wkt);
  std::string out = wkt;
  CPLFree(wkt);
  OSRDestroySpatialReference(srs);
  return out;
}

std::string file_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// A label raster in memory: north-up grid, band 1 row-major, its CRS.
struct Labels {
  std::array<double, 6> gt{};
  int width = 0, height = 0;
  std::vector<uint8_t> v;
  std::string wkt;

  uint8_t at(int row, int col) const {
    return row < 0 || col < 0 || row >= height || col >= width ? uint8_t(kNoDataLabel) : v[size_t(row) * width + col];
  }
  // The pixel (row, col) holding map point (x, y) in this raster's CRS.
  std::array<int, 2> pixel_of(double x, double y) const {
    return {int(std::floor((y - gt[3]) / gt[5])), int(std::floor((x - gt[0]) / gt[1]))};
  }
  uint8_t at_map(double x, double y) const {
    const auto p = pixel_of(x, y);
    return at(p[0], p[1]);
  }
  std::array<double, 2> centre(int row, int col) const {
    return {gt[0] + (col + 0.5) * gt[1], gt[3] + (row + 0.5) * gt[5]};
  }
};

// Band 1 of `path` as GDAL reads it.
Labels read_labels(const std::string& path) {
  Labels l;
  GDALDatasetH ds = GDALOpen(path.c_str(), GA_ReadOnly);
  EXPECT_NE(ds, nullptr) << path;
  if (!ds) return l;
  l.width = GDALGetRasterXSize(ds);
  l.height = GDALGetRasterYSize(ds);
  EXPECT_EQ(GDALGetGeoTransform(ds, l.gt.data()), CE_None) << path;
  l.wkt = GDALGetProjectionRef(ds);
  l.v.resize(size_t(l.width) * l.height);
  EXPECT_EQ(GDALRasterIO(GDALGetRasterBand(ds, 1), GF_Read, 0, 0, l.width, l.height, l.v.data(), l.width, l.height,
                         GDT_Byte, 0, 0),
            CE_None);
  GDALClose(ds);
  return l;
}

// A finished label raster written by Tessera's own writer.
void write_scene(const std::string& path, const Labels& l, const LabelStyle& style) {
  Georeference geo;
  geo.crs_wkt = l.wkt;
  geo.geotransform.assign(l.gt.begin(), l.gt.end());
  LabelRasterWriter w(LabelRasterOptions(path, Index{l.height, l.width}, geo).with_style(style));
  Block<uint8_t> block({1, l.height, l.width});
  block.data = l.v;
  w.write(Box{{0, 0}, {l.height, l.width}}, block);
  w.commit();
}

// Scene "A": 60 × 80 pixels of 10 m in `epsg` at (500000, 5000000): background 0, a disc of
// class 1, a rectangle of class 2, a block of class 3 and a nodata corner.
Labels scene_a(int epsg) {
  Labels l;
  l.gt = {500000, 10, 0, 5000000, 0, -10};
  l.width = 80;
  l.height = 60;
  l.wkt = wkt_of_epsg(epsg);
  l.v.assign(size_t(l.width) * l.height, 0);
  for (int r = 0; r < l.height; ++r)
    for (int c = 0; c < l.width; ++c) {
      uint8_t& p = l.v[size_t(r) * l.width + c];
      if ((r - 38) * (r - 38) + (c - 22) * (c - 22) <= 14 * 14) p = 1;
      if (r >= 8 && r < 30 && c >= 40 && c < 72) p = 2;
      if (r >= 45 && r < 50 && c >= 50 && c < 56) p = 3;
      if (r >= 52 && c >= 70) p = uint8_t(kNoDataLabel);
    }
  return l;
}

// Scene "B": 30 × 25 pixels of 20 m overlapping A's lower right: class 2 above, class 5 (not
// one of the style's classes) at the lower left, 0 elsewhere, nodata in its top-left corner
// (where A shows through in a mosaic).
Labels scene_b() {
  Labels l;
  l.gt = {500603, 20, 0, 4999797, 0, -20};
  l.width = 25;
  l.height = 30;
  l.wkt = wkt_of_epsg(32633);
  l.v.assign(size_t(l.width) * l.height, 0);
  for (int r = 0; r < l.height; ++r)
    for (int c = 0; c < l.width; ++c) {
      uint8_t& p = l.v[size_t(r) * l.width + c];
      if (r < 15) p = 2;
      if (r >= 15 && c < 10) p = 5;
      if (r < 5 && c < 5) p = uint8_t(kNoDataLabel);
    }
  return l;
}

std::array<int64_t, 256> histogram(const std::vector<uint8_t>& v) {
  std::array<int64_t, 256> h{};
  for (uint8_t x : v) ++h[x];
  return h;
}

// Whether any pixel within one pixel of (row, col) of `l` (outside counts as nodata) differs
// from it: where nearest neighbour may pick either side of a class edge.
bool near_edge(const Labels& l, int row, int col) {
  for (int dr = -1; dr <= 1; ++dr)
    for (int dc = -1; dc <= 1; ++dc)
      if (l.at(row + dr, col + dc) != l.at(row, col)) return true;
  return false;
}

bool in_neighbourhood(const Labels& l, int row, int col, uint8_t value) {
  for (int dr = -1; dr <= 1; ++dr)
    for (int dc = -1; dc <= 1; ++dc)
      if (l.at(row + dr, col + dc) == value) return true;
  return false;
}

// Compares `out` with `src` looked up at each output pixel centre transformed back to the
// source CRS with OSR: equal away from class edges; at an edge, a value of the neighbourhood.
// Returns how many pixels differ (all at edges).
int64_t expect_nearest_warp_of(const Labels& src, const Labels& out) {
  OGRSpatialReferenceH from = OSRNewSpatialReference(out.wkt.c_str());
  OGRSpatialReferenceH to = OSRNewSpatialReference(src.wkt.c_str());
  OSRSetAxisMappingStrategy(from, OAMS_TRADITIONAL_GIS_ORDER);
  OSRSetAxisMappingStrategy(to, OAMS_TRADITIONAL_GIS_ORDER);
  OGRCoordinateTransformationH t = OCTNewCoordinateTransformation(from, to);
  EXPECT_NE(t, nullptr);
  int64_t at_edges = 0, inside = 0, interior_wrong = 0, foreign = 0;
  for (int r = 0; r < out.height; ++r) {
    std::vector<double> x(size_t(out.width)), y(size_t(out.width));
    for (int c = 0; c < out.width; ++c) {
      const auto p = out.centre(r, c);
      x[size_t(c)] = p[0];
      y[size_t(c)] = p[1];
    }
    if (!OCTTransform(t, out.width, x.data(), y.data(), nullptr)) {
      ADD_FAILURE() << "cannot transform row " << r;
      break;
    }
    for (int c = 0; c < out.width; ++c) {
      const auto p = src.pixel_of(x[size_t(c)], y[size_t(c)]);
      const uint8_t expected = src.at(p[0], p[1]), got = out.at(r, c);
      inside += expected != kNoDataLabel;
      if (got == expected) continue;
      if (!near_edge(src, p[0], p[1])) ++interior_wrong;
      else ++at_edges;
      if (!in_neighbourhood(src, p[0], p[1], got)) ++foreign;
    }
  }
  OCTDestroyCoordinateTransformation(t);
  OSRDestroySpatialReference(from);
  OSRDestroySpatialReference(to);
  EXPECT_GT(inside, 1000) << "the check must see the scene";
  EXPECT_EQ(interior_wrong, 0) << "pixels away from any class edge differ from the source";
  EXPECT_EQ(foreign, 0) << "values that are not a nearby source pixel (mixed ids?)";
  return at_edges;
}

// Pixels of `l` whose 3 × 3 neighbourhood crosses a class edge (or the footprint's edge).
int64_t edge_pixels(const Labels& l) {
  int64_t n = 0;
  for (int r = 0; r < l.height; ++r)
    for (int c = 0; c < l.width; ++c) n += near_edge(l, r, c);
  return n;
}

// GDAL with PAM, as a GIS analyst opens the file (the .aux.xml holds names and the table).
struct GdalAsAnalysts {
  GdalAsAnalysts() { CPLSetThreadLocalConfigOption("GDAL_PAM_ENABLED", "YES"); }
  ~GdalAsAnalysts() { CPLSetThreadLocalConfigOption("GDAL_PAM_ENABLED", nullptr); }
};

// The names, colour table, nodata and attribute table (counts from `pixels`) GDAL shows of
// band 1 of `path`; `with_table`: expect a raster attribute table too.
void expect_classes(const std::string& path, const std::vector<uint8_t>& pixels, bool with_table) {
  GdalAsAnalysts pam;
  GDALDatasetH ds = GDALOpen(path.c_str(), GA_ReadOnly);
  ASSERT_NE(ds, nullptr) << path;
  GDALRasterBandH band = GDALGetRasterBand(ds, 1);
  int has_nodata = 0;
  EXPECT_EQ(GDALGetRasterNoDataValue(band, &has_nodata), 255.0) << path;
  EXPECT_TRUE(has_nodata) << path;
  GDALColorTableH ct = GDALGetRasterColorTable(band);
  EXPECT_NE(ct, nullptr) << path << ": no colour table";
  for (int id = 0; ct && id < 255; ++id) {
    const GDALColorEntry* e = GDALGetColorEntry(ct, id);
    const Rgb c = label_color(id);
    ASSERT_NE(e, nullptr) << id;
    EXPECT_EQ((std::array<int, 3>{e->c1, e->c2, e->c3}), (std::array<int, 3>{c[0], c[1], c[2]})) << path << " " << id;
  }
  const auto counts = histogram(pixels);
  char** categories = GDALGetRasterCategoryNames(band);
  ASSERT_NE(categories, nullptr) << path << ": no category names";
  const int listed = CSLCount(categories);
  for (int id = 0; id < 255; ++id) {
    const std::string want = id < 4 ? kNames[size_t(id)] : counts[size_t(id)] > 0 ? "class " + std::to_string(id) : "";
    EXPECT_EQ(id < listed ? std::string(categories[id]) : std::string(), want) << path << " category " << id;
  }
  if (with_table) {
    GDALRasterAttributeTableH rat = GDALGetDefaultRAT(band);
    ASSERT_NE(rat, nullptr) << path << ": no raster attribute table";
    const int value = GDALRATGetColOfUsage(rat, GFU_MinMax), count = GDALRATGetColOfUsage(rat, GFU_PixelCount);
    const int name = GDALRATGetColOfUsage(rat, GFU_Name);
    ASSERT_TRUE(value >= 0 && count >= 0 && name >= 0);
    std::set<int> rows;
    for (int row = 0; row < GDALRATGetRowCount(rat); ++row) {
      const int id = GDALRATGetValueAsInt(rat, row, value);
      rows.insert(id);
      EXPECT_EQ(GDALRATGetValueAsDouble(rat, row, count), double(counts[size_t(id)])) << path << " class " << id;
    }
    for (int id = 0; id < 255; ++id)
      EXPECT_EQ(rows.count(id) > 0, counts[size_t(id)] > 0 || id < 4) << path << ": row for class " << id;
    EXPECT_FALSE(rows.count(kNoDataLabel)) << "nodata is no class";
  }
  GDALClose(ds);
}

void expect_qgis_style(const std::string& raster) {
  const fs::path qml = qml_sidecar_path(raster);
  ASSERT_TRUE(fs::exists(qml)) << qml;
  const std::string text = file_text(qml);
  for (const auto& n : kNames) EXPECT_NE(text.find("label=\"" + n + "\""), std::string::npos) << n << " in " << qml;
}

bool same_crs(const std::string& wkt, int epsg) {
  OGRSpatialReferenceH a = OSRNewSpatialReference(wkt.c_str()), b = OSRNewSpatialReference(nullptr);
  OSRImportFromEPSG(b, epsg);
  const bool same = OSRIsSame(a, b);
  OSRDestroySpatialReference(a);
  OSRDestroySpatialReference(b);
  return same;
}

std::vector<std::string> files_in(const fs::path& dir) {
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.insert(e.path().filename().string());
  return {names.begin(), names.end()};
}

// ---- warp ---------------------------------------------------------------------------------

TEST(Reproject, DefaultOptionsAreValidAndBadFieldsAreNamed) {
  EXPECT_NO_THROW(WarpOptions("EPSG:3857").validate());
  EXPECT_NO_THROW(WarpOptions("EPSG:3857").with_resolution(2.5).validate());
  EXPECT_NE(message_of([] { WarpOptions("EPSG:3857").with_resolution(0).validate(); }).find("resolution: "),
            std::string::npos);
  EXPECT_NE(message_of([] { WarpOptions("EPSG:3857").with_resolution(-10).validate(); }).find("resolution: "),
            std::string::npos);
  EXPECT_NE(message_of([] { WarpOptions("EPSG:3857").with_resolution(NAN).validate(); }).find("resolution: "),
            std::string::npos);
  EXPECT_NE(message_of([] { WarpOptions("EPSG:3857").with_style(LabelStyle().with_classes(300)).validate(); })
                .find("classes: "),
            std::string::npos);
}

TEST(Reproject, WarpToWebMercatorIsNearestNeighbourOfTheSourceWithItsClasses) {
  const auto dir = temp_dir("mercator");
  const std::string source = (dir / "a.tif").string(), target = (dir / "a_3857.tif").string();
  const Labels a = scene_a(32633);
  write_scene(source, a, named_style());
  const std::string before = file_text(source), aux_before = file_text(source + ".aux.xml");

  warp_label_raster(source, target, WarpOptions("EPSG:3857").with_resolution(7).with_style(named_style()));

  const Labels out = read_labels(target);
  EXPECT_TRUE(same_crs(out.wkt, 3857));
  EXPECT_EQ(raster_crs_name(target), "EPSG:3857");
  EXPECT_EQ(raster_crs_name(source), "EPSG:32633");
  EXPECT_DOUBLE_EQ(out.gt[1], 7.0);
  EXPECT_DOUBLE_EQ(out.gt[5], -7.0);
  EXPECT_DOUBLE_EQ(std::remainder(out.gt[0], 7.0), 0.0) << "grid aligned to the resolution (-tap)";
  EXPECT_DOUBLE_EQ(std::remainder(out.gt[3], 7.0), 0.0) << "grid aligned to the resolution (-tap)";
  // 7 m Mercator pixels at 45° N are about 5 m on the ground: ~4 output pixels per source one.
  EXPECT_GT(int64_t(out.width) * out.height, 3 * int64_t(a.width) * a.height);
  const int64_t differ = expect_nearest_warp_of(a, out);
  // Only where GDAL's approximate transformer (error < 1/8 output pixel) lands a centre on the
  // other side of an edge: at most a sliver of the band around the edges (none seen here).
  const int64_t band = edge_pixels(a) * 2;  // ~2 output pixels per source pixel along an edge
  EXPECT_LE(differ, band / 50) << "of " << band << " output pixels along edges";
  const auto counts = histogram(out.v);
  for (int id : {0, 1, 2, 3, 255}) EXPECT_GT(counts[size_t(id)], 0) << "class " << id;
  for (int id = 4; id < 255; ++id) EXPECT_EQ(counts[size_t(id)], 0) << "id " << id << " is in no source pixel";
  expect_classes(target, out.v, true);
  expect_qgis_style(target);

  EXPECT_EQ(file_text(source), before) << "source changed";
  EXPECT_EQ(file_text(source + ".aux.xml"), aux_before) << "source's names changed";
  EXPECT_EQ(files_in(dir), (std::vector<std::string>{"a.qml", "a.tif", "a.tif.aux.xml", "a_3857.qml", "a_3857.tif",
                                                     "a_3857.tif.aux.xml"}));
  fs::remove_all(dir);
}

TEST(Reproject, WarpToTheNeighbouringUtmZoneAtGdalsResolutionAsCog) {
  const auto dir = temp_dir("utm");
  const std::string source = (dir / "a.tif").string(), target = (dir / "a_32632.cog.tif").string();
  const Labels a = scene_a(32633);
  write_scene(source, a, named_style());

  warp_label_raster(source, target, WarpOptions(wkt_of_epsg(32632)).with_style(named_style()));

  const Labels out = read_labels(target);
  EXPECT_TRUE(same_crs(out.wkt, 32632));
  EXPECT_EQ(raster_crs_name(target), "EPSG:32632");
  // GDAL keeps about the source's detail: 10 m pixels stay about 10 m (zone 32 is 6° away).
  EXPECT_NEAR(out.gt[1], 10.0, 1.0);
  const int64_t differ = expect_nearest_warp_of(a, out);
  EXPECT_LE(differ, edge_pixels(a) / 50);
  expect_classes(target, out.v, true);
  expect_qgis_style(target);
  GDALDatasetH ds = GDALOpen(target.c_str(), GA_ReadOnly);
  ASSERT_NE(ds, nullptr);
  const char* layout = GDALGetMetadataItem(ds, "LAYOUT", "IMAGE_STRUCTURE");
  EXPECT_STREQ(layout ? layout : "", "COG");
  GDALClose(ds);
  for (const auto& f : files_in(dir)) EXPECT_EQ(f.find(".partial"), std::string::npos) << f;
  fs::remove_all(dir);
}

TEST(Reproject, BadTargetCrsIsRefusedNamingTheValue) {
  for (const std::string bad : {"EPSG:999999", "not a crs", "+proj=nonsense"}) {
    const std::string m = message_of([&] { check_target_srs(bad); });
    EXPECT_EQ(m.rfind("--t-srs " + bad + ": not a coordinate reference system GDAL knows (", 0), 0u) << m;
    EXPECT_EQ(m.back(), ')') << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  }
  EXPECT_EQ(message_of([] { check_target_srs(""); }).rfind("--t-srs '': not a coordinate reference system", 0), 0u);
  for (const std::string& good :
       {std::string("EPSG:3857"), wkt_of_epsg(32633), std::string("+proj=utm +zone=33 +datum=WGS84 +units=m +no_defs")})
    EXPECT_NO_THROW(check_target_srs(good)) << good;

  const auto dir = temp_dir("bad-srs");
  const std::string source = (dir / "a.tif").string(), target = (dir / "out.tif").string();
  write_scene(source, scene_a(32633), named_style());
  const std::string m = message_of([&] { warp_label_raster(source, target, WarpOptions("EPSG:999999")); });
  EXPECT_EQ(m.rfind("--t-srs EPSG:999999: ", 0), 0u) << m;
  EXPECT_FALSE(fs::exists(target));
  fs::remove_all(dir);
}

TEST(Reproject, MissingOrNonLabelSourceIsNamed) {
  const auto dir = temp_dir("missing");
  const std::string missing = (dir / "nowhere.tif").string(), target = (dir / "out.tif").string();
  EXPECT_EQ(message_of([&] { warp_label_raster(missing, target, WarpOptions("EPSG:3857")); }),
            missing + ": no such file");
  EXPECT_EQ(message_of([&] { raster_crs_name(missing); }), missing + ": no such file");
  const std::string floats = (dir / "floats.tif").string();
  GDALDatasetH ds = GDALCreate(GDALGetDriverByName("GTiff"), floats.c_str(), 4, 4, 1, GDT_Float32, nullptr);
  ASSERT_NE(ds, nullptr);
  GDALClose(ds);
  const std::string m = message_of([&] { warp_label_raster(floats, target, WarpOptions("EPSG:3857")); });
  EXPECT_EQ(m.rfind(floats + ": not a label raster", 0), 0u) << m;
  EXPECT_EQ(raster_crs_name(floats), "") << "a raster without a CRS has no CRS name";
  EXPECT_FALSE(fs::exists(target));
  fs::remove_all(dir);
}

// ---- mosaic -------------------------------------------------------------------------------

// What the mosaic of A then B shows at map point (x, y): B where it has data, else A.
uint8_t mosaic_at(const Labels& a, const Labels& b, double x, double y) {
  const uint8_t vb = b.at_map(x, y);
  return vb != kNoDataLabel ? vb : a.at_map(x, y);
}

TEST(Reproject, VrtMosaicCoversBothScenesWithRelativePathsAndClasses) {
  const auto dir = temp_dir("mosaic");
  const Labels a = scene_a(32633), b = scene_b();
  const std::string pa = (dir / "scenes" / "a.tif").string(), pb = (dir / "scenes" / "b.tif").string();
  write_scene(pa, a, named_style());
  write_scene(pb, b, named_style());
  const fs::path vrt = dir / "mosaic" / "scenes.vrt";

  build_scene_mosaic({pa, pb}, vrt.string(), named_style());

  const Labels m = read_labels(vrt.string());
  // The union of the two footprints at the finer (10 m) pixel size.
  const double x0 = std::min(a.gt[0], b.gt[0]), y1 = std::max(a.gt[3], b.gt[3]);
  const double x1 = std::max(a.gt[0] + a.width * a.gt[1], b.gt[0] + b.width * b.gt[1]);
  const double y0 = std::min(a.gt[3] + a.height * a.gt[5], b.gt[3] + b.height * b.gt[5]);
  EXPECT_EQ(m.gt, (std::array<double, 6>{x0, 10, 0, y1, 0, -10}));
  EXPECT_EQ(m.width, int((x1 - x0) / 10));
  EXPECT_EQ(m.height, int((y1 - y0) / 10));
  EXPECT_TRUE(same_crs(m.wkt, 32633));
  int64_t wrong = 0, from_a = 0, from_b = 0;
  for (int r = 0; r < m.height; ++r)
    for (int c = 0; c < m.width; ++c) {
      const auto p = m.centre(r, c);
      const uint8_t want = mosaic_at(a, b, p[0], p[1]);
      wrong += m.at(r, c) != want;
      from_b += b.at_map(p[0], p[1]) != kNoDataLabel;
      from_a += want != kNoDataLabel && b.at_map(p[0], p[1]) == kNoDataLabel;
    }
  EXPECT_EQ(wrong, 0) << "mosaic pixels not at their scene's place";
  EXPECT_GT(from_a, 1000);
  EXPECT_GT(from_b, 1000);
  expect_classes(vrt.string(), m.v, false);

  const std::string text = file_text(vrt);
  EXPECT_NE(text.find("<SourceFilename relativeToVRT=\"1\">../scenes/a.tif</SourceFilename>"), std::string::npos)
      << text;
  EXPECT_NE(text.find("<SourceFilename relativeToVRT=\"1\">../scenes/b.tif</SourceFilename>"), std::string::npos)
      << text;
  EXPECT_EQ(text.find(dir.string()), std::string::npos) << "an absolute path in\n" << text;
  EXPECT_EQ(files_in(dir / "mosaic"), std::vector<std::string>{"scenes.vrt"});

  // Moved with its scenes, the mosaic still reads the same.
  const fs::path moved = dir.string() + "-moved";
  fs::remove_all(moved);
  fs::rename(dir, moved);
  const Labels again = read_labels((moved / "mosaic" / "scenes.vrt").string());
  EXPECT_EQ(again.v, m.v);
  fs::remove_all(moved);
}

TEST(Reproject, TifMosaicIsTheVrtMosaicFinishedWithItsClasses) {
  const auto dir = temp_dir("mosaic-tif");
  const Labels a = scene_a(32633), b = scene_b();
  const std::string pa = (dir / "a.tif").string(), pb = (dir / "b.tif").string();
  write_scene(pa, a, named_style());
  write_scene(pb, b, named_style());
  const std::string vrt = (dir / "m.vrt").string(), tif = (dir / "m.tif").string();

  build_scene_mosaic({pa, pb}, vrt, named_style());
  build_scene_mosaic({pa, pb}, tif, named_style());

  const Labels from_vrt = read_labels(vrt), from_tif = read_labels(tif);
  EXPECT_EQ(from_tif.gt, from_vrt.gt);
  EXPECT_EQ(from_tif.width, from_vrt.width);
  EXPECT_EQ(from_tif.height, from_vrt.height);
  EXPECT_TRUE(same_crs(from_tif.wkt, 32633));
  int64_t differ = 0;
  for (size_t i = 0; i < from_tif.v.size() && i < from_vrt.v.size(); ++i) differ += from_tif.v[i] != from_vrt.v[i];
  EXPECT_EQ(differ, 0);
  EXPECT_GT(histogram(from_tif.v)[5], 0) << "class 5 of scene B";
  expect_classes(tif, from_tif.v, true);
  expect_qgis_style(tif);
  for (const auto& f : files_in(dir)) EXPECT_EQ(f.find(".partial"), std::string::npos) << f;
  fs::remove_all(dir);
}

TEST(Reproject, MosaicOfScenesInTwoCrsIsRefusedNamingBoth) {
  const auto dir = temp_dir("mixed");
  const std::string pa = (dir / "a.tif").string(), pb = (dir / "b.tif").string(), pc = (dir / "c.tif").string();
  write_scene(pa, scene_a(32633), named_style());
  write_scene(pb, scene_b(), named_style());
  write_scene(pc, scene_a(32632), named_style());
  for (const std::string out : {"m.vrt", "m.tif"}) {
    const std::string mosaic = (dir / out).string();
    const std::string m = message_of([&] { build_scene_mosaic({pa, pb, pc}, mosaic, named_style()); });
    EXPECT_EQ(m.rfind(mosaic + ": the scenes are in 2 coordinate reference systems: ", 0), 0u) << m;
    EXPECT_NE(m.find("EPSG:32633 (" + pa + ", " + pb + ")"), std::string::npos) << m;
    EXPECT_NE(m.find("EPSG:32632 (" + pc + ")"), std::string::npos) << m;
    EXPECT_NE(m.find("--t-srs"), std::string::npos) << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
    EXPECT_FALSE(fs::exists(mosaic));
  }
  EXPECT_NO_THROW(build_scene_mosaic({pa, pb}, (dir / "same.vrt").string(), named_style()));
  fs::remove_all(dir);
}

TEST(Reproject, MosaicNamesAMissingSceneAndRefusesOtherKinds) {
  const auto dir = temp_dir("mosaic-missing");
  const std::string pa = (dir / "a.tif").string(), missing = (dir / "gone.tif").string();
  write_scene(pa, scene_a(32633), named_style());
  const std::string mosaic = (dir / "m.vrt").string();
  EXPECT_EQ(message_of([&] { build_scene_mosaic({pa, missing}, mosaic, named_style()); }), missing + ": no such file");
  EXPECT_EQ(message_of([&] { build_scene_mosaic({}, mosaic, named_style()); }), mosaic + ": no label rasters to mosaic");
  const std::string png = (dir / "m.png").string();
  EXPECT_EQ(message_of([&] { build_scene_mosaic({pa}, png, named_style()); }).rfind(png + ": a scene mosaic is a", 0), 0u);
  EXPECT_FALSE(fs::exists(mosaic));
  EXPECT_FALSE(fs::exists(png));
  EXPECT_EQ(message_of([&] { build_scene_mosaic({pa}, pa, named_style()); }),
            pa + ": is one of the scenes; write the mosaic elsewhere");

  // A scene GDAL cannot place (rotated grid) is named, not silently left out.
  Labels rotated = scene_a(32633);
  rotated.gt = {500000, 10, 2, 5000000, 2, -10};
  const std::string pr = (dir / "rotated.tif").string();
  write_scene(pr, rotated, named_style());
  const std::string m = message_of([&] { build_scene_mosaic({pa, pr}, mosaic, named_style()); });
  EXPECT_EQ(m.rfind(pr + ": GDAL left this scene out of the mosaic " + mosaic + ": ", 0), 0u) << m;
  EXPECT_NE(m.find("rotated"), std::string::npos) << m;
  const std::string floats = (dir / "floats.tif").string();
  GDALDatasetH ds = GDALCreate(GDALGetDriverByName("GTiff"), floats.c_str(), 4, 4, 1, GDT_Float32, nullptr);
  ASSERT_NE(ds, nullptr);
  GDALClose(ds);
  EXPECT_EQ(message_of([&] { build_scene_mosaic({pa, floats}, mosaic, named_style()); }),
            floats + ": not a label raster (1 band(s) of Float32; labels are one Byte band)");
  EXPECT_FALSE(fs::exists(mosaic));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tessera::io
