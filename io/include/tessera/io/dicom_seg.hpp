#pragma once
// Labels of a CT/MR DICOM series as a DICOM Segmentation object (SEG IOD, PS3.3 A.51), the
// form 3D Slicer (dcmqi), OHIF and PACS load next to the series it segments:
//   * BINARY segmentation, one segment per class id present in the labels, except background
//     (0) and nodata (kNoDataLabel, 255); segment numbers 1, 2, … in increasing class id;
//   * segment label = the class name ("class <id>" without one); property category and type
//     as SNOMED CT codes for known organ names (segment_codes), Tissue / Tissue otherwise;
//     algorithm AUTOMATIC, named by the options; recommended display colour = the class colour (colors.hpp);
//   * one frame per (segment, slice) in which the segment has voxels: empty frames are left
//     out, as dcmqi does, so a segment lists only the slices it touches. Frames go segment by
//     segment, slices in Tessera's z order (the reader's order: by position along the normal);
//   * per frame: Plane Position (the source slice's Image Position Patient, verbatim), Frame
//     Content (dimension index values: segment number, z + 1), Segment Identification and
//     Derivation Image (the source slice's SOP Class/Instance UID, purpose 121322 DCM "Source
//     image for image processing operation"); shared: Plane Orientation and Pixel Measures;
//   * patient, study and frame of reference taken over from the source series; the equipment
//     is Tessera's (it made the SEG); Referenced Series Sequence lists every source instance.
// The labels are kept in memory (one byte per voxel); commit() writes the file staged
// (tessera/run/staged_file.hpp). DCMTK types stay in io/src. Not thread safe.
// Reading (any writer's SEG, e.g. for the viewer): read_dicom_seg places each frame on a
// volume's voxel grid by its own Plane Position (io/src/dicom_seg_read.cpp).
#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tessera/core/colors.hpp"
#include "tessera/core/image_source.hpp"

namespace tessera::io {
namespace detail {
struct DicomSegSource;  // the source series' headers (io/src/dicom_seg.cpp)
}

struct DicomSegOptions {
  std::string path;                      ///< the SEG file to write (.dcm)
  std::string source;                    ///< the DICOM series read: its folder, or one of its files
  std::vector<std::string> class_names;  ///< by class id; ids without a name are "class <id>"
  std::vector<Rgb> class_colors;         ///< by class id (recommended display colour); others label_color(id)
  std::string algorithm_name = "Tessera U-Net";               ///< Segment Algorithm Name
  std::string series_description = "Tessera segmentation";  ///< Series Description of the SEG

  DicomSegOptions(std::string path_, std::string source_) : path(std::move(path_)), source(std::move(source_)) {}
  DicomSegOptions& with_class_names(std::vector<std::string> v) { class_names = std::move(v); return *this; }
  DicomSegOptions& with_class_colors(std::vector<Rgb> v) { class_colors = std::move(v); return *this; }
  DicomSegOptions& with_algorithm_name(std::string v) { algorithm_name = std::move(v); return *this; }
  DicomSegOptions& with_series_description(std::string v) { series_description = std::move(v); return *this; }

  /// Throws tessera::Error naming the bad field.
  void validate() const;
};

/// A coded concept: (code value, coding scheme designator, code meaning), e.g.
/// ("10200004", "SCT", "Liver").
struct CodedConcept {
  std::string value;
  std::string scheme;
  std::string meaning;
  bool operator==(const CodedConcept&) const = default;
};

/// Segmented Property Category and Type of a class name. Known organ names (case-insensitive;
/// '_' and '-' read as spaces: liver, kidney, spleen, pancreas, …) map to SNOMED CT under the
/// category Anatomical Structure (SCT 91723000); tumor / lesion to Morphologically Abnormal
/// Structure (SCT 49755003); anything else to category Tissue, type Tissue (SCT 85756007).
struct SegmentCodes {
  CodedConcept category;
  CodedConcept type;
};
SegmentCodes segment_codes(const std::string& class_name);

/// sRGB (0..255 per channel) as DICOM's scaled CIELab (PS3.3 C.10.7.1.1): L* × 65535 / 100,
/// (a* + 128) × 65535 / 255, (b* + 128) × 65535 / 255, rounded; D65 white point, as dcmqi.
std::array<uint16_t, 3> dicom_lab_from_srgb(uint8_t r, uint8_t g, uint8_t b);

/// A LabelSink writing a DICOM SEG (see above). The constructor reads the source series'
/// headers and checks them against `extent` (z, y, x) (slices, rows, columns; one orientation),
/// so a mismatch fails before any inference. Throws tessera::Error("<path>: <problem>").
/// Destroyed without commit(), it leaves nothing at `options.path`.
class DicomSegWriter final : public LabelSink {
 public:
  DicomSegWriter(DicomSegOptions options, Index extent);
  ~DicomSegWriter() override;
  DicomSegWriter(const DicomSegWriter&) = delete;
  DicomSegWriter& operator=(const DicomSegWriter&) = delete;

  /// Box (z, y, x); labels shape (1, box.size...).
  void write(const Box& box, const Block<uint8_t>& labels) override;
  /// Builds and writes the SEG. Throws tessera::Error naming the file when no voxel holds a
  /// class other than background or nodata (a SEG needs at least one segment).
  void commit() override;

 private:
  DicomSegOptions options_;
  Index extent_;
  std::unique_ptr<detail::DicomSegSource> source_;
  std::vector<uint8_t> labels_;  // z-major, x fastest
  bool committed_ = false;
};

/// One segment of a DICOM SEG read back: its number (the label value it gets on the grid),
/// Segment Label and Recommended Display CIELab value as sRGB (absent when not stored).
struct DicomSegSegment {
  int number = 0;
  std::string label;
  std::optional<Rgb> color;
};

/// A DICOM SEG placed on a volume's voxel grid: label value = segment number (0: no segment;
/// where segments overlap, the higher number wins), z-major with x fastest like VolumeReader.
struct DicomSegLabels {
  std::vector<uint8_t> labels;
  std::vector<DicomSegSegment> segments;  ///< increasing number
};

/// True when `path` is a file whose SOP Class is Segmentation Storage (reads the header only).
bool is_dicom_seg(const std::string& path);

/// Reads the SEG at `path` (BINARY or FRACTIONAL, the latter thresholded at half its maximum)
/// through DCMTK and places each frame by its Plane Position / Orientation and Pixel Measures
/// onto the grid of `extent` (z, y, x) and `geo` (spacing, origin, direction: the source
/// volume as VolumeReader reports it), so the order of its frames does not matter. Throws
/// tessera::Error("<path>: …") for a file that is not a SEG, more than 254 segments, or a
/// frame that does not lie on that grid (another orientation or spacing, between slices, or
/// outside the volume): the SEG was made for another series.
DicomSegLabels read_dicom_seg(const std::string& path, const Index& extent, const Georeference& geo);

}  // namespace tessera::io
