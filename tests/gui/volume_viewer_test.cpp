// Three linked slice views: the crosshair set in one view moves the other two (checked on
// the cursor and on pixels), the readout gives HU and LPS mm, a mismatched label volume
// gives a message, a DICOM series opens in the window stored with it.
#include <gtest/gtest.h>

#include <fstream>

#include <QApplication>
#include <QMouseEvent>
#include <QTest>

#include "dicom_tags.hpp"
#include "gui_test_util.hpp"
#include "main_window.hpp"
#include "tessera/io/volume.hpp"

namespace tessera::gui {
namespace {
using test::TempDir;
using test::wait_until;

constexpr int kNx = 40, kNy = 30, kNz = 20;

std::string write_ct(const TempDir& dir, const std::string& name, int nx, int ny, int nz) {
  Georeference geo;
  geo.spacing = {0.8, 0.8, 2.5};
  geo.origin = {-16, -12, -25};
  geo.direction = {1, 0, 0, 0, 1, 0, 0, 0, 1};
  std::vector<float> hu(size_t(nx) * ny * nz);
  for (int k = 0; k < nz; ++k)
    for (int j = 0; j < ny; ++j)
      for (int i = 0; i < nx; ++i) hu[(size_t(k) * ny + j) * nx + i] = float(-1000 + 10 * i + j + 100 * k);
  const std::string path = dir.file(name);
  io::write_volume(path, {nz, ny, nx}, geo, hu, true);
  return path;
}

bool has_crosshair_column(const QImage& img, int x) {
  int hits = 0;
  for (int y = 0; y < img.height(); ++y)
    if (img.pixel(x, y) == qRgb(255, 200, 0)) ++hits;
  return hits > img.height() / 3;
}

TEST(VolumeViewer, CrosshairInOneViewMovesTheOtherTwo) {
  TempDir dir;
  const std::string ct = write_ct(dir, "ct.nii.gz", kNx, kNy, kNz);
  MainWindow window;
  window.resize(1100, 800);
  window.show();
  window.openImage(QString::fromStdString(ct));
  ASSERT_TRUE(wait_until([&] { return window.volumeViewer()->volume() != nullptr; }))
      << window.lastMessage().toStdString();
  VolumeViewer* vv = window.volumeViewer();
  SliceView* axial = vv->view(Plane::Axial);
  SliceView* coronal = vv->view(Plane::Coronal);
  SliceView* sagittal = vv->view(Plane::Sagittal);
  // Click voxel (i = 10, j = 5) in the axial view.
  QTest::mouseClick(axial, Qt::LeftButton, {}, axial->slicePixelToWidget(10, 5).toPoint());
  EXPECT_EQ(vv->cursor()->voxel[0], 10);
  EXPECT_EQ(vv->cursor()->voxel[1], 5);
  EXPECT_EQ(coronal->sliceIndex(), 5);    // coronal slice = j
  EXPECT_EQ(sagittal->sliceIndex(), 10);  // sagittal slice = i
  // Pixels: the coronal view's vertical crosshair line now runs through column i = 10,
  // the sagittal view's through column j = 5.
  const QImage cor = coronal->grab().toImage(), sag = sagittal->grab().toImage();
  EXPECT_TRUE(has_crosshair_column(cor, int(coronal->slicePixelToWidget(10, 0).x())));
  EXPECT_TRUE(has_crosshair_column(sag, int(sagittal->slicePixelToWidget(5, 0).x())));
  EXPECT_FALSE(has_crosshair_column(cor, int(coronal->slicePixelToWidget(20, 0).x())));
  // Scrolling the sagittal view (wheel / Up key) moves i, and so the coronal crosshair.
  QTest::keyClick(sagittal, Qt::Key_Up);
  EXPECT_EQ(vv->cursor()->voxel[0], 11);
  // The displayed slice has the physical aspect: coronal pixel height/width = 2.5 / 0.8.
  const QPointF a = coronal->slicePixelToWidget(0, 0), b = coronal->slicePixelToWidget(1, 1);
  EXPECT_NEAR((b.y() - a.y()) / (b.x() - a.x()), 2.5 / 0.8, 1e-6);
}

TEST(VolumeViewer, ReadoutGivesHounsfieldAndLpsMillimetres) {
  TempDir dir;
  const std::string ct = write_ct(dir, "ct.nii.gz", kNx, kNy, kNz);
  VolumeViewer vv;
  vv.openVolume(QString::fromStdString(ct), {});
  ASSERT_TRUE(wait_until([&] { return vv.volume() != nullptr; }));
  // HU = −1000 + 10·3 + 4 + 100·2 = −766; LPS = origin + spacing · index.
  EXPECT_EQ(vv.readout(3, 4, 2).toStdString(),
            "voxel (3, 4, 2)  |  HU -766  |  LPS (-13.60, -8.80, -20.00) mm");
  vv.applyPreset(2);  // lung
  EXPECT_FLOAT_EQ(vv.cursor()->window, 1500);
  EXPECT_FLOAT_EQ(vv.cursor()->level, -600);
}

TEST(VolumeViewer, LabelVolumeOfAnotherSizeGivesAMessage) {
  TempDir dir;
  const std::string ct = write_ct(dir, "ct.nii.gz", kNx, kNy, kNz);
  const std::string other = write_ct(dir, "labels.nii.gz", 10, 10, 10);
  MainWindow window;
  window.openImage(QString::fromStdString(ct), QString::fromStdString(other));
  ASSERT_TRUE(wait_until([&] { return window.lastMessage().contains("overlay not shown"); }))
      << window.lastMessage().toStdString();
  ASSERT_NE(window.volumeViewer()->volume(), nullptr);
  EXPECT_TRUE(window.volumeViewer()->volume()->labels.empty());
}

TEST(VolumeViewer, MissingVolumeGivesAMessage) {
  MainWindow window;
  window.openImage("/nonexistent/ct.nii.gz");
  ASSERT_TRUE(wait_until([&] { return window.lastMessage().contains("/nonexistent/ct.nii.gz") &&
                                      !window.lastMessage().startsWith("Opening"); }));
}

}  // namespace
}  // namespace tessera::gui

