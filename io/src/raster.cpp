#include "tessera/io/raster.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <mutex>

#include <cpl_conv.h>
#include <cpl_error.h>
#include <cpl_vsi.h>
#include <gdal.h>
#include <gdal_frmts.h>
#include <gdal_priv.h>
#include <ogr_srs_api.h>

#include "gdal_error.hpp"
#include "label_output.hpp"
#include "tessera/core/colors.hpp"
#include "tessera/core/error.hpp"
#include "tessera/run/staged_file.hpp"

namespace tessera::io {
namespace {

using detail::gdal_error;

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
  const std::string reason = gdal_error("GDAL reported an error (truncated or corrupt file?)");
  const std::string blocks = damaged_blocks(band, box);
  return Error(path + ": read failed in window " + to_string(box) + (blocks.empty() ? "" : ": damaged " + blocks) +
               ": " + reason);
}

std::optional<double> band_nodata(GDALRasterBandH band) {
  int ok = 0;
  const double v = GDALGetRasterNoDataValue(band, &ok);
  return ok ? std::optional<double>(v) : std::nullopt;
}

// GDAL's resampled read of `window` (y, x) into a buffer of `size` (rows, columns) of `type`.
CPLErr read_window(GDALDatasetH ds, const Box& window, const Index& size, void* out, GDALDataType type,
                   const std::vector<int>& bands, Resampling how) {
  GDALRasterIOExtraArg extra;
  INIT_RASTERIO_EXTRA_ARG(extra);
  extra.eResampleAlg = how == Resampling::nearest ? GRIORA_NearestNeighbour : GRIORA_Average;
  CPLErrorReset();
  return GDALDatasetRasterIOEx(ds, GF_Read, int(window.origin[1]), int(window.origin[0]), int(window.size[1]),
                               int(window.size[0]), out, int(size[1]), int(size[0]), type, int(bands.size()),
                               const_cast<int*>(bands.data()), 0, 0, 0, &extra);
}

std::atomic<bool> g_cache_capped{false};

}  // namespace

void init_gdal(int64_t cache_bytes) {
  static std::once_flag once;
  std::call_once(once, [&] {
    // GeoTIFF, COG, VRT and MEM: what Tessera writes and reads back. GDALAllRegister's ~200
    // drivers page in 8.8 MB of GDAL's code that a GeoTIFF never runs (8 % of a 4096² stream's
    // peak RSS); ensure_all_gdal_drivers() registers them where any format may come.
    GDALRegister_GTiff();
    GDALRegister_COG();
    GDALRegister_VRT();
    GDALRegister_MEM();
    // Never leave .aux.xml side files next to the user's data, and keep GDAL quiet:
    // errors reach the user through tessera::Error with the file name.
    CPLSetConfigOption("GDAL_PAM_ENABLED", "NO");
    CPLSetErrorHandler(CPLQuietErrorHandler);
  });
  GDALSetCacheMax64(cache_bytes);
  g_cache_capped = true;
}

void ensure_gdal() {
  if (!g_cache_capped) init_gdal();
}

void ensure_all_gdal_drivers() {
  ensure_gdal();
  static std::once_flag once;
  std::call_once(once, [] { GDALAllRegister(); });
}

GdalCacheCap::GdalCacheCap(int64_t bytes) {
  ensure_gdal();
  previous_ = GDALGetCacheMax64();
  GDALSetCacheMax64(std::max<int64_t>(bytes, int64_t{1} << 20));
}

GdalCacheCap::~GdalCacheCap() { GDALSetCacheMax64(previous_); }

struct RasterReader::Impl {
  GDALDatasetH ds = nullptr;
  std::vector<int> bands;       // data bands (1-based), alpha bands excluded
  std::vector<bool> has_mask;   // per data band: GDAL mask is not "all valid"
  ~Impl() {
    if (ds) GDALClose(ds);
  }
};

