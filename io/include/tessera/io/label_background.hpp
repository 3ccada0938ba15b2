#pragma once
// Whether class 0 of a label raster is the background (data.background), as Tessera records it
// in the GeoTIFF's own metadata beside the CLASS_<id> names: LABEL_BACKGROUND "0" (class 0 is
// the background: left undrawn, unchecked in the viewer) or "none" (class 0 is a class like the
// others, e.g. water). Written by the label raster writer (tessera/io/label_style.hpp), read by
// the viewer to start class 0 checked or not. GDAL stays in io/src.
#include <string>

namespace tessera::io {

/// The TIFF metadata item that says whether class 0 is the background: "0" or "none".
inline constexpr const char* kBackgroundKey = "LABEL_BACKGROUND";

/// The LABEL_BACKGROUND of the raster at `path`: "0", "none", or "" when it has none (labels
/// not written by Tessera, a run's bare tiles) or cannot be opened.
std::string label_background(const std::string& path);

}  // namespace tessera::io
