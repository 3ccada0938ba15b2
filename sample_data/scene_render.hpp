#pragma once
// Turns a SceneLayout into 4-band reflectance (R, G, B, NIR; reflectance × 10000 as UInt16),
// one strip of rows at a time so memory stays bounded by the strip. Each material has a
// spectrum and a noise texture; the clean image is softened by a 3 × 3 binomial point-spread
// function of the output pixels and handed to the sensor (scene_sensor.hpp), which lights it,
// adds noise and, for a target sensor, changes the band response. A coarser sensor samples the
// layout at its pixel centres (nearest layout pixel), so its point spread is wider on the
// ground. Strips are independent: rendering [0, n) in any split gives identical bytes.
#include <cstdint>
#include <vector>

#include "scene_layout.hpp"
#include "scene_sensor.hpp"

namespace tessera::sample {

/// Renders output rows [row0, row1) of the image `sensor` sees into `out`, pixel-interleaved
/// (row, column, band), resized to (row1 − row0) × width × 4 with
/// width = sensor.output_size(layout.size). `seed` selects the textures, `strip_id` the
/// sensor-noise stream; callers number their strips 0, 1, … in a fixed height so output
/// depends only on the seed.
void render_scene_rows(const SceneLayout& layout, const SceneSensor& sensor, uint64_t seed,
                       int row0, int row1, uint64_t strip_id, std::vector<uint16_t>& out);

/// The layout's labels on the sensor's grid (nearest layout pixel), width² row-major.
std::vector<uint8_t> sensor_labels(const SceneLayout& layout, const SceneSensor& sensor);

}  // namespace tessera::sample
