#pragma once
// CT / MR volumes through ITK: NIfTI (.nii, .nii.gz), NRRD (.nrrd, .nhdr), MetaImage
// (.mha, .mhd) and DICOM series (a folder; GDCM, slices sorted by position, rescale
// slope/intercept applied so CT values are Hounsfield units; one DICOM file is read as the
// series it belongs to in its folder, alone a one-slice volume; a folder of several series
// needs one chosen, tessera/io/dicom_series.hpp). A 2-D file is a one-slice volume; 4-D files
// with more than one time point are refused. ITK types stay in io/src.
// The volume is loaded once and tiled in memory. Geometry (spacing, origin, direction,
// LPS mm, ITK axis order x, y, z) is carried to every output.
#include <memory>
#include <optional>
#include <string>

#include "tessera/core/image_source.hpp"
#include "tessera/io/label_style.hpp"
#include "tessera/io/dicom_series.hpp"

namespace tessera::io {

class VolumeReader final : public ImageSource {
 public:
  /// Throws tessera::Error("<path>: <problem>") for missing, truncated or empty input, and,
  /// before reading any voxel, for zero, negative or non-finite spacing, vector voxels, more
  /// than one time point, or a header claiming more voxels than the file holds or memory fits;
  /// for a folder of several DICOM series without options.series_uid (the message lists them:
  /// UID, modality, description, slices), an unknown series_uid, or one given for another
  /// format. info().path is `path`, except for a series chosen among several in a folder:
  /// then its first file, so that opening info().path again gives the same volume.
  explicit VolumeReader(const std::string& path, const ImageOpenOptions& options = {});
  ~VolumeReader() override;
  VolumeReader(const VolumeReader&) = delete;
  VolumeReader& operator=(const VolumeReader&) = delete;

  const ImageInfo& info() const override { return info_; }
  /// Box axis order (z, y, x); result shape (1, dz, dy, dx).
  Block<float> read(const Box& box) const override;
  /// For DICOM input: the series read, how it was found, its stored window. Else nullopt.
  const std::optional<DicomReadSummary>& dicom() const { return dicom_; }

 private:
  ImageInfo info_;
  std::optional<DicomReadSummary> dicom_;
  std::vector<float> voxels_;  // z-major, x fastest
};

/// Writes a label volume with the given geometry. Kept in memory; on commit() written with
/// ITK to a temporary name beside `path` (same extension) and renamed. Unless `style` is bare,
/// commit() first writes the class names and colours beside it for ITK-SNAP and 3D Slicer
/// (label_sidecars.hpp): ids 0..style.classes-1 and every other id present.
class LabelVolumeWriter final : public LabelSink {
 public:
  LabelVolumeWriter(std::string path, Index extent, Georeference geo, LabelStyle style = LabelStyle::bare());
  ~LabelVolumeWriter() override;
  void write(const Box& box, const Block<uint8_t>& labels) override;
  void commit() override;

 private:
  std::string path_;
  Index extent_;
  Georeference geo_;
  std::vector<uint8_t> labels_;
  LabelStyle style_;
  bool committed_ = false;
};

/// Writes a float volume (e.g. a sample CT) with the given geometry; atomic like above.
/// `voxels` are z-major with x fastest, extent (z, y, x).
void write_volume(const std::string& path, const Index& extent, const Georeference& geo,
                  const std::vector<float>& voxels, bool as_int16);
/// Writes an int16 volume as a DICOM series of one file per slice into `folder`, with
/// RescaleIntercept −1024 / slope 1 (stored values are HU + 1024 as uint16).
void write_dicom_series(const std::string& folder, const Index& extent,
                        const Georeference& geo, const std::vector<float>& hu);

}  // namespace tessera::io
