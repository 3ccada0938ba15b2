#pragma once
// Per-class probabilities as a raster: what a GIS user thresholds or blends when the argmax
// labels are too blunt. GDAL types stay in io/src.
#include <memory>
#include <string>
#include <vector>

#include "tessera/core/image_source.hpp"

namespace tessera::io {

struct ProbabilityRasterOptions {
  std::string path;                      ///< final output path (GeoTIFF; ".cog.tif": a COG)
  Index extent;                          ///< (height, width)
  Georeference geo;                      ///< copied from the input
  int classes;                           ///< one band per class, band k+1 = class k
  std::vector<std::string> class_names;  ///< band descriptions; may be shorter than classes
  int block = 256;                       ///< internal tile size
  std::string compress = "DEFLATE";      ///< with the floating-point predictor
  bool cog = false;                      ///< Cloud-Optimized GeoTIFF, internal `average` overviews

  ProbabilityRasterOptions(std::string path_, Index extent_, Georeference geo_, int classes_)
      : path(std::move(path_)), extent(std::move(extent_)), geo(std::move(geo_)), classes(classes_) {}
  ProbabilityRasterOptions& with_class_names(std::vector<std::string> v) { class_names = std::move(v); return *this; }
  ProbabilityRasterOptions& with_block(int v) { block = v; return *this; }
  ProbabilityRasterOptions& with_cog(bool v) { cog = v; return *this; }

  /// Throws tessera::Error naming the bad field.
  void validate() const;
};

/// A tiled, compressed Float32 GeoTIFF with one band per class, written window by window
/// under a temporary name beside `path` and renamed on commit(); destroyed uncommitted, it
/// deletes the temporary. With `cog` (or a name ending in .cog.tif) commit() translates the
/// finished GeoTIFF with GDAL's COG driver (overviews averaged) before the rename. Values are probabilities in [0, 1]; pixels without data are NaN
/// (the bands' nodata value). Not thread safe: write from one thread.
class ProbabilityRasterWriter {
 public:
  explicit ProbabilityRasterWriter(ProbabilityRasterOptions options);
  ~ProbabilityRasterWriter();
  ProbabilityRasterWriter(const ProbabilityRasterWriter&) = delete;
  ProbabilityRasterWriter& operator=(const ProbabilityRasterWriter&) = delete;

  /// Writes `probs`, shape (classes, box.size[0], box.size[1]), band-sequential; box inside the raster.
  void write(const Box& box, const Block<float>& probs);
  /// Finishes the file and moves it to `path`. Throws tessera::Error naming the file.
  void commit();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessera::io
