#pragma once
// GDAL rasters behind Tessera's ImageSource / LabelSink. GDAL types stay in io/src.
// Reads are windowed (never the whole scene); the GDAL block cache is capped so memory is
// bounded by the window. Thread safety: one RasterReader per thread.
#include <memory>
#include <string>

#include "tessera/core/image_source.hpp"

namespace tessera::io {

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

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  ImageInfo info_;
};

struct LabelRasterOptions {
  std::string path;           ///< final output path (GeoTIFF)
  Index extent;               ///< (height, width)
  Georeference geo;           ///< copied from the input
  int block = 256;            ///< internal tile size
  std::string compress = "DEFLATE";
  LabelRasterOptions(std::string path_, Index extent_, Georeference geo_)
      : path(std::move(path_)), extent(std::move(extent_)), geo(std::move(geo_)) {}
};

/// A tiled, compressed Byte GeoTIFF of labels, written window by window under a temporary
/// name and renamed to `path` on commit(); destroyed uncommitted, it deletes the temporary.
/// Nodata value kNoDataLabel.
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

/// Caps GDAL's block cache (bytes) and registers drivers; idempotent.
void init_gdal(int64_t cache_bytes = 16ll << 20);

}  // namespace tessera::io
