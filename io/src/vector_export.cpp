#include "tessera/io/vector_export.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>

#include <cpl_conv.h>
#include <cpl_error.h>
#include <cpl_string.h>
#include <gdal.h>
#include <gdal_alg.h>
#include <ogr_api.h>
#include <ogr_srs_api.h>

#include "tessera/core/error.hpp"
#include "tessera/core/image_source.hpp"
#include "tessera/io/raster.hpp"

namespace tessera::io {
namespace {

namespace fs = std::filesystem;

std::string gdal_error(const std::string& fallback) {
  const char* msg = CPLGetLastErrorMsg();
  return (msg && *msg) ? std::string(msg) : fallback;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return s;
}

// Every file of a written dataset shares the stem "<name>." (Shapefile: .shp .shx .dbf
// .prj .cpg; GeoPackage while open: -journal / -wal). Lists them with their extension.
std::vector<fs::path> files_with_prefix(const fs::path& dir, const std::string& prefix) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir.empty() ? fs::path(".") : dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(prefix, 0) == 0) out.push_back(e.path());
  }
  return out;
}

// Closes a GDAL dataset and removes its files (scratch or unfinished output) unless released.
struct DatasetFiles {
  GDALDatasetH ds = nullptr;
  fs::path dir;
  std::string prefix;  // "<stem>." of every file belonging to the dataset
  bool keep = false;
  ~DatasetFiles() {
    if (ds) GDALClose(ds);
    if (keep) return;
    for (const auto& p : files_with_prefix(dir, prefix)) {
      std::error_code ec;
      fs::remove(p, ec);
    }
  }
  // Closes the dataset; throws naming `target` if GDAL reports a failure while finishing.
  void close(const std::string& target) {
    CPLErrorReset();
    GDALClose(ds);
    ds = nullptr;
    if (CPLGetLastErrorType() >= CE_Failure) throw Error(target + ": finishing the file failed: " + gdal_error("GDAL error"));
  }
};

struct Progress {
  const std::function<void(double)>* fn;
  double from, span;
};

int CPL_STDCALL gdal_progress(double fraction, const char*, void* arg) {
  const auto* p = static_cast<const Progress*>(arg);
  if (*p->fn) (*p->fn)(p->from + p->span * std::clamp(fraction, 0.0, 1.0));
  return TRUE;
}

// A virtual Byte band over the labels: 1 where a polygon may form, 0 for nodata (and for
// class 0 without `background`). A VRT lookup table, so it streams like the labels do.
std::string mask_vrt(const std::string& path, int width, int height, const std::vector<bool>& keep) {
  char* escaped = CPLEscapeString(path.c_str(), -1, CPLES_XML);
  const std::string file = escaped;
  CPLFree(escaped);
  std::string lut;
  for (int v = 0; v < 256; ++v) {
    if (v) lut += ',';
    lut += std::to_string(v);
    lut += keep[v] ? ":1" : ":0";
  }
  const std::string w = std::to_string(width), h = std::to_string(height);
  const std::string rect = "xOff=\"0\" yOff=\"0\" xSize=\"" + w + "\" ySize=\"" + h + "\"";
  return "<VRTDataset rasterXSize=\"" + w + "\" rasterYSize=\"" + h + "\">"
         "<VRTRasterBand dataType=\"Byte\" band=\"1\"><ComplexSource>"
         "<SourceFilename relativeToVRT=\"0\">" + file + "</SourceFilename><SourceBand>1</SourceBand>"
         "<SrcRect " + rect + "/><DstRect " + rect + "/><LUT>" + lut + "</LUT>"
         "</ComplexSource></VRTRasterBand></VRTDataset>";
}

}  // namespace

void VectorizeOptions::validate() const {
  if (!std::isfinite(min_area) || min_area < 0)
    throw Error("min_area: must be a finite area >= 0 (map units^2), got " + std::to_string(min_area));
  if (!std::isfinite(simplify) || simplify < 0)
    throw Error("simplify: must be a finite tolerance >= 0 (map units), got " + std::to_string(simplify));
}

std::string vector_driver_for(const std::string& out_path) {
  const std::string ext = lower(fs::path(out_path).extension().string());
  if (ext == ".gpkg") return "GPKG";
  if (ext == ".geojson" || ext == ".json") return "GeoJSON";
  if (ext == ".shp") return "ESRI Shapefile";
  throw Error(out_path + ": unknown vector format '" + ext + "' (use .gpkg, .geojson or .shp)");
}

