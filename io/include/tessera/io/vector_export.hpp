#pragma once
// Polygons from a label raster, for GIS users (GeoPackage / GeoJSON / Shapefile).
// The whole raster is polygonized in one pass by GDAL (streaming, block by block), so a
// region spanning tile seams of a tiled inference is one polygon. Pixels are grouped by
// 4-connectivity (edge neighbours; diagonal contact does not join), polygons follow pixel
// edges exactly, holes are interior rings. Coordinates are map coordinates through the
// raster's geotransform (pixel coordinates when it has none); the layer's CRS is the raster's.
// Layer "labels", fields: class_id (integer), class_name (string), area (map units², of the
// written geometry). Written under a temporary name beside the target (Shapefile: every
// sidecar) and renamed when complete. GDAL types stay in io/src. Not thread safe with
// respect to the same output path.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace tessera::io {

struct VectorizeOptions {
  /// Names written to class_name, indexed by class id; ids beyond the list get "class <id>".
  std::vector<std::string> class_names;
  /// Polygons with a smaller area (map units², before simplification) are dropped. 0: keep all.
  double min_area = 0;
  /// Douglas–Peucker tolerance in map units, topology preserved per polygon. 0: exact pixel edges.
  double simplify = 0;
  /// Also write polygons of class 0 (background). Nodata (255 and the band's nodata) never.
  bool background = false;
  /// Called with the fraction done in [0, 1] from the calling thread; may be empty.
  std::function<void(double)> progress;

  VectorizeOptions& with_class_names(std::vector<std::string> v) { class_names = std::move(v); return *this; }
  VectorizeOptions& with_min_area(double v) { min_area = v; return *this; }
  VectorizeOptions& with_simplify(double v) { simplify = v; return *this; }
  VectorizeOptions& with_background(bool v) { background = v; return *this; }
  VectorizeOptions& with_progress(std::function<void(double)> v) { progress = std::move(v); return *this; }

  /// Throws tessera::Error naming the bad field (negative or non-finite min_area / simplify).
  void validate() const;
};

struct VectorizeReport {
  int64_t features = 0;               ///< polygons written
  int64_t dropped = 0;                ///< polygons below min_area
  std::vector<int64_t> per_class;     ///< polygons written per class id (size 256)
  double seconds = 0;
};

/// The OGR driver for an output name: .gpkg → "GPKG", .geojson/.json → "GeoJSON",
/// .shp → "ESRI Shapefile". Throws tessera::Error("<path>: …") for anything else.
std::string vector_driver_for(const std::string& out_path);

/// Polygonizes band 1 of `label_raster` (a single-band integer 2-D raster, class ids 0–254)
/// into `out_path`. Throws tessera::Error naming the file on a bad raster, an unknown
/// extension or a write failure; then nothing is left at `out_path` (nor a temporary).
VectorizeReport vectorize_labels(const std::string& label_raster, const std::string& out_path,
                                 const VectorizeOptions& options);

}  // namespace tessera::io
