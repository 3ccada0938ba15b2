#include "tessera/io/raster.hpp"

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <mutex>

#include <cpl_conv.h>
#include <cpl_error.h>
#include <cpl_vsi.h>
#include <gdal.h>
#include <gdal_priv.h>

#include "tessera/core/colors.hpp"
#include "tessera/core/error.hpp"

namespace tessera::io {
namespace {

// GDAL's last message on one line (user errors are one line), or `fallback`.
std::string last_gdal_error(const std::string& fallback) {
  const char* msg = CPLGetLastErrorMsg();
  std::string text = (msg && *msg) ? std::string(msg) : fallback;
  for (char& c : text)
    if (c == '\n' || c == '\r') c = ' ';
  return text;
}

Box check_inside(const std::string& path, const Box& box, const Index& extent) {
  if (box.dims() != 2 || !Box{{0, 0}, extent}.contains(box))
    throw Error(path + ": window " + to_string(box) + " lies outside the raster " + to_string(extent));
  return box;
}

// The tiles (or strips) of `box` in `band` that GDAL cannot read, e.g.
// "tile 3 (rows 512-1023, columns 512-1023)"; empty when every block reads.
std::string damaged_blocks(GDALRasterBandH band, const Box& box) {
  int bw = 0, bh = 0;
  GDALGetBlockSize(band, &bw, &bh);
  if (bw <= 0 || bh <= 0) return {};
  const int width = GDALGetRasterBandXSize(band), height = GDALGetRasterBandYSize(band);
  const int per_row = (width + bw - 1) / bw;
  const bool strips = bw >= width;
  std::vector<unsigned char> buffer(size_t(bw) * bh * GDALGetDataTypeSizeBytes(GDALGetRasterDataType(band)));
  std::string found;
  int count = 0;
  const int64_t y_end = box.origin[0] + box.size[0], x_end = box.origin[1] + box.size[1];
  for (int64_t by = box.origin[0] / bh; by * bh < y_end; ++by) {
    for (int64_t bx = box.origin[1] / bw; bx * bw < x_end; ++bx) {
      if (GDALReadBlock(band, int(bx), int(by), buffer.data()) == CE_None) continue;
      if (++count > 3) continue;  // name a few, count the rest
      const std::string rows = std::to_string(by * bh) + "-" + std::to_string(std::min<int64_t>(height, (by + 1) * bh) - 1);
      const std::string cols = std::to_string(bx * bw) + "-" + std::to_string(std::min<int64_t>(width, (bx + 1) * bw) - 1);
      found += (found.empty() ? "" : ", ") +
               (strips ? "strip " + std::to_string(by) + " (rows " + rows + ")"
                       : "tile " + std::to_string(by * per_row + bx) + " (rows " + rows + ", columns " + cols + ")");
    }
  }
  if (count > 3) found += " and " + std::to_string(count - 3) + " more";
  return found;
}

// The error for a failed read of `box`: the window, the damaged blocks, GDAL's reason.
Error read_error(const std::string& path, GDALRasterBandH band, const Box& box) {
  const std::string reason = last_gdal_error("GDAL reported an error (truncated or corrupt file?)");
  const std::string blocks = damaged_blocks(band, box);
  return Error(path + ": read failed in window " + to_string(box) + (blocks.empty() ? "" : ": damaged " + blocks) +
               ": " + reason);
}

}  // namespace

void init_gdal(int64_t cache_bytes) {
  static std::once_flag once;
  std::call_once(once, [&] {
    GDALAllRegister();
    // Never leave .aux.xml side files next to the user's data, and keep GDAL quiet:
    // errors reach the user through tessera::Error with the file name.
    CPLSetConfigOption("GDAL_PAM_ENABLED", "NO");
    CPLSetErrorHandler(CPLQuietErrorHandler);
  });
  GDALSetCacheMax64(cache_bytes);
}

struct RasterReader::Impl {
  GDALDatasetH ds = nullptr;
  std::vector<int> bands;       // data bands (1-based), alpha bands excluded
  std::vector<bool> has_mask;   // per data band: GDAL mask is not "all valid"
  ~Impl() {
    if (ds) GDALClose(ds);
  }
};

RasterReader::RasterReader(const std::string& path) : impl_(std::make_unique<Impl>()) {
  init_gdal();
  if (!std::filesystem::exists(path)) throw Error(path + ": no such file");
  CPLErrorReset();
  impl_->ds = GDALOpenEx(path.c_str(), GDAL_OF_RASTER | GDAL_OF_READONLY, nullptr, nullptr, nullptr);
  if (!impl_->ds) throw Error(path + ": cannot open as a raster: " + last_gdal_error("not a recognised format"));
  const int count = GDALGetRasterCount(impl_->ds);
  if (count < 1) throw Error(path + ": has no raster bands");
  for (int b = 1; b <= count; ++b) {
    GDALRasterBandH band = GDALGetRasterBand(impl_->ds, b);
    if (GDALGetRasterColorInterpretation(band) == GCI_AlphaBand && count > 1) continue;  // a mask, not data
    impl_->bands.push_back(b);
    impl_->has_mask.push_back((GDALGetMaskFlags(band) & GMF_ALL_VALID) == 0);
  }
  info_.path = path;
  info_.kind = "raster";
  info_.format = GDALGetDriverShortName(GDALGetDatasetDriver(impl_->ds));
  GDALRasterBandH first = GDALGetRasterBand(impl_->ds, impl_->bands.front());
  info_.data_type = GDALGetDataTypeName(GDALGetRasterDataType(first));
  info_.extent = {GDALGetRasterYSize(impl_->ds), GDALGetRasterXSize(impl_->ds)};
  info_.channels = static_cast<int>(impl_->bands.size());
  for (int b : impl_->bands) {
    int ok = 0;
    const double v = GDALGetRasterNoDataValue(GDALGetRasterBand(impl_->ds, b), &ok);
    info_.nodata.push_back(ok ? std::optional<double>(v) : std::nullopt);
  }
  if (const char* wkt = GDALGetProjectionRef(impl_->ds)) info_.geo.crs_wkt = wkt;
  double gt[6];
  if (GDALGetGeoTransform(impl_->ds, gt) == CE_None) info_.geo.geotransform.assign(gt, gt + 6);
}

RasterReader::~RasterReader() = default;

Block<float> RasterReader::read(const Box& box) const {
  check_inside(info_.path, box, info_.extent);
  const int h = static_cast<int>(box.size[0]), w = static_cast<int>(box.size[1]);
  const int x0 = static_cast<int>(box.origin[1]), y0 = static_cast<int>(box.origin[0]);
  Block<float> out({info_.channels, box.size[0], box.size[1]});
  const int64_t plane = int64_t{h} * w;
  if (plane == 0) return out;
  CPLErrorReset();
  const CPLErr err = GDALDatasetRasterIO(impl_->ds, GF_Read, x0, y0, w, h, out.data.data(), w, h, GDT_Float32,
                                         info_.channels, impl_->bands.data(), 0, 0, 0);
  if (err != CE_None) throw read_error(info_.path, GDALGetRasterBand(impl_->ds, impl_->bands.front()), box);
  std::vector<uint8_t> mask;
  for (int c = 0; c < info_.channels; ++c) {
    if (!impl_->has_mask[c]) continue;
    mask.resize(plane);
    GDALRasterBandH m = GDALGetMaskBand(GDALGetRasterBand(impl_->ds, impl_->bands[c]));
    if (GDALRasterIO(m, GF_Read, x0, y0, w, h, mask.data(), w, h, GDT_Byte, 0, 0) != CE_None)
      throw Error(info_.path + ": reading the nodata mask failed in window " + to_string(box) + ": " +
                  last_gdal_error("GDAL error"));
    float* p = out.data.data() + c * plane;
    for (int64_t i = 0; i < plane; ++i)
      if (mask[i] == 0) p[i] = std::numeric_limits<float>::quiet_NaN();
  }
  return out;
}

Normalization RasterReader::band_statistics() const {
  Normalization n;
  for (int b : impl_->bands) {
    double mn, mx, mean = 0, sd = 1;
    CPLErrorReset();
    if (GDALComputeRasterStatistics(GDALGetRasterBand(impl_->ds, b), TRUE, &mn, &mx, &mean, &sd, nullptr, nullptr) !=
            CE_None ||
        !std::isfinite(mean) || !std::isfinite(sd)) {
      mean = 0;  // e.g. every pixel is nodata: nothing to normalise by
      sd = 1;
    }
    n.offset.push_back(static_cast<float>(mean));
    n.scale.push_back(static_cast<float>(sd > 1e-6 ? sd : 1.0));
  }
  return n;
}

Block<float> RasterReader::read_preview(int64_t max_side, bool nearest) const {
  const int64_t h = info_.extent[0], w = info_.extent[1];
  const double f = std::min(1.0, double(max_side) / double(std::max(h, w)));
  const int ph = std::max<int>(1, int(std::lround(h * f))), pw = std::max<int>(1, int(std::lround(w * f)));
  Block<float> out({info_.channels, ph, pw});
  GDALRasterIOExtraArg extra;
  INIT_RASTERIO_EXTRA_ARG(extra);
  extra.eResampleAlg = nearest ? GRIORA_NearestNeighbour : GRIORA_Average;
  CPLErrorReset();
  if (GDALDatasetRasterIOEx(impl_->ds, GF_Read, 0, 0, int(w), int(h), out.data.data(), pw, ph, GDT_Float32,
                            info_.channels, impl_->bands.data(), 0, 0, 0, &extra) != CE_None)
    throw Error(info_.path + ": preview read failed: " + last_gdal_error("GDAL error"));
  return out;
}

struct LabelRasterWriter::Impl {
  std::string path, tmp;
  GDALDatasetH ds = nullptr;
  bool committed = false;
};

LabelRasterWriter::LabelRasterWriter(LabelRasterOptions o) : impl_(std::make_unique<Impl>()) {
  init_gdal();
  impl_->path = o.path;
  impl_->tmp = o.path + ".partial-" + std::to_string(::getpid());
  GDALDriverH driver = GDALGetDriverByName("GTiff");
  const std::string block = std::to_string(o.block);
  const std::string compress = "COMPRESS=" + o.compress;
  const std::string bx = "BLOCKXSIZE=" + block, by = "BLOCKYSIZE=" + block;
  const char* options[] = {"TILED=YES", bx.c_str(), by.c_str(), compress.c_str(), "BIGTIFF=IF_SAFER", nullptr};
  CPLErrorReset();
  impl_->ds = GDALCreate(driver, impl_->tmp.c_str(), static_cast<int>(o.extent[1]), static_cast<int>(o.extent[0]), 1,
                         GDT_Byte, const_cast<char**>(options));
  if (!impl_->ds) throw Error(o.path + ": cannot create output raster: " + last_gdal_error("GDAL error"));
  if (!o.geo.crs_wkt.empty()) GDALSetProjection(impl_->ds, o.geo.crs_wkt.c_str());
  if (o.geo.geotransform.size() == 6) GDALSetGeoTransform(impl_->ds, const_cast<double*>(o.geo.geotransform.data()));
  GDALRasterBandH band = GDALGetRasterBand(impl_->ds, 1);
  GDALSetRasterNoDataValue(band, kNoDataLabel);
  GDALColorTableH table = GDALCreateColorTable(GPI_RGB);
  for (int i = 0; i < 256; ++i) {
    const Rgb c = i == kNoDataLabel ? Rgb{0, 0, 0} : label_color(i);
    GDALColorEntry e{c[0], c[1], c[2], static_cast<short>(i == kNoDataLabel ? 0 : 255)};
    GDALSetColorEntry(table, i, &e);
  }
  GDALSetRasterColorTable(band, table);
  GDALDestroyColorTable(table);
}

LabelRasterWriter::~LabelRasterWriter() {
  if (impl_->ds) GDALClose(impl_->ds);
  if (!impl_->committed) VSIUnlink(impl_->tmp.c_str());
}

void LabelRasterWriter::write(const Box& box, const Block<uint8_t>& labels) {
  TESSERA_CHECK(impl_->ds && !impl_->committed);
  TESSERA_CHECK(labels.numel() == box.count());
  CPLErrorReset();
  if (GDALRasterIO(GDALGetRasterBand(impl_->ds, 1), GF_Write, int(box.origin[1]), int(box.origin[0]), int(box.size[1]),
                   int(box.size[0]), const_cast<uint8_t*>(labels.data.data()), int(box.size[1]), int(box.size[0]),
                   GDT_Byte, 0, 0) != CE_None)
    throw Error(impl_->path + ": write failed in window " + to_string(box) + ": " + last_gdal_error("GDAL error"));
}

void LabelRasterWriter::commit() {
  TESSERA_CHECK(impl_->ds && !impl_->committed);
  CPLErrorReset();
  GDALClose(impl_->ds);
  impl_->ds = nullptr;
  if (CPLGetLastErrorType() >= CE_Failure)
    throw Error(impl_->path + ": finishing the output failed: " + last_gdal_error("GDAL error"));
  std::error_code ec;
  std::filesystem::rename(impl_->tmp, impl_->path, ec);
  if (ec) throw Error(impl_->path + ": cannot move the finished output into place: " + ec.message());
  impl_->committed = true;
}

}  // namespace tessera::io
