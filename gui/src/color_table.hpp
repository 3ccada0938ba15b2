#pragma once
// Label colour tables with names, from the formats users already have:
//  - ITK-SNAP label description files:  IDX R G B A VIS MSH "LABEL"  (A in 0..1)
//  - 3D Slicer colour tables (.ctbl/.txt): id name R G B A
// ('#' starts a comment in both), read by io's codec (tessera/io/label_sidecars.hpp), which also
// writes them beside every label volume. GDAL colour tables and CLASS_<id> names come with the
// label raster itself (RasterPyramid). Pure parsing, no widgets.
#include <array>
#include <optional>
#include <string>

#include <QRgb>

namespace tessera::gui {

struct LabelTable {
  std::array<std::string, 256> names;
  std::array<std::optional<QRgb>, 256> colors;
  std::array<std::optional<bool>, 256> visible;  ///< ITK-SNAP's VIS, Slicer's opacity > 0
  int entries = 0;
};

/// Parses either format (detected per line: a quoted name means ITK-SNAP). Ids outside
/// 0..255 are ignored. Throws tessera::Error("<path>: line N: …") on a malformed line.
LabelTable load_label_table(const std::string& path);

/// The names, colours and visibility Tessera (or a user) wrote beside the label volume
/// `volume` for ITK-SNAP and 3D Slicer; nullopt when there is no such file.
std::optional<LabelTable> label_volume_table(const std::string& volume);

}  // namespace tessera::gui
