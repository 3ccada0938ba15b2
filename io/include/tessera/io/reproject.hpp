#pragma once
// Label rasters in another map projection, and one mosaic of the label rasters of many scenes.
// Class ids are never mixed: every resampling is nearest neighbour, nodata is kNoDataLabel (255)
// in and out, and the colour table travels with the labels. Outputs appear complete under their
// final name or not at all (tessera/run/staged_file.hpp); sources are only read.
// GDAL types stay in io/src. Thread safety: distinct output paths only.
#include <optional>
#include <string>
#include <vector>

#include "tessera/io/label_style.hpp"

namespace tessera::io {

/// How warp_label_raster reprojects: the target CRS (required), its pixel size, and how the
/// result presents its classes. Units: t_srs's map units (metres for UTM and EPSG:3857).
struct WarpOptions {
  std::string t_srs;                 ///< any CRS GDAL accepts: "EPSG:3857", WKT, a PROJ string
  std::optional<double> resolution;  ///< square pixel size in t_srs units, the grid aligned to it
                                     ///< (gdalwarp -tr -tap); none: GDAL's choice (the source's detail)
  LabelStyle style;                  ///< names, attribute table, COG, .qml of the result

  explicit WarpOptions(std::string t_srs_) : t_srs(std::move(t_srs_)) {}
  WarpOptions& with_resolution(double v) { resolution = v; return *this; }
  WarpOptions& with_style(LabelStyle v) { style = std::move(v); return *this; }

  /// Throws tessera::Error naming the bad field (t_srs as check_target_srs words it).
  void validate() const;
};

/// Throws tessera::Error("--t-srs <value>: not a coordinate reference system GDAL knows (<why>)")
/// unless GDAL can read `t_srs` as a CRS (EPSG code, WKT, PROJ string, a .prj file ...).
void check_target_srs(const std::string& t_srs);

/// Writes the label GeoTIFF `source` warped to o.t_srs at `target`: nearest neighbour, nodata
/// kNoDataLabel in and out (outside the source's footprint too), the source's colour table,
/// then finished as o.style asks (category names, attribute table with the warped pixel counts,
/// COG when asked or named ".cog.tif", .qml). Atomic; `source` is only read. Throws
/// tessera::Error naming the file (missing source, not a one-band Byte raster, no CRS, bad option).
void warp_label_raster(const std::string& source, const std::string& target, const WarpOptions& o);

/// The CRS of the raster at `path` as "<authority>:<code>" (e.g. "EPSG:32633") when GDAL can
/// name one, else its WKT on one line; empty when the raster has no CRS. For messages and
/// checks. Throws tessera::Error("<path>: ...") when the raster cannot be opened.
std::string raster_crs_name(const std::string& path);

/// Writes one mosaic of the finished label rasters `labels` of many scenes at `mosaic`:
///   * ".vrt": a GDAL VRT over the scenes (union extent, the finest pixel size among them,
///     later scenes drawn over earlier ones where they have data), band 1 with the colour table
///     and `style`'s category names (style.cog does not apply). Scene paths are stored relative to the mosaic's folder,
///     so the VRT stays valid when the folder is moved together with the scenes.
///   * ".tif" / ".tiff" (".cog.tif": a COG): the same grid and pixels as the VRT, warped into
///     one GeoTIFF and finished with `style` (names, attribute table with counts, .qml).
/// All scenes must share one CRS; otherwise tessera::Error lists the CRSs found and says to
/// warp them to one with --t-srs. Also throws tessera::Error naming a missing or unreadable
/// scene, a scene GDAL would skip, or a mosaic name of another kind. Atomic.
void build_scene_mosaic(const std::vector<std::string>& labels, const std::string& mosaic, const LabelStyle& style);

}  // namespace tessera::io
