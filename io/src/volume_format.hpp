#pragma once
// Which ITK ImageIO reads or writes a volume file (internal to io/src): reading decides by
// the file's content, writing by its name. ImageIO objects are chosen explicitly (not
// through ITK's object factories), so the code works whether or not the build registered
// ITK's IO factories.
#include <string>
#include <string_view>

#include <itkImageIOBase.h>

namespace tessera::io::detail {

/// A file name ending Tessera writes volumes under.
struct VolumeExtension {
  std::string_view suffix;  ///< ".nii.gz", ".nii", ".nrrd", ".mha", ".nhdr" or ".mhd"
  bool detached;            ///< header and voxel data in separate files (.nhdr, .mhd)
};

/// The writable extension `path` ends with (case-insensitive). Throws tessera::Error naming
/// the path and the extensions there are when none.
const VolumeExtension& require_writable_extension(const std::string& path);
/// NIfTI, NRRD or MetaImage by the file name; throws like require_writable_extension.
itk::ImageIOBase::Pointer io_for_writing(const std::string& path);
/// The first of NIfTI, NRRD, MetaImage and DICOM that can read `path`; throws
/// tessera::Error("<path>: cannot read volume: …") when none can.
itk::ImageIOBase::Pointer io_for_reading(const std::string& path);
/// True for ITK's DICOM ImageIO (a file that stands for its series).
bool is_dicom(const itk::ImageIOBase& io);

/// "NIfTI", "NRRD", "MetaImage" or "DICOM" (ImageInfo::format).
std::string format_name(const itk::ImageIOBase& io);
/// GDAL-like names ("Byte", "Int16", "Float32", …), so rasters and volumes report types the
/// same way (ImageInfo::data_type).
std::string data_type_name(itk::IOComponentEnum type);

}  // namespace tessera::io::detail
