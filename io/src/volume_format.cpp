// Volume formats: which ITK ImageIO reads a file (by content) or writes one (by name), and
// the names Tessera reports for formats and voxel types. See volume_format.hpp.
#include "volume_format.hpp"

#include <array>
#include <filesystem>

#include <itkGDCMImageIO.h>
#include <itkMetaImageIO.h>
#include <itkNiftiImageIO.h>
#include <itkNrrdImageIO.h>

#include "volume_header_checks.hpp"
#include "volume_itk.hpp"

namespace tessera::io::detail {
namespace fs = std::filesystem;
namespace {

constexpr std::array<VolumeExtension, 6> kWritableExtensions{{{".nii.gz", false},
                                                              {".nii", false},
                                                              {".nrrd", false},
                                                              {".mha", false},
                                                              {".nhdr", true},
                                                              {".mhd", true}}};

}  // namespace

const VolumeExtension& require_writable_extension(const std::string& path) {
  const std::string name = lower(fs::path(path).filename().string());
  for (const auto& ext : kWritableExtensions)
    if (name.size() > ext.suffix.size() && name.ends_with(ext.suffix)) return ext;
  fail(path, "unsupported volume file name (use .nii.gz, .nii, .nrrd, .nhdr, .mha or .mhd)");
}

itk::ImageIOBase::Pointer io_for_writing(const std::string& path) {
  const std::string_view suffix = require_writable_extension(path).suffix;
  if (suffix == ".nii.gz" || suffix == ".nii") return itk::NiftiImageIO::New();
  if (suffix == ".nrrd" || suffix == ".nhdr") return itk::NrrdImageIO::New();
  return itk::MetaImageIO::New();
}

itk::ImageIOBase::Pointer io_for_reading(const std::string& path) {
  const std::array<itk::ImageIOBase::Pointer, 4> candidates{
      itk::NiftiImageIO::New().GetPointer(), itk::NrrdImageIO::New().GetPointer(),
      itk::MetaImageIO::New().GetPointer(), itk::GDCMImageIO::New().GetPointer()};
  for (const auto& candidate : candidates)
    if (candidate->CanReadFile(path.c_str())) return candidate;
  fail(path, "cannot read volume: not a NIfTI, NRRD, MetaImage or DICOM file, or damaged");
}

bool is_dicom(const itk::ImageIOBase& io) { return std::string_view(io.GetNameOfClass()) == "GDCMImageIO"; }

std::string format_name(const itk::ImageIOBase& io) {
  const std::string_view cls = io.GetNameOfClass();
  if (cls == "NiftiImageIO") return "NIfTI";
  if (cls == "NrrdImageIO") return "NRRD";
  if (cls == "MetaImageIO") return "MetaImage";
  if (cls == "GDCMImageIO") return "DICOM";
  return std::string(cls);
}

std::string data_type_name(itk::IOComponentEnum type) {
  using C = itk::IOComponentEnum;
  switch (type) {
    case C::UCHAR: return "Byte";
    case C::CHAR: return "Int8";
    case C::USHORT: return "UInt16";
    case C::SHORT: return "Int16";
    case C::UINT: return "UInt32";
    case C::INT: return "Int32";
    case C::ULONG:
    case C::ULONGLONG: return "UInt64";
    case C::LONG:
    case C::LONGLONG: return "Int64";
    case C::FLOAT: return "Float32";
    case C::DOUBLE: return "Float64";
    default: return "Unknown";
  }
}

}  // namespace tessera::io::detail
