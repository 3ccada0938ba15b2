// Volumes through ITK: round trips through every writable format and DICOM, atomic label
// output, and the errors a user sees for missing, truncated or empty input.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <tuple>
#include <numbers>
#include <set>
#include <string>
#include <vector>

#include "fixtures.hpp"
#include "tessera/core/error.hpp"
#include "tessera/io/open_image.hpp"
#include "tessera/io/volume.hpp"

namespace tessera::io {
namespace {
namespace fs = std::filesystem;

// Deliberately unequal axes so a transposed or reversed axis cannot pass.
const Index kExtent{8, 10, 12};  // (z, y, x)

std::vector<double> rotation_z(double degrees) {
  const double a = degrees * std::numbers::pi / 180.0, c = std::cos(a), s = std::sin(a);
  return {c, -s, 0, s, c, 0, 0, 0, 1};
}

// Row-major 3x3 product.
std::vector<double> multiply(const std::vector<double>& a, const std::vector<double>& b) {
  std::vector<double> m(9, 0.0);
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 3; ++c)
      for (int k = 0; k < 3; ++k) m[3 * r + c] += a[3 * r + k] * b[3 * k + c];
  return m;
}

// Anisotropic, off-origin, rotated about z and flipped in z (left-handed: NIfTI's qfac).
Georeference flipped_geometry() {
  Georeference geo;
  geo.spacing = {0.7, 0.8, 2.5};
  geo.origin = {-12.5, 30.25, 101.0};
  geo.direction = multiply(rotation_z(30.0), {1, 0, 0, 0, 1, 0, 0, 0, -1});
  return geo;
}

// Right-handed and oblique, as any DICOM frame must be.
Georeference oblique_geometry() {
  const double a = 10.0 * std::numbers::pi / 180.0;
  const std::vector<double> tilt_x{1, 0, 0, 0, std::cos(a), -std::sin(a), 0, std::sin(a),
                                   std::cos(a)};
  Georeference geo;
  geo.spacing = {0.7, 0.8, 2.5};
  geo.origin = {-120.5, 80.25, -301.0};
  geo.direction = multiply(rotation_z(30.0), tilt_x);
  return geo;
}

int64_t flat(int64_t z, int64_t y, int64_t x) { return (z * kExtent[1] + y) * kExtent[2] + x; }

// Fractional values (exact in float) so truncation or int conversion would show.
float formula(int64_t z, int64_t y, int64_t x) {
  return static_cast<float>(100 * z - 7 * y + 3 * x) + 0.25f;
}

std::vector<float> formula_volume() {
  std::vector<float> v(static_cast<size_t>(kExtent[0] * kExtent[1] * kExtent[2]));
  for (int64_t z = 0; z < kExtent[0]; ++z)
    for (int64_t y = 0; y < kExtent[1]; ++y)
      for (int64_t x = 0; x < kExtent[2]; ++x) v[flat(z, y, x)] = formula(z, y, x);
  return v;
}

void expect_geometry_near(const Georeference& got, const Georeference& want, double tol) {
  ASSERT_EQ(got.spacing.size(), 3u);
  ASSERT_EQ(got.origin.size(), 3u);
  ASSERT_EQ(got.direction.size(), 9u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_NEAR(got.spacing[i], want.spacing[i], tol) << "spacing " << i;
    EXPECT_NEAR(got.origin[i], want.origin[i], tol) << "origin " << i;
  }
  for (int i = 0; i < 9; ++i)
    EXPECT_NEAR(got.direction[i], want.direction[i], tol) << "direction " << i;
}

Box whole() { return Box{{0, 0, 0}, kExtent}; }

std::set<std::string> listing(const fs::path& folder) {
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(folder)) names.insert(e.path().filename().string());
  return names;
}

