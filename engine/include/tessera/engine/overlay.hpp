#pragma once
// Overlay pictures for people: the image (percentile-stretched RGB for rasters, an axial
// slice with a soft-tissue window for volumes) with the labels blended on top.
#include <string>

namespace tessera::engine {

/// Writes a PNG of `image` with `labels` blended at `opacity` (label 0 and nodata clear).
/// Rasters are drawn at most `max_side` pixels on the longer side.
void write_overlay_png(const std::string& image, const std::string& labels, const std::string& png,
                       double opacity = 0.5, int max_side = 2048);

}  // namespace tessera::engine
