#pragma once
// Percentile Hausdorff distance (HD95 by default) between a predicted and a true label map,
// in physical units, 2-D and 3-D. ITK does the work (edges with BinaryContourImageFilter,
// exact Euclidean distance maps with SignedMaurerDistanceMapImageFilter, image spacing on);
// ITK types stay in io/src.
//
// Convention — the one of MONAI's compute_hausdorff_distance(percentile=p, directed=False):
//  * the surface of a mask is its edge voxels: voxels of the class with at least one
//    face-neighbour (4-connectivity in 2-D, 6 in 3-D) not of the class; outside the image
//    counts as "not of the class" (scipy binary_erosion with border_value 0, as MONAI);
//  * d(a, B) is the Euclidean distance, spacing applied, from the centre of edge voxel a to
//    the nearest edge-voxel centre of B (0 when a is itself an edge voxel of B);
//  * the directed distance h_p(A→B) is the p-th percentile of {d(a, B) : a ∈ edges(A)},
//    linear interpolation between order statistics (numpy.percentile's default);
//  * HD_p = max(h_p(pred→truth), h_p(truth→pred)) (HausdorffPooling::kMaxOfDirected).
//    This is NOT the percentile of the pooled distances of both directions; that variant
//    is available as HausdorffPooling::kPooled. For p = 100 both are the classical
//    Hausdorff distance between the two surfaces.
//  * Empty masks (MONAI's values): class absent from both → NaN; absent from exactly one →
//    +infinity.
#include <cstdint>
#include <string>
#include <vector>

#include "tessera/core/geometry.hpp"
#include "tessera/core/image_source.hpp"

namespace tessera::io {

enum class HausdorffPooling {
  kMaxOfDirected,  ///< max of the two directed percentiles (MONAI, the default)
  kPooled,         ///< percentile of the union of both directions' distances
};

struct HausdorffOptions {
  double percentile = 95;  ///< p in [0, 100]; 100 is the classical Hausdorff distance
  HausdorffPooling pooling = HausdorffPooling::kMaxOfDirected;

  HausdorffOptions& with_percentile(double v) { percentile = v; return *this; }
  HausdorffOptions& with_pooling(HausdorffPooling v) { pooling = v; return *this; }
  /// Throws tessera::Error naming the bad field.
  void validate() const;
};

/// Size of one pixel/voxel along each axis, in Block axis order ((y, x) or (z, y, x)).
struct GridSpacing {
  std::vector<double> step;
  std::string unit;  ///< "mm" (volumes), the CRS unit such as "metre" or "degree", or "pixel"
};

/// Rasters: from the geotransform (|column vector|, |row vector|; the CRS's unit, "pixel"
/// without a geotransform). A geographic CRS gives degrees, which are not isotropic on the
/// ground: the distance is then in degrees of the raster grid. Volumes: ITK spacing, mm.
GridSpacing grid_spacing(const ImageInfo& info);

/// HD_p of `class_id` between two label maps of shape (1, y, x) or (1, z, y, x) (Block layout,
/// the same shape). `spacing` has one positive entry per spatial axis, Block axis order.
/// Cost: a distance map over the bounding box of the two masks (one voxel wider), twice.
/// Throws tessera::Error on mismatched shapes, bad spacing or options.
double hausdorff_distance(const Block<uint8_t>& prediction, const Block<uint8_t>& truth, int class_id,
                          const std::vector<double>& spacing, const HausdorffOptions& options);
/// The same with the default pooling and the given percentile.
double hausdorff_distance(const Block<uint8_t>& prediction, const Block<uint8_t>& truth, int class_id,
                          const std::vector<double>& spacing, double percentile = 95);

/// numpy.percentile(values, p) with linear interpolation; NaN for no values. Reorders `values`.
double percentile_linear(std::vector<double>& values, double p);

}  // namespace tessera::io