namespace tessera::gui {
namespace {

TEST(VolumeViewer, ItkSnapLabelTableNamesLabelsInReadoutAndColoursOverlay) {
  TempDir dir;
  const std::string ct = write_ct(dir, "ct.nii.gz", kNx, kNy, kNz);
  Georeference geo;
  geo.spacing = {0.8, 0.8, 2.5};
  geo.origin = {-16, -12, -25};
  geo.direction = {1, 0, 0, 0, 1, 0, 0, 0, 1};
  const std::string labels = dir.file("labels.nii.gz");
  {
    io::LabelVolumeWriter w(labels, {kNz, kNy, kNx}, geo);
    Block<uint8_t> block({1, kNz, kNy, kNx});
    for (int k = 0; k < kNz; ++k)
      for (int j = 0; j < kNy; ++j)
        for (int i = 0; i < kNx; ++i) block.data[(size_t(k) * kNy + j) * kNx + i] = i < 20 ? 1 : 0;
    w.write(Box{{0, 0, 0}, {kNz, kNy, kNx}}, block);
    w.commit();
  }
  const std::string table = dir.file("labels.txt");
  {
    std::ofstream t(table);
    t << "# ITK-SNAP Label Description File\n"
      << "    0     0    0    0        0  0  0    \"Clear Label\"\n"
      << "    1    10  200   30        1  1  1    \"liver\"\n";
  }
  MainWindow window;
  window.resize(1100, 800);
  window.show();
  window.openImage(QString::fromStdString(ct), QString::fromStdString(labels));
  ASSERT_TRUE(wait_until([&] { return window.volumeViewer()->volume() != nullptr; }));
  ASSERT_TRUE(window.loadLabelTable(QString::fromStdString(table)));
  EXPECT_TRUE(window.volumeViewer()->readout(3, 4, 2).contains("label 1 liver"));
  // The axial view blends the table's colour (10, 200, 30) at opacity 0.5 over the grey.
  SliceView* axial = window.volumeViewer()->view(Plane::Axial);
  window.volumeViewer()->cursor()->setVoxel({30, 4, 2});
  const QImage img = axial->grab().toImage();
  const QRgb px = img.pixel(axial->slicePixelToWidget(3, 20).toPoint());
  const float hu = window.volumeViewer()->volume()->at(3, 20, 2);
  const auto& c = *window.volumeViewer()->cursor();
  const int g = std::clamp(int((hu - (c.level - c.window / 2)) * 255.0f / c.window + 0.5f), 0, 255);
  EXPECT_EQ(px, blend(qRgb(g, g, g), qRgb(10, 200, 30), 0.5f));
}

TEST(VolumeViewer, RightDragChangesWindowAndLevel) {
  TempDir dir;
  const std::string ct = write_ct(dir, "ct.nii.gz", kNx, kNy, kNz);
  VolumeViewer vv;
  vv.resize(800, 600);
  vv.show();
  vv.openVolume(QString::fromStdString(ct), {});
  ASSERT_TRUE(wait_until([&] { return vv.volume() != nullptr; }));
  const float w0 = vv.cursor()->window, l0 = vv.cursor()->level;
  SliceView* axial = vv.view(Plane::Axial);
  const QPoint from = axial->rect().center();
  QTest::mousePress(axial, Qt::RightButton, {}, from);
  QMouseEvent move(QEvent::MouseMove, QPointF(from + QPoint(40, -20)), axial->mapToGlobal(QPointF(from + QPoint(40, -20))),
                   Qt::NoButton, Qt::RightButton, Qt::NoModifier);
  QApplication::sendEvent(axial, &move);
  QTest::mouseRelease(axial, Qt::RightButton, {}, from + QPoint(40, -20));
  EXPECT_GT(vv.cursor()->window, w0);  // drag right widens the window
  EXPECT_GT(vv.cursor()->level, l0);   // drag up raises the level
}

}  // namespace
}  // namespace tessera::gui

