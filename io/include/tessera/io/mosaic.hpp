#pragma once
// One raster made of label tiles: a GDAL VRT that places each tile (a label GeoTIFF with its
// own geotransform, nodata kNoDataLabel) on the pixel grid of the image the tiles came from.
// Used by the run's final assembly (io/label_tiles) and by the viewer's live run mosaic;
// also a raster repeated into a larger one (write_repeating_vrt, for benchmarks).
// Where no tile lies the mosaic is nodata, so a run that is still writing tiles shows the
// finished ones. GDAL types stay in io/src. Thread safety: distinct VRT paths only.
#include <string>
#include <vector>

#include "tessera/core/image_source.hpp"

namespace tessera::io {

/// Writes a VRT at `vrt_path` (a file, or a /vsimem/ path from memory_mosaic_path()) showing
/// `tiles` on the grid of `like` (its extent and north-up geotransform; without one, the
/// pixel grid itself). The VRT has one band, nodata kNoDataLabel. Throws tessera::Error
/// naming `vrt_path` (or like.path for a rotated grid) when GDAL cannot build it.
void build_mosaic_vrt(const std::string& vrt_path, const std::vector<std::string>& tiles, const ImageInfo& like);

/// Writes a VRT at `vrt_path` of `extent` (rows, columns) that repeats the raster `source`
/// down and across from its top-left corner (the copies at the right and bottom cropped): its
/// bands, data type, nodata, geotransform and projection. For benchmarks of scene shapes the
/// sample generator does not make (a 2048-wide, 32768-tall strip of a 2048² scene); reading it
/// reads `source`. Throws tessera::Error naming the path GDAL could not open or write.
void write_repeating_vrt(const std::string& vrt_path, const std::string& source, const Index& extent);

/// A fresh in-memory path for a mosaic ("/vsimem/tessera-mosaic-<n>.vrt"), unique in the process.
std::string memory_mosaic_path();
/// Frees an in-memory mosaic once no reader has it open; ignores paths not under /vsimem/.
void release_memory_mosaic(const std::string& path);

}  // namespace tessera::io
