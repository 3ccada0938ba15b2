// Label raster → polygons (vectorize_labels), in steps: open the labels with a mask of the
// classes to keep, polygonize into a scratch GeoPackage, copy the polygons kept (filtered,
// simplified, named, measured) into the staged output, commit every part of it.
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

#include "gdal_error.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/image_source.hpp"
#include "tessera/io/raster.hpp"
#include "tessera/run/staged_file.hpp"

namespace tessera::io {
namespace {

namespace fs = std::filesystem;
using detail::gdal_error;

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

// Closes a GDAL dataset and, unless kept, removes the files "<dir>/<prefix>…" (a scratch
// file or an unfinished output with every sidecar). Not copyable.
struct DatasetFiles {
  GDALDatasetH ds = nullptr;
  fs::path dir;
  std::string prefix;  // "<stem>." of every file belonging to the dataset; empty: none
  bool keep = true;

  DatasetFiles() = default;
  DatasetFiles(fs::path dir_, std::string prefix_) : dir(std::move(dir_)), prefix(std::move(prefix_)), keep(false) {}
  DatasetFiles(const DatasetFiles&) = delete;
  DatasetFiles& operator=(const DatasetFiles&) = delete;
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
    if (CPLGetLastErrorType() >= CE_Failure) throw Error(target + ": finishing the file failed: " + gdal_error());
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

// The labels to polygonize: band 1 of a one-band Byte raster, the mask of where polygons
// may form (not nodata, not background unless asked) and the raster's CRS (may be null).
class LabelRaster {
 public:
  LabelRaster(const std::string& path, bool background) {
    if (!fs::exists(path)) throw Error(path + ": no such file");
    CPLErrorReset();
    labels_.ds = GDALOpenEx(path.c_str(), GDAL_OF_RASTER | GDAL_OF_READONLY, nullptr, nullptr, nullptr);
    if (!labels_.ds) throw Error(path + ": cannot open as a raster: " + gdal_error("not a recognised format"));
    if (GDALGetRasterCount(labels_.ds) != 1)
      throw Error(path + ": a label raster has one band, this has " + std::to_string(GDALGetRasterCount(labels_.ds)));
    band_ = GDALGetRasterBand(labels_.ds, 1);
    if (GDALGetRasterDataType(band_) != GDT_Byte)
      throw Error(path + ": labels must be Byte (class ids 0-254), not " +
                  GDALGetDataTypeName(GDALGetRasterDataType(band_)));
    open_mask(path, background);
    if (const char* wkt = GDALGetProjectionRef(labels_.ds); wkt && *wkt) {
      srs_ = OSRNewSpatialReference(wkt);
      if (srs_) OSRSetAxisMappingStrategy(srs_, OAMS_TRADITIONAL_GIS_ORDER);
    }
  }
  ~LabelRaster() {
    if (srs_) OSRRelease(srs_);
  }
  LabelRaster(const LabelRaster&) = delete;
  LabelRaster& operator=(const LabelRaster&) = delete;

  GDALRasterBandH band() const { return band_; }
  GDALRasterBandH mask() const { return GDALGetRasterBand(mask_.ds, 1); }
  OGRSpatialReferenceH srs() const { return srs_; }

 private:
  void open_mask(const std::string& path, bool background) {
    std::vector<bool> keep(256, true);
    keep[kNoDataLabel] = false;
    keep[0] = background;
    int has_nodata = 0;
    const double nodata = GDALGetRasterNoDataValue(band_, &has_nodata);
    if (has_nodata && nodata >= 0 && nodata <= 255 && nodata == std::floor(nodata)) keep[int(nodata)] = false;
    const std::string vrt = mask_vrt(fs::absolute(path).string(), GDALGetRasterXSize(labels_.ds),
                                     GDALGetRasterYSize(labels_.ds), keep);
    CPLErrorReset();
    mask_.ds = GDALOpen(vrt.c_str(), GA_ReadOnly);
    if (!mask_.ds) throw Error(path + ": cannot build the polygon mask: " + gdal_error());
  }

