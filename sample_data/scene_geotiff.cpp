#include "scene_geotiff.hpp"

#include <algorithm>
#include <filesystem>
#include <memory>
#include <vector>

#include <cpl_conv.h>
#include <cpl_error.h>
#include <cpl_string.h>
#include <gdal_priv.h>
#include <ogr_spatialref.h>

#include "scene_render.hpp"
#include "tessera/core/error.hpp"

namespace tessera::sample {
namespace {

constexpr int kStripRows = 256;  // = tile height, so every strip completes a row of tiles

struct CloseDataset {
  void operator()(GDALDataset* ds) const { GDALClose(ds); }
};
using DatasetPtr = std::unique_ptr<GDALDataset, CloseDataset>;

// Quiet GDAL for the lifetime of one write; its last message goes into our error instead.
struct QuietGdal {
  QuietGdal() { CPLPushErrorHandler(CPLQuietErrorHandler); CPLErrorReset(); }
  ~QuietGdal() { CPLPopErrorHandler(); }
};

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  const std::string detail = CPLGetLastErrorMsg();
  throw Error(path + ": " + what + (detail.empty() ? "" : " (" + detail + ")"));
}

DatasetPtr create(const std::string& tmp, const std::string& path, int size,
                  double pixel_metres, int bands, GDALDataType type, bool predictor) {
  // Drivers are registered once by main() before the worker threads start (io::init_gdal):
  // GDALAllRegister() racing itself from several threads crashed the generator.
  GDALDriver* driver = GetGDALDriverManager()->GetDriverByName("GTiff");
  if (driver == nullptr) fail(path, "GDAL has no GTiff driver");
  CPLStringList options;
  options.SetNameValue("TILED", "YES");
  options.SetNameValue("BLOCKXSIZE", "256");
  options.SetNameValue("BLOCKYSIZE", "256");
  options.SetNameValue("COMPRESS", "DEFLATE");
  if (predictor) options.SetNameValue("PREDICTOR", "2");
  if (bands > 1) options.SetNameValue("INTERLEAVE", "PIXEL");
  DatasetPtr ds(driver->Create(tmp.c_str(), size, size, bands, type, options.List()));
  if (!ds) fail(path, "cannot create");

  OGRSpatialReference srs;
  srs.SetAxisMappingStrategy(OAMS_TRADITIONAL_GIS_ORDER);
  if (srs.importFromEPSG(kSceneEpsg) != OGRERR_NONE) fail(path, "cannot build EPSG:32633");
  double transform[6] = {kSceneOriginEasting, pixel_metres, 0.0,
                         kSceneOriginNorthing, 0.0, -pixel_metres};
  if (ds->SetSpatialRef(&srs) != CE_None || ds->SetGeoTransform(transform) != CE_None)
    fail(path, "cannot set the georeference");
  return ds;
}

// Closes the dataset and moves the finished file to its final name.
void finish(DatasetPtr ds, const std::string& tmp, const std::string& path) {
  ds.reset();
  if (CPLGetLastErrorType() == CE_Failure) fail(path, "writing failed");
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) throw Error(path + ": cannot rename from " + tmp + " (" + ec.message() + ")");
}

}  // namespace

void write_scene_image(const std::string& path, const SceneLayout& layout,
                       const SceneSensor& sensor, uint64_t seed, const std::string& about) {
  const QuietGdal quiet;
  const std::string tmp = path + ".partial";
  const int size = sensor.output_size(layout.size);
  try {
    DatasetPtr ds = create(tmp, path, size, sensor.pixel_metres, kSceneBands, GDT_UInt16, true);
    const char* names[kSceneBands] = {"red", "green", "blue", "nir"};
    const GDALColorInterp interp[kSceneBands] = {GCI_RedBand, GCI_GreenBand, GCI_BlueBand,
                                                 GCI_Undefined};
    for (int b = 0; b < kSceneBands; ++b) {
      GDALRasterBand* band = ds->GetRasterBand(b + 1);
      band->SetDescription(names[b]);
      band->SetColorInterpretation(interp[b]);
    }
    ds->SetMetadataItem("TESSERA_SAMPLE", about.c_str());
    if (sensor.target) ds->SetMetadataItem("TESSERA_SENSOR", sensor.describe().c_str());

    std::vector<uint16_t> strip;
    const GSpacing pixel = kSceneBands * sizeof(uint16_t);
    for (int row0 = 0, id = 0; row0 < size; row0 += kStripRows, ++id) {
      const int row1 = std::min(size, row0 + kStripRows);
      render_scene_rows(layout, sensor, seed, row0, row1, uint64_t(id), strip);
      if (ds->RasterIO(GF_Write, 0, row0, size, row1 - row0, strip.data(), size, row1 - row0,
                       GDT_UInt16, kSceneBands, nullptr, pixel, pixel * size, sizeof(uint16_t),
                       nullptr) != CE_None)
        fail(path, "cannot write rows " + std::to_string(row0) + "..");
    }
    finish(std::move(ds), tmp, path);
  } catch (...) {
    VSIUnlink(tmp.c_str());
    throw;
  }
}

void write_scene_labels(const std::string& path, const std::vector<uint8_t>& labels, int size,
                        double pixel_metres, const std::string& about) {
  const QuietGdal quiet;
  const std::string tmp = path + ".partial";
  try {
    if (labels.size() != size_t(size) * size) throw Error(path + ": label count is not size²");
    DatasetPtr ds = create(tmp, path, size, pixel_metres, 1, GDT_Byte, false);
    GDALRasterBand* band = ds->GetRasterBand(1);
    band->SetDescription("class");
    GDALColorTable colours;
    const GDALColorEntry palette[kSceneClassCount] = {
        {46, 139, 60, 255},   // vegetation: green
        {220, 60, 50, 255},   // building: red
        {250, 210, 80, 255},  // road: yellow
        {40, 110, 230, 255},  // water: blue
    };
    for (int c = 0; c < 256; ++c) {
      const GDALColorEntry black{0, 0, 0, 255};
      colours.SetColorEntry(c, c < kSceneClassCount ? &palette[c] : &black);
    }
    if (band->SetColorTable(&colours) != CE_None) fail(path, "cannot set the colour table");
    for (int c = 0; c < kSceneClassCount; ++c)
      ds->SetMetadataItem(("CLASS_" + std::to_string(c)).c_str(),
                          scene_class_names()[size_t(c)].c_str());
    if (!about.empty()) ds->SetMetadataItem("TESSERA_SAMPLE", about.c_str());
    if (band->RasterIO(GF_Write, 0, 0, size, size, const_cast<uint8_t*>(labels.data()), size,
                       size, GDT_Byte, 0, 0, nullptr) != CE_None)
      fail(path, "cannot write the labels");
    finish(std::move(ds), tmp, path);
  } catch (...) {
    VSIUnlink(tmp.c_str());
    throw;
  }
}

}  // namespace tessera::sample