RasterReader::RasterReader(const std::string& path) : impl_(std::make_unique<Impl>()) {
  ensure_gdal();
  VSIStatBufL stat;  // VSI, not std::filesystem: /vsimem/ mosaics and /vsicurl/ COGs count too
  if (VSIStatL(path.c_str(), &stat) != 0) throw Error(path + ": no such file");
  CPLErrorReset();
  impl_->ds = GDALOpenEx(path.c_str(), GDAL_OF_RASTER | GDAL_OF_READONLY, nullptr, nullptr, nullptr);
  if (!impl_->ds) {  // not a GeoTIFF or VRT: every driver GDAL has
    ensure_all_gdal_drivers();
    CPLErrorReset();
    impl_->ds = GDALOpenEx(path.c_str(), GDAL_OF_RASTER | GDAL_OF_READONLY, nullptr, nullptr, nullptr);
  }
  if (!impl_->ds) throw Error(path + ": cannot open as a raster: " + gdal_error("not a recognised format"));
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
  for (int b : impl_->bands) info_.nodata.push_back(band_nodata(GDALGetRasterBand(impl_->ds, b)));
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
                  gdal_error("GDAL error"));
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

// The whole image at most `max_side` on its longer side, read a band of rows at a time: GDAL
// reads one band after another, so a single read of the whole image decodes every block once per
// band when the block cache (init_gdal, 16 MiB) cannot hold the image (a pixel-interleaved 4-band
// 4096² scene: 1.9 s against 0.5 s). Each band of output rows is read from its exact source
// rows (GDAL's floating-point window), so the bands add up to the one read.
Block<float> RasterReader::read_preview(int64_t max_side, bool nearest) const {
  const int64_t h = info_.extent[0], w = info_.extent[1];
  const double f = std::min(1.0, double(max_side) / double(std::max(h, w)));
  const int64_t ph = std::max<int64_t>(1, std::lround(double(h) * f)), pw = std::max<int64_t>(1, std::lround(double(w) * f));
  Block<float> out({info_.channels, ph, pw});
  int block_w = 0, block_h = 0;
  GDALGetBlockSize(GDALGetRasterBand(impl_->ds, impl_->bands.front()), &block_w, &block_h);
  const int64_t source_rows = std::max<int64_t>(block_h, 64) / std::max(block_h, 1) * std::max(block_h, 1);
  const int64_t step = std::max<int64_t>(1, source_rows * ph / h);  // output rows a read
  GDALRasterIOExtraArg extra;
  INIT_RASTERIO_EXTRA_ARG(extra);
  extra.eResampleAlg = nearest ? GRIORA_NearestNeighbour : GRIORA_Average;
  extra.bFloatingPointWindowValidity = TRUE;
  extra.dfXOff = 0;
  extra.dfXSize = double(w);
  const double rows_per_output = double(h) / double(ph);
  for (int64_t r0 = 0; r0 < ph; r0 += step) {
    const int64_t r1 = std::min(ph, r0 + step);
    extra.dfYOff = double(r0) * rows_per_output;
    extra.dfYSize = double(r1) * rows_per_output - extra.dfYOff;
    const int y0 = int(std::floor(extra.dfYOff)), y1 = std::min<int>(int(h), int(std::ceil(extra.dfYOff + extra.dfYSize)));
    CPLErrorReset();
    if (GDALDatasetRasterIOEx(impl_->ds, GF_Read, 0, y0, int(w), y1 - y0, out.data.data() + r0 * pw, int(pw),
                              int(r1 - r0), GDT_Float32, int(impl_->bands.size()), impl_->bands.data(), sizeof(float),
                              GSpacing(sizeof(float) * pw), GSpacing(sizeof(float) * pw * ph), &extra) != CE_None)
      throw Error(info_.path + ": preview read failed: " + gdal_error("GDAL error"));
  }
  return out;
}

