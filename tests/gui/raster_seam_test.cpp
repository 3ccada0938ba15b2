// Tiles of the view meet without a seam: a constant-colour 800 × 700 scene (3 × 3 tiles of
// 256) shows no background-coloured pixel inside its screen area at fractional zooms and pan
// offsets, with and without a label overlay (issue 11, defect 6: a one-pixel line at x ≈ 512
// when a Landsat scene of that size was fit to the window).
#include <gtest/gtest.h>

#include <cstdio>

#include "gui_test_util.hpp"
#include "main_window.hpp"

namespace tessera::gui {
namespace {
using test::TempDir;
using test::wait_until;

constexpr int kW = 800, kH = 700;
const QRgb kBackground = qRgb(40, 40, 40);  // RasterView's fill outside the image

bool settle(RasterView* view) {
  return wait_until([view] {
    view->repaint();
    return view->hasImage() && view->missingTiles() == 0 && !view->loading();
  });
}

// Background-coloured pixels inside the image's screen area (within the widget).
int seam_pixels(RasterView* view) {
  const QImage shot = view->grab().toImage();
  const QRect area = view->imageRectToWidget(QRectF(0, 0, kW, kH)).intersected(shot.rect());
  int n = 0;
  for (int y = area.top(); y <= area.bottom(); ++y)
    for (int x = area.left(); x <= area.right(); ++x) n += shot.pixel(x, y) == kBackground;
  return n;
}

void expect_no_seam(const std::string& labels) {
  TempDir dir;
  const std::string image = dir.file("scene.tif");
  test::write_raster(image, kW, kH, 3, [](int, int, int) { return uint8_t(120); });
  if (!labels.empty()) test::write_raster(dir.file(labels), kW, kH, 1, [](int, int, int) { return uint8_t(1); });
  MainWindow window;
  window.resize(1100, 800);
  window.show();
  window.openImage(QString::fromStdString(image), labels.empty() ? QString() : QString::fromStdString(dir.file(labels)));
  RasterView* view = window.rasterView();
  ASSERT_TRUE(wait_until([&] { return view->hasImage(); }) && settle(view));
  view->fitToWindow();
  ASSERT_TRUE(settle(view));
  EXPECT_EQ(seam_pixels(view), 0) << "fit to window, scale " << view->scale();
  for (double scale : {0.6180339, 0.7291, 0.8333333, 0.917, 1.3719, 2.4142}) {
    for (double pan : {0.0, 0.31, 0.5, 0.77}) {
      view->setView(QPointF(kW / 2.0 + pan, 512.0 - pan / 2), scale);
      ASSERT_TRUE(settle(view));
      EXPECT_EQ(seam_pixels(view), 0) << "scale " << scale << ", pan " << pan;
    }
  }
}

TEST(RasterView, TilesMeetWithoutSeamAtFractionalZoomAndPan) { expect_no_seam(""); }

TEST(RasterView, TilesWithLabelsMeetWithoutSeamAtFractionalZoomAndPan) { expect_no_seam("labels.tif"); }

// Neighbouring tiles share their screen edge exactly: no gap, no overlap.
TEST(RasterView, NeighbouringImageRectsShareTheirScreenEdge) {
  RasterView view;
  view.resize(901, 637);
  for (double scale : {0.37, 0.6180339, 0.8333333, 1.0, 1.3719, 3.3})
    for (double cx : {400.0, 400.3, 411.77}) {
      view.setView(QPointF(cx, 350.41), scale);
      for (int x = 0; x < kW; x += 256) {
        const QRect a = view.imageRectToWidget(QRectF(x, 0, 256, 256));
        const QRect b = view.imageRectToWidget(QRectF(x + 256, 256, 256, 256));
        EXPECT_EQ(a.right() + 1, b.left()) << "scale " << scale << " x " << x;
        EXPECT_EQ(a.bottom() + 1, b.top()) << "scale " << scale << " x " << x;
      }
    }
}

}  // namespace
}  // namespace tessera::gui
