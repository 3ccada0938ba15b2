#pragma once
// What the viewer shows for a run directory (see DESIGN "Files a run leaves"):
//  - its input image (config.yaml "image:" / "input:", resolved against the working
//    directory, the run directory and its parents, and sample_data/),
//  - its stitched output RUN/labels.tif once it exists, or else
//  - a live mosaic of the finished tiles RUN/tiles/*.tif (georeferenced label GeoTIFFs),
//    as an in-memory GDAL VRT on the image's grid; areas without a tile hold nodata (255).
// Pure file logic, no widgets; GDAL stays in run_mosaic.cpp.
#include <string>
#include <vector>

namespace tessera::gui {

struct RunOutputs {
  std::string image;                ///< empty when config.yaml names none that exists
  std::string stitched;             ///< RUN/labels.tif, empty until it exists
  std::string tiles_dir;            ///< RUN/tiles, empty when absent
  std::vector<std::string> tiles;   ///< finished tiles, sorted
  std::vector<std::string> class_names;  ///< config.yaml "class_names: [a, b, …]", by label id
};

RunOutputs find_run_outputs(const std::string& run_dir);

/// Builds a VRT mosaic of `tiles` on the grid of `like_image` (same size and geotransform,
/// north-up) at a fresh /vsimem/ path, and returns that path. Throws tessera::Error.
std::string build_tile_mosaic(const std::vector<std::string>& tiles, const std::string& like_image);
/// Frees a mosaic made by build_tile_mosaic (once no reader has it open).
void release_tile_mosaic(const std::string& path);

}  // namespace tessera::gui
