// STAC items and collections of label rasters: the written JSON is parsed back with nlohmann
// and checked against what GDAL/OSR say about the raster independently (geotransform, size,
// CRS code, corners transformed one by one to EPSG:4326), not against constants copied from
// the output. Rasters are written here with GDAL in a temporary folder.
#include "tessera/io/stac.hpp"

#include <gdal.h>
#include <gtest/gtest.h>
#include <ogr_spatialref.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "error_of.hpp"
#include "tessera/core/colors.hpp"
#include "tessera/io/raster.hpp"

namespace tessera::io {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::error_of;
using Point = std::array<double, 2>;
using GeoTransform = std::array<double, 6>;

fs::path temp_dir(const std::string& name) {
  auto d = fs::temp_directory_path() / ("tessera-stac-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// A Byte label GeoTIFF (values id % 4) in the CRS `crs` (anything OSR's SetFromUserInput takes);
// `crs` empty: no CRS and no geotransform.
void write_label_tiff(const std::string& path, int rows, int cols, const GeoTransform& gt, const std::string& crs) {
  ensure_gdal();
  GDALDatasetH ds = GDALCreate(GDALGetDriverByName("GTiff"), path.c_str(), cols, rows, 1, GDT_Byte, nullptr);
  ASSERT_NE(ds, nullptr) << path;
  std::vector<uint8_t> values(size_t(rows) * size_t(cols));
  for (size_t i = 0; i < values.size(); ++i) values[i] = uint8_t(i % 4);
  ASSERT_EQ(
      GDALRasterIO(GDALGetRasterBand(ds, 1), GF_Write, 0, 0, cols, rows, values.data(), cols, rows, GDT_Byte, 0, 0),
      CE_None);
  if (!crs.empty()) {
    OGRSpatialReference srs;
    ASSERT_EQ(srs.SetFromUserInput(crs.c_str()), OGRERR_NONE) << crs;
    char* wkt = nullptr;
    srs.exportToWkt(&wkt);
    GDALSetProjection(ds, wkt);
    CPLFree(wkt);
    GeoTransform copy = gt;
    GDALSetGeoTransform(ds, copy.data());
  }
  GDALClose(ds);
}

// What GDAL reads back from the raster: geotransform, size, CRS.
struct RasterFacts {
  GeoTransform gt{};
  int rows = 0, cols = 0;
  std::string wkt;
};

RasterFacts facts_of(const std::string& path) {
  RasterFacts f;
  GDALDatasetH ds = GDALOpen(path.c_str(), GA_ReadOnly);
  EXPECT_NE(ds, nullptr) << path;
  if (!ds) return f;
  EXPECT_EQ(GDALGetGeoTransform(ds, f.gt.data()), CE_None);
  f.rows = GDALGetRasterYSize(ds);
  f.cols = GDALGetRasterXSize(ds);
  f.wkt = GDALGetProjectionRef(ds);
  GDALClose(ds);
  return f;
}

Point map_of(const RasterFacts& f, double px, double py) {
  return {f.gt[0] + px * f.gt[1] + py * f.gt[2], f.gt[3] + px * f.gt[4] + py * f.gt[5]};
}

// Points transformed one by one between the raster's CRS and EPSG:4326 (lon, lat order).
class LonLat {
 public:
  explicit LonLat(const std::string& wkt) {
    crs_.importFromWkt(wkt.c_str());
    wgs84_.importFromEPSG(4326);
    crs_.SetAxisMappingStrategy(OAMS_TRADITIONAL_GIS_ORDER);
    wgs84_.SetAxisMappingStrategy(OAMS_TRADITIONAL_GIS_ORDER);
    forward_ = OGRCreateCoordinateTransformation(&crs_, &wgs84_);
    inverse_ = OGRCreateCoordinateTransformation(&wgs84_, &crs_);
  }
  ~LonLat() {
    OGRCoordinateTransformation::DestroyCT(forward_);
    OGRCoordinateTransformation::DestroyCT(inverse_);
  }
  Point from_map(Point p) const {
    EXPECT_TRUE(forward_ && forward_->Transform(1, &p[0], &p[1]));
    return p;
  }
  Point to_map(Point p) const {
    EXPECT_TRUE(inverse_ && inverse_->Transform(1, &p[0], &p[1]));
    return p;
  }

 private:
  OGRSpatialReference crs_, wgs84_;
  OGRCoordinateTransformation* forward_ = nullptr;
  OGRCoordinateTransformation* inverse_ = nullptr;
};

json read_json(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  return json::parse(in);
}

std::vector<Point> ring_of(const json& item) {
  std::vector<Point> ring;
  for (const auto& p : item.at("geometry").at("coordinates").at(0))
    ring.push_back({p.at(0).get<double>(), p.at(1).get<double>()});
  return ring;
}

// Even-odd ray casting; points on the boundary are not asked about.
bool inside(const std::vector<Point>& ring, Point p) {
  bool in = false;
  for (size_t i = 0, j = ring.size() - 1; i < ring.size(); j = i++)
    if ((ring[i][1] > p[1]) != (ring[j][1] > p[1]) &&
        p[0] < (ring[j][0] - ring[i][0]) * (p[1] - ring[i][1]) / (ring[j][1] - ring[i][1]) + ring[i][0])
      in = !in;
  return in;
}

// Distance (degrees, planar in lon/lat) from `p` to the nearest segment of `ring`.
double distance_to_ring(const std::vector<Point>& ring, Point p) {
  double best = 1e300;
  for (size_t i = 0; i + 1 < ring.size(); ++i) {
    const Point a = ring[i], b = ring[i + 1];
    const double dx = b[0] - a[0], dy = b[1] - a[1], len2 = dx * dx + dy * dy;
    const double t = len2 > 0 ? std::clamp(((p[0] - a[0]) * dx + (p[1] - a[1]) * dy) / len2, 0.0, 1.0) : 0.0;
    best = std::min(best, std::hypot(p[0] - (a[0] + t * dx), p[1] - (a[1] + t * dy)));
  }
  return best;
}

double signed_area(const std::vector<Point>& ring) {
  double a = 0;
  for (size_t i = 0; i + 1 < ring.size(); ++i) a += ring[i][0] * ring[i + 1][1] - ring[i + 1][0] * ring[i][1];
  return a / 2;
}

const json* link_of(const json& doc, const std::string& rel) {
  for (const auto& l : doc.at("links"))
    if (l.at("rel") == rel) return &l;
  return nullptr;
}

// The file an href names, resolved against `folder` when relative.
fs::path resolve(const fs::path& folder, const std::string& href) {
  const fs::path p(href);
  return p.is_absolute() ? p : folder / p;
}

const GeoTransform kUtm33{400000, 2, 0, 5000000, 0, -2};  // 2 m pixels, north-up, ~45° N 15° E

TEST(Stac, DefaultOptionsAreValidAndBadFieldsAreNamed) {
  EXPECT_NO_THROW(StacItemOptions("labels", "labels.tif").validate());
  EXPECT_NE(error_of([] { StacItemOptions("", "labels.tif").validate(); }).find("id:"), std::string::npos);
  EXPECT_NE(error_of([] { StacItemOptions("a", "").validate(); }).find("raster:"), std::string::npos);
  EXPECT_NE(error_of([] { StacItemOptions("a", "a.tif").with_classes(256).validate(); }).find("classes:"),
            std::string::npos);
  EXPECT_NE(error_of([] { StacItemOptions("a", "a.tif").with_datetime("yesterday").validate(); }).find("datetime:"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              StacItemOptions("a", "a.tif").with_datetime("2024-13-01T00:00:00Z").validate();
            }).find("datetime:"),
            std::string::npos);
  EXPECT_NO_THROW(StacItemOptions("a", "a.tif").with_datetime("2024-05-02T10:00:00.25+02:00").validate());
  // write_stac_item checks the options before it touches the raster.
  EXPECT_NE(error_of([] {
              write_stac_item("/nonexistent/x.stac.json",
                              StacItemOptions("a", "/nonexistent/a.tif").with_datetime("now"));
            }).find("datetime:"),
            std::string::npos);
  const std::vector<StacAsset> twice{{"probabilities", "p.tif", "", "", {}}, {"probabilities", "q.tif", "", "", {}}};
  EXPECT_NE(error_of([&] { StacItemOptions("a", "a.tif").with_extra_assets(twice).validate(); }).find("extra_assets:"),
            std::string::npos);
  const std::vector<StacAsset> clash{{"labels", "p.tif", "", "", {}}};
  EXPECT_NE(error_of([&] { StacItemOptions("a", "a.tif").with_extra_assets(clash).validate(); }).find("extra_assets:"),
            std::string::npos);
}

TEST(Stac, ItemPathReplacesTheLastExtension) {
  EXPECT_EQ(stac_item_path("labels.tif"), "labels.stac.json");
  EXPECT_EQ(stac_item_path("out/labels.cog.tif"), "out/labels.cog.stac.json");
  EXPECT_EQ(stac_item_path("/data/run 1/scene.tiff"), "/data/run 1/scene.stac.json");
}

// The item's "labels" asset: the raster, its media type and roles, its shape, and one
// classification class per class id with its name and the label colour as colour hint.
void expect_labels_asset(const json& item, const fs::path& dir, const std::string& raster, const RasterFacts& f) {
  const json& labels = item.at("assets").at("labels");
  EXPECT_TRUE(fs::equivalent(resolve(dir, labels.at("href")), raster)) << labels;
  EXPECT_EQ(labels.at("type"), "image/tiff; application=geotiff");
  EXPECT_EQ(labels.at("roles").get<std::set<std::string>>(),
            (std::set<std::string>{"data", "labels", "labels-raster"}));
  EXPECT_EQ(labels.at("proj:shape").get<std::vector<int>>(), (std::vector<int>{f.rows, f.cols}));
  const json& classes = labels.at("classification:classes");
  ASSERT_EQ(classes.size(), 4u);
  const std::vector<std::string> names{"background", "water", "forest", "class 3"};
  for (int id = 0; id < 4; ++id) {
    EXPECT_EQ(classes[size_t(id)].at("value"), id);
    EXPECT_EQ(classes[size_t(id)].at("name"), names[size_t(id)]);
    EXPECT_EQ(classes[size_t(id)].at("description"), names[size_t(id)]);
    const Rgb c = label_color(id);
    EXPECT_EQ(std::stoul(classes[size_t(id)].at("color_hint").get<std::string>(), nullptr, 16),
              (unsigned long)(c[0]) << 16 | (unsigned long)(c[1]) << 8 | c[2]);
  }
}

TEST(Stac, ItemHasTheRequiredFieldsAndTheRastersProjection) {
  const auto dir = temp_dir("item");
  const std::string raster = (dir / "labels.tif").string();
  const std::string source = (dir / "in" / "scene.tif").string();
  fs::create_directories(dir / "in");
  write_label_tiff(raster, 30, 50, kUtm33, "EPSG:32633");
  write_label_tiff(source, 30, 50, kUtm33, "EPSG:32633");
  const std::string item_path = stac_item_path(raster);
  write_stac_item(item_path, StacItemOptions("labels", raster)
                                 .with_class_names({"background", "water", "forest"})
                                 .with_classes(4)
                                 .with_model("unet-tiny")
                                 .with_checkpoint((dir / "best.pt").string())
                                 .with_source(source)
                                 .with_datetime("2024-05-02T10:00:00Z"));
  const json item = read_json(item_path);
  const RasterFacts f = facts_of(raster);
  {
    std::ifstream in(item_path);
    std::string first, second;
    std::getline(in, first);
    std::getline(in, second);
    EXPECT_EQ(first, "{");
    EXPECT_EQ(second, "  \"type\": \"Feature\",") << "not indented by 2";
  }

  EXPECT_EQ(item.at("type"), "Feature");
  EXPECT_EQ(item.at("stac_version"), "1.0.0");
  EXPECT_EQ(item.at("id"), "labels");
  const auto extensions = item.at("stac_extensions").get<std::set<std::string>>();
  for (const char* url : {"https://stac-extensions.github.io/label/v1.0.1/schema.json",
                          "https://stac-extensions.github.io/projection/v1.1.0/schema.json",
                          "https://stac-extensions.github.io/classification/v1.1.0/schema.json"})
    EXPECT_EQ(extensions.count(url), 1u) << url;
  EXPECT_EQ(item.at("geometry").at("type"), "Polygon");
  EXPECT_EQ(item.at("bbox").size(), 4u);
  EXPECT_FALSE(item.contains("collection"));

  const json& p = item.at("properties");
  EXPECT_EQ(p.at("datetime"), "2024-05-02T10:00:00Z");
  OGRSpatialReference srs;
  srs.importFromWkt(f.wkt.c_str());
  ASSERT_NE(srs.GetAuthorityCode(nullptr), nullptr);
  EXPECT_EQ(p.at("proj:epsg").get<int>(), std::atoi(srs.GetAuthorityCode(nullptr)));
  EXPECT_FALSE(p.contains("proj:wkt2"));
  EXPECT_EQ(p.at("proj:transform").get<std::vector<double>>(),
            (std::vector<double>{f.gt[1], f.gt[2], f.gt[0], f.gt[4], f.gt[5], f.gt[3]}));
  EXPECT_EQ(p.at("proj:shape").get<std::vector<int>>(), (std::vector<int>{f.rows, f.cols}));
  EXPECT_EQ(p.at("label:type"), "raster");
  EXPECT_TRUE(p.at("label:properties").is_null());
  EXPECT_EQ(p.at("label:tasks"), json::array({"segmentation"}));
  EXPECT_TRUE(p.at("label:classes").at(0).at("name").is_null());
  EXPECT_EQ(p.at("label:classes").at(0).at("classes").get<std::vector<int>>(), (std::vector<int>{0, 1, 2, 3}));
  const std::string description = p.at("label:description");
  for (const char* name : {"background", "water", "forest", "class 3"})
    EXPECT_NE(description.find(name), std::string::npos) << description;
  EXPECT_EQ(p.at("tessera:model"), "unet-tiny");
  EXPECT_EQ(p.at("tessera:checkpoint"), (dir / "best.pt").string());
  EXPECT_EQ(p.at("tessera:source"), source);

  const json* src = link_of(item, "source");
  ASSERT_NE(src, nullptr);
  EXPECT_FALSE(fs::path(src->at("href").get<std::string>()).is_absolute()) << *src;
  EXPECT_TRUE(fs::equivalent(resolve(dir, src->at("href")), source)) << *src;
  const json* self = link_of(item, "self");
  ASSERT_NE(self, nullptr);
  EXPECT_TRUE(fs::equivalent(self->at("href").get<std::string>(), item_path));
  EXPECT_EQ(link_of(item, "collection"), nullptr);

  expect_labels_asset(item, dir, raster, f);
  fs::remove_all(dir);
}

// The colour hints are the colours GIS software shows for the raster: its own colour table.
TEST(Stac, ClassColoursAreTheLabelRastersColourTable) {
  const auto dir = temp_dir("colours");
  const std::string raster = (dir / "labels.tif").string();
  OGRSpatialReference srs;
  srs.importFromEPSG(32633);
  char* wkt = nullptr;
  srs.exportToWkt(&wkt);
  Georeference geo;
  geo.crs_wkt = wkt;
  CPLFree(wkt);
  geo.geotransform.assign(kUtm33.begin(), kUtm33.end());
  {
    LabelRasterWriter w(LabelRasterOptions(raster, {16, 16}, geo).with_style(LabelStyle().with_classes(6)));
    Block<uint8_t> labels({1, 16, 16});
    for (size_t i = 0; i < labels.data.size(); ++i) labels.data[i] = uint8_t(i % 6);
    w.write(Box{{0, 0}, {16, 16}}, labels);
    w.commit();
  }
  write_stac_item(stac_item_path(raster), StacItemOptions("labels", raster).with_classes(6));
  const json classes = read_json(stac_item_path(raster)).at("assets").at("labels").at("classification:classes");
  ASSERT_EQ(classes.size(), 6u);
  GDALDatasetH ds = GDALOpen(raster.c_str(), GA_ReadOnly);
  ASSERT_NE(ds, nullptr);
  GDALColorTableH table = GDALGetRasterColorTable(GDALGetRasterBand(ds, 1));
  ASSERT_NE(table, nullptr);
  for (int id = 0; id < 6; ++id) {
    const GDALColorEntry* e = GDALGetColorEntry(table, id);
    char hex[8];
    std::snprintf(hex, sizeof hex, "%02x%02x%02x", e->c1, e->c2, e->c3);
    EXPECT_EQ(classes[size_t(id)].at("color_hint"), hex) << "class " << id;
  }
  GDALClose(ds);
  fs::remove_all(dir);
}

struct FootprintCase {
  const char* name;
  const char* crs;
  GeoTransform gt;
  int rows, cols;
};

// bbox and polygon hold the raster's corners (transformed here one by one); every vertex of
// the ring lies on the raster's outline; the ring is closed and counter-clockwise.
TEST(Stac, FootprintHoldsTheRasterCornersInLonLat) {
  const std::vector<FootprintCase> cases{
      {"utm33n", "EPSG:32633", kUtm33, 30, 50},
      {"utm17s", "EPSG:32717", {300000, 300, 0, 8000000, 0, -300}, 400, 300},  // 120 km x 90 km: edges bend
      {"rotated", "EPSG:32633", {500000, 1.8, 0.6, 5100000, 0.7, -1.9}, 40, 20},
      {"lonlat", "EPSG:4326", {10, 0.001, 0, 50, 0, -0.001}, 20, 30}};
  const auto dir = temp_dir("footprint");
  for (const FootprintCase& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string raster = (dir / (std::string(c.name) + ".tif")).string();
    write_label_tiff(raster, c.rows, c.cols, c.gt, c.crs);
    write_stac_item(stac_item_path(raster), StacItemOptions(c.name, raster));
    const json item = read_json(stac_item_path(raster));
    const RasterFacts f = facts_of(raster);
    const LonLat lonlat(f.wkt);
    const std::vector<Point> ring = ring_of(item);
    const auto bbox = item.at("bbox").get<std::vector<double>>();
    EXPECT_EQ(item.at("properties").at("proj:transform").get<std::vector<double>>(),
              (std::vector<double>{f.gt[1], f.gt[2], f.gt[0], f.gt[4], f.gt[5], f.gt[3]}));
    ASSERT_GE(ring.size(), 5u);
    EXPECT_EQ(ring.front(), ring.back()) << "ring not closed";
    EXPECT_GT(signed_area(ring), 0) << "ring not counter-clockwise";
    const double tol = 1e-9;  // degrees, ~0.1 mm
    for (Point px :
         std::vector<Point>{{0, 0}, {double(f.cols), 0}, {double(f.cols), double(f.rows)}, {0, double(f.rows)}}) {
      const Point corner = lonlat.from_map(map_of(f, px[0], px[1]));
      EXPECT_GE(corner[0], bbox[0] - tol);
      EXPECT_GE(corner[1], bbox[1] - tol);
      EXPECT_LE(corner[0], bbox[2] + tol);
      EXPECT_LE(corner[1], bbox[3] + tol);
      bool vertex = false;
      for (const Point& v : ring) vertex |= std::hypot(v[0] - corner[0], v[1] - corner[1]) < tol;
      EXPECT_TRUE(vertex) << "corner " << px[0] << "," << px[1] << " not on the ring";
      // A point just inside the corner is inside the polygon.
      const Point in = lonlat.from_map(map_of(f, px[0] == 0 ? 0.01 : px[0] - 0.01, px[1] == 0 ? 0.01 : px[1] - 0.01));
      EXPECT_TRUE(inside(ring, in)) << "near corner " << px[0] << "," << px[1];
    }
    EXPECT_TRUE(inside(ring, lonlat.from_map(map_of(f, f.cols / 2.0, f.rows / 2.0))));
    EXPECT_FALSE(inside(ring, lonlat.from_map(map_of(f, -1, f.rows / 2.0))));
    // Every vertex maps back onto the raster's outline, and the bbox is the ring's.
    GeoTransform gt = f.gt;
    double inv[6];
    ASSERT_TRUE(GDALInvGeoTransform(gt.data(), inv));
    double min_lon = 1e9, min_lat = 1e9, max_lon = -1e9, max_lat = -1e9;
    for (const Point& v : ring) {
      const Point m = lonlat.to_map(v);
      const double px = inv[0] + m[0] * inv[1] + m[1] * inv[2], py = inv[3] + m[0] * inv[4] + m[1] * inv[5];
      const double off = std::min({std::abs(px), std::abs(px - f.cols), std::abs(py), std::abs(py - f.rows)});
      EXPECT_LT(off, 1e-5) << "vertex " << v[0] << "," << v[1] << " is pixel " << px << "," << py;
      EXPECT_TRUE(px > -1e-5 && px < f.cols + 1e-5 && py > -1e-5 && py < f.rows + 1e-5) << px << "," << py;
      min_lon = std::min(min_lon, v[0]);
      min_lat = std::min(min_lat, v[1]);
      max_lon = std::max(max_lon, v[0]);
      max_lat = std::max(max_lat, v[1]);
    }
    EXPECT_EQ(bbox, (std::vector<double>{min_lon, min_lat, max_lon, max_lat}));
    // The ring follows the whole outline, not only the corners: edges of a projected raster bend
    // in lon/lat (~5e-4 degrees off the chord on the 120 km raster).
    const double bend_tol = 1e-5;
    const int n = 256;
    for (int k = 0; k <= n; ++k) {
      const double t = double(k) / n;
      for (Point px : std::vector<Point>{
               {t * f.cols, 0}, {t * f.cols, double(f.rows)}, {0, t * f.rows}, {double(f.cols), t * f.rows}}) {
        const Point q = lonlat.from_map(map_of(f, px[0], px[1]));
        EXPECT_TRUE(q[0] >= bbox[0] - bend_tol && q[0] <= bbox[2] + bend_tol && q[1] >= bbox[1] - bend_tol &&
                    q[1] <= bbox[3] + bend_tol)
            << "outline point at pixel " << px[0] << "," << px[1] << " outside the bbox";
        EXPECT_LT(distance_to_ring(ring, q), bend_tol) << "outline point at pixel " << px[0] << "," << px[1];
      }
    }
  }
  fs::remove_all(dir);
}

TEST(Stac, CrsWithoutEpsgCodeIsWrittenAsWkt2) {
  const auto dir = temp_dir("wkt2");
  const std::string raster = (dir / "labels.tif").string();
  const char* lcc = "+proj=lcc +lat_1=41 +lat_2=47 +lat_0=44 +lon_0=9 +x_0=0 +y_0=0 +ellps=GRS80 +units=m +no_defs";
  write_label_tiff(raster, 10, 12, {1000, 5, 0, 2000, 0, -5}, lcc);
  write_stac_item(stac_item_path(raster), StacItemOptions("labels", raster));
  const json p = read_json(stac_item_path(raster)).at("properties");
  EXPECT_TRUE(p.at("proj:epsg").is_null());
  ASSERT_TRUE(p.contains("proj:wkt2"));
  OGRSpatialReference written, expected;
  ASSERT_EQ(written.importFromWkt(p.at("proj:wkt2").get<std::string>().c_str()), OGRERR_NONE);
  expected.importFromWkt(facts_of(raster).wkt.c_str());
  EXPECT_TRUE(written.IsSame(&expected));
  fs::remove_all(dir);
}

TEST(Stac, CogLabelsAreTypedCloudOptimized) {
  const auto dir = temp_dir("cog");
  const std::string plain = (dir / "a.tif").string(), named = (dir / "b.cog.tif").string();
  write_label_tiff(plain, 8, 8, kUtm33, "EPSG:32633");
  write_label_tiff(named, 8, 8, kUtm33, "EPSG:32633");
  auto type_of = [](const std::string& raster, bool cog) {
    write_stac_item(stac_item_path(raster), StacItemOptions("x", raster).with_cog(cog));
    return read_json(stac_item_path(raster)).at("assets").at("labels").at("type").get<std::string>();
  };
  const std::string cog_type = "image/tiff; application=geotiff; profile=cloud-optimized";
  EXPECT_EQ(type_of(plain, false), "image/tiff; application=geotiff");
  EXPECT_EQ(type_of(plain, true), cog_type);
  EXPECT_EQ(type_of(named, false), cog_type);
  fs::remove_all(dir);
}

TEST(Stac, ExtraAssetsAreRelativeAndMissingOnesRefused) {
  const auto dir = temp_dir("assets");
  const std::string raster = (dir / "labels.tif").string();
  write_label_tiff(raster, 8, 8, kUtm33, "EPSG:32633");
  std::ofstream(dir / "labels.gpkg") << "not really";
  const std::string item_path = stac_item_path(raster);
  write_stac_item(item_path,
                  StacItemOptions("labels", raster)
                      .with_extra_assets({{"polygons", (dir / "labels.gpkg").string(), "", "Polygons", {"data"}}}));
  const json a = read_json(item_path).at("assets").at("polygons");
  EXPECT_EQ(a.at("href"), "labels.gpkg");
  EXPECT_EQ(a.at("type"), "application/geopackage+sqlite3");
  EXPECT_EQ(a.at("title"), "Polygons");
  EXPECT_EQ(a.at("roles"), json::array({"data"}));

  fs::remove(item_path);
  const std::string missing = (dir / "probabilities.tif").string();
  const std::string e = error_of([&] {
    write_stac_item(item_path,
                    StacItemOptions("labels", raster).with_extra_assets({{"probabilities", missing, "", "", {}}}));
  });
  EXPECT_NE(e.find(missing), std::string::npos) << e;
  EXPECT_FALSE(fs::exists(item_path));
  fs::remove_all(dir);
}

TEST(Stac, ReadRoundTripsWhatWasWritten) {
  const auto dir = temp_dir("read");
  const std::string raster = (dir / "labels.tif").string();
  write_label_tiff(raster, 30, 50, kUtm33, "EPSG:32633");
  const std::string checkpoint = (dir / "ckpt" / "best.pt").string();
  write_stac_item(stac_item_path(raster), StacItemOptions("scene-7", raster)
                                              .with_model("unet-small")
                                              .with_checkpoint(checkpoint)
                                              .with_source((dir / "scene.tif").string())
                                              .with_collection("runs")
                                              .with_datetime("2023-11-05T08:09:10Z"));
  const StacItemSummary s = read_stac_item(stac_item_path(raster));
  EXPECT_EQ(s.id, "scene-7");
  EXPECT_EQ(s.model, "unet-small");
  EXPECT_EQ(s.checkpoint, checkpoint);
  EXPECT_EQ(s.source, (dir / "scene.tif").string());
  EXPECT_EQ(s.collection, "runs");
  EXPECT_EQ(s.datetime, "2023-11-05T08:09:10Z");
  EXPECT_EQ(s.shape, (std::vector<int64_t>{30, 50}));
  const auto bbox = read_json(stac_item_path(raster)).at("bbox").get<std::vector<double>>();
  EXPECT_EQ(std::vector<double>(s.bbox.begin(), s.bbox.end()), bbox);

  // Random init: no checkpoint, null in the file, "" back.
  write_stac_item(stac_item_path(raster), StacItemOptions("scene-7", raster).with_model("unet-tiny"));
  EXPECT_TRUE(read_json(stac_item_path(raster)).at("properties").at("tessera:checkpoint").is_null());
  EXPECT_EQ(read_stac_item(stac_item_path(raster)).checkpoint, "");
  fs::remove_all(dir);
}

TEST(Stac, ReadNamesAMissingTruncatedOrForeignFile) {
  const auto dir = temp_dir("corrupt");
  const std::string raster = (dir / "labels.tif").string();
  write_label_tiff(raster, 8, 8, kUtm33, "EPSG:32633");
  const std::string item_path = stac_item_path(raster);
  write_stac_item(item_path, StacItemOptions("labels", raster));
  ASSERT_NO_THROW(read_stac_item(item_path));

  const std::string truncated = (dir / "truncated.stac.json").string();
  fs::copy_file(item_path, truncated);
  fs::resize_file(truncated, fs::file_size(item_path) / 2);
  const std::string garbage = (dir / "garbage.stac.json").string();
  std::ofstream(garbage) << "\x89PNG\r\n\x1a\n binary";
  const std::string collection = (dir / "collection.json").string();
  std::ofstream(collection) << R"({"type": "Collection", "stac_version": "1.0.0", "id": "c"})";
  const std::string no_bbox = (dir / "nobbox.stac.json").string();
  json broken = read_json(item_path);
  broken.erase("bbox");
  std::ofstream(no_bbox) << broken.dump();
  const std::string wrong_type = (dir / "wrongtype.stac.json").string();
  json other = read_json(item_path);
  other["type"] = "FeatureCollection";
  std::ofstream(wrong_type) << other.dump();
  const std::string not_stac = (dir / "geojson.stac.json").string();
  json plain = read_json(item_path);
  plain.erase("stac_version");
  std::ofstream(not_stac) << plain.dump();
  for (const std::string& bad :
       {truncated, garbage, collection, no_bbox, wrong_type, not_stac, (dir / "missing.stac.json").string()}) {
    const std::string e = error_of([&] { read_stac_item(bad); });
    EXPECT_EQ(e.rfind(bad + ": ", 0), 0u) << e;
  }
  fs::remove_all(dir);
}

TEST(Stac, RasterWithoutGeoreferenceIsRefused) {
  const auto dir = temp_dir("nogeo");
  const std::string raster = (dir / "labels.tif").string();
  write_label_tiff(raster, 8, 8, {}, "");
  const std::string item_path = stac_item_path(raster);
  const std::string e = error_of([&] { write_stac_item(item_path, StacItemOptions("labels", raster)); });
  EXPECT_EQ(e, raster + ": no georeference; a STAC item needs one");
  EXPECT_FALSE(fs::exists(item_path));
  for (const auto& entry : fs::directory_iterator(dir))
    EXPECT_EQ(entry.path().extension(), ".tif") << "left behind: " << entry.path();
  fs::remove_all(dir);
}

TEST(Stac, CollectionExtentCoversItsItems) {
  const auto dir = temp_dir("collection");
  fs::create_directories(dir / "north");
  fs::create_directories(dir / "south");
  const std::string a = (dir / "north" / "a.tif").string(), b = (dir / "south" / "b.tif").string();
  write_label_tiff(a, 30, 50, kUtm33, "EPSG:32633");
  write_label_tiff(b, 40, 60, {300000, 30, 0, 8000000, 0, -30}, "EPSG:32717");
  write_stac_item(stac_item_path(a),
                  StacItemOptions("a", a).with_collection("scenes").with_datetime("2024-05-02T12:30:00Z"));
  write_stac_item(stac_item_path(b),
                  StacItemOptions("b", b).with_collection("scenes").with_datetime("2024-03-01T10:00:00+01:00"));
  const std::string path = (dir / "collection.json").string();
  write_stac_collection(path, "scenes", "two zones", {stac_item_path(a), stac_item_path(b)});
  const json c = read_json(path);

  EXPECT_EQ(c.at("type"), "Collection");
  EXPECT_EQ(c.at("stac_version"), "1.0.0");
  EXPECT_EQ(c.at("id"), "scenes");
  EXPECT_EQ(c.at("description"), "two zones");
  EXPECT_TRUE(c.at("license").is_string());
  const auto extent = c.at("extent").at("spatial").at("bbox").at(0).get<std::vector<double>>();
  const auto ba = read_json(stac_item_path(a)).at("bbox").get<std::vector<double>>();
  const auto bb = read_json(stac_item_path(b)).at("bbox").get<std::vector<double>>();
  EXPECT_EQ(extent, (std::vector<double>{std::min(ba[0], bb[0]), std::min(ba[1], bb[1]), std::max(ba[2], bb[2]),
                                         std::max(ba[3], bb[3])}));
  for (const auto& box : {ba, bb}) {
    EXPECT_LE(extent[0], box[0]);
    EXPECT_LE(extent[1], box[1]);
    EXPECT_GE(extent[2], box[2]);
    EXPECT_GE(extent[3], box[3]);
  }
  EXPECT_EQ(c.at("extent").at("temporal").at("interval").at(0),
            json::array({"2024-03-01T10:00:00+01:00", "2024-05-02T12:30:00Z"}));

  std::set<fs::path> items;
  for (const auto& l : c.at("links"))
    if (l.at("rel") == "item") {
      EXPECT_FALSE(fs::path(l.at("href").get<std::string>()).is_absolute()) << l;
      items.insert(fs::canonical(resolve(dir, l.at("href"))));
    }
  EXPECT_EQ(items, (std::set<fs::path>{fs::canonical(stac_item_path(a)), fs::canonical(stac_item_path(b))}));
  ASSERT_NE(link_of(c, "self"), nullptr);
  ASSERT_NE(link_of(c, "root"), nullptr);
  EXPECT_TRUE(fs::equivalent(resolve(dir, link_of(c, "root")->at("href")), path));

  // The items point back at a collection.json beside them.
  const json item = read_json(stac_item_path(a));
  EXPECT_EQ(item.at("collection"), "scenes");
  ASSERT_NE(link_of(item, "collection"), nullptr);
  EXPECT_EQ(link_of(item, "collection")->at("href"), "collection.json");

  // An item of another collection is refused, naming it.
  const std::string e = error_of([&] { write_stac_collection(path, "other", "", {stac_item_path(a)}); });
  EXPECT_EQ(e.rfind(stac_item_path(a) + ": ", 0), 0u) << e;
  fs::remove_all(dir);
}

// Every local path a self-contained item names: link and asset hrefs and the two path properties.
std::vector<std::string> local_paths_of(const json& item) {
  std::vector<std::string> out;
  for (const auto& l : item.at("links")) out.push_back(l.at("href"));
  for (const auto& [key, a] : item.at("assets").items()) out.push_back(a.at("href"));
  for (const char* key : {"tessera:source", "tessera:checkpoint"}) out.push_back(item.at("properties").at(key));
  return out;
}

// --stac-relative: the labels in one top-level folder (the working directory's), their source,
// checkpoint and polygons in another (the temporary one). By default those are absolute and
// the item has an absolute self link; relative, every path is relative to the item's folder
// and names the same file, there is no self link, and reading the item back gives the
// absolute paths (a rerun recognises the scenes it finished).
TEST(Stac, RelativeItemsNameEveryLocalFileFromTheirFolder) {
  const fs::path out = fs::current_path() / ("tessera-stac-relative-" + std::to_string(::getpid()));
  fs::remove_all(out);
  fs::create_directories(out);
  const auto in = temp_dir("relative-in");
  const std::string raster = (out / "labels.tif").string(), source = (in / "scene.tif").string();
  const std::string checkpoint = (in / "last.pt").string(), polygons = (in / "labels.gpkg").string();
  write_label_tiff(raster, 8, 8, kUtm33, "EPSG:32633");
  write_label_tiff(source, 8, 8, kUtm33, "EPSG:32633");
  std::ofstream(checkpoint) << "weights";
  std::ofstream(polygons) << "polygons";
  const std::string item_path = stac_item_path(raster);
  const auto item_of = [&](bool relative) {
    write_stac_item(item_path, StacItemOptions("labels", raster)
                                   .with_source(source)
                                   .with_checkpoint(checkpoint)
                                   .with_extra_assets({{"polygons", polygons, "", "", {}}})
                                   .with_relative(relative));
    return read_json(item_path);
  };
  const auto top = [](const fs::path& p) { return *std::next(p.begin()); };
  if (top(out) != top(in)) {  // the default keeps absolute paths across top-level folders
    const json item = item_of(false);
    EXPECT_TRUE(fs::path(link_of(item, "source")->at("href").get<std::string>()).is_absolute()) << item;
    EXPECT_NE(link_of(item, "self"), nullptr);
  }
  const json item = item_of(true);
  EXPECT_EQ(link_of(item, "self"), nullptr) << item;
  for (const std::string& p : local_paths_of(item)) {
    EXPECT_FALSE(fs::path(p).is_absolute()) << p;
    EXPECT_TRUE(fs::exists(resolve(out, p))) << p;
  }
  EXPECT_TRUE(fs::equivalent(resolve(out, link_of(item, "source")->at("href")), source));
  EXPECT_TRUE(fs::equivalent(resolve(out, item.at("assets").at("polygons").at("href")), polygons));
  EXPECT_TRUE(fs::equivalent(resolve(out, item.at("properties").at("tessera:checkpoint")), checkpoint));
  const StacItemSummary s = read_stac_item(item_path);
  EXPECT_EQ(s.source, source);
  EXPECT_EQ(s.checkpoint, checkpoint);

  const std::string collection = (out / "collection.json").string();
  write_stac_collection(collection, "c", "", {item_path}, true);
  EXPECT_EQ(link_of(read_json(collection), "self"), nullptr);
  for (const auto& l : read_json(collection).at("links"))
    EXPECT_FALSE(fs::path(l.at("href").get<std::string>()).is_absolute()) << l;
  fs::remove_all(out);
  fs::remove_all(in);
}

}  // namespace
}  // namespace tessera::io
