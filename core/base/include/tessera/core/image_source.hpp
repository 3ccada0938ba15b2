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

/// How intensities become network inputs, per channel:
///   x' = (clip(x, clip_low, clip_high) − offset) / scale      (no clipping where clip_* is empty)
/// `kind` says where the numbers come from (the choice is the config's `data.normalization`,
/// stored in checkpoints so inference repeats it):
///   "affine"  offset and scale given explicitly;
///   "raster"  per-band mean and standard deviation of the image (the rasters' default);
///   "ct"      clipped to a Hounsfield window, or to the 0.5 / 99.5 percentiles of the training
///             set's foreground voxels, then z-scored with the mean and standard deviation of
///             those clipped foreground voxels — statistics of the whole training set, computed
///             once (nnU-Net's CT scheme);
///   "mr"      z-score of each image by its own mean and standard deviation (of its voxels ≠ 0
///             only when `mask`): offset and scale are empty in a checkpoint and resolved per
///             image (io::resolve_normalization) before any window is read.
/// Torch-free; plain data.
struct Normalization {
  std::vector<float> offset;
  std::vector<float> scale;
  std::string kind = "affine";
  std::vector<float> clip_low;   ///< per channel; empty = no clipping
  std::vector<float> clip_high;  ///< per channel; empty = no clipping
  bool mask = false;             ///< mr: statistics over voxels ≠ 0 (the body), not the air around it

  /// Offset and scale are known (not an "mr" description still to be resolved per image).
  bool resolved() const { return !offset.empty() && offset.size() == scale.size(); }
  bool operator==(const Normalization&) const = default;
};

/// Volumes only: the voxel grid the network runs on. Images are resampled to `spacing`
/// (x, y, z in mm, ITK axis order) before the network, and its labels back onto each input's
/// own grid (size, spacing, origin, direction) before they are written. Empty spacing: every
/// volume runs on its own grid. Interpolation names: "linear" or "nearest".
struct VolumeResampling {
  std::vector<double> spacing;
  std::string image = "linear";
  std::string labels = "nearest";
  bool enabled() const { return !spacing.empty(); }
  bool operator==(const VolumeResampling&) const = default;
};

/// The normalisation kinds above, in the order `--help` lists them.
inline const char* const kNormalizationKinds[] = {"affine", "raster", "ct", "mr"};

/// The label value written where the input has no data.
inline constexpr uint8_t kNoDataLabel = 255;

}  // namespace tessera
