#pragma once
// The viewer's zoom levels over a raster. Every read goes through tessera::io::RasterReader
// (reduced-resolution windows from the file's overviews, band details, one pixel); this file
// only knows the level grid. No GDAL here.
//
// Level k is the full-resolution grid downsampled by 2^k: level size ceil(W / 2^k) ×
// ceil(H / 2^k). Pixel coordinates are (x = column, y = row), origin top-left.
// Thread safety: one RasterPyramid per thread (each owns one io::RasterReader).
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tessera/io/raster.hpp"

namespace tessera::gui {

/// GDAL's block cache while the viewer runs (pans revisit tiles; the batch tools keep 16 MiB).
inline constexpr int64_t kViewerCacheBytes = 64ll << 20;

struct RasterMeta {
  std::string path;
  int width = 0, height = 0, bands = 0;
  std::string data_type;
  std::vector<std::optional<double>> nodata;  ///< per band
  std::vector<double> geotransform;           ///< 6 GDAL terms, empty when absent
  std::string crs_wkt;
  int overview_count = 0;                     ///< of band 1
  std::vector<std::string> band_names;        ///< descriptions, may be empty strings
  std::array<std::string, 256> class_names;   ///< from CLASS_<id> metadata, may be empty
  std::string background;                     ///< LABEL_BACKGROUND: "0", "none" (class 0 a class), "" unknown
  std::optional<std::array<uint32_t, 256>> color_table;  ///< QRgb-compatible ARGB, if any
};

/// A band-major float block: `bands` planes of w × h, NaN where nodata.
struct LevelBlock {
  int w = 0, h = 0, bands = 0;
  std::vector<float> data;
};

class RasterPyramid {
 public:
  /// Throws tessera::Error("<path>: …") when the file is missing or not a raster.
  explicit RasterPyramid(const std::string& path);
  RasterPyramid(const RasterPyramid&) = delete;
  RasterPyramid& operator=(const RasterPyramid&) = delete;

  const RasterMeta& meta() const { return meta_; }
  int level_width(int level) const;
  int level_height(int level) const;
  /// Number of levels until the whole image fits into one tile of `tile` pixels.
  int level_count(int tile) const;

  /// Reads the window [x0, x0+w) × [y0, y0+h) of `level` for the given 1-based bands.
  /// `nearest` for labels, averaging otherwise. Throws tessera::Error on read failure.
  LevelBlock read(int level, int x0, int y0, int w, int h, const std::vector<int>& bands, bool nearest) const;
  /// Reads band 1 as bytes with nearest resampling (label rasters).
  std::vector<uint8_t> read_labels(int level, int x0, int y0, int w, int h) const;
  /// All band values of one full-resolution pixel.
  std::vector<double> read_pixel(int x, int y) const;

  /// Builds external overviews (factors 2, 4, … down to < 256 px), averaging, or nearest
  /// for label rasters. Throws tessera::Error on failure.
  static void build_overviews(const std::string& path, bool nearest);

 private:
  // The full-resolution window under a level window, clipped to the raster.
  Box full_window(int level, int x0, int y0, int w, int h) const;

  io::RasterReader reader_;
  RasterMeta meta_;
};

/// Per-band low/high percentiles of a block (NaN ignored), for a linear stretch.
struct Stretch {
  std::vector<float> lo, hi;
};
Stretch percentile_stretch(const LevelBlock& block, double low_pct = 2.0, double high_pct = 98.0);

/// Map coordinates of a pixel position (x, y may be fractional) through a geotransform.
std::array<double, 2> pixel_to_map(const std::vector<double>& gt, double x, double y);

}  // namespace tessera::gui
