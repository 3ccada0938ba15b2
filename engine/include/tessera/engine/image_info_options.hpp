#pragma once
// What `tessera info` is asked, declared once: fields() drives the command's flags (`path` is
// also the command's positional argument), their help, and validate(), whose messages name
// them. Torch-free.
#include <string>

namespace tessera::engine {

struct ImageInfoOptions {
  std::string path;    ///< required: a raster, a volume, a DICOM file or folder
  std::string series;  ///< DICOM: the series to describe from a folder of several; "" = the only one
  bool json = false;

  /// Throws tessera::Error naming the flag.
  void validate() const;
};

template <class V>
void fields(ImageInfoOptions& o, V& v) {
  v.field("path", o.path,
          "GeoTIFF/VRT/any GDAL raster, NIfTI/NRRD/MHA, a DICOM folder or file, or a study on a PACS "
          "(dicomweb://HOST[:PORT]/PATH/studies/UID: its series, by QIDO-RS)");
  v.field("series", o.series,
          "DICOM: the SeriesInstanceUID to describe, from a folder holding several series (without it, such a folder "
          "is listed)");
  v.field("json", o.json, "Print JSON instead of text");
}

}  // namespace tessera::engine
