// A label volume written by Tessera opens in the viewer with its class names, colours and
// background from the ITK-SNAP / Slicer side files written beside it (NIfTI has no names); a
// label GeoTIFF with the names and background in its own metadata (CLASS_<id>, LABEL_BACKGROUND).
#include <gtest/gtest.h>

#include <QTableWidget>

#include "gui_test_util.hpp"
#include "main_window.hpp"
#include "tessera/io/label_sidecars.hpp"
#include "tessera/io/raster.hpp"
#include "tessera/io/volume.hpp"

namespace tessera::gui {
namespace {
using test::TempDir;
using test::wait_until;

constexpr int kNx = 24, kNy = 20, kNz = 6;

Georeference geometry() {
  Georeference geo;
  geo.spacing = {1, 1, 2};
  geo.origin = {0, 0, 0};
  geo.direction = {1, 0, 0, 0, 1, 0, 0, 0, 1};
  return geo;
}

// The legend's row of `label`: its check state and name; nullopt when there is none.
std::optional<std::pair<bool, QString>> legend_row(MainWindow& w, int label) {
  QTableWidget* t = w.legend()->table();
  for (int r = 0; r < t->rowCount(); ++r)
    if (t->item(r, 0)->data(Qt::UserRole).toInt() == label)
      return std::pair{t->item(r, 0)->checkState() == Qt::Checked, t->item(r, 1)->text()};
  return std::nullopt;
}

TEST(LabelSidecars, VolumeLabelsOpenWithTheirNamesAndClassZeroCheckedWhenNotBackground) {
  TempDir dir;
  const std::string ct = dir.file("ct.nii.gz"), labels = dir.file("labels.nii.gz");
  io::write_volume(ct, {kNz, kNy, kNx}, geometry(), std::vector<float>(size_t(kNx) * kNy * kNz, 40.f), true);
  {
    const auto style = io::LabelStyle()
                           .with_class_names({"water", "liver"})
                           .with_class_colors({{31, 120, 180}, {221, 130, 101}})
                           .with_background("none")
                           .with_classes(2);
    io::LabelVolumeWriter w(labels, {kNz, kNy, kNx}, geometry(), style);
    Block<uint8_t> block({1, kNz, kNy, kNx});
    for (size_t i = 0; i < block.data.size(); ++i) block.data[i] = (i % kNx) < 10 ? 1 : 0;
    w.write(Box{{0, 0, 0}, {kNz, kNy, kNx}}, block);
    w.commit();
  }
  ASSERT_TRUE(std::filesystem::exists(io::itksnap_sidecar_path(labels)));
  ASSERT_TRUE(std::filesystem::exists(io::slicer_sidecar_path(labels)));
  MainWindow window;
  window.resize(900, 700);
  window.show();
  window.openImage(QString::fromStdString(ct), QString::fromStdString(labels));
  ASSERT_TRUE(wait_until([&] { return window.volumeViewer()->volume() != nullptr && legend_row(window, 1); }))
      << window.lastMessage().toStdString();
  const auto zero = legend_row(window, 0), one = legend_row(window, 1);
  ASSERT_TRUE(zero && one);
  EXPECT_EQ(one->second.toStdString(), "liver");
  EXPECT_EQ(zero->second.toStdString(), "water");
  EXPECT_TRUE(zero->first) << "class 0 is a class (background none): it starts checked";
  EXPECT_TRUE(window.volumeViewer()->readout(3, 4, 2).contains("label 1 liver"));
}

// A label GeoTIFF as `tessera infer` writes it (LabelRasterWriter with the model's style) on
// the grid of `image`: class 1 in the left columns, class 0 (water or background) elsewhere.
void write_label_geotiff(const std::string& image, const std::string& labels, const std::string& background) {
  const auto geo = io::RasterReader(image).info().geo;
  io::LabelRasterWriter w(io::LabelRasterOptions(labels, {kNy, kNx}, geo)
                              .with_style(io::LabelStyle()
                                              .with_class_names({"water", "building"})
                                              .with_background(background)
                                              .with_classes(2)));
  Block<uint8_t> block({1, kNy, kNx});
  for (size_t i = 0; i < block.data.size(); ++i) block.data[i] = (i % kNx) < 10 ? 1 : 0;
  w.write(Box{{0, 0}, {kNy, kNx}}, block);
  w.commit();
}

// data.background none (class 0 is water): class 0 starts checked; data.background 0: unchecked;
// then a label raster that says nothing after one that said none: unchecked again.
TEST(LabelSidecars, LabelGeoTiffStartsClassZeroCheckedOnlyWhenItIsAClass) {
  TempDir dir;
  const std::string image = dir.file("scene.tif");
  test::write_raster(image, kNx, kNy, 3, [](int b, int x, int y) { return uint8_t(40 * b + x + y); });
  const std::string water = dir.file("water.tif"), background = dir.file("background.tif"), bare = dir.file("bare.tif");
  write_label_geotiff(image, water, "none");
  write_label_geotiff(image, background, "0");
  test::write_raster(bare, kNx, kNy, 1, [](int, int x, int) { return uint8_t(x < 10 ? 1 : 0); });
  MainWindow window;
  window.resize(900, 700);
  window.show();
  const auto zero_after_opening = [&](const std::string& labels) {
    window.openImage(QString::fromStdString(image), QString::fromStdString(labels));
    EXPECT_TRUE(wait_until([&] { return window.viewReady() && legend_row(window, 0) && legend_row(window, 1); }))
        << labels << ": " << window.lastMessage().toStdString();
    return legend_row(window, 0);
  };
  const auto as_water = zero_after_opening(water);
  ASSERT_TRUE(as_water);
  EXPECT_EQ(as_water->second.toStdString(), "water");
  EXPECT_TRUE(as_water->first) << "class 0 is a class (LABEL_BACKGROUND none): it starts checked";
  const auto as_background = zero_after_opening(background);
  ASSERT_TRUE(as_background);
  EXPECT_FALSE(as_background->first) << "class 0 is the background: it starts unchecked";
  ASSERT_TRUE(zero_after_opening(water)->first);
  const auto unsaid = zero_after_opening(bare);
  ASSERT_TRUE(unsaid);
  EXPECT_FALSE(unsaid->first) << "labels that do not say: class 0 is the background, as before";
}

}  // namespace
}  // namespace tessera::gui
