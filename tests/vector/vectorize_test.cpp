// vectorize_labels against an independent count: OpenCV's 4-connected components of the
// same label image. The scene crosses the 256-pixel block seams of the label GeoTIFF, holds
// a ring with an island in its hole, shapes that touch only diagonally, nodata, and
// one-pixel specks; pixels are 2 m × 3 m so areas are not pixel counts by accident.
#include "tessera/io/vector_export.hpp"

#include <cpl_conv.h>
#include <gdal.h>
#include <gtest/gtest.h>
#include <ogr_api.h>
#include <ogr_srs_api.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>

#include "tessera/core/error.hpp"
#include "tessera/io/raster.hpp"

namespace tessera::io {
namespace {

namespace fs = std::filesystem;

constexpr int kWidth = 700, kHeight = 500;
const double kGeotransform[6] = {500000, 2, 0, 4000000, 0, -3};
constexpr double kPixelArea = 6;

fs::path temp_dir(const std::string& name) {
  auto d = fs::temp_directory_path() / ("tessera-vector-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

std::string utm32n_wkt() {
  OGRSpatialReferenceH srs = OSRNewSpatialReference(nullptr);
  OSRImportFromEPSG(srs, 32632);
  char* wkt = nullptr;
  OSRExportToWkt(srs, &wkt);
  std::string s = wkt;
  CPLFree(wkt);
  OSRRelease(srs);
  return s;
}

// The label image, drawn with OpenCV (row = y, column = x).
cv::Mat make_scene() {
  cv::Mat m(kHeight, kWidth, CV_8U, cv::Scalar(0));
  auto rect = [&](int x0, int y0, int x1, int y1, int v) { m(cv::Rect(x0, y0, x1 - x0, y1 - y0)).setTo(v); };
  rect(200, 220, 330, 300, 1);                      // crosses x = 256 and y = 256
  cv::circle(m, {512, 256}, 90, cv::Scalar(2), cv::FILLED);  // ring across x = 512, y = 256
  cv::circle(m, {512, 256}, 45, cv::Scalar(0), cv::FILLED);
  rect(505, 250, 520, 262, 1);                      // island in the ring's hole
  rect(50, 50, 70, 70, 1);                          // two squares touching at one corner
  rect(70, 70, 90, 90, 1);
  m.at<uint8_t>(100, 255) = 3;                      // diagonal pair across the x = 256 seam
  m.at<uint8_t>(101, 256) = 3;
  cv::line(m, {0, 480}, {400, 380}, cv::Scalar(2), 5);  // a stripe across x = 256
  rect(100, 200, 110, 320, 2);                      // an L across y = 256
  rect(100, 310, 180, 320, 2);
  rect(350, 240, 380, 270, 3);                      // a U across y = 256
  rect(358, 240, 372, 262, 0);
  rect(0, 300, 30, 330, 1);                         // on the image border
  rect(680, 0, 700, 60, 2);
  rect(600, 400, 640, 440, 3);                      // partly under nodata
  rect(620, 420, 700, 500, kNoDataLabel);
  for (auto [x, y] : {std::pair{10, 10}, {650, 50}, {300, 450}, {640, 300}, {2, 498}}) m.at<uint8_t>(y, x) = 3;
  return m;
}

// What LabelRasterWriter leaves beside labels.tif (io/label_style.hpp): the attribute table
// and the QGIS style; anything else in the folder was left by vectorizing.
bool is_label_sidecar(const std::string& name) { return name == "labels.tif.aux.xml" || name == "labels.qml"; }

void write_labels(const cv::Mat& m, const std::string& path) {
  Georeference geo;
  geo.crs_wkt = utm32n_wkt();
  geo.geotransform.assign(kGeotransform, kGeotransform + 6);
  LabelRasterWriter w(LabelRasterOptions(path, {kHeight, kWidth}, geo));
  for (int y0 = 0; y0 < kHeight; y0 += 130) {  // windows that do not match the 256 blocks
    const int h = std::min(130, kHeight - y0);
    Block<uint8_t> b({1, h, kWidth});
    for (int y = 0; y < h; ++y) std::copy(m.ptr<uint8_t>(y0 + y), m.ptr<uint8_t>(y0 + y) + kWidth, b.data.begin() + y * kWidth);
    w.write(Box{{y0, 0}, {h, kWidth}}, b);
  }
  w.commit();
}

// 4-connected components of one class: the component id of every pixel (0: not this class)
// and each component's pixel count.
struct Components {
  cv::Mat ids;
  std::vector<int> pixels;  // indexed by id, [0] unused
};

Components components(const cv::Mat& m, int cls) {
  Components c;
  cv::Mat stats, centroids;
  const int n = cv::connectedComponentsWithStats(m == cls, c.ids, stats, centroids, 4, CV_32S);
  c.pixels.resize(n);
  for (int i = 1; i < n; ++i) c.pixels[i] = stats.at<int>(i, cv::CC_STAT_AREA);
  return c;
}

struct Feature {
  int class_id;
  std::string class_name;
  double area, geometry_area;
  int x, y;  // a pixel inside the polygon
  int rings, vertices;
};

struct VectorFile {
  std::vector<Feature> features;
  std::string crs_wkt, layer_name;
};

VectorFile read_vector(const std::string& path) {
  VectorFile out;
  GDALDatasetH ds = GDALOpenEx(path.c_str(), GDAL_OF_VECTOR | GDAL_OF_READONLY, nullptr, nullptr, nullptr);
  if (!ds) throw Error(path + ": OGR cannot open it");
  EXPECT_EQ(GDALDatasetGetLayerCount(ds), 1);
  OGRLayerH layer = GDALDatasetGetLayer(ds, 0);
  out.layer_name = OGR_L_GetName(layer);
  if (OGRSpatialReferenceH srs = OGR_L_GetSpatialRef(layer)) {
    char* wkt = nullptr;
    OSRExportToWkt(srs, &wkt);
    out.crs_wkt = wkt;
    CPLFree(wkt);
  }
  OGRFeatureDefnH defn = OGR_L_GetLayerDefn(layer);
  const int f_id = OGR_FD_GetFieldIndex(defn, "class_id"), f_name = OGR_FD_GetFieldIndex(defn, "class_name"),
            f_area = OGR_FD_GetFieldIndex(defn, "area");
  EXPECT_GE(f_id, 0);
  EXPECT_GE(f_name, 0);
  EXPECT_GE(f_area, 0);
  OGR_L_ResetReading(layer);
  while (OGRFeatureH f = OGR_L_GetNextFeature(layer)) {
    OGRGeometryH g = OGR_F_GetGeometryRef(f);
    Feature r{OGR_F_GetFieldAsInteger(f, f_id), OGR_F_GetFieldAsString(f, f_name), OGR_F_GetFieldAsDouble(f, f_area),
              g ? OGR_G_Area(g) : 0, -1, -1, 0, 0};
    if (g && wkbFlatten(OGR_G_GetGeometryType(g)) == wkbPolygon) {
      r.rings = OGR_G_GetGeometryCount(g);
      for (int i = 0; i < r.rings; ++i) r.vertices += OGR_G_GetPointCount(OGR_G_GetGeometryRef(g, i));
      OGRGeometryH p = OGR_G_PointOnSurface(g);
      if (p) {
        r.x = int(std::floor((OGR_G_GetX(p, 0) - kGeotransform[0]) / kGeotransform[1]));
        r.y = int(std::floor((OGR_G_GetY(p, 0) - kGeotransform[3]) / kGeotransform[5]));
        OGR_G_DestroyGeometry(p);
      }
    }
    out.features.push_back(r);
    OGR_F_Destroy(f);
  }
  GDALClose(ds);
  return out;
}

class Vectorize : public ::testing::Test {
 protected:
  void SetUp() override {
    init_gdal();
    dir_ = temp_dir(::testing::UnitTest::GetInstance()->current_test_info()->name());
    scene_ = make_scene();
    labels_ = (dir_ / "labels.tif").string();
    write_labels(scene_, labels_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Every feature lies on one 4-connected component of its class, every component
  // (of the classes in `classes`, with at least `min_pixels`) has exactly one feature,
  // and the feature's area is the component's pixel count × pixel area.
  void expect_matches_components(const VectorFile& v, const std::vector<int>& classes, int min_pixels = 0) {
    std::map<int, std::vector<int>> seen;  // class → features per component id
    std::map<int, Components> comps;
    size_t expected = 0;
    for (int c : classes) {
      comps[c] = components(scene_, c);
      seen[c].assign(comps[c].pixels.size(), 0);
      for (size_t i = 1; i < comps[c].pixels.size(); ++i) expected += comps[c].pixels[i] >= min_pixels;
    }
    EXPECT_EQ(v.features.size(), expected);
    for (const Feature& f : v.features) {
      ASSERT_TRUE(comps.count(f.class_id)) << "unexpected class " << f.class_id;
      ASSERT_TRUE(f.x >= 0 && f.x < kWidth && f.y >= 0 && f.y < kHeight) << "point on surface off the raster";
      const int id = comps[f.class_id].ids.at<int>(f.y, f.x);
      ASSERT_GT(id, 0) << "class " << f.class_id << " feature's interior pixel (" << f.x << ", " << f.y
                       << ") is not of its class";
      ++seen[f.class_id][id];
      const double want = comps[f.class_id].pixels[id] * kPixelArea;
      EXPECT_NEAR(f.area, want, 1e-6 * want) << "class " << f.class_id << " component " << id;
      EXPECT_NEAR(f.geometry_area, want, 1e-6 * want);
      EXPECT_GE(comps[f.class_id].pixels[id], min_pixels);
    }
    for (int c : classes)
      for (size_t i = 1; i < seen[c].size(); ++i)
        EXPECT_EQ(seen[c][i], comps[c].pixels[i] >= min_pixels ? 1 : 0)
            << "class " << c << " component " << i << " of " << comps[c].pixels[i] << " pixels";
  }

  fs::path dir_;
  cv::Mat scene_;
  std::string labels_;
};

TEST_F(Vectorize, OneFeaturePer4ConnectedComponentAcrossBlockSeams) {
  const std::string out = (dir_ / "out.gpkg").string();
  std::vector<double> progress;
  const auto r = vectorize_labels(
      labels_, out,
      VectorizeOptions().with_class_names({"background", "building", "road"}).with_progress([&](double x) {
        progress.push_back(x);
      }));
  const VectorFile v = read_vector(out);
  expect_matches_components(v, {1, 2, 3});
  EXPECT_EQ(r.features, int64_t(v.features.size()));
  for (int c = 1; c <= 3; ++c) EXPECT_EQ(r.per_class[c], int64_t(components(scene_, c).pixels.size()) - 1);
  EXPECT_EQ(r.per_class[0], 0);
  EXPECT_EQ(r.per_class[kNoDataLabel], 0);
  for (const Feature& f : v.features)
    EXPECT_EQ(f.class_name, f.class_id == 1 ? "building" : f.class_id == 2 ? "road" : "class 3");

  // The ring: one polygon with exactly one hole, whose area excludes the hole.
  const Components ring = components(scene_, 2);
  const int ring_id = ring.ids.at<int>(256, 512 + 60);
  int rings_found = 0;
  for (const Feature& f : v.features)
    if (f.class_id == 2 && ring.ids.at<int>(f.y, f.x) == ring_id) {
      ++rings_found;
      EXPECT_EQ(f.rings, 2) << "exterior + one interior ring";
    }
  EXPECT_EQ(rings_found, 1);

  OGRSpatialReferenceH want = OSRNewSpatialReference(utm32n_wkt().c_str());
  OGRSpatialReferenceH got = OSRNewSpatialReference(v.crs_wkt.c_str());
  EXPECT_TRUE(OSRIsSame(want, got)) << v.crs_wkt;
  OSRRelease(want);
  OSRRelease(got);

  ASSERT_FALSE(progress.empty());
  EXPECT_TRUE(std::is_sorted(progress.begin(), progress.end()));
  EXPECT_DOUBLE_EQ(progress.back(), 1.0);
  for (const auto& e : fs::directory_iterator(dir_)) {
    const std::string name = e.path().filename().string();
    EXPECT_TRUE(name == "labels.tif" || is_label_sidecar(name) || name == "out.gpkg") << "left behind: " << name;
  }
}

TEST_F(Vectorize, MinAreaDropsOnlySmallerPolygonsGeoJson) {
  const std::string out = (dir_ / "out.geojson").string();
  const int min_pixels = 10;
  const auto r = vectorize_labels(labels_, out, VectorizeOptions().with_min_area(min_pixels * kPixelArea));
  const VectorFile v = read_vector(out);
  expect_matches_components(v, {1, 2, 3}, min_pixels);
  int64_t small = 0;
  for (int c = 1; c <= 3; ++c) {
    const auto comps = components(scene_, c);
    for (size_t i = 1; i < comps.pixels.size(); ++i) small += comps.pixels[i] < min_pixels;
  }
  EXPECT_GE(small, 7) << "the scene should hold the single-pixel specks";
  EXPECT_EQ(r.dropped, small);
}

TEST_F(Vectorize, BackgroundOnRequestShapefileWithSidecars) {
  const std::string out = (dir_ / "out.shp").string();
  vectorize_labels(labels_, out, VectorizeOptions().with_background(true));
  const VectorFile v = read_vector(out);
  expect_matches_components(v, {0, 1, 2, 3});
  for (const char* ext : {".shp", ".shx", ".dbf", ".prj"}) EXPECT_TRUE(fs::exists(dir_ / (std::string("out") + ext))) << ext;
  for (const auto& e : fs::directory_iterator(dir_))
    EXPECT_EQ(e.path().filename().string().find("partial"), std::string::npos) << e.path();
}

TEST_F(Vectorize, SimplifyKeepsEveryPolygonWithFewerVertices) {
  const std::string exact = (dir_ / "exact.gpkg").string(), simple = (dir_ / "simple.gpkg").string();
  vectorize_labels(labels_, exact, VectorizeOptions());
  vectorize_labels(labels_, simple, VectorizeOptions().with_simplify(2 * kGeotransform[1]));
  const VectorFile a = read_vector(exact), b = read_vector(simple);
  ASSERT_EQ(a.features.size(), b.features.size());
  int64_t va = 0, vb = 0;
  for (const auto& f : a.features) va += f.vertices;
  for (const auto& f : b.features) {
    vb += f.vertices;
    EXPECT_GT(f.area, 0);
    EXPECT_NEAR(f.area, f.geometry_area, 1e-9 * f.area);  // the area of what is written
  }
  EXPECT_LT(vb, va * 3 / 4) << "the circle and the stripe should lose staircase vertices";
}

TEST_F(Vectorize, BadInputsFailNamingTheFileAndLeaveNothing) {
  EXPECT_NO_THROW(VectorizeOptions().validate());
  try {
    VectorizeOptions().with_min_area(-1).validate();
    FAIL() << "negative min_area accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("min_area"), std::string::npos) << e.what();
  }
  EXPECT_THROW(VectorizeOptions().with_simplify(std::nan("")).validate(), Error);
  const std::string bad_ext = (dir_ / "out.kml").string();
  try {
    vectorize_labels(labels_, bad_ext, VectorizeOptions());
    FAIL() << "unknown extension accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(bad_ext), std::string::npos) << e.what();
  }
  const std::string missing = (dir_ / "missing.tif").string(), out = (dir_ / "out.gpkg").string();
  try {
    vectorize_labels(missing, out, VectorizeOptions());
    FAIL() << "missing raster accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(missing), std::string::npos) << e.what();
  }
  // A multi-band float raster is not a label raster.
  const std::string rgb = (dir_ / "rgb.tif").string();
  GDALDatasetH ds = GDALCreate(GDALGetDriverByName("GTiff"), rgb.c_str(), 8, 8, 3, GDT_Float32, nullptr);
  GDALClose(ds);
  EXPECT_THROW(vectorize_labels(rgb, out, VectorizeOptions()), Error);
  for (const auto& e : fs::directory_iterator(dir_)) {
    const std::string name = e.path().filename().string();
    EXPECT_TRUE(name == "labels.tif" || is_label_sidecar(name) || name == "rgb.tif") << "left behind: " << name;
  }
}

}  // namespace
}  // namespace tessera::io