int64_t RasterReader::block_row_bytes(int64_t columns) const {
  int64_t bytes = 0;
  for (int b = 1; b <= GDALGetRasterCount(impl_->ds); ++b) {
    GDALRasterBandH band = GDALGetRasterBand(impl_->ds, b);
    int block_w = 0, block_h = 0;
    GDALGetBlockSize(band, &block_w, &block_h);
    int64_t across = (info_.extent[1] + block_w - 1) / std::max(block_w, 1);
    if (columns > 0) across = std::min(across, (columns + block_w - 1) / std::max(block_w, 1) + 1);
    bytes += across * block_w * block_h * GDALGetDataTypeSizeBytes(GDALGetRasterDataType(band));
  }
  return bytes;
}

RasterDescription RasterReader::describe() const {
  RasterDescription d;
  d.bands = GDALGetRasterCount(impl_->ds);
  for (int b = 1; b <= d.bands; ++b) {
    GDALRasterBandH band = GDALGetRasterBand(impl_->ds, b);
    d.nodata.push_back(band_nodata(band));
    const char* name = GDALGetDescription(band);
    d.band_names.emplace_back(name ? name : "");
  }
  GDALRasterBandH b1 = GDALGetRasterBand(impl_->ds, 1);
  d.overview_count = GDALGetOverviewCount(b1);
  for (int i = 0; i < 256; ++i) {
    const std::string key = "CLASS_" + std::to_string(i);
    if (const char* n = GDALGetMetadataItem(impl_->ds, key.c_str(), nullptr)) d.class_names[size_t(i)] = n;
  }
  if (char** categories = GDALGetRasterCategoryNames(b1))  // GDAL's own class names (e.g. from .aux.xml / PAM)
    for (int i = 0; i < 256 && categories[i]; ++i)
      if (d.class_names[size_t(i)].empty() && *categories[i]) d.class_names[size_t(i)] = categories[i];
  if (GDALColorTableH ct = GDALGetRasterColorTable(b1)) {
    std::array<uint32_t, 256> table{};
    for (int i = 0; i < 256 && i < GDALGetColorEntryCount(ct); ++i) {
      const GDALColorEntry* e = GDALGetColorEntry(ct, i);
      table[size_t(i)] = (0xFFu << 24) | (uint32_t(e->c1) << 16) | (uint32_t(e->c2) << 8) | uint32_t(e->c3);
    }
    d.color_table = table;
  }
  return d;
}

Block<float> RasterReader::read_resampled(const Box& window, const Index& size, const std::vector<int>& bands,
                                          Resampling how) const {
  check_inside(info_.path, window, info_.extent);
  TESSERA_CHECK(size.size() == 2 && size[0] >= 0 && size[1] >= 0);
  Block<float> out({int64_t(bands.size()), size[0], size[1]});
  const int64_t plane = size[0] * size[1];
  if (plane == 0 || bands.empty()) return out;
  if (read_window(impl_->ds, window, size, out.data.data(), GDT_Float32, bands, how) != CE_None)
    throw Error(info_.path + ": read failed in window " + to_string(window) + " at " + std::to_string(size[0]) +
                " x " + std::to_string(size[1]) + ": " + gdal_error("GDAL error (truncated or corrupt file?)"));
  for (size_t c = 0; c < bands.size(); ++c) {
    const auto nodata = band_nodata(GDALGetRasterBand(impl_->ds, bands[c]));
    if (!nodata) continue;
    const float v = static_cast<float>(*nodata);
    float* p = out.data.data() + int64_t(c) * plane;
    for (int64_t i = 0; i < plane; ++i)
      if (p[i] == v) p[i] = std::numeric_limits<float>::quiet_NaN();
  }
  return out;
}

