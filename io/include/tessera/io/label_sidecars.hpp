#pragma once
// The class names and colours of a label volume, in the side files the viewers clinicians use
// read (NIfTI, NRRD and MetaImage carry no class names):
//   <stem>.itksnap.txt      ITK-SNAP's label description file (Segmentation > Import Label
//                           Descriptions): IDX R G B A VIS MSH "LABEL", one line per value;
//   <stem>_ColorTable.ctbl  3D Slicer's colour table ("# Color table file", then
//                           "value name R G B A", spaces in names as underscores), loaded
//                           with the volume and chosen as the labelmap's colour node.
// <stem> is the volume's name without .nii.gz / .nii / .nrrd / .nhdr / .mha / .mhd. Tessera
// writes both beside every label volume (LabelVolumeWriter with a style) and reads them back
// (tessera eval, the viewer's legend). Plain text: no LibTorch, no GDAL, no ITK.
#include <array>
#include <optional>
#include <string>
#include <vector>

#include "tessera/core/colors.hpp"
#include "tessera/io/label_style.hpp"

namespace tessera::io {

/// One class of a label volume as the side files describe it.
struct LabelEntry {
  int value = 0;
  std::string name;
  Rgb color{};
  bool visible = true;  ///< false for the background (ITK-SNAP's VIS, Slicer's opacity 0)
  bool operator==(const LabelEntry&) const = default;
};

/// The entries of `style`: ids 0..classes-1 and every other id `present` (never nodata), each
/// with its name, colour and visibility (the background class hidden).
std::vector<LabelEntry> label_entries(const LabelStyle& style, const std::array<bool, 256>& present);

/// The ITK-SNAP label description text of `entries`.
std::string itksnap_label_description(const std::vector<LabelEntry>& entries);
/// Parses ITK-SNAP's label description text; `name` prefixes errors. Throws tessera::Error
/// naming the line when one is not IDX R G B A VIS MSH "LABEL".
std::vector<LabelEntry> parse_itksnap_label_description(const std::string& text, const std::string& name);

/// The 3D Slicer colour table text of `entries` (`title`: the header's file name).
std::string slicer_color_table(const std::vector<LabelEntry>& entries, const std::string& title);
/// Parses a Slicer discrete colour table (underscores in names read back as spaces). Throws
/// tessera::Error naming the line when one is not "value name R G B A".
std::vector<LabelEntry> parse_slicer_color_table(const std::string& text, const std::string& name);

/// A label table file in either format (ITK-SNAP when a data line has a quoted name, else
/// Slicer), as a user loads one into the viewer. Throws tessera::Error naming the file when it
/// cannot be read, a line is malformed or it lists no label.
std::vector<LabelEntry> read_label_table(const std::string& path);

/// <stem>.itksnap.txt and <stem>_ColorTable.ctbl beside `volume`.
std::string itksnap_sidecar_path(const std::string& volume);
std::string slicer_sidecar_path(const std::string& volume);

/// Writes both side files of `volume`, each atomically. Throws tessera::Error naming the file.
void write_label_sidecars(const std::string& volume, const std::vector<LabelEntry>& entries);
/// The side files of `volume`: ITK-SNAP's when present (names keep their spaces), else
/// Slicer's; nullopt when there is neither. Throws tessera::Error naming a malformed file.
std::optional<std::vector<LabelEntry>> read_label_sidecars(const std::string& volume);

/// The class names of any label file, by value (empty strings where unnamed; empty when none):
/// a raster's CLASS_<id> metadata or categories, a volume's side files.
std::vector<std::string> label_class_names(const std::string& path);

}  // namespace tessera::io
