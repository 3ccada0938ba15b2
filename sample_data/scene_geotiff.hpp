#pragma once
// GeoTIFF output of the synthetic scene through GDAL (GDAL stays inside scene_geotiff.cpp).
// All files share one georeference: EPSG:32633 (WGS 84 / UTM 33N), north-up, the upper-left
// corner at E 500000, N 5800000; the pixel size is the sensor's (0.5 m for the source scene,
// coarser for target sensors). Tiled 256 × 256, DEFLATE. Each file is written under
// "<path>.partial" and renamed when complete.
#include <cstdint>
#include <string>
#include <vector>

#include "scene_layout.hpp"
#include "scene_sensor.hpp"

namespace tessera::sample {

inline constexpr int kSceneEpsg = 32633;
inline constexpr double kSceneOriginEasting = 500000.0;
inline constexpr double kSceneOriginNorthing = 5800000.0;

/// 4-band UInt16 (red, green, blue, nir) of `layout` as `sensor` sees it, textures and noise
/// from `seed`; PREDICTOR=2, rendered and written in strips of 256 rows. `about` goes into
/// the TESSERA_SAMPLE metadata item, a non-empty sensor.describe() into TESSERA_SENSOR.
/// Throws tessera::Error("<path>: <problem>").
void write_scene_image(const std::string& path, const SceneLayout& layout,
                       const SceneSensor& sensor, uint64_t seed, const std::string& about);

/// 1-band Byte class map, size² row-major, with a colour table and class names in the
/// metadata; no nodata. A non-empty `about` goes into the TESSERA_SAMPLE metadata item.
/// Throws tessera::Error("<path>: <problem>").
void write_scene_labels(const std::string& path, const std::vector<uint8_t>& labels, int size,
                        double pixel_metres, const std::string& about);

}  // namespace tessera::sample