Block<uint8_t> RasterReader::read_labels_resampled(const Box& window, const Index& size) const {
  check_inside(info_.path, window, info_.extent);
  TESSERA_CHECK(size.size() == 2 && size[0] >= 0 && size[1] >= 0);
  Block<uint8_t> out({1, size[0], size[1]});
  if (out.data.empty()) return out;
  if (read_window(impl_->ds, window, size, out.data.data(), GDT_Byte, {1}, Resampling::nearest) != CE_None)
    throw Error(info_.path + ": label read failed in window " + to_string(window) + " at " +
                std::to_string(size[0]) + " x " + std::to_string(size[1]) + ": " +
                gdal_error("GDAL error (truncated or corrupt file?)"));
  return out;
}

std::vector<double> RasterReader::read_pixel(int64_t row, int64_t column) const {
  if (row < 0 || column < 0 || row >= info_.extent[0] || column >= info_.extent[1]) return {};
  const int bands = GDALGetRasterCount(impl_->ds);
  std::vector<double> v(size_t(bands), 0.0);
  CPLErrorReset();
  if (GDALDatasetRasterIO(impl_->ds, GF_Read, int(column), int(row), 1, 1, v.data(), 1, 1, GDT_Float64, bands,
                          nullptr, 0, 0, 0) != CE_None)
    throw Error(info_.path + ": pixel read failed: " + gdal_error("GDAL error"));
  return v;
}

void build_overviews(const std::string& path, Resampling how) {
  ensure_gdal();
  CPLErrorReset();
  GDALDatasetH ds = GDALOpen(path.c_str(), GA_ReadOnly);  // read-only: GDAL writes an external .ovr
  if (!ds) throw Error(path + ": cannot open to build overviews: " + gdal_error("GDAL error"));
  std::vector<int> factors;
  for (int f = 2; std::max(GDALGetRasterXSize(ds), GDALGetRasterYSize(ds)) / f >= 128; f *= 2) factors.push_back(f);
  CPLErr err = CE_None;
  if (!factors.empty())
    err = GDALBuildOverviews(ds, how == Resampling::nearest ? "NEAREST" : "AVERAGE", int(factors.size()),
                             factors.data(), 0, nullptr, nullptr, nullptr);
  GDALClose(ds);
  if (err != CE_None) throw Error(path + ": building overviews failed: " + gdal_error("GDAL error"));
}

std::optional<std::array<double, 2>> map_to_lonlat(const std::string& crs_wkt, double x, double y) {
  if (crs_wkt.empty()) return std::nullopt;
  OGRSpatialReferenceH src = OSRNewSpatialReference(crs_wkt.c_str());
  if (!src) return std::nullopt;
  OGRSpatialReferenceH dst = OSRCloneGeogCS(src);
  std::optional<std::array<double, 2>> out;
  if (dst) {
    OSRSetAxisMappingStrategy(src, OAMS_TRADITIONAL_GIS_ORDER);
    OSRSetAxisMappingStrategy(dst, OAMS_TRADITIONAL_GIS_ORDER);
    if (OGRCoordinateTransformationH t = OCTNewCoordinateTransformation(src, dst)) {
      double lon = x, lat = y;
      if (OCTTransform(t, 1, &lon, &lat, nullptr)) out = std::array<double, 2>{lon, lat};
      OCTDestroyCoordinateTransformation(t);
    }
    OSRDestroySpatialReference(dst);
  }
  OSRDestroySpatialReference(src);
  return out;
}

struct LabelRasterWriter::Impl {
  Impl(const std::string& path, LabelStyle s) : staged(path), style(std::move(s)) {}
  StagedFile staged;             // the GeoTIFF is written under staged.path()
  LabelStyle style;
  detail::LabelCounts counts{};  // pixels written per value
  GDALDatasetH ds = nullptr;     // closed before `staged` removes an uncommitted temporary
  ~Impl() {
    if (ds) GDALClose(ds);
  }
};

