#pragma once
// DICOM series through ITK/GDCM (internal to io/src): finding the series of a folder,
// choosing the one a path and a series UID stand for (dicom_series.cpp), and reading it as one
// volume (volume_dicom.cpp). Writing is tessera::io::write_dicom_series (tessera/io/volume.hpp).
#include <optional>
#include <string>
#include <vector>

#include <itkImageIOBase.h>

#include "tessera/io/dicom_series.hpp"
#include "volume_itk.hpp"

namespace tessera::io::detail {

/// One group of a folder's DICOM files as GDCM forms it for ITK: series details on, so one
/// SeriesInstanceUID splits where rows, columns, slice thickness, series number or sequence
/// name differ. Files sorted as ITK reads them (by position along the slice normal); the tags
/// are the first file's.
struct DicomSeriesPart {
  DicomSeriesSummary summary;  ///< summary.slices == files.size()
  std::optional<DisplayWindow> window;
  std::vector<std::string> files;
};
/// The groups directly in `folder`, by UID, the largest group of a UID first. Empty when
/// there is none. ITK exceptions pass through.
std::vector<DicomSeriesPart> dicom_series_parts(const std::string& folder);

/// The series a folder or DICOM file stands for.
struct ChosenDicomSeries {
  std::vector<std::string> files;  ///< sorted as ITK reads them
  DicomReadSummary summary;
  std::string reopen_path;  ///< a path that opens the same series without a UID (ImageInfo::path)
};
/// A folder: its only series, or the one `series_uid` names (its largest group of files). A
/// file: the group holding it, which `series_uid`, if given, must name. Throws
/// tessera::Error("<path>: ...") when there is none, when a folder holds several and no UID
/// chooses (the message lists them), or when the UID is not there. ITK exceptions pass through.
ChosenDicomSeries choose_dicom_series(const std::string& path, const std::string& series_uid);

/// DCMTK reports through its own logger on stderr; Tessera reports one line naming the file.
/// Turns it off once.
void quiet_dcmtk();

/// Reads `files` (one series, sorted by GDCM) as one volume; `gdcm_io` applies rescale
/// slope/intercept, so CT values come out in HU. Errors name `path` (the folder or file the
/// user gave); ITK exceptions pass through.
Image3<float>::Pointer read_dicom_series(const std::string& path, const std::vector<std::string>& files,
                                         const itk::ImageIOBase::Pointer& gdcm_io);

}  // namespace tessera::io::detail
