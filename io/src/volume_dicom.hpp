#pragma once
// DICOM series through ITK/GDCM (internal to io/src): finding a series' files and reading
// them as one volume. Writing is tessera::io::write_dicom_series (tessera/io/volume.hpp).
#include <string>
#include <vector>

#include <itkImageIOBase.h>

#include "volume_itk.hpp"

namespace tessera::io::detail {

/// The files of the DICOM series in `folder`: the first series, or the one holding `member`
/// (empty: any). Empty when there is none.
std::vector<std::string> dicom_series_files(const std::string& folder, const std::string& member);
/// Reads `files` (one series, sorted by GDCM) as one volume; `gdcm_io` applies rescale
/// slope/intercept, so CT values come out in HU. Errors name `path` (the folder or file the
/// user gave); ITK exceptions pass through.
Image3<float>::Pointer read_dicom_series(const std::string& path, const std::vector<std::string>& files,
                                         const itk::ImageIOBase::Pointer& gdcm_io);

}  // namespace tessera::io::detail
