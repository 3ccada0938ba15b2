// DICOM input as a user meets it: a folder of several series is refused with a list of them
// unless one is chosen by UID; one file opens its whole series, or one slice when alone; the
// stored Window Center / Width comes with the volume. Series are written by
// io::write_dicom_series and edited with DCMTK; UIDs and tags are read back with DCMTK, a
// route apart from the GDCM reader under test.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "dicom_tags.hpp"
#include "error_of.hpp"
#include "tessera/io/dicom_seg.hpp"
#include "tessera/io/open_image.hpp"
#include "tessera/io/volume.hpp"

namespace tessera::io {
namespace {
namespace fs = std::filesystem;
using test::dicom_tag;
using test::error_of;
using test::set_dicom_tags;
using Tags = std::vector<std::pair<DcmTagKey, std::string>>;

// A series as written: what the reader must give back.
struct WrittenSeries {
  std::string uid;  // read back with DCMTK
  Index extent;
  std::vector<float> hu;           // whole HU, stored exactly as uint16 HU + 1024
  std::vector<std::string> files;  // slice 1 (z = 0) first
};

class DicomSeries : public ::testing::Test {
 protected:
  void SetUp() override {
    static std::atomic<int> counter{0};
    dir_ = fs::temp_directory_path() /
           ("tessera_dicom_series_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Writes a series of `extent` (z, y, x) with HU base + 7x + 3y + 50z, moves its slices into
  // `folder` as <prefix>_slice_NNNN.dcm and sets `tags` in every slice.
  WrittenSeries write(const fs::path& folder, const std::string& prefix, const Index& extent, float base,
                      const Tags& tags) {
    WrittenSeries s;
    s.extent = extent;
    for (int64_t z = 0; z < extent[0]; ++z)
      for (int64_t y = 0; y < extent[1]; ++y)
        for (int64_t x = 0; x < extent[2]; ++x) s.hu.push_back(base + float(7 * x + 3 * y + 50 * z));
    Georeference geo;
    geo.spacing = {0.7, 0.6, 2.0};
    geo.origin = {-10, -20, 30};
    geo.direction = {1, 0, 0, 0, 1, 0, 0, 0, 1};
    const fs::path scratch = dir_ / ("scratch_" + prefix);
    write_dicom_series(scratch.string(), extent, geo, s.hu);
    fs::create_directories(folder);
    for (int64_t z = 0; z < extent[0]; ++z) {
      char name[32];
      std::snprintf(name, sizeof name, "slice_%04lld.dcm", static_cast<long long>(z + 1));
      const fs::path to = folder / (prefix + "_" + name);
      fs::rename(scratch / name, to);
      if (!tags.empty()) set_dicom_tags(to.string(), tags);
      s.files.push_back(to.string());
    }
    fs::remove_all(scratch);
    s.uid = dicom_tag(s.files.front(), DCM_SeriesInstanceUID);
    return s;
  }

  // Two series in one folder: a CT "Abdomen" of 3 slices 8 x 10 and an "MR" "Chest" of 5
  // slices 6 x 7, with other values.
  std::pair<WrittenSeries, WrittenSeries> write_two(const fs::path& folder) {
    auto a = write(folder, "a", {3, 8, 10}, -500, {{DCM_SeriesDescription, "Abdomen"}});
    auto b = write(folder, "b", {5, 6, 7}, 100, {{DCM_SeriesDescription, "Chest"}, {DCM_Modality, "MR"}});
    return {a, b};
  }

  fs::path dir_;
};

std::vector<float> all_of(const ImageSource& image) { return image.read(Box{{0, 0, 0}, image.info().extent}).data; }

// One slice z of a written series.
std::vector<float> slice_of(const WrittenSeries& s, int64_t z) {
  const auto n = static_cast<size_t>(s.extent[1] * s.extent[2]);
  return {s.hu.begin() + static_cast<ptrdiff_t>(z * n), s.hu.begin() + static_cast<ptrdiff_t>((z + 1) * n)};
}

TEST(ImageOpenOptions, DefaultsAreValidAndAMalformedUidIsNamed) {
  EXPECT_NO_THROW(ImageOpenOptions().validate());
  EXPECT_NO_THROW(ImageOpenOptions().with_series_uid("1.2.840.10008.5.1.4").validate());
  for (const std::string& bad : std::vector<std::string>{"1.2.3a", " 1.2.3", "1.2.", std::string(65, '1')})
    EXPECT_EQ(error_of([&] { ImageOpenOptions().with_series_uid(bad).validate(); }).rfind("series_uid '" + bad + "'", 0),
              0u)
        << bad;
}

TEST_F(DicomSeries, FolderOfSeveralSeriesIsRefusedInOneLineListingThem) {
  const fs::path folder = dir_ / "two";
  const auto [a, b] = write_two(folder);
  ASSERT_NE(a.uid, b.uid);
  const std::string what = error_of([&] { open_image(folder.string()); });
  EXPECT_EQ(what.rfind(folder.string() + ": holds 2 DICOM series", 0), 0u) << what;
  EXPECT_EQ(what.find('\n'), std::string::npos) << what;
  EXPECT_NE(what.find(a.uid + " (CT, \"Abdomen\", 3 slices)"), std::string::npos) << what;
  EXPECT_NE(what.find(b.uid + " (MR, \"Chest\", 5 slices)"), std::string::npos) << what;
  // The viewer's reader refuses alike.
  EXPECT_EQ(error_of([&] { VolumeReader r(folder.string()); }), what);

  const auto listed = list_dicom_series(folder.string());
  ASSERT_EQ(listed.size(), 2u);
  const auto& first = a.uid < b.uid ? a : b;
  EXPECT_EQ(listed[0].uid, first.uid);
  EXPECT_EQ(listed[0].slices, first.extent[0]);
  EXPECT_EQ(listed[1].modality, a.uid < b.uid ? "MR" : "CT");
}

TEST_F(DicomSeries, EachChosenSeriesGivesItsOwnExtentAndValues) {
  const fs::path folder = dir_ / "two";
  const auto [a, b] = write_two(folder);
  for (const WrittenSeries* s : {&a, &b}) {
    const auto image = open_image(folder.string(), ImageOpenOptions().with_series_uid(s->uid));
    EXPECT_EQ(image->info().extent, s->extent);
    EXPECT_EQ(all_of(*image), s->hu);
    const auto& dicom = dynamic_cast<const VolumeReader&>(*image).dicom();
    ASSERT_TRUE(dicom.has_value());
    EXPECT_EQ(dicom->series.uid, s->uid);
    EXPECT_EQ(dicom->how, "chosen among the 2 series in the folder");
    // info().path reopens the same series without the UID: one of its files.
    EXPECT_EQ(fs::path(image->info().path).parent_path(), folder);
    const auto again = open_image(image->info().path);
    EXPECT_EQ(again->info().extent, s->extent);
    EXPECT_EQ(all_of(*again), s->hu);
    // So does a DICOM SEG's source, which is that path.
    EXPECT_NO_THROW(create_label_sink((dir_ / "seg.dcm").string(), image->info()));
  }
}

TEST_F(DicomSeries, UnknownUidOrUidForAnotherFormatIsRefused) {
  const fs::path folder = dir_ / "two";
  const auto [a, b] = write_two(folder);
  const std::string unknown = error_of([&] { open_image(folder.string(), ImageOpenOptions().with_series_uid("1.2.3")); });
  EXPECT_EQ(unknown.rfind(folder.string() + ": holds no DICOM series 1.2.3; it holds ", 0), 0u) << unknown;
  EXPECT_NE(unknown.find(a.uid), std::string::npos) << unknown;
  // A file of series a with b's UID.
  const std::string other = error_of([&] { open_image(a.files[1], ImageOpenOptions().with_series_uid(b.uid)); });
  EXPECT_EQ(other, a.files[1] + ": belongs to DICOM series " + a.uid + ", not " + b.uid);
  const std::string nifti = (dir_ / "ct.nii.gz").string();
  write_volume(nifti, {2, 3, 4}, {}, std::vector<float>(24, 0.0f), true);
  const std::string not_dicom = error_of([&] { open_image(nifti, ImageOpenOptions().with_series_uid(a.uid)); });
  EXPECT_EQ(not_dicom.rfind(nifti + ": a series UID (" + a.uid + ") chooses among DICOM series", 0), 0u) << not_dicom;
  EXPECT_EQ(error_of([&] { open_image(nifti, ImageOpenOptions().with_series_uid("x")); }).rfind("series_uid 'x'", 0), 0u);
}

TEST_F(DicomSeries, OneFileOfASeriesOpensTheWholeSeries) {
  const fs::path folder = dir_ / "two";
  const auto [a, b] = write_two(folder);
  for (const WrittenSeries* s : {&a, &b}) {
    VolumeReader reader(s->files[1]);
    EXPECT_EQ(reader.info().extent, s->extent);
    EXPECT_EQ(all_of(reader), s->hu);
    EXPECT_EQ(reader.info().path, s->files[1]);
    ASSERT_TRUE(reader.dicom().has_value());
    EXPECT_EQ(reader.dicom()->series.uid, s->uid);
    EXPECT_EQ(reader.dicom()->series.slices, s->extent[0]);
    // The type the files store (write_dicom_series: uint16 HU + 1024), not ITK's rescaled one
    // (`tessera info` said Int32 for a 16-bit series).
    EXPECT_EQ(reader.info().data_type, "UInt16");
    EXPECT_EQ(reader.dicom()->how, "the whole series, from the files beside " + fs::path(s->files[1]).filename().string());
    // Its own UID given is fine.
    EXPECT_EQ(open_image(s->files[1], ImageOpenOptions().with_series_uid(s->uid))->info().extent, s->extent);
  }
}

TEST_F(DicomSeries, LoneFileOpensAsOneSlice) {
  const auto [a, b] = write_two(dir_ / "two");
  // Alone in its folder, and beside another series' files only.
  for (const bool beside_b : {false, true}) {
    const fs::path folder = dir_ / (beside_b ? "beside_b" : "alone");
    fs::create_directories(folder);
    const fs::path lone = folder / "lone.dcm";
    fs::copy_file(a.files[1], lone);
    if (beside_b)
      for (const auto& f : b.files) fs::copy_file(f, folder / fs::path(f).filename());
    VolumeReader reader(lone.string());
    EXPECT_EQ(reader.info().extent, (Index{1, a.extent[1], a.extent[2]}));
    EXPECT_EQ(all_of(reader), slice_of(a, 1));
    ASSERT_TRUE(reader.dicom().has_value());
    EXPECT_EQ(reader.dicom()->series.uid, a.uid);
    EXPECT_EQ(reader.dicom()->how, "this file alone, a one-slice volume: no other file of its series beside it");
  }
}

TEST_F(DicomSeries, TheOnlySeriesOfAFolderOpensAsBefore) {
  const auto a = write(dir_ / "one", "a", {3, 8, 10}, -500, {});
  const auto image = open_image((dir_ / "one").string());
  EXPECT_EQ(image->info().path, (dir_ / "one").string());
  EXPECT_EQ(all_of(*image), a.hu);
  const auto& dicom = dynamic_cast<const VolumeReader&>(*image).dicom();
  ASSERT_TRUE(dicom.has_value());
  EXPECT_EQ(dicom->how, "the only series in the folder");
  EXPECT_EQ(dicom->series.slices, 3);
  EXPECT_EQ(dicom->series.modality, "CT");
  EXPECT_FALSE(dicom->window.has_value());  // write_dicom_series stores none
  ASSERT_EQ(list_dicom_series((dir_ / "one").string()).size(), 1u);
  EXPECT_EQ(describe(list_dicom_series((dir_ / "one").string())[0]), a.uid + " (CT, 3 slices)");
}

// One UID whose files differ in size: GDCM groups them apart; the largest group is read, and
// the summary says that it is part of the series.
TEST_F(DicomSeries, SeriesOfMixedSliceSizesReadsOneGroupAndSaysSo) {
  const fs::path folder = dir_ / "mixed";
  const auto a = write(folder, "a", {3, 8, 10}, -500, {});
  const auto c = write(folder, "c", {2, 6, 7}, 100, {});
  for (const auto& f : c.files) set_dicom_tags(f, {{DCM_SeriesInstanceUID, a.uid}});
  const auto listed = list_dicom_series(folder.string());
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].slices, 5);
  VolumeReader whole(folder.string());
  EXPECT_EQ(whole.info().extent, a.extent);
  EXPECT_EQ(all_of(whole), a.hu);
  EXPECT_EQ(whole.dicom()->how,
            "the only series in the folder; 3 of its 5 files: the others differ in size, slice thickness or series "
            "number");
  VolumeReader part(c.files[0]);
  EXPECT_EQ(part.info().extent, c.extent);
  EXPECT_EQ(all_of(part), c.hu);
  EXPECT_NE(part.dicom()->how.find("; 2 of its 5 files"), std::string::npos) << part.dicom()->how;
}

TEST_F(DicomSeries, StoredWindowIsTheFirstSlicesFirstValue) {
  const auto a = write(dir_ / "win", "a", {3, 8, 10}, -500, {{DCM_WindowCenter, "-600"}, {DCM_WindowWidth, "1500"}});
  // The first slice (z = 0, the one at the origin) holds two windows; the first counts.
  set_dicom_tags(a.files[0], {{DCM_WindowCenter, "40\\300"}, {DCM_WindowWidth, "400\\1800"}});
  VolumeReader reader((dir_ / "win").string());
  ASSERT_TRUE(reader.dicom().has_value());
  ASSERT_TRUE(reader.dicom()->window.has_value());
  EXPECT_EQ(reader.dicom()->window->center, 40.0);
  EXPECT_EQ(reader.dicom()->window->width, 400.0);
  // Opened through another slice, the series' first slice still decides.
  VolumeReader member(a.files[2]);
  ASSERT_TRUE(member.dicom()->window.has_value());
  EXPECT_EQ(member.dicom()->window->center, 40.0);
  // A width of 0 or a value that is no number is no window.
  for (const auto& [center, width] : std::vector<std::pair<std::string, std::string>>{{"40", "0"}, {"abc", "400"}}) {
    set_dicom_tags(a.files[0], {{DCM_WindowCenter, center}, {DCM_WindowWidth, width}});
    EXPECT_FALSE(VolumeReader((dir_ / "win").string()).dicom()->window.has_value()) << center << " " << width;
  }
  // Not DICOM: no summary at all.
  const std::string nifti = (dir_ / "ct.nii.gz").string();
  write_volume(nifti, {2, 3, 4}, {}, std::vector<float>(24, 0.0f), true);
  EXPECT_FALSE(VolumeReader(nifti).dicom().has_value());
}

}  // namespace
}  // namespace tessera::io
