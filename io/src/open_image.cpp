#include "tessera/io/open_image.hpp"

#include <algorithm>
#include <array>
#include <filesystem>
#include <fstream>
#include <string_view>

#include "tessera/core/error.hpp"
#include "tessera/io/dicom_seg.hpp"
#include "tessera/io/raster.hpp"
#include "tessera/io/volume.hpp"

namespace tessera::io {
namespace {
// Whether `s` ends with the lower-case `suffix`, in any case (SCAN.NII.GZ is a NIfTI).
bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         std::equal(suffix.rbegin(), suffix.rend(), s.rbegin(), [](char lower, char c) {
           return std::tolower(static_cast<unsigned char>(c)) == lower;
         });
}

// DICOM Part 10 files carry "DICM" after a 128-byte preamble, whatever their name.
bool has_dicom_magic(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::array<char, 132> head{};
  return f.read(head.data(), head.size()) && std::string_view(head.data() + 128, 4) == "DICM";
}
}  // namespace

bool is_volume_path(const std::string& path) {
  if (std::filesystem::is_directory(path)) return true;  // a DICOM series
  for (const char* ext : {".nii", ".nii.gz", ".nrrd", ".nhdr", ".mha", ".mhd", ".dcm", ".dicom"})
    if (ends_with(path, ext)) return true;
  return std::filesystem::is_regular_file(path) && has_dicom_magic(path);
}

std::unique_ptr<ImageSource> open_image(const std::string& path, const ImageOpenOptions& options) {
  options.validate();
  if (!std::filesystem::exists(path)) throw Error(path + ": no such file or folder");
  if (is_volume_path(path)) return std::make_unique<VolumeReader>(path, options);
  if (!options.series_uid.empty())
    throw Error(path + ": a series UID (" + options.series_uid + ") chooses among DICOM series; this is not DICOM");
  return std::make_unique<RasterReader>(path);
}

Normalization default_normalization(const ImageSource& image) {
  if (const auto* raster = dynamic_cast<const RasterReader*>(&image)) return raster->band_statistics();
  // CT: an abdominal window — soft tissue (40 HU) at 0, ±250 HU at ±1; air and bone stay distinct.
  return {std::vector<float>(image.info().channels, 40.f), std::vector<float>(image.info().channels, 250.f)};
}

std::unique_ptr<LabelSink> create_label_sink(const std::string& path, const ImageInfo& like, const LabelStyle& style) {
  if (ends_with(path, ".dcm") || ends_with(path, ".dicom")) {
    if (like.format != "DICOM")
      throw Error(path + ": a DICOM SEG needs a DICOM series as input; " + like.path + " is " +
                  (like.kind == "volume" ? like.format : "a raster (" + like.format + ")"));
    return std::make_unique<DicomSegWriter>(DicomSegOptions(path, like.path).with_class_names(style.class_names).with_class_colors(style.class_colors),
                                            like.extent);
  }
  if (like.kind == "volume") {
    if (!is_volume_path(path) || std::filesystem::is_directory(path))
      throw Error(path + ": a volume's labels need a volume file name (.nii.gz, .nrrd, .mha)");
    return std::make_unique<LabelVolumeWriter>(path, like.extent, like.geo, style);
  }
  if (is_volume_path(path)) throw Error(path + ": a raster's labels need a raster file name (.tif)");
  return std::make_unique<LabelRasterWriter>(LabelRasterOptions(path, like.extent, like.geo).with_style(style));
}

}  // namespace tessera::io
