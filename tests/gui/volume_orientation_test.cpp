// What the viewer shows of a volume: radiological orientation whatever the direction matrix
// (checked on rendered pixels), CT values and window for a lone CT slice without air or a
// stored window, and a DICOM SEG over its series (labels on the series' grid, segment names).
#include <gtest/gtest.h>

#include <filesystem>

#include "gui_test_util.hpp"
#include "main_window.hpp"
#include "tessera/core/colors.hpp"
#include "tessera/io/dicom_seg.hpp"
#include "tessera/io/volume.hpp"

namespace tessera::gui {
namespace {
using test::TempDir;
using test::wait_until;

constexpr int kNx = 12, kNy = 10, kNz = 8;

struct Marked {
  std::array<int, 3> centre, left, anterior, superior;  // stored voxel indices
};

// A volume of zeros with four marked voxels: a centre (1000), one voxel towards the patient's
// left (2000), one anterior (3000), one superior (4000) of it. With a direction matrix D that
// permutes and flips the axes (unit spacing), an LPS step along axis r is a voxel step of D's
// row r (the inverse of D is its transpose) — worked out here independently of the viewer.
Marked write_marked(const std::string& path, const std::vector<double>& direction) {
  const std::array<int, 3> c{kNx / 2, kNy / 2, kNz / 2};
  const auto step = [&](int r, int sign) {
    std::array<int, 3> v = c;
    for (int a = 0; a < 3; ++a) v[size_t(a)] += sign * int(direction[size_t(r * 3 + a)]);
    return v;
  };
  const Marked m{c, step(0, 1), step(1, -1), step(2, 1)};
  std::vector<float> voxels(size_t(kNx) * kNy * kNz, 0.0f);
  const auto at = [&](std::array<int, 3> v) -> float& { return voxels[(size_t(v[2]) * kNy + v[1]) * kNx + v[0]]; };
  at(m.centre) = 1000;
  at(m.left) = 2000;
  at(m.anterior) = 3000;
  at(m.superior) = 4000;
  Georeference geo;
  geo.spacing = {1, 1, 1};
  geo.origin = {10, -20, 30};
  geo.direction = direction;
  io::write_volume(path, {kNz, kNy, kNx}, geo, voxels, true);
  return m;
}

// Where the grey of `value` (window 5000, level 2500) sits in a rendered slice.
QPoint find_value(const QImage& img, float value) {
  const int g = std::clamp(int(value * 255.0f / 5000.0f + 0.5f), 0, 255);
  for (int y = 0; y < img.height(); ++y)
    for (int x = 0; x < img.width(); ++x)
      if (img.pixel(x, y) == qRgb(g, g, g)) return {x, y};
  return {-1, -1};
}

TEST(VolumeOrientation, AnteriorUpAndPatientRightOnScreenLeftWhateverTheDirection) {
  TempDir dir;
  // Identity (LPS storage), RAS storage as NIfTI writers often leave it (an MR: P at the top and
  // L on the left before), and axes permuted with a flip (a sagittally acquired series).
  const std::vector<std::pair<std::string, std::vector<double>>> cases = {
      {"lps.mha", {1, 0, 0, 0, 1, 0, 0, 0, 1}},
      {"ras.nii.gz", {-1, 0, 0, 0, -1, 0, 0, 0, 1}},
      {"sagittal.mha", {0, 0, -1, 1, 0, 0, 0, -1, 0}},
  };
  for (const auto& [name, direction] : cases) {
    SCOPED_TRACE(name);
    const Marked m = write_marked(dir.file(name), direction);
    const auto v = load_volume(dir.file(name), {});
    const auto slice = [&](Plane p) {
      const int index = voxel_to_slice(*v, p, m.centre[0], m.centre[1], m.centre[2])[2];
      return render_slice(*v, p, index, 5000, 2500, nullptr);
    };
    const QImage axial = slice(Plane::Axial), coronal = slice(Plane::Coronal), sagittal = slice(Plane::Sagittal);
    const QPoint a0 = find_value(axial, 1000), c0 = find_value(coronal, 1000), s0 = find_value(sagittal, 1000);
    ASSERT_GE(a0.x(), 0);
    ASSERT_GE(c0.x(), 0);
    ASSERT_GE(s0.x(), 0);
    // Axial: the patient's left is screen right, anterior is up.
    EXPECT_EQ(find_value(axial, 2000), a0 + QPoint(1, 0));
    EXPECT_EQ(find_value(axial, 3000), a0 + QPoint(0, -1));
    // Coronal: left is screen right, superior is up.
    EXPECT_EQ(find_value(coronal, 2000), c0 + QPoint(1, 0));
    EXPECT_EQ(find_value(coronal, 4000), c0 + QPoint(0, -1));
    // Sagittal: anterior is screen left, superior is up.
    EXPECT_EQ(find_value(sagittal, 3000), s0 + QPoint(-1, 0));
    EXPECT_EQ(find_value(sagittal, 4000), s0 + QPoint(0, -1));
    // Slice pixels map back to the stored voxels (the cursor and readout use those).
    EXPECT_EQ(slice_to_voxel(*v, Plane::Axial, voxel_to_slice(*v, Plane::Axial, m.left[0], m.left[1], m.left[2])[2],
                             a0.x() + 1, a0.y()),
              m.left);
  }
}

// A CT slice with no air in it (a crop of soft tissue, 20..91 HU) and no stored window, alone
// in its folder: CT by its Modality, so HU in the readout and the CT default window.
TEST(VolumeOrientation, LoneCtSliceWithoutAirOrWindowOpensInHuAndTheCtWindow) {
  TempDir dir;
  std::vector<float> hu(size_t(kNx) * kNy);
  for (int j = 0; j < kNy; ++j)
    for (int i = 0; i < kNx; ++i) hu[size_t(j) * kNx + i] = float(20 + i + 5 * j);
  Georeference geo;
  geo.spacing = {0.7, 0.7, 3};
  const std::string folder = dir.file("ct");
  io::write_dicom_series(folder, {1, kNy, kNx}, geo, hu);
  const std::string file = (std::filesystem::path(folder) / "slice_0001.dcm").string();
  VolumeViewer vv;
  vv.resize(800, 600);
  vv.show();
  vv.openVolume(QString::fromStdString(file), {});
  ASSERT_TRUE(wait_until([&] { return vv.volume() != nullptr; }));
  const auto& abdomen = ct_window_presets()[3];
  EXPECT_FLOAT_EQ(vv.cursor()->window, abdomen.window);
  EXPECT_FLOAT_EQ(vv.cursor()->level, abdomen.level);
  EXPECT_TRUE(vv.readout(3, 2, 0).contains("HU 33")) << vv.readout(3, 2, 0).toStdString();
  // Pixels: voxel (3, 2) = 33 HU in the abdomen window.
  SliceView* axial = vv.view(Plane::Axial);
  const int g = std::clamp(int((33.0f - (abdomen.level - abdomen.window / 2)) * 255.0f / abdomen.window + 0.5f), 0, 255);
  EXPECT_EQ(axial->grab().toImage().pixel(axial->slicePixelToWidget(3, 2).toPoint()), qRgb(g, g, g));
}

// `tessera-view ct_dicom --labels seg.dcm`: the SEG (written by io's DicomSegWriter) placed on
// the series' grid, its segments' names in the readout and its colour in the overlay pixels.
TEST(VolumeOrientation, DicomSegOpensOverItsSeriesWithSegmentNames) {
  TempDir dir;
  std::vector<float> hu(size_t(kNx) * kNy * kNz, 40.0f);
  hu[0] = -1000;
  Georeference geo;
  geo.spacing = {0.8, 0.8, 2.5};
  const std::string folder = dir.file("ct");
  io::write_dicom_series(folder, {kNz, kNy, kNx}, geo, hu);
  const std::string seg = dir.file("seg.dcm");
  {
    io::DicomSegWriter writer(io::DicomSegOptions(seg, folder).with_class_names({"background", "liver", "kidney"}),
                              {kNz, kNy, kNx});
    Block<uint8_t> block(Index{1, kNz, kNy, kNx});
    for (int k = 0; k < kNz; ++k)
      for (int j = 0; j < kNy; ++j)
        for (int i = 0; i < kNx; ++i) block.data[(size_t(k) * kNy + j) * kNx + i] = i < 4 ? 2 : 0;
    writer.write(Box{{0, 0, 0}, {kNz, kNy, kNx}}, block);
    writer.commit();
  }
  MainWindow window;
  window.resize(1100, 800);
  window.show();
  window.openImage(QString::fromStdString(folder), QString::fromStdString(seg));
  ASSERT_TRUE(wait_until([&] { return window.volumeViewer()->volume() != nullptr && !window.isBusy(); }))
      << window.lastMessage().toStdString();
  const auto v = window.volumeViewer()->volume();
  ASSERT_FALSE(v->labels.empty()) << v->label_message.toStdString();
  EXPECT_EQ(v->label_at(1, 5, 3), 1);  // class 2, the SEG's only segment: number 1
  EXPECT_EQ(v->label_at(6, 5, 3), 0);
  EXPECT_TRUE(window.volumeViewer()->readout(1, 5, 3).contains("label 1 kidney"))
      << window.volumeViewer()->readout(1, 5, 3).toStdString();
  // The overlay is drawn in the segment's recommended colour (the writer's colour of class 2).
  window.volumeViewer()->cursor()->setVoxel({10, 8, 3});
  SliceView* axial = window.volumeViewer()->view(Plane::Axial);
  const QRgb px = axial->grab().toImage().pixel(axial->slicePixelToWidget(1, 2).toPoint());
  const Rgb kidney = label_color(2);
  const auto& c = *window.volumeViewer()->cursor();
  const int g = std::clamp(int((40.0f - (c.level - c.window / 2)) * 255.0f / c.window + 0.5f), 0, 255);
  const QRgb expected = blend(qRgb(g, g, g), qRgb(kidney[0], kidney[1], kidney[2]), c.overlay.opacity);
  EXPECT_NEAR(qRed(px), qRed(expected), 2);
  EXPECT_NEAR(qGreen(px), qGreen(expected), 2);
  EXPECT_NEAR(qBlue(px), qBlue(expected), 2);
}

}  // namespace
}  // namespace tessera::gui
