#pragma once
// The torch-free seam between file formats (io/) and the engines (core/).
// An ImageSource hands out windows of a multi-channel image in pixel/voxel index space;
// a LabelSink receives label windows and becomes a finished file only on commit().
// io/ implements both for GDAL rasters and ITK volumes; tests implement them in memory.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tessera/core/geometry.hpp"

namespace tessera {

/// Where an image sits in the world; carried unchanged from input to every output.
struct Georeference {
  // Rasters: CRS as WKT and the GDAL geotransform (rotation terms included).
  std::string crs_wkt;
  std::vector<double> geotransform;  // 6 terms, empty when the raster has none
  // Volumes: ITK geometry, axis order (x, y, z); LPS millimetres.
  std::vector<double> spacing;
  std::vector<double> origin;
  std::vector<double> direction;  // 9 terms, row-major
};

struct ImageInfo {
  std::string path;
  std::string kind;              ///< "raster" or "volume"
  std::string format;            ///< driver / IO name, e.g. "GTiff", "NIfTI", "DICOM"
  std::string data_type;         ///< e.g. "Byte", "UInt16", "Float32", "Int16"
  Index extent;                  ///< (y, x) or (z, y, x)
  int channels = 1;
  std::vector<std::optional<double>> nodata;  ///< per channel
  Georeference geo;
};

class ImageSource {
 public:
  virtual ~ImageSource() = default;
  virtual const ImageInfo& info() const = 0;
  /// Reads `box` (which must lie inside the image) as float, shape (channels, box.size...).
  /// Nodata and NaN pixels are returned as NaN; the caller masks them.
  /// Throws tessera::Error naming the file when the data cannot be read.
  virtual Block<float> read(const Box& box) const = 0;
};

class LabelSink {
 public:
  virtual ~LabelSink() = default;
  /// Writes one window of labels, shape (1, box.size...), box inside the image.
  virtual void write(const Box& box, const Block<uint8_t>& labels) = 0;
  /// Finishes the file and moves it to its final name. Without commit the output path
  /// holds nothing after the sink is destroyed.
  virtual void commit() = 0;
};

/// Per-channel affine normalisation x' = (x − offset) / scale, applied before the network.
struct Normalization {
  std::vector<float> offset;
  std::vector<float> scale;
};

/// The label value written where the input has no data.
inline constexpr uint8_t kNoDataLabel = 255;

}  // namespace tessera
