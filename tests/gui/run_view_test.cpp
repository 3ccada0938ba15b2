// A run directory whose tiles appear one by one is shown growing (unfinished areas greyed),
// and once the stitched output exists the view equals it pixel for pixel.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "gui_test_util.hpp"
#include "main_window.hpp"
#include "tessera/core/colors.hpp"
#include "tessera/io/raster.hpp"

namespace tessera::gui {
namespace {
using test::TempDir;
using test::wait_until;

constexpr int kW = 512, kH = 384, kTw = 256, kTh = 192;
const std::vector<double> kGt = {500000, 0.5, 0, 5800000, 0, -0.5};

uint8_t image_value(int band, int, int y) { return y < 40 ? 0 : y >= 344 ? 255 : uint8_t(100 + 50 * band); }
uint8_t tile_label(int x, int y) { return uint8_t(1 + x / kTw + 2 * (y / kTh)); }

QRgb mix(QRgb img, QRgb c) {
  auto m = [](int a, int b) { return int(std::lround(0.5 * a + 0.5 * b)); };
  return qRgb(m(qRed(img), qRed(c)), m(qGreen(img), qGreen(c)), m(qBlue(img), qBlue(c)));
}
QRgb label_rgb(int l) {
  const Rgb c = label_color(l);
  return qRgb(c[0], c[1], c[2]);
}
constexpr QRgb kImage = 0xFF6496C8;

// Writes a label GeoTIFF of the window (x0, y0, w, h) the way `tessera infer` does.
void write_labels(const std::string& path, int x0, int y0, int w, int h) {
  Georeference geo;
  geo.geotransform = {kGt[0] + x0 * kGt[1], kGt[1], 0, kGt[3] + y0 * kGt[5], 0, kGt[5]};
  io::LabelRasterWriter writer(io::LabelRasterOptions(path, {h, w}, geo));
  Block<uint8_t> block({1, h, w});
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) block.data[size_t(y) * w + x] = tile_label(x0 + x, y0 + y);
  writer.write(Box{{0, 0}, {h, w}}, block);
  writer.commit();
}

QRgb pixel_at(RasterView* view, int x, int y) {
  return view->grab().toImage().pixel(view->imageToWidget(QPointF(x + 0.5, y + 0.5)).toPoint());
}

TEST(RunView, TilesAppearOneByOneAndTheFinalViewEqualsTheStitchedOutput) {
  TempDir run;
  const std::string image = run.file("scene.tif");
  test::write_raster(image, kW, kH, 3, image_value, kGt);
  std::ofstream(run.file("config.yaml")) << "data:\n  pairs:\n    - image: " << image
                                         << "\n  class_names: [background, field, road, water, forest]\n";
  std::filesystem::create_directories(run.path / "tiles");
  write_labels(run.file("tiles/tile_0_0.tif"), 0, 0, kTw, kTh);
  write_labels(run.file("tiles/tile_1_0.tif"), kTw, 0, kTw, kTh);

  MainWindow window;
  window.resize(1100, 800);
  window.show();
  window.openRun(QString::fromStdString(run.path.string()));
  RasterView* view = window.rasterView();
  auto shows = [&](int x, int y, QRgb want) {
    const bool ok = wait_until([&] {
      view->repaint();
      return window.viewReady() && pixel_at(view, x, y) == want;
    }, 15000);
    if (!ok)
      ADD_FAILURE() << "pixel (" << x << ", " << y << ") is " << std::hex << pixel_at(view, x, y) << ", want " << want
                    << std::dec << "; ready " << window.viewReady() << "; " << window.lastMessage().toStdString();
    return ok;
  };
  ASSERT_TRUE(window.showingLiveTiles());
  EXPECT_TRUE(shows(100, 100, mix(kImage, label_rgb(1))));          // finished tile
  EXPECT_TRUE(shows(300, 100, mix(kImage, label_rgb(2))));
  EXPECT_TRUE(shows(100, 300, mix(kImage, qRgb(70, 70, 70))));      // unfinished: greyed
  EXPECT_TRUE(window.lastMessage().contains("2 tile(s) finished")) << window.lastMessage().toStdString();

  write_labels(run.file("tiles/tile_0_1.tif"), 0, kTh, kTw, kTh);
  EXPECT_TRUE(shows(100, 300, mix(kImage, label_rgb(3))));          // grew
  EXPECT_TRUE(shows(300, 300, mix(kImage, qRgb(70, 70, 70))));
  write_labels(run.file("tiles/tile_1_1.tif"), kTw, kTh, kTw, kTh);
  EXPECT_TRUE(shows(300, 300, mix(kImage, label_rgb(4))));
  const QImage mosaic = view->grab().toImage();

  write_labels(run.file("labels.tif"), 0, 0, kW, kH);              // the stitched output
  ASSERT_TRUE(wait_until([&] {
    view->repaint();
    return !window.showingLiveTiles() && view->labelMeta() && view->labelMeta()->path == run.file("labels.tif") &&
           window.viewReady();
  }));
  const QImage stitched = view->grab().toImage();
  view->probePixel(300, 300);  // names come from the run's config.yaml
  EXPECT_TRUE(wait_until([&] { return window.readoutText().contains("label 4 forest"); }))
      << window.readoutText().toStdString();
  ASSERT_EQ(stitched.size(), mosaic.size());
  int differing = 0;
  for (int y = 0; y < stitched.height(); ++y)
    for (int x = 0; x < stitched.width(); ++x) differing += stitched.pixel(x, y) != mosaic.pixel(x, y);
  EXPECT_EQ(differing, 0);
}

}  // namespace
}  // namespace tessera::gui
