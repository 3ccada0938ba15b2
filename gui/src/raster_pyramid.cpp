#include "raster_pyramid.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <mutex>

#include <cpl_conv.h>
#include <cpl_error.h>
#include <cpl_vsi.h>
#include <gdal.h>
#include <ogr_srs_api.h>

#include "tessera/core/error.hpp"
#include "tessera/io/raster.hpp"

namespace tessera::gui {
namespace {

std::string gdal_error(const char* fallback) {
  const char* m = CPLGetLastErrorMsg();
  return (m && *m) ? std::string(m) : std::string(fallback);
}

int ceil_shift(int n, int level) { return std::max(1, (n + (1 << level) - 1) >> level); }

}  // namespace

struct RasterPyramid::Impl {
  GDALDatasetH ds = nullptr;
  ~Impl() {
    if (ds) GDALClose(ds);
  }
};

RasterPyramid::RasterPyramid(const std::string& path) : impl_(std::make_unique<Impl>()) {
  io::init_gdal(64ll << 20);
  VSIStatBufL stat;  // VSI, not std::filesystem: /vsimem/ mosaics and /vsicurl/ COGs count too
  if (VSIStatL(path.c_str(), &stat) != 0) throw Error(path + ": no such file");
  CPLErrorReset();
  impl_->ds = GDALOpenEx(path.c_str(), GDAL_OF_RASTER | GDAL_OF_READONLY, nullptr, nullptr, nullptr);
  if (!impl_->ds) throw Error(path + ": cannot open as a raster: " + gdal_error("not a recognised format"));
  meta_.path = path;
  meta_.width = GDALGetRasterXSize(impl_->ds);
  meta_.height = GDALGetRasterYSize(impl_->ds);
  meta_.bands = GDALGetRasterCount(impl_->ds);
  if (meta_.bands < 1) throw Error(path + ": has no raster bands");
  GDALRasterBandH b1 = GDALGetRasterBand(impl_->ds, 1);
  meta_.data_type = GDALGetDataTypeName(GDALGetRasterDataType(b1));
  meta_.overview_count = GDALGetOverviewCount(b1);
  for (int b = 1; b <= meta_.bands; ++b) {
    GDALRasterBandH band = GDALGetRasterBand(impl_->ds, b);
    int ok = 0;
    const double v = GDALGetRasterNoDataValue(band, &ok);
    meta_.nodata.push_back(ok ? std::optional<double>(v) : std::nullopt);
    const char* d = GDALGetDescription(band);
    meta_.band_names.emplace_back(d ? d : "");
  }
  double gt[6];
  if (GDALGetGeoTransform(impl_->ds, gt) == CE_None) meta_.geotransform.assign(gt, gt + 6);
  if (const char* wkt = GDALGetProjectionRef(impl_->ds)) meta_.crs_wkt = wkt;
  for (int i = 0; i < 256; ++i) {
    const std::string key = "CLASS_" + std::to_string(i);
    if (const char* n = GDALGetMetadataItem(impl_->ds, key.c_str(), nullptr)) meta_.class_names[size_t(i)] = n;
  }
  if (char** categories = GDALGetRasterCategoryNames(b1))  // GDAL's own class names (e.g. from .aux.xml / PAM)
    for (int i = 0; i < 256 && categories[i]; ++i)
      if (meta_.class_names[size_t(i)].empty() && *categories[i]) meta_.class_names[size_t(i)] = categories[i];
  if (GDALColorTableH ct = GDALGetRasterColorTable(b1)) {
    std::array<uint32_t, 256> table{};
    for (int i = 0; i < 256 && i < GDALGetColorEntryCount(ct); ++i) {
      const GDALColorEntry* e = GDALGetColorEntry(ct, i);
      table[size_t(i)] = (0xFFu << 24) | (uint32_t(e->c1) << 16) | (uint32_t(e->c2) << 8) | uint32_t(e->c3);
    }
    meta_.color_table = table;
  }
}

RasterPyramid::~RasterPyramid() = default;

int RasterPyramid::level_width(int level) const { return ceil_shift(meta_.width, level); }
int RasterPyramid::level_height(int level) const { return ceil_shift(meta_.height, level); }

int RasterPyramid::level_count(int tile) const {
  int levels = 1;
  while (std::max(level_width(levels - 1), level_height(levels - 1)) > tile && levels < 24) ++levels;
  return levels;
}

LevelBlock RasterPyramid::read(int level, int x0, int y0, int w, int h, const std::vector<int>& bands,
                               bool nearest) const {
  LevelBlock out;
  out.w = w;
  out.h = h;
  out.bands = static_cast<int>(bands.size());
  out.data.assign(size_t(w) * size_t(h) * bands.size(), 0.0f);
  if (w <= 0 || h <= 0) return out;
  // Full-resolution window covered by the level window, clipped to the raster.
  const int fx0 = x0 << level, fy0 = y0 << level;
  const int fw = std::min(meta_.width - fx0, w << level), fh = std::min(meta_.height - fy0, h << level);
  if (fw <= 0 || fh <= 0) throw Error(meta_.path + ": tile window outside the raster");
  GDALRasterIOExtraArg extra;
  INIT_RASTERIO_EXTRA_ARG(extra);
  extra.eResampleAlg = nearest ? GRIORA_NearestNeighbour : GRIORA_Average;
  CPLErrorReset();
  const CPLErr err = GDALDatasetRasterIOEx(impl_->ds, GF_Read, fx0, fy0, fw, fh, out.data.data(), w, h, GDT_Float32,
                                           out.bands, const_cast<int*>(bands.data()), 0, 0, 0, &extra);
  if (err != CE_None)
    throw Error(meta_.path + ": read failed at level " + std::to_string(level) + ": " +
                gdal_error("GDAL error (truncated or corrupt file?)"));
  for (int c = 0; c < out.bands; ++c) {
    const auto& nd = meta_.nodata[size_t(bands[size_t(c)] - 1)];
    if (!nd) continue;
    const float v = static_cast<float>(*nd);
    float* p = out.data.data() + size_t(c) * size_t(w) * size_t(h);
    for (size_t i = 0; i < size_t(w) * size_t(h); ++i)
      if (p[i] == v) p[i] = std::numeric_limits<float>::quiet_NaN();
  }
  return out;
}

std::vector<uint8_t> RasterPyramid::read_labels(int level, int x0, int y0, int w, int h) const {
  std::vector<uint8_t> out(size_t(std::max(w, 0)) * size_t(std::max(h, 0)), 0);
  if (out.empty()) return out;
  const int fx0 = x0 << level, fy0 = y0 << level;
  const int fw = std::min(meta_.width - fx0, w << level), fh = std::min(meta_.height - fy0, h << level);
  if (fw <= 0 || fh <= 0) throw Error(meta_.path + ": tile window outside the raster");
  GDALRasterIOExtraArg extra;
  INIT_RASTERIO_EXTRA_ARG(extra);
  extra.eResampleAlg = GRIORA_NearestNeighbour;
  CPLErrorReset();
  if (GDALRasterIOEx(GDALGetRasterBand(impl_->ds, 1), GF_Read, fx0, fy0, fw, fh, out.data(), w, h, GDT_Byte, 0, 0,
                     &extra) != CE_None)
    throw Error(meta_.path + ": label read failed at level " + std::to_string(level) + ": " +
                gdal_error("GDAL error (truncated or corrupt file?)"));
  return out;
}

std::vector<double> RasterPyramid::read_pixel(int x, int y) const {
  std::vector<double> v(size_t(meta_.bands), 0.0);
  if (x < 0 || y < 0 || x >= meta_.width || y >= meta_.height) return {};
  CPLErrorReset();
  if (GDALDatasetRasterIO(impl_->ds, GF_Read, x, y, 1, 1, v.data(), 1, 1, GDT_Float64, meta_.bands, nullptr, 0, 0,
                          0) != CE_None)
    throw Error(meta_.path + ": pixel read failed: " + gdal_error("GDAL error"));
  return v;
}

void RasterPyramid::build_overviews(const std::string& path, bool nearest) {
  io::init_gdal(64ll << 20);
  CPLErrorReset();
  GDALDatasetH ds = GDALOpen(path.c_str(), GA_ReadOnly);  // read-only: GDAL writes an external .ovr
  if (!ds) throw Error(path + ": cannot open to build overviews: " + gdal_error("GDAL error"));
  std::vector<int> factors;
  for (int f = 2; std::max(GDALGetRasterXSize(ds), GDALGetRasterYSize(ds)) / f >= 128; f *= 2) factors.push_back(f);
  CPLErr err = CE_None;
  if (!factors.empty())
    err = GDALBuildOverviews(ds, nearest ? "NEAREST" : "AVERAGE", int(factors.size()), factors.data(), 0, nullptr,
                             nullptr, nullptr);
  GDALClose(ds);
  if (err != CE_None) throw Error(path + ": building overviews failed: " + gdal_error("GDAL error"));
}

Stretch percentile_stretch(const LevelBlock& block, double low_pct, double high_pct) {
  Stretch s;
  const size_t plane = size_t(block.w) * size_t(block.h);
  for (int c = 0; c < block.bands; ++c) {
    std::vector<float> v;
    v.reserve(plane);
    for (size_t i = 0; i < plane; ++i) {
      const float x = block.data[size_t(c) * plane + i];
      if (std::isfinite(x)) v.push_back(x);
    }
    float lo = 0, hi = 1;
    if (!v.empty()) {
      auto at = [&](double pct) {
        const size_t k = std::min(v.size() - 1, size_t(pct / 100.0 * double(v.size() - 1) + 0.5));
        std::nth_element(v.begin(), v.begin() + std::ptrdiff_t(k), v.end());
        return v[k];
      };
      lo = at(low_pct);
      hi = at(high_pct);
      if (!(hi > lo)) hi = lo + 1;
    }
    s.lo.push_back(lo);
    s.hi.push_back(hi);
  }
  return s;
}

std::array<double, 2> pixel_to_map(const std::vector<double>& gt, double x, double y) {
  if (gt.size() != 6) return {x, y};
  return {gt[0] + x * gt[1] + y * gt[2], gt[3] + x * gt[4] + y * gt[5]};
}

std::optional<std::array<double, 2>> map_to_lonlat(const std::string& crs_wkt, double mx, double my) {
  if (crs_wkt.empty()) return std::nullopt;
  OGRSpatialReferenceH src = OSRNewSpatialReference(crs_wkt.c_str());
  if (!src) return std::nullopt;
  OGRSpatialReferenceH dst = OSRCloneGeogCS(src);
  std::optional<std::array<double, 2>> out;
  if (dst) {
    OSRSetAxisMappingStrategy(src, OAMS_TRADITIONAL_GIS_ORDER);
    OSRSetAxisMappingStrategy(dst, OAMS_TRADITIONAL_GIS_ORDER);
    if (OGRCoordinateTransformationH t = OCTNewCoordinateTransformation(src, dst)) {
      double x = mx, y = my;
      if (OCTTransform(t, 1, &x, &y, nullptr)) out = std::array<double, 2>{x, y};
      OCTDestroyCoordinateTransformation(t);
    }
    OSRDestroySpatialReference(dst);
  }
  OSRDestroySpatialReference(src);
  return out;
}

}  // namespace tessera::gui
