#pragma once
// GeoTIFF output of the synthetic scene through GDAL (GDAL stays inside scene_geotiff.cpp).
// Both files share one grid: EPSG:32633 (WGS 84 / UTM 33N), north-up, 0.5 m pixels, the
// upper-left corner at E 500000, N 5800000. Tiled 256 × 256, DEFLATE. Each file is written
// under "<path>.partial" and renamed when complete.
#include <cstdint>
#include <string>

#include "scene_layout.hpp"

namespace tessera::sample {

inline constexpr int kSceneEpsg = 32633;
inline constexpr double kSceneOriginEasting = 500000.0;
inline constexpr double kSceneOriginNorthing = 5800000.0;
inline constexpr double kScenePixelMetres = 0.5;

/// 4-band UInt16 (red, green, blue, nir), PREDICTOR=2, rendered and written in strips of
/// 256 rows. Throws tessera::Error("<path>: <problem>").
void write_scene_image(const std::string& path, const SceneLayout& layout, uint64_t seed);

/// 1-band Byte class map with a colour table and class names in the metadata; no nodata.
/// Throws tessera::Error("<path>: <problem>").
void write_scene_labels(const std::string& path, const SceneLayout& layout);

}  // namespace tessera::sample
