#pragma once
// Cursor readout text for rasters and volumes. Pure functions (no widgets, no I/O).
//
// Raster map coordinates are the geotransform applied to the pixel CENTRE:
//   X = gt0 + (x + 0.5)·gt1 + (y + 0.5)·gt2,  Y = gt3 + (x + 0.5)·gt4 + (y + 0.5)·gt5,
// with (x, y) the integer column and row. Longitude/latitude follow through io (OGR) when the
// raster has a CRS. Volume positions are LPS millimetres of the voxel centre:
//   p = origin + D · (i·sx, j·sy, k·sz)   (ITK convention, D row-major, axes x, y, z).
#include <array>
#include <string>
#include <vector>

#include <QString>
#include <QVector>

#include "raster_pyramid.hpp"

namespace tessera::gui {

/// Map coordinate of the centre of pixel (x, y).
std::array<double, 2> pixel_center_to_map(const std::vector<double>& gt, int x, int y);

/// Name shown for a label id: the file's class name, else "label <id>"; 255 is "nodata".
QString label_name(const std::array<std::string, 256>& names, int label);

/// "label 2 road", or "label 2" when the label has no name.
QString label_text(const std::array<std::string, 256>& names, int label);

/// "x 12  y 34 | B1 0.5 B2 … | label 2 road | E 500006.25 N 5799982.75 (EPSG…) | 15.0001°E 52.33°N".
QString format_raster_readout(const RasterMeta& meta, const std::array<std::string, 256>& names, int x, int y,
                              const QVector<double>& values, int label);

/// LPS millimetres of voxel (i, j, k) (x, y, z index).
std::array<double, 3> voxel_to_lps(const std::vector<double>& spacing, const std::vector<double>& origin,
                                   const std::vector<double>& direction, int i, int j, int k);

}  // namespace tessera::gui
