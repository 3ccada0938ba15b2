// DICOM series: reading one (volume_dicom.hpp; finding and choosing it: dicom_series.cpp) and
// writing one (tessera::io::write_dicom_series: one CT slice per file, uint16 HU + 1024, fresh
// UIDs).
#include "volume_dicom.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <random>
#include <string_view>
#include <system_error>

#include <itkGDCMImageIO.h>
#include <itkImageSeriesReader.h>
#include <itkImageSeriesWriter.h>
#include <itkMetaDataObject.h>

#include "tessera/io/volume.hpp"
#include "volume_header_checks.hpp"

namespace tessera::io {
namespace fs = std::filesystem;

namespace detail {

Image3<float>::Pointer read_dicom_series(const std::string& path, const std::vector<std::string>& files,
                                         const itk::ImageIOBase::Pointer& gdcm_io) {
  if (files.empty()) fail(path, "no DICOM series found");
  gdcm_io->SetFileName(files.front());
  gdcm_io->ReadImageInformation();
  check_header(path, *gdcm_io);
  auto reader = itk::ImageSeriesReader<Image3<float>>::New();
  reader->SetImageIO(gdcm_io);
  reader->SetFileNames(files);
  reader->Update();
  return reader->GetOutput();
}

}  // namespace detail

namespace {
using detail::Image3;

// write_dicom_series stores uint16 HU + 1024, as many CT scanners do.
constexpr float kDicomIntercept = -1024.0f;

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

// Creates `folder` and removes the slices of an earlier series under our names, which would
// form a second series there.
void prepare_series_folder(const std::string& folder) {
  try {
    fs::create_directories(folder);
    for (const auto& entry : fs::directory_iterator(folder)) {
      const std::string name = entry.path().filename().string();
      if (name.rfind("slice_", 0) == 0 && name.ends_with(".dcm")) fs::remove(entry.path());
    }
  } catch (const fs::filesystem_error& e) {
    detail::fail(folder, std::string("cannot write DICOM series: ") + e.code().message());
  }
}

// The tags of every slice: one study, series and frame of reference, slice k's instance
// number and position along the volume's z axis, CT rescale to HU.
std::vector<itk::MetaDataDictionary> slice_dictionaries(const Georeference& geo, int64_t slices) {
  const std::string study_uid = new_dicom_uid();
  const std::string series_uid = new_dicom_uid();
  const std::string frame_uid = new_dicom_uid();
  const auto& d = geo.direction;  // row-major; columns are the x, y, z axes
  const double sz = geo.spacing[2];
  std::vector<itk::MetaDataDictionary> dictionaries(static_cast<size_t>(slices));
  for (int64_t k = 0; k < slices; ++k) {
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
  }
  return dictionaries;
}

}  // namespace

void write_dicom_series(const std::string& folder, const Index& extent,
                        const Georeference& geo_in, const std::vector<float>& hu) {
  detail::check_volume_extent(extent);
  TESSERA_CHECK(static_cast<int64_t>(hu.size()) == detail::voxel_count(extent));
  const Georeference geo = detail::complete_volume_geometry(geo_in);
  prepare_series_folder(folder);

  // Stored values are uint16 = HU + 1024. GDCMImageIO inverts the rescale tags we give it on
  // write, so it receives HU as float (with the stored pixel format spelled out) and stores
  // (HU - intercept) / slope; handing it uint16 HU + 1024 would add the 1024 twice.
  auto image = detail::make_image<float>(extent, geo);
  std::transform(hu.begin(), hu.end(), image->GetBufferPointer(), [](float v) {
    if (std::isnan(v)) return kDicomIntercept;  // no data: air
    return std::clamp(std::round(v), kDicomIntercept, 65535.0f + kDicomIntercept);
  });

  std::vector<itk::MetaDataDictionary> dictionaries = slice_dictionaries(geo, extent[0]);
  itk::ImageSeriesWriter<Image3<float>, itk::Image<float, 2>>::DictionaryArrayType dictionary_ptrs;
  std::vector<std::string> files;
  for (size_t k = 0; k < dictionaries.size(); ++k) {
    dictionary_ptrs.push_back(&dictionaries[k]);
    char name[32];
    std::snprintf(name, sizeof name, "slice_%04lld.dcm", static_cast<long long>(k + 1));
    files.push_back((fs::path(folder) / name).string());
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
    detail::fail(folder, "cannot write DICOM series: " + detail::short_reason(e));
  }
}

}  // namespace tessera::io
