#pragma once
// ITK glue shared by the volume files of io/src (internal): the 3-D image type, errors that
// name the path, ITK's exception text made one line, and the geometry carried between
// tessera's (z, y, x) extents / Georeference and ITK images (axis order x, y, z, LPS mm).
// The volume files, by concern:
//   volume_format.*        which ITK ImageIO reads or writes a file (by content / by name)
//   volume_header_checks.* what a header or payload may claim, checked before ITK reads
//   volume_read.cpp        VolumeReader: opening a file or series, reading boxes
//   volume_write.cpp       LabelVolumeWriter, write_volume: staged NIfTI / NRRD / MetaImage
//   volume_dicom.*         DICOM series: reading and writing one
//   dicom_series.cpp       DICOM series: listing a folder's, choosing the one a path stands for
#include <cstdint>
#include <string>
#include <vector>

#include <itkImage.h>
#include <itkMacro.h>

#include "tessera/core/error.hpp"
#include "tessera/core/image_source.hpp"

namespace tessera::io::detail {

inline constexpr unsigned kVolumeDims = 3;
template <class T>
using Image3 = itk::Image<T, kVolumeDims>;

/// Throws tessera::Error("<path>: <problem>").
[[noreturn]] void fail(const std::string& path, const std::string& problem);

/// ITK's exception description as one short line: the reason without the "ITK ERROR:
/// Class(0x…):" prefix, whitespace collapsed, Teem's chain cut to its last reason.
std::string short_reason(const itk::ExceptionObject& e);

/// ITK's warnings (e.g. about odd spacing) go straight to stderr; Tessera reports problems
/// itself, one line naming the file. Turns them off once.
void quiet_itk();

/// Empty fields mean "unknown": unit spacing, zero origin, identity direction.
Georeference complete_volume_geometry(Georeference geo);
int64_t voxel_count(const Index& extent);
/// Programmer error unless a (z, y, x) extent of positive sizes.
void check_volume_extent(const Index& extent);
/// Box (z, y, x) lies inside extent (z, y, x).
bool inside(const Box& box, const Index& extent);
/// Copies `labels` (shape 1 × box) into the whole-volume buffer `volume` of `extent` at `box`
/// (programmer error unless the box lies inside and the shape matches).
void paste_labels(std::vector<uint8_t>& volume, const Index& extent, const Box& box, const Block<uint8_t>& labels);
/// The geometry of an ITK image (spacing, origin, direction row-major).
Georeference geometry_of(const Image3<float>& image);

/// An allocated ITK image of `extent` (z, y, x) with the geometry `geo` (completed).
template <class T>
typename Image3<T>::Pointer make_image(const Index& extent, const Georeference& geo_in) {
  const Georeference geo = complete_volume_geometry(geo_in);
  typename Image3<T>::SizeType size;
  size[0] = static_cast<itk::SizeValueType>(extent[2]);
  size[1] = static_cast<itk::SizeValueType>(extent[1]);
  size[2] = static_cast<itk::SizeValueType>(extent[0]);
  typename Image3<T>::IndexType start;
  start.Fill(0);
  typename Image3<T>::SpacingType spacing;
  typename Image3<T>::PointType origin;
  typename Image3<T>::DirectionType direction;
  for (unsigned r = 0; r < 3; ++r) {
    spacing[r] = geo.spacing[r];
    origin[r] = geo.origin[r];
    for (unsigned c = 0; c < 3; ++c) direction(r, c) = geo.direction[3 * r + c];
  }
  auto image = Image3<T>::New();
  image->SetRegions(typename Image3<T>::RegionType(start, size));
  image->SetSpacing(spacing);
  image->SetOrigin(origin);
  image->SetDirection(direction);
  image->Allocate();
  return image;
}

}  // namespace tessera::io::detail
