#pragma once
// `tessera info` as a library: what an image is and where it sits in the world (size, bands,
// type; CRS and geotransform of a raster, spacing, origin and direction of a volume in LPS
// mm); for DICOM, which series was read and how. A folder of several DICOM series is listed
// (not an error) so that one can be chosen with `series`. Torch-free.
#include "tessera/engine/image_info_options.hpp"

namespace tessera::engine {

/// The command: validate(), then the description printed as text or JSON. Throws
/// tessera::Error naming the file.
void print_image_info(const ImageInfoOptions& o);

}  // namespace tessera::engine
