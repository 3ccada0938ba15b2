// The side files that carry a label volume's class names and colours to ITK-SNAP and 3D
// Slicer: written beside it by LabelVolumeWriter with a style, read back by io's one codec
// (what tessera eval and the viewer use), in both formats; a malformed line names its file.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "tessera/core/error.hpp"
#include "tessera/io/label_sidecars.hpp"
#include "tessera/io/volume.hpp"

namespace tessera::io {
namespace {

namespace fs = std::filesystem;

struct Dir {
  fs::path path = fs::temp_directory_path() / ("tessera-sidecars-" + std::to_string(::getpid()));
  Dir() { fs::create_directories(path); }
  ~Dir() { fs::remove_all(path); }
  std::string file(const std::string& name) const { return (path / name).string(); }
};

void write_labels(const std::string& path, const LabelStyle& style) {
  Georeference geo;
  geo.spacing = {1, 1, 1};
  LabelVolumeWriter w(path, {2, 3, 4}, geo, style);
  Block<uint8_t> b({1, 2, 3, 4});
  for (size_t i = 0; i < b.data.size(); ++i) b.data[i] = i % 2 ? 1 : 7;  // 7: present, beyond the classes
  w.write(Box{{0, 0, 0}, {2, 3, 4}}, b);
  w.commit();
}

TEST(LabelSidecars, WrittenBesideTheVolumeAndReadBackInBothFormats) {
  Dir dir;
  const std::string labels = dir.file("seg.nii.gz");
  const auto style =
      LabelStyle().with_class_names({"background", "left kidney"}).with_class_colors({{0, 0, 0}, {185, 102, 83}}).with_classes(2);
  write_labels(labels, style);
  EXPECT_EQ(itksnap_sidecar_path(labels), dir.file("seg.itksnap.txt"));
  EXPECT_EQ(slicer_sidecar_path(labels), dir.file("seg_ColorTable.ctbl"));
  const std::vector<LabelEntry> want = {
      {0, "background", {0, 0, 0}, false}, {1, "left kidney", {185, 102, 83}, true}, {7, "class 7", label_color(7), true}};
  EXPECT_EQ(read_label_sidecars(labels), want);
  EXPECT_EQ(read_label_table(itksnap_sidecar_path(labels)), want);
  EXPECT_EQ(read_label_table(slicer_sidecar_path(labels)), want);  // underscores back to spaces
  std::ifstream slicer(slicer_sidecar_path(labels));
  std::string header;
  std::getline(slicer, header);
  EXPECT_EQ(header.rfind("# Color table file ", 0), 0u) << header;  // what Slicer looks for
  EXPECT_EQ(label_class_names(labels), (std::vector<std::string>{"background", "left kidney", "", "", "", "", "", "class 7"}));
  // Without the ITK-SNAP file the Slicer one is read.
  fs::remove(itksnap_sidecar_path(labels));
  EXPECT_EQ(read_label_sidecars(labels), want);
}

TEST(LabelSidecars, BackgroundNoneKeepsClassZeroVisibleAndABareWriterWritesNone) {
  Dir dir;
  write_labels(dir.file("a.nrrd"), LabelStyle().with_class_names({"water", "land"}).with_background("none").with_classes(2));
  EXPECT_TRUE(read_label_sidecars(dir.file("a.nrrd"))->front().visible);
  write_labels(dir.file("b.mha"), LabelStyle::bare());
  EXPECT_FALSE(read_label_sidecars(dir.file("b.mha")));
  EXPECT_FALSE(fs::exists(dir.file("b_ColorTable.ctbl")));
}

TEST(LabelSidecars, AMalformedLineNamesTheFileAndLine) {
  Dir dir;
  const std::string bad = dir.file("bad.ctbl");
  std::ofstream(bad) << "# Color table file bad.ctbl\n0 background 0 0 0 0\n1 liver red 1 2 3\n";
  try {
    read_label_table(bad);
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind(bad + ":3: ", 0), 0u) << e.what();
  }
  std::ofstream(bad) << "# nothing\n";
  EXPECT_THROW(read_label_table(bad), Error);
}

}  // namespace
}  // namespace tessera::io
