#include "tessera/io/rasterize.hpp"

#include <filesystem>
#include <memory>
#include <vector>

#include <gdal_priv.h>
#include <gdal_utils.h>
#include <ogrsf_frmts.h>

#include "gdal_error.hpp"
#include "tessera/core/error.hpp"
#include "tessera/io/raster.hpp"
#include "tessera/run/staged_file.hpp"

namespace tessera::io {
namespace {

// GDAL's last message in parentheses, or nothing when it has none.
std::string gdal_message() {
  const std::string m = detail::gdal_error("");
  return m.empty() ? std::string() : " (" + m + ")";
}

struct DatasetCloser {
  void operator()(GDALDataset* d) const { GDALClose(d); }
};
using Dataset = std::unique_ptr<GDALDataset, DatasetCloser>;

}  // namespace

void RasterizeOptions::validate() const {
  if (attribute.empty()) throw Error("label_attribute: must name an integer field of the polygons");
  if (background < 0 || background > 254) throw Error("background: must be in 0..254");
}

bool is_vector_path(const std::string& path) {
  std::string ext = std::filesystem::path(path).extension().string();
  for (auto& c : ext) c = char(std::tolower(static_cast<unsigned char>(c)));
  return ext == ".gpkg" || ext == ".geojson" || ext == ".json" || ext == ".shp";
}

void rasterize_polygons(const std::string& vector_path, const std::string& image, const std::string& out_path,
                        const RasterizeOptions& o) {
  o.validate();
  init_gdal();
  ensure_all_gdal_drivers();
  CPLErrorReset();
  Dataset vec(static_cast<GDALDataset*>(GDALOpenEx(vector_path.c_str(), GDAL_OF_VECTOR, nullptr, nullptr, nullptr)));
  if (!vec) throw Error(vector_path + ": not a readable vector file" + gdal_message());
  OGRLayer* layer = o.layer.empty() ? (vec->GetLayerCount() > 0 ? vec->GetLayer(0) : nullptr)
                                    : vec->GetLayerByName(o.layer.c_str());
  if (!layer) throw Error(vector_path + ": no layer " + (o.layer.empty() ? std::string("at all") : "'" + o.layer + "'"));
  const int field = layer->GetLayerDefn()->GetFieldIndex(o.attribute.c_str());
  if (field < 0) throw Error(vector_path + ": layer '" + layer->GetName() + "' has no attribute '" + o.attribute + "'");
  layer->ResetReading();
  for (OGRFeature* f; (f = layer->GetNextFeature()) != nullptr;) {
    const int64_t v = f->GetFieldAsInteger64(field);
    const int64_t fid = f->GetFID();
    OGRFeature::DestroyFeature(f);
    if (v < 0 || v > 254)
      throw Error(vector_path + ": feature " + std::to_string(fid) + " has " + o.attribute + " = " +
                  std::to_string(v) + ", outside the class ids 0..254");
  }
  layer->ResetReading();

  Dataset ref(static_cast<GDALDataset*>(GDALOpenEx(image.c_str(), GDAL_OF_RASTER, nullptr, nullptr, nullptr)));
  if (!ref) throw Error(image + ": not a readable raster" + gdal_message());
  double gt[6];
  if (ref->GetGeoTransform(gt) != CE_None) throw Error(image + ": has no geotransform to rasterize polygons onto");

  StagedFile staged(out_path, ".tif");  // removed unless committed
  {
    GDALDriver* gtiff = GetGDALDriverManager()->GetDriverByName("GTiff");
    char** co = nullptr;
    co = CSLSetNameValue(co, "TILED", "YES");
    co = CSLSetNameValue(co, "COMPRESS", "DEFLATE");
    Dataset out(gtiff->Create(staged.path().c_str(), ref->GetRasterXSize(), ref->GetRasterYSize(), 1, GDT_Byte, co));
    CSLDestroy(co);
    if (!out) throw Error(out_path + ": cannot create" + gdal_message());
    out->SetGeoTransform(gt);
    out->SetProjection(ref->GetProjectionRef());
    out->GetRasterBand(1)->Fill(o.background);
    std::vector<std::string> args{"-a", o.attribute, "-l", layer->GetName()};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    GDALRasterizeOptions* ro = GDALRasterizeOptionsNew(argv.data(), nullptr);
    int failed = 0;
    GDALDatasetH src = vec.get();
    CPLErrorReset();
    GDALDatasetH done = GDALRasterize(nullptr, out.get(), src, ro, &failed);
    GDALRasterizeOptionsFree(ro);
    if (!done || failed) throw Error(vector_path + ": cannot rasterize onto " + image + gdal_message());
    out.reset();
  }
  staged.commit();
}

}  // namespace tessera::io
