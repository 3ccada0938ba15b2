#pragma once
// Polygon labels for analysts: a vector file (GeoPackage, GeoJSON, Shapefile) whose
// polygons carry an integer class attribute, burnt onto an image's pixel grid with GDAL
// (geometries reprojected to the image's CRS when they differ). Pixels under no polygon are
// `background`; a pixel belongs to a polygon when its centre lies inside (GDAL's default).
#include <string>

namespace tessera::io {

struct RasterizeOptions {
  std::string attribute = "class_id";  ///< integer field holding the class id (0..254)
  std::string layer;                   ///< layer name; empty = the first layer
  int background = 0;                  ///< value of pixels under no polygon

  RasterizeOptions& with_attribute(std::string v) { attribute = std::move(v); return *this; }
  RasterizeOptions& with_layer(std::string v) { layer = std::move(v); return *this; }
  RasterizeOptions& with_background(int v) { background = v; return *this; }
  /// Throws tessera::Error naming the bad field.
  void validate() const;
};

/// True for the extensions rasterize_polygons reads (.gpkg, .geojson, .json, .shp).
bool is_vector_path(const std::string& path);

/// Writes a Byte GeoTIFF at `out_path` (atomically) on the grid of the 2-D raster `image`
/// with the polygons of `vector_path` burnt in. Throws tessera::Error naming the file: not
/// readable, no such layer or attribute, a class id outside 0..254.
void rasterize_polygons(const std::string& vector_path, const std::string& image, const std::string& out_path,
                        const RasterizeOptions& options = {});

}  // namespace tessera::io