class VolumeIo : public ::testing::Test {
 protected:
  void SetUp() override {
    static std::atomic<int> counter{0};
    dir_ = fs::temp_directory_path() /
           ("tessera_volume_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string file(const std::string& name) const { return (dir_ / name).string(); }

  fs::path dir_;
};

struct FormatCase {
  std::string file_name;
  std::string format;
  std::set<std::string> files_after_write;
};

void PrintTo(const FormatCase& c, std::ostream* os) { *os << c.file_name; }

class VolumeFormats : public VolumeIo, public ::testing::WithParamInterface<FormatCase> {};

TEST_P(VolumeFormats, FloatRoundTripKeepsValuesAndGeometry) {
  const FormatCase& c = GetParam();
  const Georeference geo = flipped_geometry();
  write_volume(file(c.file_name), kExtent, geo, formula_volume(), /*as_int16=*/false);

  const std::set<std::string> files = listing(dir_);
  EXPECT_TRUE(files == c.files_after_write) << "unexpected files beside the output";

  VolumeReader reader(file(c.file_name));
  const ImageInfo& info = reader.info();
  EXPECT_EQ(info.path, file(c.file_name));
  EXPECT_EQ(info.kind, "volume");
  EXPECT_EQ(info.format, c.format);
  EXPECT_EQ(info.data_type, "Float32");
  EXPECT_EQ(info.extent, kExtent);
  EXPECT_EQ(info.channels, 1);
  ASSERT_EQ(info.nodata.size(), 1u);
  EXPECT_FALSE(info.nodata[0].has_value());
  expect_geometry_near(info.geo, geo, 1e-4);

  const Block<float> all = reader.read(whole());
  ASSERT_EQ(all.shape, (Index{1, 8, 10, 12}));
  for (int64_t z = 0; z < kExtent[0]; ++z)
    for (int64_t y = 0; y < kExtent[1]; ++y)
      for (int64_t x = 0; x < kExtent[2]; ++x)
        ASSERT_EQ(all.data[flat(z, y, x)], formula(z, y, x)) << z << "," << y << "," << x;
}

INSTANTIATE_TEST_SUITE_P(
    Formats, VolumeFormats,
    ::testing::Values(FormatCase{"ct.nii.gz", "NIfTI", {"ct.nii.gz"}},
                      FormatCase{"ct.nii", "NIfTI", {"ct.nii"}},
                      FormatCase{"ct.nrrd", "NRRD", {"ct.nrrd"}},
                      FormatCase{"ct.mha", "MetaImage", {"ct.mha"}},
                      FormatCase{"ct.mhd", "MetaImage", {"ct.mhd", "ct.zraw"}},
                      FormatCase{"ct.nhdr", "NRRD", {"ct.nhdr", "ct.raw.gz"}}),
    [](const auto& info) {
      std::string name = info.param.file_name;
      for (char& ch : name)
        if (ch == '.') ch = '_';
      return name;
    });

TEST_F(VolumeIo, ReadReturnsTheRequestedWindow) {
  write_volume(file("ct.nrrd"), kExtent, flipped_geometry(), formula_volume(), false);
  VolumeReader reader(file("ct.nrrd"));
  const Box box{{2, 3, 4}, {3, 5, 6}};
  const Block<float> block = reader.read(box);
  ASSERT_EQ(block.shape, (Index{1, 3, 5, 6}));
  for (int64_t z = 0; z < 3; ++z)
    for (int64_t y = 0; y < 5; ++y)
      for (int64_t x = 0; x < 6; ++x)
        EXPECT_EQ(block.data[(z * 5 + y) * 6 + x], formula(2 + z, 3 + y, 4 + x));
}

TEST_F(VolumeIo, Int16VolumeIsRoundedAndClamped) {
  std::vector<float> voxels = formula_volume();
  voxels[flat(1, 2, 3)] = 40000.0f;
  voxels[flat(4, 5, 6)] = -40000.0f;
  voxels[flat(7, 9, 11)] = -2.6f;
  write_volume(file("ct.nii.gz"), kExtent, flipped_geometry(), voxels, /*as_int16=*/true);

  VolumeReader reader(file("ct.nii.gz"));
  EXPECT_EQ(reader.info().data_type, "Int16");
  const Block<float> all = reader.read(whole());
  for (size_t i = 0; i < voxels.size(); ++i) {
    const float want = std::clamp(std::round(voxels[i]), -32768.0f, 32767.0f);
    ASSERT_EQ(all.data[i], want) << "voxel " << i;
  }
  EXPECT_EQ(all.data[flat(1, 2, 3)], 32767.0f);
  EXPECT_EQ(all.data[flat(4, 5, 6)], -32768.0f);
  EXPECT_EQ(all.data[flat(7, 9, 11)], -3.0f);
}

TEST_F(VolumeIo, LabelWriterRoundTripsCommittedWindows) {
  const Georeference geo = flipped_geometry();
  const Box first{{0, 0, 0}, {4, 10, 12}};
  const Box second{{5, 2, 3}, {2, 4, 7}};
  {
    LabelVolumeWriter writer(file("labels.nii.gz"), kExtent, geo);
    Block<uint8_t> ones(Index{1, 4, 10, 12});
    for (int64_t z = 0; z < 4; ++z)
      for (int64_t y = 0; y < 10; ++y)
        for (int64_t x = 0; x < 12; ++x) ones.data[(z * 10 + y) * 12 + x] = uint8_t(1 + (x % 2));
    writer.write(first, ones);
    Block<uint8_t> sevens(Index{1, 2, 4, 7});
    std::fill(sevens.data.begin(), sevens.data.end(), uint8_t{7});
    writer.write(second, sevens);
    EXPECT_FALSE(fs::exists(file("labels.nii.gz"))) << "output visible before commit";
    writer.commit();
  }
  EXPECT_EQ(listing(dir_), std::set<std::string>{"labels.nii.gz"});

  VolumeReader reader(file("labels.nii.gz"));
  EXPECT_EQ(reader.info().data_type, "Byte");
  EXPECT_EQ(reader.info().extent, kExtent);
  expect_geometry_near(reader.info().geo, geo, 1e-4);
  const Block<float> all = reader.read(whole());
  for (int64_t z = 0; z < kExtent[0]; ++z)
    for (int64_t y = 0; y < kExtent[1]; ++y)
      for (int64_t x = 0; x < kExtent[2]; ++x) {
        float want = 0.0f;
        if (first.contains(Box{{z, y, x}, {1, 1, 1}})) want = float(1 + (x % 2));
        if (second.contains(Box{{z, y, x}, {1, 1, 1}})) want = 7.0f;
        ASSERT_EQ(all.data[flat(z, y, x)], want) << z << "," << y << "," << x;
      }
}

TEST_F(VolumeIo, LabelWriterWithDetachedHeaderPublishesBothFiles) {
  {
    LabelVolumeWriter writer(file("labels.mhd"), kExtent, flipped_geometry());
    Block<uint8_t> block(Index{1, 1, 1, 1});
    block.data[0] = 9;
    writer.write(Box{{3, 4, 5}, {1, 1, 1}}, block);
    writer.commit();
  }
  EXPECT_EQ(listing(dir_), (std::set<std::string>{"labels.mhd", "labels.zraw"}));
  VolumeReader reader(file("labels.mhd"));
  const Block<float> all = reader.read(whole());
  EXPECT_EQ(all.data[flat(3, 4, 5)], 9.0f);
  EXPECT_EQ(all.data[flat(3, 4, 6)], 0.0f);
}

TEST_F(VolumeIo, UncommittedLabelWriterLeavesNothing) {
  for (const char* name : {"labels.nii.gz", "labels.mhd"}) {
    {
      LabelVolumeWriter writer(file(name), kExtent, flipped_geometry());
      writer.write(Box{{0, 0, 0}, {1, 1, 1}}, Block<uint8_t>(Index{1, 1, 1, 1}));
    }
    EXPECT_TRUE(listing(dir_).empty()) << name;
  }
}

TEST_F(VolumeIo, LabelWriterRejectsUnknownExtensionAtOnce) {
  try {
    LabelVolumeWriter writer(file("labels.png"), kExtent, flipped_geometry());
    FAIL() << "expected tessera::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(file("labels.png")), std::string::npos) << e.what();
  }
}

// Values that barely compress, so cutting a file in half cuts into the voxel data.
std::vector<float> noise_volume() {
  std::vector<float> noise(formula_volume().size());
  uint32_t state = 12345;
  for (float& v : noise) {
    state = state * 1664525u + 1013904223u;
    v = static_cast<float>(state >> 8);
  }
  return noise;
}

TEST_F(VolumeIo, TruncatedNiftiThrowsNamingTheFile) {
  const std::string path = file("ct.nii.gz");
  write_volume(path, kExtent, flipped_geometry(), noise_volume(), false);
  fs::resize_file(path, fs::file_size(path) / 2);
  try {
    VolumeReader reader(path);
    FAIL() << "expected tessera::Error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind(path + ": cannot read volume: ", 0), 0u) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
  }
}

// ITK reads short NIfTI and MetaImage data without complaint; the reader must not.
// (NRRD reports it itself, but ITK 5.2's NRRD error path leaks, which LeakSanitizer flags.)
TEST_F(VolumeIo, EveryTruncatedFormatThrows) {
  for (const char* name : {"ct.nii", "ct.mha", "ct.mhd"}) {
    const std::string path = file(name);
    write_volume(path, kExtent, flipped_geometry(), noise_volume(), false);
    const fs::path data = std::string(name) == "ct.mhd" ? dir_ / "ct.zraw" : fs::path(path);
    fs::resize_file(data, fs::file_size(data) * 3 / 4);
    try {
      VolumeReader reader(path);
      ADD_FAILURE() << name << ": expected tessera::Error";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_EQ(what.rfind(path + ": cannot read volume: ", 0), 0u) << what;
      EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    }
  }
}

TEST_F(VolumeIo, UnwritableDestinationThrowsNamingThePath) {
  const std::string path = file("missing_folder/ct.nii.gz");
  try {
    write_volume(path, kExtent, flipped_geometry(), formula_volume(), false);
    FAIL() << "expected tessera::Error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind(path + ": ", 0), 0u) << e.what();
  }
  try {
    LabelVolumeWriter writer(path, kExtent, flipped_geometry());
    FAIL() << "expected tessera::Error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind(path + ": ", 0), 0u) << e.what();
  }
  EXPECT_EQ(listing(dir_), std::set<std::string>{});
}

TEST_F(VolumeIo, MissingFileThrows) {
  const std::string path = file("absent.nii.gz");
  try {
    VolumeReader reader(path);
    FAIL() << "expected tessera::Error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), path + ": no such file");
  }
}

TEST_F(VolumeIo, NonVolumeFileThrows) {
  const std::string path = file("notes.nii.gz");
  std::ofstream(path) << "not a volume\n";
  try {
    VolumeReader reader(path);
    FAIL() << "expected tessera::Error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind(path + ": cannot read volume: ", 0), 0u) << e.what();
  }
}

TEST_F(VolumeIo, FolderWithoutDicomThrows) {
  for (bool with_text_file : {false, true}) {
    if (with_text_file) std::ofstream(dir_ / "notes.txt") << "not a DICOM file\n";
    try {
      VolumeReader reader(dir_.string());
      FAIL() << "expected tessera::Error";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(dir_.string()), std::string::npos) << what;
      EXPECT_NE(what.find("no DICOM series"), std::string::npos) << what;
    }
  }
}

TEST_F(VolumeIo, DicomSeriesRoundTripGivesHounsfieldUnitsAndGeometry) {
  // CT-like values from air through soft tissue, bone, and the ends of the stored range.
  std::vector<float> hu(formula_volume().size());
  for (int64_t z = 0; z < kExtent[0]; ++z)
    for (int64_t y = 0; y < kExtent[1]; ++y)
      for (int64_t x = 0; x < kExtent[2]; ++x)
        hu[flat(z, y, x)] = static_cast<float>(-1000 + 150 * z + 19 * y + 11 * x);
  hu[flat(0, 0, 0)] = -1024.0f;
  hu[flat(7, 9, 11)] = 2400.0f;
  hu[flat(3, 3, 3)] = -1000.0f;
  std::vector<float> want = hu;
  hu[flat(1, 1, 1)] = -3000.0f;  // below what uint16 HU + 1024 can hold
  want[flat(1, 1, 1)] = -1024.0f;
  hu[flat(2, 2, 2)] = std::nanf("");  // no data is written as air
  want[flat(2, 2, 2)] = -1024.0f;
  const Georeference geo = oblique_geometry();
  const fs::path folder = dir_ / "series";
  write_dicom_series(folder.string(), kExtent, geo, hu);
  EXPECT_EQ(listing(folder).size(), static_cast<size_t>(kExtent[0]));
  EXPECT_TRUE(fs::exists(folder / "slice_0001.dcm"));

  VolumeReader reader(folder.string());
  const ImageInfo& info = reader.info();
  EXPECT_EQ(info.format, "DICOM");
  EXPECT_EQ(info.extent, kExtent);
  expect_geometry_near(info.geo, geo, 1e-4);
  const Block<float> all = reader.read(whole());
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_NEAR(all.data[i], want[i], 1.0f) << "voxel " << i;
}

TEST_F(VolumeIo, DicomRewriteReplacesTheEarlierSeries) {
  const fs::path folder = dir_ / "series";
  const Georeference geo = oblique_geometry();
  std::vector<float> hu(formula_volume().size(), 40.0f);
  write_dicom_series(folder.string(), kExtent, geo, hu);
  const Index fewer{5, 10, 12};
  write_dicom_series(folder.string(), fewer, geo, std::vector<float>(5 * 10 * 12, -500.0f));
  VolumeReader reader(folder.string());
  EXPECT_EQ(reader.info().extent, fewer);
  EXPECT_EQ(reader.read(Box{{0, 0, 0}, fewer}).data.front(), -500.0f);
}

// ---- odd and broken files (tests/fixtures) ---------------------------------------------

std::string fixture(const std::string& name) { return (fixtures::fixtures_for_tests() / name).string(); }

std::string open_error(const std::string& path) {
  try {
    VolumeReader reader(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "(opened)";
}

int64_t peak_rss_kib() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss;
}

TEST(VolumeFixtures, ZeroOrNegativeSpacingIsRefusedNamingTheSpacing) {
  for (const char* name : {"zero_spacing.mha", "negative_spacing.mha", "zero_spacing.nrrd"}) {
    const std::string path = fixture(name), what = open_error(path);
    EXPECT_EQ(what.rfind(path + ": voxel spacing ", 0), 0u) << what;
    EXPECT_NE(what.find("every spacing must be positive"), std::string::npos) << what;
  }
}

// Refused from the header, before any allocation: the peak memory does not grow by the
// claimed size (10^18 voxels; 4 GiB for short_data.nrrd).
TEST(VolumeFixtures, HeaderClaimingHugeDimensionsIsRefusedBeforeAllocating) {
  const int64_t before = peak_rss_kib();
  for (const char* name : {"huge_header.mha", "huge_header.nrrd", "huge_header.nii", "short_data.nrrd"}) {
    const std::string path = fixture(name), what = open_error(path);
    EXPECT_EQ(what.rfind(path + ": ", 0), 0u) << what;
    const bool names_problem = what.find("more than this machine's memory") != std::string::npos ||
                               what.find("voxel data ends early") != std::string::npos;
    EXPECT_TRUE(names_problem) << what;
  }
  EXPECT_LT(peak_rss_kib() - before, 256 * 1024) << "KiB of peak RSS growth";
}

// Compressed MetaImage data without its byte count: MetaIO would size its buffer from the
// file's end (a damaged header made that exabytes; tests/fuzz regression
// metaio_compressed_without_size.mha). Refused from the header, naming the field.
TEST(VolumeFixtures, CompressedMetaImageWithoutItsSizeIsRefused) {
  const fs::path dir = fs::temp_directory_path() / ("tessera-mha-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string head = "ObjectType = Image\nNDims = 3\nDimSize = 4 4 4\nElementType = MET_UCHAR\nCompressedData = True\n";
  // MetaIO reads the flag past every separator by its first character: "== 1" is compressed too.
  {
    const std::string path = (dir / "digit_flag.mha").string();
    std::ofstream(path, std::ios::binary) << "ObjectType = Image\nNDims = 3\nDimSize = 4 4 4\nElementType = MET_UCHAR\n"
                                             "CompressedData == 1 1 1\nElementDataFile = LOCAL\n" << std::string(40, 'x');
    const std::string what = open_error(path);
    EXPECT_NE(what.find("gives no CompressedDataSize"), std::string::npos) << what;
  }
  for (const auto& [name, size_line, want] :
       {std::tuple{"no_size.mha", std::string(), std::string("gives no CompressedDataSize")},
        std::tuple{"zero_size.mha", std::string("CompressedDataSize = 0\n"), std::string("positive byte count")}}) {
    const std::string path = (dir / name).string();
    std::ofstream(path, std::ios::binary) << head << size_line << "ElementDataFile = LOCAL\n" << std::string(40, 'x');
    const std::string what = open_error(path);
    EXPECT_EQ(what.rfind(path + ": ", 0), 0u) << what;
    EXPECT_NE(what.find(want), std::string::npos) << what;
  }
  fs::remove_all(dir);
}

// File names choose the reader whatever their case, as on the scanners' and PACS exports.
TEST(VolumeFixtures, VolumeNamesAreRecognisedInAnyCase) {
  for (const char* name : {"/nowhere/SCAN.NII.GZ", "/nowhere/scan.Nii", "/nowhere/IM0001.DCM", "/nowhere/ct.MHA"})
    EXPECT_TRUE(is_volume_path(name)) << name;
  for (const char* name : {"/nowhere/SCENE.TIF", "/nowhere/scene.tif", "/nowhere/notes.txt"})
    EXPECT_FALSE(is_volume_path(name)) << name;
}

// A NIfTI-1 header whose sform (or qform, or spacing) holds NaN: ITK's SVD of the direction
// matrix aborts the process (a fuzz finding), so it is refused before ITK reads it, naming the
// field; the same file with finite values opens.
TEST(VolumeFixtures, NonFiniteNiftiGeometryIsRefusedNamingTheField) {
  const fs::path dir = fs::temp_directory_path() / ("tessera-nifti-nan-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  auto write = [&](const std::string& name, int field_offset, int16_t qform_code, int16_t sform_code) {
    std::vector<char> h(352, 0);
    auto put = [&](size_t at, auto v) { std::memcpy(h.data() + at, &v, sizeof v); };
    put(0, int32_t{348});
    for (int i = 0; i < 4; ++i) put(40 + 2 * size_t(i), int16_t{i == 0 ? 3 : 4});  // dim = 3, 4 x 4 x 4
    put(70, int16_t{2});   // datatype: uint8
    put(72, int16_t{8});   // bitpix
    for (int i = 0; i < 4; ++i) put(76 + 4 * size_t(i), 1.0f);  // qfac and spacing 1 mm
    put(108, 352.0f);      // vox_offset
    put(252, qform_code);
    put(254, sform_code);
    for (int r = 0; r < 3; ++r) put(280 + 16 * size_t(r) + 4 * size_t(r), 1.0f);  // identity srow
    if (field_offset > 0) put(size_t(field_offset), std::numeric_limits<float>::quiet_NaN());
    std::memcpy(h.data() + 344, "n+1", 4);
    const std::string path = (dir / name).string();
    std::ofstream out(path, std::ios::binary);
    out.write(h.data(), std::streamsize(h.size()));
    out << std::string(64, '\x01');
    return path;
  };
  for (const auto& [name, offset, q, s, want] :
       {std::tuple{"sform.nii", 296, int16_t{0}, int16_t{1}, "non-finite sform"},
        std::tuple{"qform.nii", 260, int16_t{1}, int16_t{0}, "non-finite qform"},
        std::tuple{"spacing.nii", 84, int16_t{1}, int16_t{1}, "non-finite pixdim"}}) {
    const std::string path = write(name, offset, q, s), what = open_error(path);
    EXPECT_EQ(what.rfind(path + ": ", 0), 0u) << what;
    EXPECT_NE(what.find(want), std::string::npos) << what;
  }
  // NaN in an sform that sform_code 0 tells ITK to ignore is not refused; nor is a finite file.
  EXPECT_EQ(VolumeReader(write("unused_sform.nii", 296, 1, 0)).info().extent, (Index{4, 4, 4}));
  EXPECT_EQ(VolumeReader(write("finite.nii", 0, 1, 1)).info().extent, (Index{4, 4, 4}));
  fs::remove_all(dir);
}

TEST(VolumeFixtures, FourDimensionalVolumeIsRefusedUnlessOneFrame) {
  const std::string path = fixture("four_d.nii.gz"), what = open_error(path);
  EXPECT_EQ(what.rfind(path + ": volume has 4 dimensions (12 x 10 x 8 x 3)", 0), 0u) << what;
  VolumeReader one(fixture("four_d_one_frame.nii.gz"));
  EXPECT_EQ(one.info().extent, (Index{8, 10, 12}));
  EXPECT_EQ(one.read(Box{{7, 9, 11}, {1, 1, 1}}).data[0], 100.0f * 7 - 7.0f * 9 + 3.0f * 11 + 0.25f);
}

TEST(VolumeFixtures, TwoDimensionalFileIsAOneSliceVolume) {
  VolumeReader reader(fixture("two_d.nii.gz"));
  EXPECT_EQ(reader.info().extent, (Index{1, 10, 12}));
  EXPECT_EQ(reader.info().geo.spacing.size(), 3u);
  const Block<float> b = reader.read(Box{{0, 0, 0}, {1, 10, 12}});
  EXPECT_EQ(b.data[3 * 12 + 5], -7.0f * 3 + 3.0f * 5 + 0.25f);
}

TEST(VolumeFixtures, NanVoxelsStayNan) {
  VolumeReader some(fixture("nan.nii.gz"));
  const Block<float> b = some.read(Box{{0, 0, 0}, some.info().extent});
  for (size_t i = 0; i < b.data.size(); ++i) ASSERT_EQ(std::isnan(b.data[i]), i % 5 == 0) << i;
  VolumeReader all(fixture("all_nan.nii.gz"));
  const Block<float> a = all.read(Box{{0, 0, 0}, all.info().extent});
  EXPECT_TRUE(std::all_of(a.data.begin(), a.data.end(), [](float v) { return std::isnan(v); }));
}

// One DICOM file is read as the series it belongs to; alone, it is a one-slice volume.
TEST(VolumeFixtures, SingleDicomFileOpensItsSeries) {
  VolumeReader folder(fixture("dicom_series"));
  ASSERT_EQ(folder.info().extent, (Index{4, 16, 16}));
  VolumeReader member(fixture("dicom_series/slice_0003.dcm"));
  EXPECT_EQ(member.info().extent, folder.info().extent);
  EXPECT_EQ(member.info().format, "DICOM");
  EXPECT_EQ(member.read(Box{{0, 0, 0}, {4, 16, 16}}).data, folder.read(Box{{0, 0, 0}, {4, 16, 16}}).data);
  VolumeReader alone(fixture("single_slice.dcm"));
  EXPECT_EQ(alone.info().extent, (Index{1, 16, 16}));
  EXPECT_EQ(alone.read(Box{{0, 0, 0}, {1, 16, 16}}).data, folder.read(Box{{1, 0, 0}, {1, 16, 16}}).data);
  const auto image = open_image(fixture("single_slice.dcm"));
  EXPECT_EQ(image->info().kind, "volume");
}

TEST(VolumeFixtures, EveryTruncatedFixtureIsRefused) {
  for (const char* name : {"truncated.nii.gz", "truncated.nii", "truncated.mha", "truncated.nrrd"}) {
    const std::string path = fixture(name), what = open_error(path);
    EXPECT_EQ(what.rfind(path + ": cannot read volume: ", 0), 0u) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
  }
}

// The threadsafe death-test child runs this body again from the top and then aborts; it
// reuses the parent's folder (passed through the environment), so nothing is left behind.
TEST(VolumeIoDeathTest, ReadOutsideTheVolumeIsAProgrammerError) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  constexpr const char* kVariable = "TESSERA_VOLUME_DEATH_TEST_DIR";
  const char* inherited = std::getenv(kVariable);
  const fs::path dir = inherited != nullptr
                           ? fs::path(inherited)
                           : fs::temp_directory_path() /
                                 ("tessera_volume_death_" + std::to_string(::getpid()));
  const std::string path = (dir / "ct.mha").string();
  if (inherited == nullptr) {
    fs::create_directories(dir);
    ::setenv(kVariable, dir.c_str(), 1);
    write_volume(path, kExtent, flipped_geometry(), formula_volume(), false);
  }
  VolumeReader reader(path);
  EXPECT_DEATH(reader.read(Box{{0, 0, 0}, {8, 10, 13}}), "internal check failed");
  EXPECT_DEATH(reader.read(Box{{-1, 0, 0}, {2, 2, 2}}), "internal check failed");
  if (inherited == nullptr) {
    ::unsetenv(kVariable);
    fs::remove_all(dir);
  }
}

}  // namespace
}  // namespace tessera::io
