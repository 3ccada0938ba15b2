#pragma once
// Finished label tiles in a run directory (RUN/tiles/), and the mosaic made from them.
// A tile is a small label file of its inset only, georeferenced so that it sits where it
// belongs: a GeoTIFF for rasters (geotransform shifted to the inset origin), an NRRD for
// volumes (origin moved along the direction cosines). Each is written under a temporary
// name and renamed, so a killed run leaves either a whole tile or none. Rasters are
// assembled by the tile VRT of tessera/io/mosaic.hpp translated to one GeoTIFF; volumes are pasted
// into the output through the usual label sink. Thread safety: distinct files only.
#include <cstdint>
#include <string>
#include <vector>

#include "tessera/core/image_source.hpp"
#include "tessera/io/label_style.hpp"

namespace tessera::io {

/// "<dir>/tile-<index>.tif" (raster) or ".nrrd" (volume), index zero-padded to 7 digits.
std::string label_tile_path(const std::string& dir, const ImageInfo& like, int64_t index);

/// Writes labels (1, inset.size...) of `inset` of an image described by `like` to `path`, atomically.
void write_label_tile(const std::string& path, const ImageInfo& like, const Box& inset, const Block<uint8_t>& labels);

/// Whether `path` is a complete tile of `inset`: opens, decodes every pixel, has the inset's
/// size, one band and the expected georeference. Never throws for a bad file: returns false.
bool label_tile_valid(const std::string& path, const ImageInfo& like, const Box& inset);

/// Writes the mosaic of `tiles` (paths, each covering insets[i]; together they cover the image
/// once) to `output`, atomically. Rasters: also leaves `<tiles dir>/mosaic.vrt`, and the
/// output follows `style` (class names, attribute table with the mosaic's pixel counts, COG,
/// .qml) as a single process's LabelRasterWriter output does. Tiles themselves are bare.
void assemble_label_tiles(const std::vector<std::string>& tiles, const std::vector<Box>& insets,
                          const std::string& output, const ImageInfo& like, const LabelStyle& style = {});

}  // namespace tessera::io
