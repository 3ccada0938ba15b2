#include "tessera/io/mosaic.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>

#include <cpl_error.h>
#include <cpl_vsi.h>
#include <gdal.h>
#include <gdal_utils.h>
#include <gdal_vrt.h>

#include "gdal_args.hpp"
#include "gdal_error.hpp"
#include "tessera/core/error.hpp"
#include "tessera/io/raster.hpp"

namespace tessera::io {
namespace {

using detail::exact_decimal;

// gdalbuildvrt's arguments that put the mosaic on the grid of `like`: its extent (-te) and
// pixel size (-tr), nodata kNoDataLabel in and out.
std::vector<std::string> grid_arguments(const ImageInfo& like) {
  std::vector<double> gt = like.geo.geotransform;
  if (gt.size() != 6) gt = {0, 1, 0, 0, 0, -1};
  if (gt[2] != 0 || gt[4] != 0) throw Error(like.path + ": rotated rasters cannot be mosaicked from tiles");
  const double w = double(like.extent[1]), h = double(like.extent[0]);
  const double x0 = gt[0], x1 = gt[0] + w * gt[1], y0 = gt[3], y1 = gt[3] + h * gt[5];
  const std::string nodata = std::to_string(int(kNoDataLabel));
  return {"-te",        exact_decimal(std::min(x0, x1)), exact_decimal(std::min(y0, y1)), exact_decimal(std::max(x0, x1)),
          exact_decimal(std::max(y0, y1)), "-tr", exact_decimal(std::abs(gt[1])), exact_decimal(std::abs(gt[5])),
          "-vrtnodata", nodata, "-srcnodata", nodata};
}

}  // namespace

void build_mosaic_vrt(const std::string& vrt_path, const std::vector<std::string>& tiles, const ImageInfo& like) {
  ensure_all_gdal_drivers();
  std::vector<std::string> args = grid_arguments(like);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  GDALBuildVRTOptions* options = GDALBuildVRTOptionsNew(argv.data(), nullptr);
  std::vector<const char*> names;
  for (const auto& t : tiles) names.push_back(t.c_str());
  int usage_error = 0;
  CPLErrorReset();
  GDALDatasetH vrt = GDALBuildVRT(vrt_path.c_str(), int(names.size()), nullptr, names.data(), options, &usage_error);
  GDALBuildVRTOptionsFree(options);
  if (!vrt) throw Error(vrt_path + ": cannot build the tile mosaic: " + detail::gdal_error());
  CPLErrorReset();
  GDALClose(vrt);  // writes the VRT file
  if (CPLGetLastErrorType() >= CE_Failure)
    throw Error(vrt_path + ": cannot write the tile mosaic: " + detail::gdal_error());
}

void write_repeating_vrt(const std::string& vrt_path, const std::string& source, const Index& extent) {
  ensure_all_gdal_drivers();
  TESSERA_CHECK(extent.size() == 2 && extent[0] > 0 && extent[1] > 0);
  GDALDatasetH src = GDALOpen(source.c_str(), GA_ReadOnly);
  if (!src) throw Error(source + ": " + detail::gdal_error("cannot open"));
  const int64_t rows = GDALGetRasterYSize(src), cols = GDALGetRasterXSize(src);
  GDALDatasetH vrt = GDALCreate(GDALGetDriverByName("VRT"), vrt_path.c_str(), int(extent[1]), int(extent[0]), 0,
                                GDT_Unknown, nullptr);
  if (!vrt) {
    GDALClose(src);
    throw Error(vrt_path + ": " + detail::gdal_error("cannot create a VRT"));
  }
  double gt[6];
  if (GDALGetGeoTransform(src, gt) == CE_None) GDALSetGeoTransform(vrt, gt);
  GDALSetProjection(vrt, GDALGetProjectionRef(src));
  for (int b = 1; b <= GDALGetRasterCount(src); ++b) {
    GDALRasterBandH in = GDALGetRasterBand(src, b);
    GDALAddBand(vrt, GDALGetRasterDataType(in), nullptr);
    auto out = static_cast<VRTSourcedRasterBandH>(GDALGetRasterBand(vrt, b));
    int has_nodata = 0;
    const double nodata = GDALGetRasterNoDataValue(in, &has_nodata);
    if (has_nodata) GDALSetRasterNoDataValue(out, nodata);
    for (int64_t y = 0; y < extent[0]; y += rows)
      for (int64_t x = 0; x < extent[1]; x += cols) {
        const int h = int(std::min(rows, extent[0] - y)), w = int(std::min(cols, extent[1] - x));
        VRTAddSimpleSource(out, in, 0, 0, w, h, int(x), int(y), w, h, "near", VRT_NODATA_UNSET);
      }
  }
  CPLErrorReset();
  GDALClose(vrt);  // writes the VRT file
  GDALClose(src);
  if (CPLGetLastErrorType() >= CE_Failure) throw Error(vrt_path + ": " + detail::gdal_error("cannot write the VRT"));
}

std::string memory_mosaic_path() {
  static std::atomic<int> counter{0};
  return "/vsimem/tessera-mosaic-" + std::to_string(counter++) + ".vrt";
}

void release_memory_mosaic(const std::string& path) {
  if (path.rfind("/vsimem/", 0) == 0) VSIUnlink(path.c_str());
}

}  // namespace tessera::io