namespace tessera::gui {
namespace {

// A CT series of 4 slices 12 x 16, HU −200 + 10i + 20j + 40k (air at voxel 0, so it reads as
// CT), with `tags` set in every slice through DCMTK.
std::string write_dicom_ct(const TempDir& dir, const std::string& name,
                           const std::vector<std::pair<DcmTagKey, std::string>>& tags) {
  constexpr int nx = 16, ny = 12, nz = 4;
  std::vector<float> hu(size_t(nx) * ny * nz);
  for (int k = 0; k < nz; ++k)
    for (int j = 0; j < ny; ++j)
      for (int i = 0; i < nx; ++i) hu[(size_t(k) * ny + j) * nx + i] = float(-200 + 10 * i + 20 * j + 40 * k);
  hu[0] = -1000;
  Georeference geo;
  geo.spacing = {0.8, 0.8, 2.5};
  const std::string folder = dir.file(name);
  io::write_dicom_series(folder, {nz, ny, nx}, geo, hu);
  for (const auto& entry : std::filesystem::directory_iterator(folder))
    if (!tags.empty()) tessera::test::set_dicom_tags(entry.path().string(), tags);
  return folder;
}

// The grey of axial pixel (3, 2) on the middle slice (k = 2, HU −200 + 30 + 40 + 80 = −50),
// far from the crosshair, and the grey that window / level give it by hand.
void expect_grey_of_minus_50(VolumeViewer& vv, float window, float level) {
  SliceView* axial = vv.view(Plane::Axial);
  ASSERT_EQ(vv.cursor()->voxel[2], 2);
  ASSERT_FLOAT_EQ(vv.volume()->at(3, 2, 2), -50.0f);
  const QImage img = axial->grab().toImage();
  const int g = std::clamp(int((-50.0f - (level - window / 2)) * 255.0f / window + 0.5f), 0, 255);
  EXPECT_EQ(img.pixel(axial->slicePixelToWidget(3, 2).toPoint()), qRgb(g, g, g));
}

TEST(VolumeViewer, DicomSeriesOpensInItsStoredWindow) {
  TempDir dir;
  struct Case { const char* center; const char* width; float level, window; };
  // 40 / 400 as asked; 100 / 700 matches no preset; a first value of several counts.
  for (const Case c : {Case{"40", "400", 40, 400}, Case{"100\\-600", "700\\1500", 100, 700}}) {
    const std::string ct = write_dicom_ct(dir, std::string("ct_") + c.center[0], {{DCM_WindowCenter, c.center},
                                                                                   {DCM_WindowWidth, c.width}});
    MainWindow window;
    window.resize(1100, 800);
    window.show();
    window.openImage(QString::fromStdString(ct));
    VolumeViewer* vv = window.volumeViewer();
    ASSERT_TRUE(wait_until([&] { return vv->volume() != nullptr; })) << window.lastMessage().toStdString();
    EXPECT_FLOAT_EQ(vv->cursor()->window, c.window);
    EXPECT_FLOAT_EQ(vv->cursor()->level, c.level);
    expect_grey_of_minus_50(*vv, c.window, c.level);
    // The status line says which series was read and how.
    EXPECT_TRUE(window.lastMessage().contains("the only series in the folder")) << window.lastMessage().toStdString();
    // Another preset, then the stored window again from the preset box's last entry.
    vv->applyPreset(2);
    EXPECT_FLOAT_EQ(vv->cursor()->window, 1500);
    vv->applyPreset(1 + int(ct_window_presets().size()));
    EXPECT_FLOAT_EQ(vv->cursor()->window, c.window);
    EXPECT_FLOAT_EQ(vv->cursor()->level, c.level);
  }
}

TEST(VolumeViewer, DicomSeriesWithoutStoredWindowKeepsTheCtDefault) {
  TempDir dir;
  const std::string ct = write_dicom_ct(dir, "ct", {});
  VolumeViewer vv;
  vv.resize(800, 600);
  vv.show();
  vv.openVolume(QString::fromStdString(ct), {});
  ASSERT_TRUE(wait_until([&] { return vv.volume() != nullptr; }));
  // The abdomen preset, as for any CT before.
  const auto& abdomen = ct_window_presets()[3];
  ASSERT_STREQ(abdomen.name, "Abdomen");
  EXPECT_FLOAT_EQ(vv.cursor()->window, abdomen.window);
  EXPECT_FLOAT_EQ(vv.cursor()->level, abdomen.level);
  expect_grey_of_minus_50(vv, abdomen.window, abdomen.level);
}

}  // namespace
}  // namespace tessera::gui
