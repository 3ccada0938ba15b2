#pragma once
// GDAL rasters behind Tessera's ImageSource / LabelSink, and the reads a viewer needs
// (reduced-resolution windows from the file's overviews, band details, one pixel, overview
// building, geographic coordinates). GDAL types stay in io/src. Reads are windowed (never the
// whole scene); the GDAL block cache is capped so memory is bounded by the window.
// Thread safety: one RasterReader per thread (a reader owns one GDAL dataset handle).
#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tessera/core/image_source.hpp"
#include "tessera/io/label_style.hpp"

namespace tessera::io {

/// How a reduced-resolution read combines the full-resolution pixels of an output pixel:
/// `nearest` for label rasters (class ids are never averaged), `average` for images.
enum class Resampling { nearest, average };

/// What a viewer shows about a raster besides ImageInfo. Bands here are the file's bands,
/// 1-based, alpha bands included (ImageInfo counts data bands only).
struct RasterDescription {
  int bands = 0;                              ///< every band of the file
  std::vector<std::optional<double>> nodata;  ///< per file band
  std::vector<std::string> band_names;        ///< descriptions, may be empty strings
  int overview_count = 0;                     ///< of band 1
  std::array<std::string, 256> class_names;   ///< CLASS_<id> metadata, else band 1's categories
  std::optional<std::array<uint32_t, 256>> color_table;  ///< band 1's, 0xFFRRGGBB (QRgb order)
};

/// Opens a raster with GDAL. Throws tessera::Error("<path>: <problem>") if it cannot.
class RasterReader final : public ImageSource {
 public:
  explicit RasterReader(const std::string& path);
  ~RasterReader() override;
  RasterReader(const RasterReader&) = delete;
  RasterReader& operator=(const RasterReader&) = delete;

  const ImageInfo& info() const override { return info_; }
  Block<float> read(const Box& box) const override;
  /// Approximate per-band mean and standard deviation (from overviews or a sample).
  Normalization band_statistics() const;
  /// Reads the whole raster resampled to at most max_side on its longer side (for previews).
  /// `nearest` for label rasters (no averaging of class ids).
  Block<float> read_preview(int64_t max_side, bool nearest = false) const;

  /// Every band of the file (alpha included): names, nodata, overviews, classes, colours.
  RasterDescription describe() const;
  /// Reads the full-resolution `window` (y, x) resampled to `size` (rows, columns) for the
  /// 1-based file `bands`; GDAL reads the file's overviews when they cover the reduction.
  /// Values equal to a band's nodata become NaN. Layout (bands, rows, columns).
  /// Throws tessera::Error("<path>: ...") when the window is outside or the read fails.
  Block<float> read_resampled(const Box& window, const Index& size, const std::vector<int>& bands,
                              Resampling how) const;
  /// Band 1 of `window` resampled to `size` by nearest neighbour as label ids (GDAL clamps
  /// other types to 0..255). Layout (1, rows, columns).
  Block<uint8_t> read_labels_resampled(const Box& window, const Index& size) const;
  /// Every band of the file at full-resolution pixel (row, column); empty outside the raster.
  std::vector<double> read_pixel(int64_t row, int64_t column) const;
  /// Bytes of one row of the file's blocks across its width, every band: what a reader of
  /// successive rows needs decoded in GDAL's block cache. `columns` > 0: of the blocks a
  /// window that many columns wide can span (a stream's column group).
  int64_t block_row_bytes(int64_t columns = 0) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  ImageInfo info_;
};

struct LabelRasterOptions {
  std::string path;           ///< final output path (GeoTIFF; ".cog.tif": a COG)
  Index extent;               ///< (height, width)
  Georeference geo;           ///< copied from the input
  static constexpr int kDefaultBlock = 256;
  int block = kDefaultBlock;  ///< internal tile size
  std::string compress = "DEFLATE";
  LabelStyle style;           ///< class names, attribute table, COG, .qml (tessera/io/label_style.hpp)
  LabelRasterOptions(std::string path_, Index extent_, Georeference geo_)
      : path(std::move(path_)), extent(std::move(extent_)), geo(std::move(geo_)) {}
  LabelRasterOptions& with_style(LabelStyle v) { style = std::move(v); return *this; }

  /// A path, a 2-D extent of positive sides, a block that is a multiple of 16 (GeoTIFF tiles),
  /// a compression, a valid style. Throws tessera::Error naming the path and the field.
  void validate() const;
};

/// A tiled, compressed Byte GeoTIFF of labels, written window by window under a temporary
/// name and renamed to `path` on commit(); destroyed uncommitted, it deletes the temporary.
/// Nodata value kNoDataLabel, colour table label_color(). Unless the style is bare, commit()
/// also names the classes (CLASS_<id> metadata; category names and an attribute table whose
/// Count column is the pixels written per class, in `<path>.aux.xml`), writes the QGIS style
/// `<path minus extension>.qml`, and makes a COG when the style or the name asks for one
/// (see tessera/io/label_style.hpp). Each pixel is written once (the LabelSink contract),
/// so the counts add up the windows written. Not thread safe.
class LabelRasterWriter final : public LabelSink {
 public:
  explicit LabelRasterWriter(LabelRasterOptions options);
  ~LabelRasterWriter() override;
  void write(const Box& box, const Block<uint8_t>& labels) override;
  void commit() override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// GDAL's block cache capped at `bytes` (at least 1 MiB) while it lives, the cap before it back
/// at its end. A stream reads and writes a few rows at a time and needs only the block rows they
/// are in; the default cap keeps up to 16 MiB of blocks it has left behind.
class GdalCacheCap {
 public:
  explicit GdalCacheCap(int64_t bytes);
  ~GdalCacheCap();
  GdalCacheCap(const GdalCacheCap&) = delete;
  GdalCacheCap& operator=(const GdalCacheCap&) = delete;

 private:
  int64_t previous_;
};

/// Caps GDAL's block cache (bytes) and registers the drivers Tessera writes (GeoTIFF, COG, VRT,
/// MEM); idempotent. RasterReader falls back to every driver for other formats.
void init_gdal(int64_t cache_bytes = 16ll << 20);
/// init_gdal() with the default cap unless a cap was set already (the viewer sets a larger
/// one and keeps it while it reads); what RasterReader and the mosaic builder call.
void ensure_gdal();
/// ensure_gdal() and every driver GDAL has (GDALAllRegister), once: before opening or writing
/// files of any format a user names (vector files, mosaics' and warps' scenes, label rasters).
void ensure_all_gdal_drivers();

/// Builds external overviews of `path` (`<path>.ovr`; factors 2, 4, … while the overview's
/// longer side is >= 128 px). Throws tessera::Error("<path>: ...").
void build_overviews(const std::string& path, Resampling how);

/// Longitude/latitude (degrees) of map coordinates (x, y) in `crs_wkt`, through the CRS's
/// geographic base; nullopt without a CRS or when the transformation fails.
std::optional<std::array<double, 2>> map_to_lonlat(const std::string& crs_wkt, double x, double y);

}  // namespace tessera::io
