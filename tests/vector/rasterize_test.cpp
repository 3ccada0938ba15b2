// Polygon labels burnt onto an image grid (io/rasterize.hpp): classes land where the
// polygons are, in the image's CRS even when the polygons come in another one.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <gdal_priv.h>
#include <ogr_spatialref.h>

#include "tessera/core/error.hpp"
#include "tessera/io/raster.hpp"
#include "tessera/io/rasterize.hpp"

namespace tessera::io {
namespace {

namespace fs = std::filesystem;

// A 200×100 raster, 2 m pixels, UTM 33N, origin (500000, 5000200).
std::string make_image(const fs::path& dir) {
  init_gdal();
  const std::string path = (dir / "image.tif").string();
  GDALDataset* ds = GetGDALDriverManager()->GetDriverByName("GTiff")->Create(path.c_str(), 200, 100, 1, GDT_Byte, nullptr);
  double gt[6] = {500000, 2, 0, 5000200, 0, -2};
  ds->SetGeoTransform(gt);
  OGRSpatialReference srs;
  srs.importFromEPSG(32633);
  ds->SetSpatialRef(&srs);
  GDALClose(ds);
  return path;
}

std::vector<uint8_t> read_all(const std::string& path) {
  GDALDataset* ds = static_cast<GDALDataset*>(GDALOpen(path.c_str(), GA_ReadOnly));
  std::vector<uint8_t> v(200 * 100);
  EXPECT_EQ(ds->GetRasterBand(1)->RasterIO(GF_Read, 0, 0, 200, 100, v.data(), 200, 100, GDT_Byte, 0, 0), CE_None);
  GDALClose(ds);
  return v;
}

TEST(Rasterize, PolygonsLandOnTheirPixelsWithTheirClass) {
  const fs::path dir = fs::temp_directory_path() / "tessera-rasterize-test";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string image = make_image(dir);
  // Class 2: x in [500020, 500060), y in [5000100, 5000140) → columns 10..29, rows 30..49 (400 px).
  // Class 3: the same kind of square given in EPSG:4326 must be reprojected; checked by its centre.
  OGRSpatialReference utm, geo;
  utm.importFromEPSG(32633);
  geo.importFromEPSG(4326);
  geo.SetAxisMappingStrategy(OAMS_TRADITIONAL_GIS_ORDER);
  utm.SetAxisMappingStrategy(OAMS_TRADITIONAL_GIS_ORDER);
  auto* to_geo = OGRCreateCoordinateTransformation(&utm, &geo);
  double xs[4] = {500300, 500360, 500360, 500300}, ys[4] = {5000020, 5000020, 5000080, 5000080};
  to_geo->Transform(4, xs, ys);
  OCTDestroyCoordinateTransformation(to_geo);
  {
    std::ofstream utm_json(dir / "utm.geojson");
    utm_json << R"({"type":"FeatureCollection","crs":{"type":"name","properties":{"name":"urn:ogc:def:crs:EPSG::32633"}},
      "features":[{"type":"Feature","properties":{"cls":2},"geometry":{"type":"Polygon","coordinates":
      [[[500020,5000100],[500060,5000100],[500060,5000140],[500020,5000140],[500020,5000100]]]}}]})";
    std::ofstream geo_json(dir / "geo.geojson");
    geo_json.precision(12);
    geo_json << R"({"type":"FeatureCollection","features":[{"type":"Feature","properties":{"cls":3},"geometry":{"type":"Polygon","coordinates":[[)";
    for (int i = 0; i <= 4; ++i) geo_json << (i ? "," : "") << "[" << xs[i % 4] << "," << ys[i % 4] << "]";
    geo_json << "]]}}]}";
  }
  const RasterizeOptions o = RasterizeOptions().with_attribute("cls");
  rasterize_polygons((dir / "utm.geojson").string(), image, (dir / "utm.tif").string(), o);
  const auto a = read_all((dir / "utm.tif").string());
  int64_t twos = 0;
  for (int r = 0; r < 100; ++r)
    for (int c = 0; c < 200; ++c) {
      const bool inside = c >= 10 && c < 30 && r >= 30 && r < 50;
      EXPECT_EQ(a[r * 200 + c], inside ? 2 : 0) << "row " << r << " col " << c;
      twos += a[r * 200 + c] == 2;
      if (a[r * 200 + c] != (inside ? 2 : 0)) return;
    }
  EXPECT_EQ(twos, 400);

  rasterize_polygons((dir / "geo.geojson").string(), image, (dir / "geo.tif").string(), o);
  const auto b = read_all((dir / "geo.tif").string());
  // Centre of the square: x 500330 → column 165, y 5000050 → row 75; about 30 × 30 pixels.
  EXPECT_EQ(b[75 * 200 + 165], 3);
  int64_t threes = 0;
  for (uint8_t v : b) threes += v == 3;
  EXPECT_NEAR(double(threes), 900, 60);

  EXPECT_THROW(rasterize_polygons((dir / "utm.geojson").string(), image, (dir / "x.tif").string(),
                                  RasterizeOptions().with_attribute("missing")),
               Error);
  EXPECT_FALSE(fs::exists(dir / "x.tif"));
  EXPECT_THROW(rasterize_polygons((dir / "nothing.gpkg").string(), image, (dir / "x.tif").string(), o), Error);
  EXPECT_TRUE(is_vector_path("a.GPKG"));
  EXPECT_FALSE(is_vector_path("a.tif"));
}

}  // namespace
}  // namespace tessera::io
