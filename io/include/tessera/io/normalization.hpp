#pragma once
// Modality-aware intensity normalisation (core's Normalization says what each kind means):
// statistics of a training set, computed once, and the per-image resolution that "mr" and
// "raster" need before a window is read. Reads through ImageSource; no LibTorch, no ITK.
//
// CT follows nnU-Net: the foreground (label > 0) voxels of every training case, each case
// contributing at most `max_voxels_per_image` of them (an even stride, so the result does not
// depend on thread or read order), give the 0.5 / 99.5 percentiles (or a given HU window)
// and then the mean and standard deviation of the values clipped to those bounds.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tessera/core/image_source.hpp"

namespace tessera::io {

/// Per channel, what foreground_statistics found.
struct IntensityStatistics {
  double low = 0, high = 0;  ///< clip bounds: the given window, else the 0.5 / 99.5 percentiles
  double mean = 0, std = 1;  ///< of the clipped foreground values
  int64_t voxels = 0;        ///< foreground voxels used
  int images = 0;            ///< images that had any foreground
};

struct ForegroundStatisticsOptions {
  /// Clip to this [low, high] instead of the percentiles (a Hounsfield window, e.g. −160, 240).
  std::optional<std::pair<double, double>> window;
  double low_percentile = 0.5;
  double high_percentile = 99.5;
  int64_t max_voxels_per_image = 100000;

  /// 0 <= low_percentile < high_percentile <= 100, max_voxels_per_image >= 1, a window with
  /// low < high. Throws tessera::Error naming the field.
  void validate() const;
};

/// A training image, its labels (same extent) and the box of it that trains.
struct LabelledRegion {
  const ImageSource* image = nullptr;
  const ImageSource* labels = nullptr;
  Box region;
};

/// The statistics of the voxels whose label is > 0 (not NaN), per channel, over the regions
/// (a held-back part of an image is never looked at). Throws tessera::Error naming the first
/// label file when no region has any foreground, or naming a pair whose extents differ.
std::vector<IntensityStatistics> foreground_statistics(const std::vector<LabelledRegion>& training,
                                                       const ForegroundStatisticsOptions& options = {});

/// The "ct" normalisation of those statistics: clip [low, high], offset mean, scale std.
Normalization ct_normalization(const std::vector<IntensityStatistics>& stats);

/// `spec` made concrete for `image`: "mr" gets the image's own mean and standard deviation
/// per channel (over voxels ≠ 0 when spec.mask); "raster" without numbers gets the band
/// statistics; "affine" and "ct" are returned as they are. Throws tessera::Error naming the
/// image when a channel is constant or has no finite voxel (nothing to scale by).
Normalization resolve_normalization(const Normalization& spec, const ImageSource& image);

/// Per channel, where most of an image's values lie: its 1st and 99th percentiles.
struct IntensityRange {
  double low = 0, high = 0;
};

/// The IntensityRange of every channel of `image`, from a bounded sample of its finite values:
/// a raster's preview at most 1024 px on a side (GDAL reads overviews where the file has
/// them), a volume's slices at most 32 of them, evenly spaced. A channel without a finite
/// value gets {NaN, NaN}. Throws tessera::Error naming the image when it cannot be read.
std::vector<IntensityRange> intensity_ranges(const ImageSource& image);

/// One line for logs and reports: "ct: clip [-958, 1270], mean 52.1, std 141.0".
std::string describe(const Normalization& norm);

}  // namespace tessera::io
