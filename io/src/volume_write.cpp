// Volume files written through ITK (NIfTI, NRRD, MetaImage; attached or detached header),
// staged: LabelVolumeWriter and write_volume write to a temporary beside the target and move
// it into place complete, or leave nothing. DICOM series: volume_dicom.cpp.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <optional>
#include <string_view>
#include <system_error>

#include <itkImageFileWriter.h>

#include "tessera/io/label_sidecars.hpp"
#include "tessera/io/volume.hpp"
#include "tessera/run/staged_file.hpp"
#include "volume_format.hpp"
#include "volume_itk.hpp"

namespace tessera::io {
namespace fs = std::filesystem;
using detail::fail;
using detail::Image3;

namespace {

// ITK writes into an existing folder only; so do we (StagedFile would create it).
void require_existing_folder(const std::string& path) {
  const fs::path folder = fs::path(path).parent_path();
  std::error_code ec;
  if (!folder.empty() && !fs::is_directory(folder, ec)) fail(path, "folder " + folder.string() + " does not exist");
}

// A volume file in the making. A single-file format is a StagedFile (temporary with the same
// extension beside the target). A detached format (.mhd/.nhdr name their data file inside
// the header) is written under its final names into the folder staged_path(target) beside
// the target, so moving the files out keeps the header's reference valid; the header moves
// last. The destructor removes whatever an uncommitted write left.
class StagedVolume {
 public:
  explicit StagedVolume(const std::string& path) : target_(path) {
    const detail::VolumeExtension& ext = detail::require_writable_extension(path);
    require_existing_folder(path);
    if (ext.detached) {
      folder_ = staged_path(path);
      header_ = folder_ / target_.filename();
    } else {
      file_.emplace(path, ext.suffix);
      header_ = file_->path();
    }
  }
  ~StagedVolume() {
    std::error_code ignored;
    if (!folder_.empty()) fs::remove_all(folder_, ignored);
  }
  StagedVolume(const StagedVolume&) = delete;
  StagedVolume& operator=(const StagedVolume&) = delete;

  // Where ITK writes (the header, for a detached format).
  std::string path() const { return header_.string(); }
  // Empties the staging folder of a detached format (left by an earlier failed write).
  void prepare() const {
    if (folder_.empty()) return;
    fs::remove_all(folder_);
    fs::create_directory(folder_);
  }
  // Moves the finished file(s) to their final names; the header goes last. Throws
  // fs::filesystem_error or tessera::Error.
  void commit() {
    if (file_) {
      file_->commit();
      return;
    }
    for (const auto& entry : fs::directory_iterator(folder_))
      if (entry.path().filename() != header_.filename())
        fs::rename(entry.path(), target_.parent_path() / entry.path().filename());
    fs::rename(header_, target_);
    fs::remove(folder_);
  }

 private:
  fs::path target_;
  std::optional<StagedFile> file_;  // single-file formats
  fs::path folder_;                 // detached formats
  fs::path header_;
};

// Writes `image` to `path` staged; the target appears only complete.
template <class T>
void write_staged(const typename Image3<T>::Pointer& image, const std::string& path) {
  StagedVolume staged(path);
  try {
    staged.prepare();
    auto writer = itk::ImageFileWriter<Image3<T>>::New();
    auto io = detail::io_for_writing(path);
    writer->SetImageIO(io);
    writer->SetFileName(staged.path());
    writer->SetInput(image);
    // NIfTI compresses by the ".gz" in its name; the others on request.
    writer->SetUseCompression(std::string_view(io->GetNameOfClass()) != "NiftiImageIO");
    writer->Update();
    staged.commit();
  } catch (const itk::ExceptionObject& e) {
    fail(path, "cannot write volume: " + detail::short_reason(e));
  } catch (const fs::filesystem_error& e) {
    fail(path, std::string("cannot write volume: ") + e.code().message());
  }
}

}  // namespace

// ---- LabelVolumeWriter ----------------------------------------------------------------

LabelVolumeWriter::LabelVolumeWriter(std::string path, Index extent, Georeference geo, LabelStyle style)
    : path_(std::move(path)), extent_(std::move(extent)), geo_(std::move(geo)), style_(std::move(style)) {
  detail::check_volume_extent(extent_);
  geo_ = detail::complete_volume_geometry(std::move(geo_));
  detail::require_writable_extension(path_);  // fail now, not after hours of inference
  require_existing_folder(path_);
  labels_.assign(static_cast<size_t>(detail::voxel_count(extent_)), 0);
}

// An interrupted commit() leaves nothing (StagedVolume); path_ is untouched.
LabelVolumeWriter::~LabelVolumeWriter() = default;

void LabelVolumeWriter::write(const Box& box, const Block<uint8_t>& labels) {
  TESSERA_CHECK(!committed_);
  TESSERA_CHECK(detail::inside(box, extent_));
  const int64_t dz = box.size[0], dy = box.size[1], dx = box.size[2];
  TESSERA_CHECK((labels.shape == Index{1, dz, dy, dx}));
  TESSERA_CHECK(static_cast<int64_t>(labels.data.size()) == dz * dy * dx);
  const int64_t ny = extent_[1], nx = extent_[2];
  for (int64_t z = 0; z < dz; ++z) {
    for (int64_t y = 0; y < dy; ++y) {
      const auto src = labels.data.begin() + (z * dy + y) * dx;
      std::copy(src, src + dx, labels_.begin() + ((box.origin[0] + z) * ny + box.origin[1] + y) * nx + box.origin[2]);
    }
  }
}

void LabelVolumeWriter::commit() {
  TESSERA_CHECK(!committed_);
  auto image = detail::make_image<unsigned char>(extent_, geo_);
  std::copy(labels_.begin(), labels_.end(), image->GetBufferPointer());
  if (style_.describe) {  // the side files first: the volume's arrival says everything is in place
    std::array<bool, 256> present{};
    for (uint8_t v : labels_) present[v] = true;
    write_label_sidecars(path_, label_entries(style_, present));
  }
  try {
    write_staged<unsigned char>(image, path_);
  } catch (...) {  // no side files without their volume
    std::error_code ignored;
    std::filesystem::remove(itksnap_sidecar_path(path_), ignored);
    std::filesystem::remove(slicer_sidecar_path(path_), ignored);
    throw;
  }
  committed_ = true;
}

// ---- write_volume ---------------------------------------------------------------------

void write_volume(const std::string& path, const Index& extent, const Georeference& geo,
                  const std::vector<float>& voxels, bool as_int16) {
  detail::check_volume_extent(extent);
  TESSERA_CHECK(static_cast<int64_t>(voxels.size()) == detail::voxel_count(extent));
  if (as_int16) {
    auto image = detail::make_image<int16_t>(extent, geo);
    // Rounded and clamped to the int16 range; NaN has no int16 value and becomes 0.
    std::transform(voxels.begin(), voxels.end(), image->GetBufferPointer(), [](float v) {
      if (std::isnan(v)) return int16_t{0};
      return static_cast<int16_t>(std::clamp(std::round(v), -32768.0f, 32767.0f));
    });
    write_staged<int16_t>(image, path);
  } else {
    auto image = detail::make_image<float>(extent, geo);
    std::copy(voxels.begin(), voxels.end(), image->GetBufferPointer());
    write_staged<float>(image, path);
  }
}

}  // namespace tessera::io
