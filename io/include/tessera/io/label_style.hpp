#pragma once
// How a finished label raster presents its classes to GIS software, the way analysts expect:
//   * class names as GDAL category names and a raster attribute table (Value, Class_Name,
//     Red, Green, Blue, Count), in the GeoTIFF's `<file>.aux.xml` (GeoTIFF has no tag for
//     either; GDAL, QGIS and ArcGIS read the .aux.xml), plus CLASS_<id> metadata inside the
//     TIFF, which RasterReader::describe() and the viewer read;
//   * the colour table (the style's class colours, colors.hpp) and nodata kNoDataLabel, inside
//     the TIFF;
//   * optionally a Cloud-Optimized GeoTIFF (GDAL's COG driver) with internal `mode` overviews;
//   * a QGIS style sidecar `<file minus its last extension>.qml` (paletted renderer, one entry
//     per class with its name and colour), which QGIS applies when it opens the raster.
// Every file appears complete under its final name or not at all (tessera/run/staged_file.hpp);
// the raster itself is renamed last. GDAL types stay in io/src.
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "tessera/core/colors.hpp"

namespace tessera::io {

struct LabelStyle {
  std::vector<std::string> class_names;  ///< by class id; ids without a name are "class <id>"
  std::vector<Rgb> class_colors;         ///< by class id; ids without one get label_color(id)
  int classes = 0;                       ///< ids 0..classes-1 always listed; others only if present
  bool cog = false;                      ///< Cloud-Optimized GeoTIFF (also when the name ends in .cog.tif)
  std::string background = "0";          ///< "0": class 0 is background (no overlay colour, unchecked); "none"
  bool describe = true;                  ///< names, attribute table and .qml; false: a bare GeoTIFF (run tiles)

  LabelStyle& with_class_names(std::vector<std::string> v) { class_names = std::move(v); return *this; }
  LabelStyle& with_class_colors(std::vector<Rgb> v) { class_colors = std::move(v); return *this; }
  LabelStyle& with_classes(int v) { classes = v; return *this; }
  LabelStyle& with_background(std::string v) { background = std::move(v); return *this; }
  LabelStyle& with_cog(bool v) { cog = v; return *this; }

  /// A bare GeoTIFF: colour table and nodata only (what a run's tiles are).
  static LabelStyle bare() { LabelStyle s; s.describe = false; return s; }
  /// The name of class `id`: class_names[id], or "class <id>" when there is none.
  std::string name(int id) const;
  /// The colour of class `id`: class_colors[id], or label_color(id).
  Rgb color(int id) const { return class_color(class_colors, id); }
  /// Whether `id` is the background that overlays leave undrawn and viewers start unchecked.
  bool is_background(int id) const { return id == 0 && background != "none"; }
  /// Throws tessera::Error naming the bad field.
  void validate() const;
};

/// Whether `path` is written as a COG: `cog`, or the name ends in ".cog.tif" / ".cog.tiff".
bool wants_cog(const std::string& path, bool cog);

/// Where QGIS looks for the default style of `raster`: the name minus its last extension
/// plus ".qml" (labels.tif -> labels.qml, labels.cog.tif -> labels.cog.qml).
std::string qml_sidecar_path(const std::string& raster);

/// The QGIS style (QML) of a label raster: paletted renderer on band 1, one palette entry per
/// id with count or class: value, colour (style.color) and the class name as its label.
/// `present[id]`: the id occurs in the raster.
std::string qgis_label_style(const LabelStyle& style, const std::array<bool, 256>& present);

/// Replaces the finished label GeoTIFF at `path` by one with `style` (names, attribute table
/// with pixel counts read from the file, COG if asked, .qml), atomically. For labels written
/// without a style, e.g. the mosaic of a run's tiles. Throws tessera::Error("<path>: ...").
void restyle_label_raster(const std::string& path, const LabelStyle& style);

}  // namespace tessera::io
