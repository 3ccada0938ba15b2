#include "tessera/io/probability_raster.hpp"

#include <limits>
#include <optional>

#include <cpl_error.h>
#include <gdal.h>

#include "gdal_error.hpp"
#include "label_output.hpp"
#include "tessera/core/error.hpp"
#include "tessera/io/label_style.hpp"
#include "tessera/io/raster.hpp"
#include "tessera/run/staged_file.hpp"

namespace tessera::io {

void ProbabilityRasterOptions::validate() const {
  if (path.empty()) throw Error("path: an output file name is required");
  if (extent.size() != 2 || extent[0] <= 0 || extent[1] <= 0)
    throw Error(path + ": extent: probabilities need a 2-D raster, got " + to_string(extent));
  if (classes < 1 || classes > 65535) throw Error(path + ": classes: must be in 1..65535, got " + std::to_string(classes));
  if (block < 16 || block % 16 != 0) throw Error(path + ": block: must be a multiple of 16, got " + std::to_string(block));
}

struct ProbabilityRasterWriter::Impl {
  std::string path;
  std::optional<StagedFile> staged;  // removes the temporary unless committed
  int classes = 0;
  bool cog = false;
  GDALDatasetH ds = nullptr;
  bool committed = false;
};

ProbabilityRasterWriter::ProbabilityRasterWriter(ProbabilityRasterOptions o) : impl_(std::make_unique<Impl>()) {
  o.validate();
  init_gdal();
  impl_->path = o.path;
  impl_->classes = o.classes;
  impl_->cog = wants_cog(o.path, o.cog);
  // Keep the extension so GDAL and people see a GeoTIFF; the name says it is unfinished.
  impl_->staged.emplace(o.path, ".tif");
  const std::string block = std::to_string(o.block);
  const std::string compress = "COMPRESS=" + o.compress;
  const std::string bx = "BLOCKXSIZE=" + block, by = "BLOCKYSIZE=" + block;
  const char* options[] = {"TILED=YES", bx.c_str(), by.c_str(), compress.c_str(), "PREDICTOR=3",
                           "INTERLEAVE=BAND", "BIGTIFF=IF_SAFER", nullptr};
  CPLErrorReset();
  impl_->ds = GDALCreate(GDALGetDriverByName("GTiff"), impl_->staged->path().c_str(), static_cast<int>(o.extent[1]),
                         static_cast<int>(o.extent[0]), o.classes, GDT_Float32, const_cast<char**>(options));
  if (!impl_->ds) throw Error(o.path + ": cannot create the probability raster: " + detail::gdal_error());
  if (!o.geo.crs_wkt.empty()) GDALSetProjection(impl_->ds, o.geo.crs_wkt.c_str());
  if (o.geo.geotransform.size() == 6) GDALSetGeoTransform(impl_->ds, const_cast<double*>(o.geo.geotransform.data()));
  for (int c = 0; c < o.classes; ++c) {
    GDALRasterBandH band = GDALGetRasterBand(impl_->ds, c + 1);
    GDALSetRasterNoDataValue(band, std::numeric_limits<double>::quiet_NaN());
    const std::string name = c < int(o.class_names.size()) ? o.class_names[c] : "class " + std::to_string(c);
    GDALSetDescription(band, name.c_str());
  }
}

ProbabilityRasterWriter::~ProbabilityRasterWriter() {
  if (impl_->ds) GDALClose(impl_->ds);  // before the staged file removes an uncommitted temporary
}

void ProbabilityRasterWriter::write(const Box& box, const Block<float>& probs) {
  TESSERA_CHECK(impl_->ds && !impl_->committed);
  TESSERA_CHECK(box.dims() == 2 && probs.shape.size() == 3 && probs.shape[0] == impl_->classes);
  TESSERA_CHECK(probs.shape[1] == box.size[0] && probs.shape[2] == box.size[1]);
  CPLErrorReset();
  if (GDALDatasetRasterIO(impl_->ds, GF_Write, int(box.origin[1]), int(box.origin[0]), int(box.size[1]),
                          int(box.size[0]), const_cast<float*>(probs.data.data()), int(box.size[1]), int(box.size[0]),
                          GDT_Float32, impl_->classes, nullptr, 0, 0, 0) != CE_None)
    throw Error(impl_->path + ": write failed in window " + to_string(box) + ": " + detail::gdal_error());
}

void ProbabilityRasterWriter::commit() {
  TESSERA_CHECK(impl_->ds && !impl_->committed);
  CPLErrorReset();
  GDALClose(impl_->ds);
  impl_->ds = nullptr;
  if (CPLGetLastErrorType() >= CE_Failure)
    throw Error(impl_->path + ": finishing the output failed: " + detail::gdal_error());
  if (impl_->cog) {
    StagedFile cog(impl_->path, ".cog.tif");  // not the GeoTIFF's own temporary name
    detail::translate_to_cog(impl_->staged->path(), cog.path(), "AVERAGE", true, impl_->path);
    cog.commit();
    impl_->staged->discard();
  } else {
    impl_->staged->commit();
  }
  impl_->committed = true;
}

}  // namespace tessera::io
