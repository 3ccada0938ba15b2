// VolumeReader: opens a NIfTI / NRRD / MetaImage file, a DICOM file (as its series) or a
// DICOM folder through ITK, checks header and payload first (volume_header_checks.hpp),
// loads the voxels once and reads boxes from memory. ITK exceptions become tessera::Error
// naming the path.
#include <filesystem>
#include <limits>
#include <optional>
#include <string_view>
#include <system_error>

#include <itkGDCMImageIO.h>
#include <itkImageFileReader.h>

#include "tessera/core/tile_choice.hpp"
#include "tessera/io/volume.hpp"
#include "volume_dicom.hpp"
#include "volume_format.hpp"
#include "volume_header_checks.hpp"
#include "volume_itk.hpp"

namespace tessera::io {
namespace fs = std::filesystem;
using detail::fail;
using detail::Image3;

namespace {

// One NIfTI, NRRD or MetaImage file, after the checks ITK does not make.
Image3<float>::Pointer read_volume_file(const std::string& path, const itk::ImageIOBase::Pointer& io) {
  if (std::string_view(io->GetNameOfClass()) == "NrrdImageIO")
    if (const auto problem = detail::nrrd_spacing_problem(path)) fail(path, *problem);
  if (std::string_view(io->GetNameOfClass()) == "NiftiImageIO")
    if (const auto problem = detail::nifti_geometry_problem(path)) fail(path, "cannot read volume: " + *problem);
  if (std::string_view(io->GetNameOfClass()) == "MetaImageIO")
    if (const auto problem = detail::metaimage_header_problem(path)) fail(path, "cannot read volume: " + *problem);
  io->SetFileName(path);
  io->ReadImageInformation();
  detail::check_header(path, *io);
  if (const auto problem = detail::payload_problem(path, *io)) fail(path, "cannot read volume: " + *problem);
  auto reader = itk::ImageFileReader<Image3<float>>::New();
  reader->SetImageIO(io);
  reader->SetFileName(path);
  reader->Update();
  return reader->GetOutput();
}

struct LoadedVolume {
  Image3<float>::Pointer image;
  itk::ImageIOBase::Pointer io;                    // the ImageIO that read it (format, voxel type)
  std::optional<detail::ChosenDicomSeries> dicom;  // which series, for DICOM input
};

// A folder is a DICOM series; a DICOM file stands for the series it belongs to in its folder
// (its slices sharing its series UID; alone in its series it is a one-slice volume).
LoadedVolume load(const std::string& path, const ImageOpenOptions& options) {
  std::error_code ec;
  const bool is_folder = fs::is_directory(path, ec);
  if (!is_folder && !fs::exists(path, ec)) fail(path, "no such file");
  LoadedVolume v;
  try {
    if (is_folder) {
      if (fs::is_empty(path, ec)) fail(path, "no DICOM series found (the folder is empty)");
      v.io = itk::GDCMImageIO::New();
    } else {
      v.io = detail::io_for_reading(path);
    }
    if (is_folder || detail::is_dicom(*v.io)) {
      v.dicom = detail::choose_dicom_series(path, options.series_uid);
      v.image = detail::read_dicom_series(path, v.dicom->files, v.io);
    } else {
      if (!options.series_uid.empty())
        fail(path, "a series UID (" + options.series_uid + ") chooses among DICOM series; this is " +
                       detail::format_name(*v.io));
      v.image = read_volume_file(path, v.io);
    }
  } catch (const itk::ExceptionObject& e) {
    fail(path, "cannot read volume: " + detail::short_reason(e));
  } catch (const std::bad_alloc&) {
    // Either the volume is larger than memory, or a damaged header (a compressed-data size,
    // the element count) made ITK's reader ask for an absurd buffer: say what the header holds.
    const int64_t declared = v.io ? static_cast<int64_t>(v.io->GetImageSizeInBytes()) : 0;
    fail(path, "cannot read volume: out of memory" +
                   (declared > 0 ? " (its header declares " + format_bytes(declared) +
                                       " of voxels; more than that means a damaged header or data size)"
                                 : std::string()));
  }
  return v;
}

}  // namespace

VolumeReader::VolumeReader(const std::string& path, const ImageOpenOptions& options) {
  options.validate();
  detail::quiet_itk();
  const LoadedVolume v = load(path, options);
  const auto size = v.image->GetLargestPossibleRegion().GetSize();
  info_.path = v.dicom ? v.dicom->reopen_path : path;
  if (v.dicom) dicom_ = v.dicom->summary;
  info_.kind = "volume";
  info_.format = detail::format_name(*v.io);
  // DICOM: the stored pixels' type (16-bit Int16 / UInt16), not the wider type GDCM reads them
  // into to apply the rescale slope and intercept.
  const auto* gdcm = dynamic_cast<const itk::GDCMImageIO*>(v.io.GetPointer());
  info_.data_type = detail::data_type_name(gdcm ? gdcm->GetInternalComponentType() : v.io->GetComponentType());
  info_.extent = {static_cast<int64_t>(size[2]), static_cast<int64_t>(size[1]), static_cast<int64_t>(size[0])};
  info_.channels = 1;
  info_.nodata = {std::nullopt};
  info_.geo = detail::geometry_of(*v.image);

  const auto expected = static_cast<size_t>(detail::voxel_count(info_.extent));
  const size_t buffered = v.image->GetBufferedRegion().GetNumberOfPixels();
  if (buffered != expected || v.image->GetBufferPointer() == nullptr)
    fail(path, "cannot read volume: got " + std::to_string(buffered) + " voxels, expected " + std::to_string(expected));
  // ITK's buffer is x fastest, then y, then z: exactly our (z, y, x) C order.
  voxels_.assign(v.image->GetBufferPointer(), v.image->GetBufferPointer() + expected);
  if (info_.format == "NIfTI") {
    const std::vector<bool> nonfinite = detail::nifti_nonfinite_voxels(path, expected);
    for (size_t i = 0; i < nonfinite.size(); ++i)
      if (nonfinite[i]) voxels_[i] = std::numeric_limits<float>::quiet_NaN();
  }
}

VolumeReader::~VolumeReader() = default;

Block<float> VolumeReader::read(const Box& box) const {
  TESSERA_CHECK(detail::inside(box, info_.extent));
  const int64_t dz = box.size[0], dy = box.size[1], dx = box.size[2];
  const int64_t ny = info_.extent[1], nx = info_.extent[2];
  Block<float> out(Index{1, dz, dy, dx});
  for (int64_t z = 0; z < dz; ++z) {
    for (int64_t y = 0; y < dy; ++y) {
      const auto src = voxels_.begin() + ((box.origin[0] + z) * ny + box.origin[1] + y) * nx + box.origin[2];
      std::copy(src, src + dx, out.data.begin() + (z * dy + y) * dx);
    }
  }
  return out;
}

}  // namespace tessera::io