  DatasetFiles labels_, mask_;
  GDALRasterBandH band_ = nullptr;
  OGRSpatialReferenceH srs_ = nullptr;
};

// Every polygon of the labels, in a scratch GeoPackage beside the target
// ("<stem>.scratch-<pid>.gpkg", removed on destruction): layer "raw" with class_id only,
// no spatial index, written in one transaction. Reports progress 0 … 0.8.
class ScratchPolygons {
 public:
  ScratchPolygons(const LabelRaster& labels, const std::string& label_path, const std::string& out_path,
                  const std::function<void(double)>& progress)
      : files_(fs::path(out_path).parent_path(),
               fs::path(out_path).stem().string() + ".scratch-" + std::to_string(::getpid()) + ".") {
    const std::string path = (files_.dir / (files_.prefix + "gpkg")).string();
    CPLErrorReset();
    files_.ds = GDALCreate(GDALGetDriverByName("GPKG"), path.c_str(), 0, 0, 0, GDT_Unknown, nullptr);
    if (!files_.ds) throw Error(out_path + ": cannot create a scratch file beside it: " + gdal_error());
    const char* layer_options[] = {"SPATIAL_INDEX=NO", nullptr};
    raw_ = GDALDatasetCreateLayer(files_.ds, "raw", labels.srs(), wkbPolygon, const_cast<char**>(layer_options));
    if (!raw_) throw Error(out_path + ": cannot create a scratch layer: " + gdal_error());
    OGRFieldDefnH fd = OGR_Fld_Create("class_id", OFTInteger);
    OGR_L_CreateField(raw_, fd, TRUE);
    OGR_Fld_Destroy(fd);
    Progress polygonize_progress{&progress, 0.0, 0.8};
    GDALDatasetStartTransaction(files_.ds, FALSE);
    CPLErrorReset();
    if (GDALPolygonize(labels.band(), labels.mask(), raw_, 0, nullptr, gdal_progress, &polygonize_progress) != CE_None)
      throw Error(label_path + ": polygonizing failed: " + gdal_error());
    if (GDALDatasetCommitTransaction(files_.ds) != OGRERR_NONE)
      throw Error(out_path + ": writing the scratch polygons failed: " + gdal_error());
  }

  OGRLayerH layer() const { return raw_; }

 private:
  DatasetFiles files_;
  OGRLayerH raw_ = nullptr;
};

// The output dataset, written under `staged`'s temporary name: layer "labels" with fields
// class_id, class_name and area. Every part of it (a Shapefile's sidecars too) shares the
// staged name's stem; commit() moves them all into place, the main file last, so a
// Shapefile never looks complete with a sidecar still missing. Uncommitted parts are removed.
class PolygonOutput {
 public:
  PolygonOutput(StagedFile& staged, const std::string& driver_name, OGRSpatialReferenceH srs)
      : staged_(staged),
        parts_(fs::path(staged.path()).parent_path(), fs::path(staged.path()).stem().string() + "."),
        driver_name_(driver_name) {
    const std::string& out_path = staged.final_path();
    GDALDriverH driver = GDALGetDriverByName(driver_name.c_str());
    if (!driver) throw Error(out_path + ": this GDAL has no " + driver_name + " driver");
    CPLErrorReset();
    parts_.ds = GDALCreate(driver, staged.path().c_str(), 0, 0, 0, GDT_Unknown, nullptr);
    if (!parts_.ds) throw Error(out_path + ": cannot create: " + gdal_error());
    layer_ = GDALDatasetCreateLayer(parts_.ds, "labels", srs, wkbPolygon, nullptr);
    if (!layer_) throw Error(out_path + ": cannot create the layer: " + gdal_error());
    const std::pair<const char*, OGRFieldType> fields[] = {
        {"class_id", OFTInteger}, {"class_name", OFTString}, {"area", OFTReal}};
    for (const auto& [name, type] : fields) {
      OGRFieldDefnH fd = OGR_Fld_Create(name, type);
      const OGRErr err = OGR_L_CreateField(layer_, fd, TRUE);
      OGR_Fld_Destroy(fd);
      if (err != OGRERR_NONE) throw Error(out_path + ": cannot create field " + name + ": " + gdal_error());
    }
    defn_ = OGR_L_GetLayerDefn(layer_);
    f_id_ = OGR_FD_GetFieldIndex(defn_, "class_id");
    f_name_ = OGR_FD_GetFieldIndex(defn_, "class_name");
    f_area_ = OGR_FD_GetFieldIndex(defn_, "area");
    in_transaction_ = GDALDatasetStartTransaction(parts_.ds, FALSE) == OGRERR_NONE;
  }