VectorizeReport vectorize_labels(const std::string& label_raster, const std::string& out_path,
                                 const VectorizeOptions& options) {
  options.validate();
  const auto start = std::chrono::steady_clock::now();
  const std::string driver_name = vector_driver_for(out_path);
  init_gdal();
  if (options.simplify > 0 && !OGRGetGEOSVersion(nullptr, nullptr, nullptr))
    throw Error(out_path + ": --simplify needs GDAL built with GEOS, which this GDAL is not");

  // The labels.
  if (!fs::exists(label_raster)) throw Error(label_raster + ": no such file");
  CPLErrorReset();
  GDALDatasetH labels = GDALOpenEx(label_raster.c_str(), GDAL_OF_RASTER | GDAL_OF_READONLY, nullptr, nullptr, nullptr);
  if (!labels) throw Error(label_raster + ": cannot open as a raster: " + gdal_error("not a recognised format"));
  DatasetFiles labels_guard{labels, {}, {}, true};
  if (GDALGetRasterCount(labels) != 1)
    throw Error(label_raster + ": a label raster has one band, this has " + std::to_string(GDALGetRasterCount(labels)));
  GDALRasterBandH band = GDALGetRasterBand(labels, 1);
  if (GDALGetRasterDataType(band) != GDT_Byte)
    throw Error(label_raster + ": labels must be Byte (class ids 0-254), not " +
                GDALGetDataTypeName(GDALGetRasterDataType(band)));
  const int width = GDALGetRasterXSize(labels), height = GDALGetRasterYSize(labels);

  std::vector<bool> keep(256, true);
  keep[kNoDataLabel] = false;
  keep[0] = options.background;
  int has_nodata = 0;
  const double nodata = GDALGetRasterNoDataValue(band, &has_nodata);
  if (has_nodata && nodata >= 0 && nodata <= 255 && nodata == std::floor(nodata)) keep[int(nodata)] = false;
  const std::string vrt = mask_vrt(fs::absolute(label_raster).string(), width, height, keep);
  CPLErrorReset();
  GDALDatasetH mask = GDALOpen(vrt.c_str(), GA_ReadOnly);
  if (!mask) throw Error(label_raster + ": cannot build the polygon mask: " + gdal_error("GDAL error"));
  DatasetFiles mask_guard{mask, {}, {}, true};

  OGRSpatialReferenceH srs = nullptr;
  if (const char* wkt = GDALGetProjectionRef(labels); wkt && *wkt) {
    srs = OSRNewSpatialReference(wkt);
    if (srs) OSRSetAxisMappingStrategy(srs, OAMS_TRADITIONAL_GIS_ORDER);
  }
  struct SrsGuard {
    OGRSpatialReferenceH h;
    ~SrsGuard() { if (h) OSRRelease(h); }
  } srs_guard{srs};

  // Polygonize into a scratch GeoPackage beside the target: class_id only, no index,
  // one transaction. Its features are then filtered, named, measured and copied.
  const fs::path target(out_path);
  const fs::path dir = target.parent_path();
  if (!dir.empty()) fs::create_directories(dir);
  const std::string stem = target.stem().string(), pid = std::to_string(::getpid());
  DatasetFiles scratch{nullptr, dir, stem + ".scratch-" + pid + ".", false};
  const std::string scratch_path = (dir / (scratch.prefix + "gpkg")).string();
  CPLErrorReset();
  scratch.ds = GDALCreate(GDALGetDriverByName("GPKG"), scratch_path.c_str(), 0, 0, 0, GDT_Unknown, nullptr);
  if (!scratch.ds) throw Error(out_path + ": cannot create a scratch file beside it: " + gdal_error("GDAL error"));
  const char* scratch_layer_options[] = {"SPATIAL_INDEX=NO", nullptr};
  OGRLayerH raw = GDALDatasetCreateLayer(scratch.ds, "raw", srs, wkbPolygon, const_cast<char**>(scratch_layer_options));
  if (!raw) throw Error(out_path + ": cannot create a scratch layer: " + gdal_error("GDAL error"));
  {
    OGRFieldDefnH fd = OGR_Fld_Create("class_id", OFTInteger);
    OGR_L_CreateField(raw, fd, TRUE);
    OGR_Fld_Destroy(fd);
  }
  const std::function<void(double)>& progress = options.progress;
  Progress polygonize_progress{&progress, 0.0, 0.8};
  GDALDatasetStartTransaction(scratch.ds, FALSE);
  CPLErrorReset();
  if (GDALPolygonize(band, GDALGetRasterBand(mask, 1), raw, 0, nullptr, gdal_progress, &polygonize_progress) != CE_None)
    throw Error(label_raster + ": polygonizing failed: " + gdal_error("GDAL error"));
  if (GDALDatasetCommitTransaction(scratch.ds) != OGRERR_NONE)
    throw Error(out_path + ": writing the scratch polygons failed: " + gdal_error("GDAL error"));

  // The output, under a temporary name with the target's extension.
  DatasetFiles out{nullptr, dir, stem + ".partial-" + pid + ".", false};
  const std::string tmp_path = (dir / (out.prefix + target.extension().string().substr(1))).string();
  GDALDriverH driver = GDALGetDriverByName(driver_name.c_str());
  if (!driver) throw Error(out_path + ": this GDAL has no " + driver_name + " driver");
  CPLErrorReset();
  out.ds = GDALCreate(driver, tmp_path.c_str(), 0, 0, 0, GDT_Unknown, nullptr);
  if (!out.ds) throw Error(out_path + ": cannot create: " + gdal_error("GDAL error"));
  OGRLayerH layer = GDALDatasetCreateLayer(out.ds, "labels", srs, wkbPolygon, nullptr);
  if (!layer) throw Error(out_path + ": cannot create the layer: " + gdal_error("GDAL error"));
  const std::pair<const char*, OGRFieldType> fields[] = {
      {"class_id", OFTInteger}, {"class_name", OFTString}, {"area", OFTReal}};
  for (const auto& [name, type] : fields) {
    OGRFieldDefnH fd = OGR_Fld_Create(name, type);
    const OGRErr err = OGR_L_CreateField(layer, fd, TRUE);
    OGR_Fld_Destroy(fd);
    if (err != OGRERR_NONE) throw Error(out_path + ": cannot create field " + name + ": " + gdal_error("GDAL error"));
  }
  OGRFeatureDefnH defn = OGR_L_GetLayerDefn(layer);
  const int f_id = OGR_FD_GetFieldIndex(defn, "class_id"), f_name = OGR_FD_GetFieldIndex(defn, "class_name"),
            f_area = OGR_FD_GetFieldIndex(defn, "area");
  const bool in_transaction = GDALDatasetStartTransaction(out.ds, FALSE) == OGRERR_NONE;

  VectorizeReport report;
  report.per_class.assign(256, 0);
  const int64_t total = std::max<int64_t>(1, OGR_L_GetFeatureCount(raw, TRUE));
  int64_t seen = 0;
  OGR_L_ResetReading(raw);
  while (OGRFeatureH f = OGR_L_GetNextFeature(raw)) {
    struct FeatureGuard {
      OGRFeatureH h;
      ~FeatureGuard() { OGR_F_Destroy(h); }
    } f_guard{f};
    if (progress && ++seen % 1024 == 0) progress(0.8 + 0.2 * double(seen) / double(total));
    const int cls = OGR_F_GetFieldAsInteger(f, 0);
    OGRGeometryH geom = OGR_F_GetGeometryRef(f);
    if (!geom) continue;
    if (options.min_area > 0 && OGR_G_Area(geom) < options.min_area) {
      ++report.dropped;
      continue;
    }
    OGRGeometryH simplified = nullptr;
    if (options.simplify > 0) {
      simplified = OGR_G_SimplifyPreserveTopology(geom, options.simplify);
      if (simplified && OGR_G_IsEmpty(simplified)) {
        OGR_G_DestroyGeometry(simplified);
        simplified = nullptr;
      }
    }
    OGRGeometryH written = simplified ? simplified : geom;
    OGRFeatureH g = OGR_F_Create(defn);
    OGR_F_SetFieldInteger(g, f_id, cls);
    const std::string name = cls >= 0 && cls < int(options.class_names.size()) ? options.class_names[cls]
                                                                               : "class " + std::to_string(cls);
    OGR_F_SetFieldString(g, f_name, name.c_str());
    OGR_F_SetFieldDouble(g, f_area, OGR_G_Area(written));
    OGR_F_SetGeometry(g, written);
    if (simplified) OGR_G_DestroyGeometry(simplified);
    CPLErrorReset();
    const OGRErr err = OGR_L_CreateFeature(layer, g);
    OGR_F_Destroy(g);
    if (err != OGRERR_NONE) throw Error(out_path + ": writing a polygon failed: " + gdal_error("GDAL error"));
    ++report.features;
    if (cls >= 0 && cls < 256) ++report.per_class[cls];
  }
  if (in_transaction && GDALDatasetCommitTransaction(out.ds) != OGRERR_NONE)
    throw Error(out_path + ": writing the polygons failed: " + gdal_error("GDAL error"));
  out.close(out_path);

  // Move every file of the finished dataset into place; the main file last, so a
  // Shapefile never looks complete with a sidecar still missing.
  const std::string final_prefix = stem + ".";
  if (driver_name == "ESRI Shapefile")
    for (const char* ext : {"shp", "shx", "dbf", "prj", "cpg", "qix", "sbn", "sbx"}) {
      std::error_code ec;
      fs::remove(dir / (final_prefix + ext), ec);  // sidecars of an earlier output would mismatch
    }
  auto files = files_with_prefix(dir, out.prefix);
  std::stable_partition(files.begin(), files.end(), [&](const fs::path& p) { return p.string() != tmp_path; });
  for (const auto& p : files) {
    const std::string rest = p.filename().string().substr(out.prefix.size());
    std::error_code ec;
    fs::rename(p, dir / (final_prefix + rest), ec);
    if (ec) throw Error(out_path + ": cannot move the finished file into place: " + ec.message());
  }
  out.keep = true;
  if (progress) progress(1.0);
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

}  // namespace tessera::io
