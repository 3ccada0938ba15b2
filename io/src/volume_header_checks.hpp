#pragma once
// Checks of volume files that ITK does not make (internal to io/src; used by volume_read.cpp
// and volume_dicom.cpp before ITK reads a voxel).
// Each names the file; none allocates in proportion to what a header claims.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <itkImageIOBase.h>

namespace tessera::io::detail {

/// Throws tessera::Error("<path>: ...") unless the header (after ReadImageInformation)
/// describes scalar voxels, at most 3 non-trivial dimensions, positive finite spacing, and a
/// size whose reading fits in this machine's memory.
void check_header(const std::string& path, const itk::ImageIOBase& io);
/// What in a MetaImage header would crash MetaIO or send it astray (read before ITK): a field
/// name longer than MetaIO's buffer, a repeated field, NDims and DimSize that disagree,
/// compressed data without its size, an ElementDataFile naming several files (a '%' pattern
/// or LIST), or a header too long to reach its ElementDataFile.
std::optional<std::string> metaimage_header_problem(const std::string& path);
/// NaN or Inf in a NIfTI header's spacing, qform or sform (read before ITK, whose SVD of a
/// non-finite direction matrix aborts the process).
std::optional<std::string> nifti_geometry_problem(const std::string& path);
/// NRRD "spacings:" that are zero or negative (read before ITK, whose Teem error path leaks).
std::optional<std::string> nrrd_spacing_problem(const std::string& path);
/// Voxel data that is shorter than the header says or damaged (NIfTI, MetaImage, attached
/// raw or gzip NRRD); nullopt when fine or not checkable (ITK then reports it itself).
std::optional<std::string> payload_problem(const std::string& path, const itk::ImageIOBase& io);
/// The non-finite voxels of a float NIfTI file, by index in ITK's buffer order (niftilib
/// replaces them by 0 on reading); empty when there are none.
std::vector<bool> nifti_nonfinite_voxels(const std::string& path, uint64_t voxels);
/// ASCII lower case.
std::string lower(std::string s);

}  // namespace tessera::io::detail
