#pragma once
// Overlay pictures for people: the image (percentile-stretched RGB for rasters; for volumes the
// middle axial, coronal and sagittal planes with a soft-tissue window, at their physical
// aspect, z upwards) with the labels blended on top, and a legend of every class's colour and
// name to the right.
#include <string>

#include "tessera/io/label_style.hpp"

namespace tessera::engine {

/// Writes a PNG of `image` with `labels` blended at `opacity` in the style's class colours
/// (its background class, class 0 unless data.background is none, and nodata clear).
/// Rasters are drawn at most `max_side` pixels on the longer side.
void write_overlay_png(const std::string& image, const std::string& labels, const std::string& png,
                       const io::LabelStyle& style = {}, double opacity = 0.5, int max_side = 2048);

}  // namespace tessera::engine