  // Writes one polygon; `geometry` stays the caller's.
  void add(int class_id, const std::string& class_name, OGRGeometryH geometry) {
    OGRFeatureH g = OGR_F_Create(defn_);
    OGR_F_SetFieldInteger(g, f_id_, class_id);
    OGR_F_SetFieldString(g, f_name_, class_name.c_str());
    OGR_F_SetFieldDouble(g, f_area_, OGR_G_Area(geometry));
    OGR_F_SetGeometry(g, geometry);
    CPLErrorReset();
    const OGRErr err = OGR_L_CreateFeature(layer_, g);
    OGR_F_Destroy(g);
    if (err != OGRERR_NONE) throw Error(staged_.final_path() + ": writing a polygon failed: " + gdal_error());
  }

  // Ends the transaction, closes the dataset, and moves its parts to their final names.
  void commit() {
    const std::string& out_path = staged_.final_path();
    if (in_transaction_ && GDALDatasetCommitTransaction(parts_.ds) != OGRERR_NONE)
      throw Error(out_path + ": writing the polygons failed: " + gdal_error());
    parts_.close(out_path);
    const fs::path target(out_path);
    const fs::path dir = target.parent_path();
    const std::string final_prefix = target.stem().string() + ".";
    if (driver_name_ == "ESRI Shapefile")
      for (const char* ext : {"shp", "shx", "dbf", "prj", "cpg", "qix", "sbn", "sbx"}) {
        std::error_code ec;
        fs::remove(dir / (final_prefix + ext), ec);  // sidecars of an earlier output would mismatch
      }
    const fs::path main_file = fs::path(staged_.path()).filename();
    for (const auto& p : files_with_prefix(parts_.dir, parts_.prefix)) {
      if (p.filename() == main_file) continue;
      std::error_code ec;
      fs::rename(p, dir / (final_prefix + p.filename().string().substr(parts_.prefix.size())), ec);
      if (ec) throw Error(out_path + ": cannot move the finished file into place: " + ec.message());
    }
    staged_.commit();
    parts_.keep = true;
  }

 private:
  StagedFile& staged_;
  DatasetFiles parts_;
  std::string driver_name_;
  OGRLayerH layer_ = nullptr;
  OGRFeatureDefnH defn_ = nullptr;
  int f_id_ = -1, f_name_ = -1, f_area_ = -1;
  bool in_transaction_ = false;
};

// `geometry` simplified with `tolerance`, topology preserved; null when that leaves nothing.
// The caller owns the result.
OGRGeometryH simplified(OGRGeometryH geometry, double tolerance) {
  OGRGeometryH s = OGR_G_SimplifyPreserveTopology(geometry, tolerance);
  if (s && OGR_G_IsEmpty(s)) {
    OGR_G_DestroyGeometry(s);
    return nullptr;
  }
  return s;
}

std::string class_name(const VectorizeOptions& options, int class_id) {
  return class_id >= 0 && class_id < int(options.class_names.size()) ? options.class_names[class_id]
                                                                       : "class " + std::to_string(class_id);
}

// Copies the scratch polygons that are large enough into `out`, simplified and named, and
// counts them in `report`. Reports progress 0.8 … 1 (every 1024 polygons).
void copy_polygons(OGRLayerH raw, PolygonOutput& out, const VectorizeOptions& options, VectorizeReport& report) {
  const std::function<void(double)>& progress = options.progress;
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
    OGRGeometryH simple = options.simplify > 0 ? simplified(geom, options.simplify) : nullptr;
    struct GeometryGuard {
      OGRGeometryH h;
      ~GeometryGuard() { if (h) OGR_G_DestroyGeometry(h); }
    } simple_guard{simple};
    out.add(cls, class_name(options, cls), simple ? simple : geom);
    ++report.features;
    if (cls >= 0 && cls < 256) ++report.per_class[cls];
  }
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
  ensure_all_gdal_drivers();
  if (options.simplify > 0 && !OGRGetGEOSVersion(nullptr, nullptr, nullptr))
    throw Error(out_path + ": --simplify needs GDAL built with GEOS, which this GDAL is not");

  const LabelRaster labels(label_raster, options.background);
  StagedFile staged(out_path, fs::path(out_path).extension().string());  // creates the folder
  const ScratchPolygons scratch(labels, label_raster, out_path, options.progress);
  PolygonOutput out(staged, driver_name, labels.srs());
  VectorizeReport report;
  copy_polygons(scratch.layer(), out, options, report);
  out.commit();
  if (options.progress) options.progress(1.0);
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

}  // namespace tessera::io
