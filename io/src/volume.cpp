// ITK-backed volumes: VolumeReader, LabelVolumeWriter, write_volume, write_dicom_series.
// Every ITK type and exception stays in this file (and in volume_header_checks.cpp, which
// checks headers and payloads before ITK reads them); callers see tessera::Error naming the
// path. ImageIO objects are chosen explicitly (not through ITK's object factories), so the
// code works whether or not the build registered ITK's IO factories.
#include "tessera/io/volume.hpp"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <random>
#include <string_view>
#include <system_error>

#include <itkGDCMImageIO.h>
#include <itkGDCMSeriesFileNames.h>
#include <itkImage.h>
#include <itkImageFileReader.h>
#include <itkImageFileWriter.h>
#include <itkImageSeriesReader.h>
#include <itkImageSeriesWriter.h>
#include <itkMetaDataObject.h>
#include <itkMetaImageIO.h>
#include <itkNiftiImageIO.h>
#include <itkNrrdImageIO.h>

#include "tessera/core/error.hpp"
#include "volume_header_checks.hpp"

namespace tessera::io {
namespace fs = std::filesystem;
using detail::lower;

namespace {

constexpr unsigned kDims = 3;
// write_dicom_series stores uint16 HU + 1024, as many CT scanners do.
constexpr float kDicomIntercept = -1024.0f;
template <class T>
using Image3 = itk::Image<T, kDims>;

[[noreturn]] void fail(const std::string& path, const std::string& problem) {
  throw Error(path + ": " + problem);
}

// ITK descriptions look like "ITK ERROR: NiftiImageIO(0x55d0): reason\n more"; keep the
// reason, on one line, short enough for a log line.
std::string short_reason(const itk::ExceptionObject& e) {
  std::string text = e.GetDescription();
  if (text.rfind("ITK ERROR:", 0) == 0) {
    const auto close = text.find("): ");
    if (close != std::string::npos) text = text.substr(close + 3);
  }
  std::string out;
  for (char c : text) {
    const bool space = std::isspace(static_cast<unsigned char>(c)) != 0;
    if (space && (out.empty() || out.back() == ' ')) continue;
    out += space ? ' ' : c;
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  // Teem (NRRD) chains "[nrrd] caller: trouble [nrrd] callee: reason"; the reason is last.
  if (const auto last = out.rfind("[nrrd] "); last != std::string::npos) {
    out = out.substr(last + 7);
    const auto colon = out.find(": ");
    if (colon != std::string::npos && out.find(' ') > colon) out = out.substr(colon + 2);
  }
  constexpr size_t kMaxLength = 240;
  if (out.size() > kMaxLength) out = out.substr(0, kMaxLength - 3) + "...";
  return out.empty() ? "ITK error" : out;
}

// GDAL-like names, so rasters and volumes report types the same way.
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

std::string format_name(const itk::ImageIOBase& io) {
  const std::string_view cls = io.GetNameOfClass();
  if (cls == "NiftiImageIO") return "NIfTI";
  if (cls == "NrrdImageIO") return "NRRD";
  if (cls == "MetaImageIO") return "MetaImage";
  if (cls == "GDCMImageIO") return "DICOM";
  return std::string(cls);
}

// ---- extensions and atomic publication ------------------------------------------------

struct VolumeExtension {
  std::string_view suffix;
  bool detached;  // header and voxel data in separate files
};
constexpr std::array<VolumeExtension, 6> kWritableExtensions{{{".nii.gz", false},
                                                              {".nii", false},
                                                              {".nrrd", false},
                                                              {".mha", false},
                                                              {".nhdr", true},
                                                              {".mhd", true}}};

const VolumeExtension* writable_extension(const std::string& path) {
  const std::string name = lower(fs::path(path).filename().string());
  for (const auto& ext : kWritableExtensions) {
    if (name.size() > ext.suffix.size() && name.ends_with(ext.suffix)) return &ext;
  }
  return nullptr;
}

const VolumeExtension& require_writable_extension(const std::string& path) {
  const VolumeExtension* ext = writable_extension(path);
  if (ext == nullptr)
    fail(path, "unsupported volume file name (use .nii.gz, .nii, .nrrd, .nhdr, .mha or .mhd)");
  return *ext;
}

// Where a volume is written before it appears under its final name. Single-file formats go
// to "<stem>.partial-<pid><ext>" beside the target; detached formats (.mhd/.nhdr name their
// data file inside the header) go, under their final names, into a "<stem>.partial-<pid>"
// folder beside the target, so renaming the files out keeps the header's reference valid.
struct StagedPath {
  fs::path target;
  fs::path temp_file;
  fs::path staging_dir;  // empty for single-file formats

  static StagedPath of(const std::string& path) {
    const VolumeExtension& ext = require_writable_extension(path);
    const fs::path target(path);
    const std::string name = target.filename().string();
    const std::string stem = name.substr(0, name.size() - ext.suffix.size());
    const std::string tag = ".partial-" + std::to_string(::getpid());
    StagedPath staged{target, {}, {}};
    if (ext.detached) {
      staged.staging_dir = target.parent_path() / (stem + tag);
      staged.temp_file = staged.staging_dir / name;
    } else {
      staged.temp_file = target.parent_path() / (stem + tag + name.substr(stem.size()));
    }
    return staged;
  }

  void prepare() const {
    if (!staging_dir.empty()) {
      fs::remove_all(staging_dir);
      fs::create_directory(staging_dir);
    }
  }

  // Moves the finished file(s) to their final names; the header goes last.
  void publish() const {
    if (staging_dir.empty()) {
      fs::rename(temp_file, target);
      return;
    }
    for (const auto& entry : fs::directory_iterator(staging_dir)) {
      if (entry.path().filename() != temp_file.filename())
        fs::rename(entry.path(), target.parent_path() / entry.path().filename());
    }
    fs::rename(temp_file, target);
    fs::remove(staging_dir);
  }

  // Removes whatever a failed or abandoned write left; never throws.
  void discard() const noexcept {
    std::error_code ignored;
    if (staging_dir.empty()) {
      fs::remove(temp_file, ignored);
    } else {
      fs::remove_all(staging_dir, ignored);
    }
  }
};

// ---- geometry -------------------------------------------------------------------------

// Empty fields mean "unknown": unit spacing, zero origin, identity direction.
Georeference complete_volume_geometry(Georeference geo) {
  if (geo.spacing.empty()) geo.spacing = {1.0, 1.0, 1.0};
  if (geo.origin.empty()) geo.origin = {0.0, 0.0, 0.0};
  if (geo.direction.empty()) geo.direction = {1, 0, 0, 0, 1, 0, 0, 0, 1};
  TESSERA_CHECK(geo.spacing.size() == 3 && geo.origin.size() == 3 && geo.direction.size() == 9);
  return geo;
}

int64_t voxel_count(const Index& extent) {
  int64_t n = 1;
  for (int64_t e : extent) n *= e;
  return n;
}

void check_volume_extent(const Index& extent) {
  TESSERA_CHECK(extent.size() == 3);
  for (int64_t e : extent) TESSERA_CHECK(e > 0);
}

// Box (z, y, x) lies inside extent (z, y, x).
bool inside(const Box& box, const Index& extent) {
  if (box.origin.size() != 3 || box.size.size() != 3) return false;
  for (size_t i = 0; i < 3; ++i) {
    if (box.origin[i] < 0 || box.size[i] < 0 || box.origin[i] + box.size[i] > extent[i])
      return false;
  }
  return true;
}

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

Georeference geometry_of(const Image3<float>& image) {
  Georeference geo;
  for (unsigned r = 0; r < 3; ++r) {
    geo.spacing.push_back(image.GetSpacing()[r]);
    geo.origin.push_back(image.GetOrigin()[r]);
    for (unsigned c = 0; c < 3; ++c) geo.direction.push_back(image.GetDirection()(r, c));
  }
  return geo;
}

// ---- writing --------------------------------------------------------------------------

itk::ImageIOBase::Pointer io_for_writing(const std::string& path) {
  const std::string suffix(require_writable_extension(path).suffix);
  if (suffix == ".nii.gz" || suffix == ".nii") return itk::NiftiImageIO::New();
  if (suffix == ".nrrd" || suffix == ".nhdr") return itk::NrrdImageIO::New();
  return itk::MetaImageIO::New();
}

// Writes `image` to `path` through a staged temporary; the target appears only complete.
template <class T>
void write_staged(const typename Image3<T>::Pointer& image, const std::string& path) {
  const StagedPath staged = StagedPath::of(path);
  try {
    staged.prepare();
    auto writer = itk::ImageFileWriter<Image3<T>>::New();
    auto io = io_for_writing(path);
    writer->SetImageIO(io);
    writer->SetFileName(staged.temp_file.string());
    writer->SetInput(image);
    // NIfTI compresses by the ".gz" in its name; the others on request.
    writer->SetUseCompression(std::string_view(io->GetNameOfClass()) != "NiftiImageIO");
    writer->Update();
    staged.publish();
  } catch (const itk::ExceptionObject& e) {
    staged.discard();
    fail(path, "cannot write volume: " + short_reason(e));
  } catch (const fs::filesystem_error& e) {
    staged.discard();
    fail(path, std::string("cannot write volume: ") + e.code().message());
  }
}

// DICOM decimal strings (VR DS) hold at most 16 characters.
std::string decimal_string(double v) {
  if (std::abs(v) < 1e-12) v = 0.0;  // no "-0" or "1e-17"
  char buf[32];
  for (int precision = 12; precision > 0; --precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, v);
    if (std::string_view(buf).size() <= 16) break;
  }
  return buf;
}

std::string decimal_strings(std::initializer_list<double> values) {
  std::string out;
  for (double v : values) {
    if (!out.empty()) out += '\\';
    out += decimal_string(v);
  }
  return out;
}

// A fresh DICOM UID derived from a random UUID ("2.25.<128-bit number>", DICOM PS3.5 B.2),
// which needs no registered root.
std::string new_dicom_uid() {
  thread_local std::mt19937_64 engine = [] {
    std::random_device device;
    std::seed_seq seed{device(), device(), device(), device(), device(), device()};
    return std::mt19937_64(seed);
  }();
  using U128 = unsigned __int128;
  U128 n = (static_cast<U128>(engine()) << 64) | engine();
  n = (n & ~(static_cast<U128>(0xF) << 76)) | (static_cast<U128>(0x4) << 76);  // version 4
  n = (n & ~(static_cast<U128>(0x3) << 62)) | (static_cast<U128>(0x2) << 62);  // variant 1
  std::string digits;
  do {
    digits.insert(digits.begin(), static_cast<char>('0' + static_cast<int>(n % 10)));
    n /= 10;
  } while (n != 0);
  return "2.25." + digits;
}

}  // namespace

// ---- reading --------------------------------------------------------------------------
namespace {

// ITK's warnings (e.g. about odd spacing) go straight to stderr; Tessera reports problems
// itself, one line naming the file.
void quiet_itk() {
  static const bool once = [] {
    itk::Object::GlobalWarningDisplayOff();
    return true;
  }();
  (void)once;
}

// The files of the DICOM series in `folder`: the first series, or the one holding `member`.
std::vector<std::string> dicom_series_files(const std::string& folder, const std::string& member) {
  auto names = itk::GDCMSeriesFileNames::New();
  names->SetUseSeriesDetails(true);
  names->SetDirectory(folder);
  for (const auto& uid : names->GetSeriesUIDs()) {
    auto files = names->GetFileNames(uid);
    if (member.empty() && !files.empty()) return files;
    for (const auto& f : files) {
      std::error_code ec;
      if (fs::equivalent(f, member, ec)) return files;
    }
  }
  return {};
}

// `gdcm_io` applies rescale slope/intercept: CT values come out in HU.
Image3<float>::Pointer read_dicom_series(const std::string& path, const std::vector<std::string>& files,
                                         const itk::ImageIOBase::Pointer& gdcm_io) {
  if (files.empty()) fail(path, "no DICOM series found");
  gdcm_io->SetFileName(files.front());
  gdcm_io->ReadImageInformation();
  detail::check_header(path, *gdcm_io);
  auto reader = itk::ImageSeriesReader<Image3<float>>::New();
  reader->SetImageIO(gdcm_io);
  reader->SetFileNames(files);
  reader->Update();
  return reader->GetOutput();
}

itk::ImageIOBase::Pointer io_for_reading(const std::string& path) {
  const std::array<itk::ImageIOBase::Pointer, 4> candidates{
      itk::NiftiImageIO::New().GetPointer(), itk::NrrdImageIO::New().GetPointer(),
      itk::MetaImageIO::New().GetPointer(), itk::GDCMImageIO::New().GetPointer()};
  for (const auto& candidate : candidates)
    if (candidate->CanReadFile(path.c_str())) return candidate;
  fail(path, "cannot read volume: not a NIfTI, NRRD, MetaImage or DICOM file, or damaged");
}

Image3<float>::Pointer read_volume_file(const std::string& path, const itk::ImageIOBase::Pointer& io) {
  if (std::string_view(io->GetNameOfClass()) == "NrrdImageIO")
    if (const auto problem = detail::nrrd_spacing_problem(path)) fail(path, *problem);
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

}  // namespace

// ---- VolumeReader ---------------------------------------------------------------------

VolumeReader::VolumeReader(const std::string& path) {
  quiet_itk();
  std::error_code ec;
  const bool is_folder = fs::is_directory(path, ec);
  if (!is_folder && !fs::exists(path, ec)) fail(path, "no such file");

  Image3<float>::Pointer image;
  itk::ImageIOBase::Pointer io;
  try {
    if (is_folder) {
      if (fs::is_empty(path, ec)) fail(path, "no DICOM series found (the folder is empty)");
      io = itk::GDCMImageIO::New();
      image = read_dicom_series(path, dicom_series_files(path, ""), io);
    } else {
      io = io_for_reading(path);
      if (std::string_view(io->GetNameOfClass()) == "GDCMImageIO") {
        // One DICOM file: read the series it belongs to (its folder's slices sharing its
        // series UID); a file alone in its series is a one-slice volume.
        const std::string folder = fs::absolute(path).parent_path().string();
        image = read_dicom_series(path, dicom_series_files(folder, path), io);
      } else {
        image = read_volume_file(path, io);
      }
    }
  } catch (const itk::ExceptionObject& e) {
    fail(path, "cannot read volume: " + short_reason(e));
  } catch (const std::bad_alloc&) {
    fail(path, "cannot read volume: out of memory");
  }

  const auto size = image->GetLargestPossibleRegion().GetSize();
  info_.path = path;
  info_.kind = "volume";
  info_.format = format_name(*io);
  info_.data_type = data_type_name(io->GetComponentType());
  info_.extent = {static_cast<int64_t>(size[2]), static_cast<int64_t>(size[1]),
                  static_cast<int64_t>(size[0])};
  info_.channels = 1;
  info_.nodata = {std::nullopt};
  info_.geo = geometry_of(*image);

  const auto expected = static_cast<size_t>(voxel_count(info_.extent));
  const size_t buffered = image->GetBufferedRegion().GetNumberOfPixels();
  if (buffered != expected || image->GetBufferPointer() == nullptr)
    fail(path, "cannot read volume: got " + std::to_string(buffered) + " voxels, expected " +
                   std::to_string(expected));
  // ITK's buffer is x fastest, then y, then z: exactly our (z, y, x) C order.
  voxels_.assign(image->GetBufferPointer(), image->GetBufferPointer() + expected);
  if (info_.format == "NIfTI") {
    const std::vector<bool> nonfinite = detail::nifti_nonfinite_voxels(path, expected);
    for (size_t i = 0; i < nonfinite.size(); ++i)
      if (nonfinite[i]) voxels_[i] = std::numeric_limits<float>::quiet_NaN();
  }
}

VolumeReader::~VolumeReader() = default;

Block<float> VolumeReader::read(const Box& box) const {
  TESSERA_CHECK(inside(box, info_.extent));
  const int64_t dz = box.size[0], dy = box.size[1], dx = box.size[2];
  const int64_t ny = info_.extent[1], nx = info_.extent[2];
  Block<float> out(Index{1, dz, dy, dx});
  for (int64_t z = 0; z < dz; ++z) {
    for (int64_t y = 0; y < dy; ++y) {
      const auto src = voxels_.begin() +
                       ((box.origin[0] + z) * ny + box.origin[1] + y) * nx + box.origin[2];
      std::copy(src, src + dx, out.data.begin() + (z * dy + y) * dx);
    }
  }
  return out;
}

// ---- LabelVolumeWriter ----------------------------------------------------------------

LabelVolumeWriter::LabelVolumeWriter(std::string path, Index extent, Georeference geo)
    : path_(std::move(path)), extent_(std::move(extent)), geo_(std::move(geo)) {
  check_volume_extent(extent_);
  geo_ = complete_volume_geometry(std::move(geo_));
  require_writable_extension(path_);  // fail now, not after hours of inference
  const fs::path folder = fs::path(path_).parent_path();
  std::error_code ec;
  if (!folder.empty() && !fs::is_directory(folder, ec))
    fail(path_, "folder " + folder.string() + " does not exist");
  labels_.assign(static_cast<size_t>(voxel_count(extent_)), 0);
}

LabelVolumeWriter::~LabelVolumeWriter() {
  if (committed_) return;
  try {
    StagedPath::of(path_).discard();  // what an interrupted commit() left; path_ untouched
  } catch (...) {
    // The extension was checked on construction; nothing to clean up otherwise.
  }
}

void LabelVolumeWriter::write(const Box& box, const Block<uint8_t>& labels) {
  TESSERA_CHECK(!committed_);
  TESSERA_CHECK(inside(box, extent_));
  const int64_t dz = box.size[0], dy = box.size[1], dx = box.size[2];
  TESSERA_CHECK((labels.shape == Index{1, dz, dy, dx}));
  TESSERA_CHECK(static_cast<int64_t>(labels.data.size()) == dz * dy * dx);
  const int64_t ny = extent_[1], nx = extent_[2];
  for (int64_t z = 0; z < dz; ++z) {
    for (int64_t y = 0; y < dy; ++y) {
      const auto src = labels.data.begin() + (z * dy + y) * dx;
      std::copy(src, src + dx,
                labels_.begin() + ((box.origin[0] + z) * ny + box.origin[1] + y) * nx +
                    box.origin[2]);
    }
  }
}

void LabelVolumeWriter::commit() {
  TESSERA_CHECK(!committed_);
  auto image = make_image<unsigned char>(extent_, geo_);
  std::copy(labels_.begin(), labels_.end(), image->GetBufferPointer());
  write_staged<unsigned char>(image, path_);
  committed_ = true;
}

// ---- free functions -------------------------------------------------------------------

void write_volume(const std::string& path, const Index& extent, const Georeference& geo,
                  const std::vector<float>& voxels, bool as_int16) {
  check_volume_extent(extent);
  TESSERA_CHECK(static_cast<int64_t>(voxels.size()) == voxel_count(extent));
  if (as_int16) {
    auto image = make_image<int16_t>(extent, geo);
    // Rounded and clamped to the int16 range; NaN has no int16 value and becomes 0.
    std::transform(voxels.begin(), voxels.end(), image->GetBufferPointer(), [](float v) {
      if (std::isnan(v)) return int16_t{0};
      return static_cast<int16_t>(std::clamp(std::round(v), -32768.0f, 32767.0f));
    });
    write_staged<int16_t>(image, path);
  } else {
    auto image = make_image<float>(extent, geo);
    std::copy(voxels.begin(), voxels.end(), image->GetBufferPointer());
    write_staged<float>(image, path);
  }
}

void write_dicom_series(const std::string& folder, const Index& extent,
                        const Georeference& geo_in, const std::vector<float>& hu) {
  check_volume_extent(extent);
  TESSERA_CHECK(static_cast<int64_t>(hu.size()) == voxel_count(extent));
  const Georeference geo = complete_volume_geometry(geo_in);
  const int64_t nz = extent[0];
  const auto slice_name = [&](int64_t k) {
    char name[32];
    std::snprintf(name, sizeof name, "slice_%04lld.dcm", static_cast<long long>(k + 1));
    return (fs::path(folder) / name).string();
  };

  try {
    fs::create_directories(folder);
    // Slices of an earlier series under our names would form a second series here.
    for (const auto& entry : fs::directory_iterator(folder)) {
      const std::string name = entry.path().filename().string();
      if (name.rfind("slice_", 0) == 0 && name.ends_with(".dcm")) fs::remove(entry.path());
    }
  } catch (const fs::filesystem_error& e) {
    fail(folder, std::string("cannot write DICOM series: ") + e.code().message());
  }

  // Stored values are uint16 = HU + 1024. GDCMImageIO inverts the rescale tags we give it on
  // write, so it receives HU as float (with the stored pixel format spelled out) and stores
  // (HU - intercept) / slope; handing it uint16 HU + 1024 would add the 1024 twice.
  auto image = make_image<float>(extent, geo);
  std::transform(hu.begin(), hu.end(), image->GetBufferPointer(), [](float v) {
    if (std::isnan(v)) return kDicomIntercept;  // no data: air
    return std::clamp(std::round(v), kDicomIntercept, 65535.0f + kDicomIntercept);
  });

  const std::string study_uid = new_dicom_uid();
  const std::string series_uid = new_dicom_uid();
  const std::string frame_uid = new_dicom_uid();
  const auto& d = geo.direction;  // row-major; columns are the x, y, z axes
  const double sz = geo.spacing[2];

  std::vector<itk::MetaDataDictionary> dictionaries(static_cast<size_t>(nz));
  itk::ImageSeriesWriter<Image3<float>, itk::Image<float, 2>>::DictionaryArrayType dictionary_ptrs;
  std::vector<std::string> files;
  for (int64_t k = 0; k < nz; ++k) {
    auto& dict = dictionaries[static_cast<size_t>(k)];
    const auto set = [&dict](const char* tag, const std::string& value) {
      itk::EncapsulateMetaData<std::string>(dict, tag, value);
    };
    set("0008|0016", "1.2.840.10008.5.1.4.1.1.2");  // SOP class: CT Image Storage
    set("0008|0018", new_dicom_uid());             // SOP instance
    set("0008|0008", "DERIVED\\SECONDARY\\AXIAL");  // image type
    set("0008|0060", "CT");
    set("0028|0002", "1");            // samples per pixel
    set("0028|0004", "MONOCHROME2");  // photometric interpretation (GDCM warns without it)
    set("0010|0010", "Tessera^Sample");
    set("0010|0020", "TESSERA");
    set("0020|000d", study_uid);
    set("0020|000e", series_uid);
    set("0020|0052", frame_uid);
    set("0020|0011", "1");                          // series number
    set("0020|0013", std::to_string(k + 1));        // instance number
    const double t = static_cast<double>(k) * sz;
    set("0020|0032", decimal_strings({geo.origin[0] + d[2] * t, geo.origin[1] + d[5] * t,
                                      geo.origin[2] + d[8] * t}));
    set("0020|0037", decimal_strings({d[0], d[3], d[6], d[1], d[4], d[7]}));
    set("0018|0050", decimal_string(sz));                                 // slice thickness
    set("0028|0030", decimal_strings({geo.spacing[1], geo.spacing[0]}));  // row\column
    set("0028|1052", "-1024");
    set("0028|1053", "1");
    set("0028|1054", "HU");
    set("0028|0100", "16");  // bits allocated
    set("0028|0101", "16");  // bits stored
    set("0028|0102", "15");  // high bit
    set("0028|0103", "0");   // unsigned
    dictionary_ptrs.push_back(&dict);
    files.push_back(slice_name(k));
  }

  try {
    auto io = itk::GDCMImageIO::New();
    io->KeepOriginalUIDOn();  // our study/series/instance UIDs, consistent across slices
    auto writer = itk::ImageSeriesWriter<Image3<float>, itk::Image<float, 2>>::New();
    writer->SetInput(image);
    writer->SetImageIO(io);
    writer->SetFileNames(files);
    writer->SetMetaDataDictionaryArray(&dictionary_ptrs);
    writer->Update();
  } catch (const itk::ExceptionObject& e) {
    std::error_code ignored;
    for (const auto& file : files) fs::remove(file, ignored);
    fail(folder, "cannot write DICOM series: " + short_reason(e));
  }
}

}  // namespace tessera::io
