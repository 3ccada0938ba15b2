#pragma once
// Chooses the reader for a path: a folder is a DICOM series; .nii/.nii.gz/.nrrd/.nhdr/
// .mha/.mhd are ITK volumes; a DICOM file (.dcm, .dicom, or "DICM" at byte 128) is read as
// the series it belongs to; anything else goes to GDAL. A folder of several DICOM series is
// refused unless options.series_uid chooses one (tessera/io/dicom_series.hpp).
#include <memory>
#include <string>

#include "tessera/core/image_source.hpp"
#include "tessera/io/dicom_series.hpp"
#include "tessera/io/label_style.hpp"

namespace tessera::io {

bool is_volume_path(const std::string& path);
/// Throws tessera::Error("<path>: ...") for what cannot be read, and as ImageOpenOptions
/// says (options.validate(); a series UID for a raster).
std::unique_ptr<ImageSource> open_image(const std::string& path, const ImageOpenOptions& options = {});
/// Rasters: per-band mean and standard deviation (approximate, from overviews or a sample).
/// Volumes: Hounsfield units in an abdominal window, (HU − 40) / 250.
Normalization default_normalization(const ImageSource& image);
/// A label sink matching the input's kind and geometry, writing to `path`. Rasters follow
/// `style` (class names, attribute table, COG, .qml); volumes ignore it, except that a `path`
/// ending in .dcm / .dicom for a DICOM series (like.format "DICOM") is a DICOM SEG
/// referencing that series (DicomSegWriter, segments named by style.class_names); for any
/// other input such a path is refused.
std::unique_ptr<LabelSink> create_label_sink(const std::string& path, const ImageInfo& like,
                                             const LabelStyle& style = {});

}  // namespace tessera::io
