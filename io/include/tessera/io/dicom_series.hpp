#pragma once
// DICOM series as a user meets them: a folder may hold several (a CT with and without
// contrast, a scout), and one file stands for the series it belongs to. A series is a
// SeriesInstanceUID (0020,000E); its files are those of that UID directly in the folder
// (not in subfolders). ImageOpenOptions chooses one; VolumeReader::dicom() says which series
// was read and how (folder, the series beside a file, a lone file). GDCM types stay in io/src.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tessera::io {

/// How open_image / VolumeReader pick among what a path holds.
struct ImageOpenOptions {
  /// DICOM: the SeriesInstanceUID to read. Needed for a folder holding several series (which
  /// is refused without it, the refusal listing them); for a DICOM file it must be the file's
  /// own series. Empty: the only series there is. Refused for any other format.
  std::string series_uid;

  ImageOpenOptions& with_series_uid(std::string v) { series_uid = std::move(v); return *this; }
  /// Throws tessera::Error naming series_uid unless it is empty or a DICOM UID (digits and
  /// dots, at most 64 characters).
  void validate() const;
};

/// A DICOM UID: digits and dots, 1 to 64 characters, no dot first or last.
bool is_dicom_uid(const std::string& uid);

/// One series of a folder, as listed for the user.
struct DicomSeriesSummary {
  std::string uid;          ///< SeriesInstanceUID (0020,000E)
  std::string description;  ///< SeriesDescription (0008,103E); empty when absent
  std::string modality;     ///< Modality (0008,0060), e.g. "CT"; empty when absent
  int64_t slices = 0;       ///< files of this series in the folder
};

/// A display window stored with the image, in the volume's values (for CT: Hounsfield units,
/// the window applying after the rescale slope/intercept, DICOM PS3.3 C.11.2.1.2).
struct DisplayWindow {
  double center = 0;
  double width = 0;  ///< > 0
};

/// What a DICOM input was read as (VolumeReader::dicom()).
struct DicomReadSummary {
  DicomSeriesSummary series;  ///< series.slices: the slices in the volume
  /// One phrase for summaries: "the only series in the folder", "chosen among the 3 series in
  /// the folder", "the whole series, from the files beside slice_0002.dcm", "this file alone, a
  /// one-slice volume: no other file of its series beside it". Says so, too, when the series'
  /// files differ in size or thickness and only one group of them was read.
  std::string how;
  /// Window Center / Width (0028,1050 / 0028,1051) of the first slice, the first value of
  /// each when there are several; absent when not stored or not a usable number.
  std::optional<DisplayWindow> window;
};

/// The series directly in `folder`, ordered by UID. Empty when it holds no DICOM series.
/// Throws tessera::Error("<folder>: ...") when the folder cannot be read.
std::vector<DicomSeriesSummary> list_dicom_series(const std::string& folder);
/// `1.2.840.… (CT, "Abdomen 5mm", 120 slices)`: the UID, then what is known of the rest.
std::string describe(const DicomSeriesSummary& series);

}  // namespace tessera::io
