#pragma once
// Turns a SceneLayout into 4-band reflectance (R, G, B, NIR; reflectance × 10000 as UInt16),
// one strip of rows at a time so memory stays bounded by the strip. Each material has a
// spectrum and a noise texture; the clean image is softened by a 3 × 3 binomial point-spread
// function, lit by a slight gradient and given gaussian sensor noise (σ ≈ 2 % of range).
// Strips are independent: rendering [0, n) in any split gives identical bytes.
#include <cstdint>
#include <vector>

#include "scene_layout.hpp"

namespace tessera::sample {

inline constexpr int kSceneBands = 4;

/// Renders rows [row0, row1) into `out`, pixel-interleaved (row, column, band), resized
/// to (row1 − row0) × size × 4. `strip_id` selects the sensor-noise stream; callers number
/// their strips 0, 1, … in a fixed height so output depends only on the seed.
void render_scene_rows(const SceneLayout& layout, uint64_t seed, int row0, int row1,
                       uint64_t strip_id, std::vector<uint16_t>& out);

}  // namespace tessera::sample
