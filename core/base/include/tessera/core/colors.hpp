#pragma once
// The default label colour table shared by outputs (GeoTIFF colour tables, overlay PNGs)
// and the viewer: label 0 is background, kNoDataLabel is transparent/black.
#include <array>
#include <cstdint>

namespace tessera {

using Rgb = std::array<uint8_t, 3>;

/// A distinct colour per label id (a fixed table for the first ids, then a hash).
Rgb label_color(int label);

}  // namespace tessera