void LabelRasterOptions::validate() const {
  if (path.empty()) throw Error("label raster: no output path");
  if (extent.size() != 2 || extent[0] < 1 || extent[1] < 1)
    throw Error(path + ": a label raster needs a 2-D extent of positive sides, got " + to_string(extent));
  if (block < 16 || block % 16 != 0)
    throw Error(path + ": block must be a positive multiple of 16 (GeoTIFF tiles), got " + std::to_string(block));
  if (compress.empty()) throw Error(path + ": no compression named (e.g. DEFLATE, or NONE)");
  style.validate();
}

LabelRasterWriter::LabelRasterWriter(LabelRasterOptions o) : impl_(std::make_unique<Impl>(o.path, o.style)) {
  o.validate();
  init_gdal();
  GDALDriverH driver = GDALGetDriverByName("GTiff");
  const std::string block = std::to_string(o.block);
  const std::string compress = "COMPRESS=" + o.compress;
  const std::string bx = "BLOCKXSIZE=" + block, by = "BLOCKYSIZE=" + block;
  const char* options[] = {"TILED=YES", bx.c_str(), by.c_str(), compress.c_str(), "BIGTIFF=IF_SAFER", nullptr};
  CPLErrorReset();
  impl_->ds = GDALCreate(driver, impl_->staged.path().c_str(), static_cast<int>(o.extent[1]), static_cast<int>(o.extent[0]), 1,
                         GDT_Byte, const_cast<char**>(options));
  if (!impl_->ds) throw Error(o.path + ": cannot create output raster: " + gdal_error("GDAL error"));
  if (!o.geo.crs_wkt.empty()) GDALSetProjection(impl_->ds, o.geo.crs_wkt.c_str());
  if (o.geo.geotransform.size() == 6) GDALSetGeoTransform(impl_->ds, const_cast<double*>(o.geo.geotransform.data()));
  GDALRasterBandH band = GDALGetRasterBand(impl_->ds, 1);
  GDALSetRasterNoDataValue(band, kNoDataLabel);
  detail::set_label_colour_table(band, o.style.class_colors);
}

LabelRasterWriter::~LabelRasterWriter() = default;

namespace detail {

void set_label_colour_table(GDALRasterBandH band, const std::vector<Rgb>& colors) {
  GDALColorTableH table = GDALCreateColorTable(GPI_RGB);
  for (int i = 0; i < 256; ++i) {
    const Rgb c = i == kNoDataLabel ? Rgb{0, 0, 0} : class_color(colors, i);
    GDALColorEntry e{c[0], c[1], c[2], static_cast<short>(i == kNoDataLabel ? 0 : 255)};
    GDALSetColorEntry(table, i, &e);
  }
  GDALSetRasterColorTable(band, table);
  GDALDestroyColorTable(table);
}

}  // namespace detail

void LabelRasterWriter::write(const Box& box, const Block<uint8_t>& labels) {
  TESSERA_CHECK(impl_->ds);
  TESSERA_CHECK(labels.numel() == box.count());
  CPLErrorReset();
  if (GDALRasterIO(GDALGetRasterBand(impl_->ds, 1), GF_Write, int(box.origin[1]), int(box.origin[0]), int(box.size[1]),
                   int(box.size[0]), const_cast<uint8_t*>(labels.data.data()), int(box.size[1]), int(box.size[0]),
                   GDT_Byte, 0, 0) != CE_None)
    throw Error(impl_->staged.final_path() + ": write failed in window " + to_string(box) + ": " + gdal_error("GDAL error"));
  for (uint8_t v : labels.data) ++impl_->counts[v];
}

void LabelRasterWriter::commit() {
  TESSERA_CHECK(impl_->ds);
  CPLErrorReset();
  GDALClose(impl_->ds);
  impl_->ds = nullptr;
  if (CPLGetLastErrorType() >= CE_Failure)
    throw Error(impl_->staged.final_path() + ": finishing the output failed: " + gdal_error("GDAL error"));
  detail::publish_label_raster(impl_->staged, impl_->style, impl_->counts);
}

}  // namespace tessera::io
