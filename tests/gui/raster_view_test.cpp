// RasterView through the main window, looking at pixels: overlay blend, outline, hidden
// labels, the readout of a georeferenced pixel, bad files, the bounded tile cache, and the
// analysts' outputs: a mosaic VRT of many scenes' labels and a COG with internal overviews.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>

#include <QElapsedTimer>
#include <cpl_conv.h>
#include <gdal.h>

#include "fixtures.hpp"
#include "gui_test_util.hpp"
#include "main_window.hpp"
#include "tessera/core/colors.hpp"
#include "tessera/io/label_style.hpp"
#include "tessera/io/reproject.hpp"

namespace tessera::gui {
namespace {
using test::TempDir;
using test::wait_until;

// 512 × 384, bands (100, 150, 200) with dark (0) top rows and bright (255) bottom rows, so
// the 2–98 % stretch is the identity and displayed colours equal the file's values.
uint8_t image_value(int band, int, int y) {
  if (y < 40) return 0;
  if (y >= 344) return 255;
  return uint8_t(100 + 50 * band);
}

uint8_t label_value(int, int x, int y) {
  if (x >= 100 && x < 200 && y >= 100 && y < 200) return 2;
  if (x >= 300 && x < 350 && y >= 150 && y < 250) return 1;
  if (x < 20 && y >= 100 && y < 120) return 255;
  return 0;
}

constexpr QRgb kImage = 0xFF6496C8;

QRgb expected(int label, double alpha) {
  const Rgb c = label_color(label);
  auto mix = [&](int i, int l) { return int(std::lround((1 - alpha) * i + alpha * l)); };
  return qRgb(mix(100, c[0]), mix(150, c[1]), mix(200, c[2]));
}

struct Files {
  TempDir dir;
  std::string image = dir.file("scene.tif"), labels = dir.file("labels.tif");
  Files() {
    test::write_raster(image, 512, 384, 3, image_value);
    test::write_raster(labels, 512, 384, 1, label_value);
    GDALDatasetH ds = GDALOpen(labels.c_str(), GA_Update);
    GDALSetMetadataItem(ds, "CLASS_2", "road", nullptr);
    GDALClose(ds);
  }
};

// Repaints until every visible tile is drawn.
bool settle(RasterView* view) {
  return wait_until([view] {
    view->repaint();
    return view->hasImage() && view->missingTiles() == 0 && !view->loading();
  });
}

QRgb pixel_at(RasterView* view, int x, int y) {
  const QImage g = view->grab().toImage();
  const QPoint p = view->imageToWidget(QPointF(x + 0.5, y + 0.5)).toPoint();
  return g.pixel(p);
}

struct Viewer {
  MainWindow window;
  Viewer() {
    window.resize(1100, 800);
    window.show();
  }
  bool open(const std::string& image, const std::string& labels) {
    window.openImage(QString::fromStdString(image), QString::fromStdString(labels));
    return wait_until([&] { return window.rasterView()->hasImage(); }) && settle(window.rasterView());
  }
};

TEST(RasterView, OverlayPixelHasBlendedColourForItsLabelAndOpacity) {
  Files f;
  Viewer v;
  ASSERT_TRUE(v.open(f.image, f.labels));
  RasterView* view = v.window.rasterView();
  view->setView(QPointF(200, 180), 2.0);
  ASSERT_TRUE(settle(view));
  EXPECT_EQ(pixel_at(view, 150, 150), expected(2, 0.5));  // label 2, default opacity 0.5
  EXPECT_EQ(pixel_at(view, 320, 200), expected(1, 0.5));
  EXPECT_EQ(pixel_at(view, 250, 150), kImage);             // label 0: transparent
  EXPECT_EQ(pixel_at(view, 10, 110), kImage);              // nodata: transparent
  v.window.legend()->setOpacity(0.8);
  EXPECT_EQ(pixel_at(view, 150, 150), expected(2, 0.8));
}

TEST(RasterView, ExportSavesTheViewWithOverlayAsPng) {
  Files f;
  Viewer v;
  ASSERT_TRUE(v.open(f.image, f.labels));
  RasterView* view = v.window.rasterView();
  view->setView(QPointF(200, 180), 2.0);
  ASSERT_TRUE(settle(view));
  const std::string png = f.dir.file("view.png");
  ASSERT_TRUE(v.window.exportView(QString::fromStdString(png)));
  const QImage saved(QString::fromStdString(png));
  ASSERT_EQ(saved.size(), view->size());
  const QPoint p = view->imageToWidget(QPointF(150.5, 150.5)).toPoint();
  EXPECT_EQ(saved.pixel(p), expected(2, 0.5));
  EXPECT_FALSE(v.window.exportView("/nonexistent-dir/view.png"));
  EXPECT_TRUE(v.window.lastMessage().contains("cannot write"));
}

TEST(RasterView, BandSelectionShowsTheChosenBands) {
  Files f;
  Viewer v;
  v.window.setBands({3, 2, 1});
  ASSERT_TRUE(v.open(f.image, f.labels));
  EXPECT_EQ(pixel_at(v.window.rasterView(), 250, 150), qRgb(200, 150, 100));
  v.window.setBands({2});  // one band: grey
  ASSERT_TRUE(wait_until([&] { return v.window.rasterView()->bands().size() == 1; }));
  ASSERT_TRUE(settle(v.window.rasterView()));
  EXPECT_EQ(pixel_at(v.window.rasterView(), 250, 150), qRgb(150, 150, 150));
  v.window.setBands({7, 1, 2});  // no band 7: the default, with a message
  ASSERT_TRUE(wait_until([&] { return v.window.lastMessage().contains("band selection"); }));
}

TEST(RasterView, OutlineModeLeavesInteriorsUnblended) {
  Files f;
  Viewer v;
  ASSERT_TRUE(v.open(f.image, f.labels));
  RasterView* view = v.window.rasterView();
  view->setView(QPointF(150, 150), 4.0);
  ASSERT_TRUE(settle(view));
  v.window.legend()->setOutline(true);
  EXPECT_EQ(pixel_at(view, 150, 150), kImage);            // interior of the label-2 block
  EXPECT_EQ(pixel_at(view, 100, 150), expected(2, 0.5));  // its left boundary
  EXPECT_EQ(pixel_at(view, 150, 199), expected(2, 0.5));  // its bottom boundary
}

TEST(RasterView, HiddenLabelIsNotDrawn) {
  Files f;
  Viewer v;
  ASSERT_TRUE(v.open(f.image, f.labels));
  RasterView* view = v.window.rasterView();
  view->setView(QPointF(250, 180), 2.0);
  ASSERT_TRUE(settle(view));
  ASSERT_TRUE(wait_until([&] { return view->countsReady(); }));
  EXPECT_EQ(view->labelCounts()[2], 100 * 100);
  v.window.legend()->setLabelVisible(2, false);
  EXPECT_EQ(pixel_at(view, 150, 150), kImage);
  EXPECT_EQ(pixel_at(view, 320, 200), expected(1, 0.5));
  // Show only the selected label: selecting 2 with the option on hides label 1.
  v.window.legend()->setLabelVisible(2, true);
  v.window.legend()->selectLabel(2);
  v.window.legend()->setShowOnlySelected(true);
  EXPECT_EQ(pixel_at(view, 150, 150), expected(2, 0.5));
  EXPECT_EQ(pixel_at(view, 320, 200), kImage);
}

// Map coordinates are the geotransform applied to the pixel CENTRE (x + 0.5, y + 0.5).
TEST(RasterView, ReadoutShowsValueLabelAndMapCoordinateOfAKnownPixel) {
  Files f;
  Viewer v;
  ASSERT_TRUE(v.open(f.image, f.labels));
  v.window.rasterView()->probePixel(120, 150);
  ASSERT_TRUE(wait_until([&] { return v.window.readoutText().contains("x 120  y 150"); }));
  const QString text = v.window.readoutText();
  EXPECT_TRUE(text.contains("B1 100 B2 150 B3 200")) << text.toStdString();
  EXPECT_TRUE(text.contains("label 2 road")) << text.toStdString();
  // E = 500000 + 120.5 · 0.5, N = 5800000 − 150.5 · 0.5 (EPSG:32633).
  EXPECT_TRUE(text.contains("X 500060.250  Y 5799924.750")) << text.toStdString();
  EXPECT_TRUE(text.contains("lon 15.00")) << text.toStdString();
  EXPECT_TRUE(text.contains("lat 52.3")) << text.toStdString();
}

// The raster fixtures of tests/fixtures written into `folder`; GDAL's PAM setting (which the
// fixture writer turns off) restored afterwards for the rest of this process.
void write_raster_fixtures(const std::filesystem::path& folder) {
  const std::string pam = CPLGetConfigOption("GDAL_PAM_ENABLED", "YES");
  std::filesystem::create_directories(folder);
  fixtures::make_raster_fixtures(folder);
  CPLSetConfigOption("GDAL_PAM_ENABLED", pam.c_str());
}

TEST(RasterView, CorruptAndTruncatedFilesGiveAMessageNotACrash) {
  TempDir dir;
  const std::string good = dir.file("good.tif"), truncated = dir.file("truncated.tif");
  test::write_raster(good, 512, 512, 3, [](int b, int x, int y) { return uint8_t((x * 7 + y * 13 + b) % 251); });
  std::filesystem::copy_file(good, truncated);
  std::filesystem::resize_file(truncated, std::filesystem::file_size(good) / 3);
  // corrupt_tile.tif opens and previews; its tile 3 (rows and columns 512-1023) is damaged.
  write_raster_fixtures(dir.path / "fixtures");
  const std::vector<std::string> bad = {truncated, dir.file("missing.tif"), dir.file("fixtures/corrupt_tile.tif")};
  for (const std::string& path : bad) {
    Viewer v;
    v.window.openImage(QString::fromStdString(path));
    const QString name = QString::fromStdString(std::filesystem::path(path).filename().string());
    ASSERT_TRUE(wait_until([&] {
      v.window.rasterView()->repaint();
      return !v.window.lastMessage().startsWith("Opening") && v.window.lastMessage().contains(name);
    })) << path << ": " << v.window.lastMessage().toStdString();
    std::printf("[ message ] %s\n", qPrintable(v.window.lastMessage()));
  }
}

TEST(RasterView, LabelMapOfAnotherSizeGivesAMessage) {
  Files f;
  const std::string small = f.dir.file("small_labels.tif");
  test::write_raster(small, 256, 256, 1, label_value);
  Viewer v;
  ASSERT_TRUE(v.open(f.image, small));
  ASSERT_TRUE(wait_until([&] { return v.window.lastMessage().contains("256 × 256"); }))
      << v.window.lastMessage().toStdString();
  EXPECT_FALSE(v.window.rasterView()->labelMeta().has_value());
  EXPECT_EQ(pixel_at(v.window.rasterView(), 150, 150), kImage);  // image still shown, no overlay
}

TEST(RasterView, TileCacheStaysUnderItsLimitWhilePanningALargeRaster) {
  TempDir dir;
  const int n = 4096;
  const std::string image = dir.file("large.tif"), labels = dir.file("large_labels.tif");
  test::write_raster(image, n, n, 3, [](int b, int x, int y) { return uint8_t((x / 3 + y / 5 + 40 * b) & 255); }, {0, 1, 0, 0, 0, -1}, true);
  test::write_raster(labels, n, n, 1, [](int, int x, int y) { return uint8_t(((x / 64) + (y / 64)) % 4); }, {0, 1, 0, 0, 0, -1}, true);
  const int64_t limit = 16ll << 20;
  RasterView view(nullptr, limit);
  view.resize(1024, 768);
  view.show();
  view.openRaster(QString::fromStdString(image), QString::fromStdString(labels));
  ASSERT_TRUE(settle(&view));
  double worst_ms = 0;
  for (double scale : {1.0, 0.5, 0.2, 0.05}) {
    double sum_ms = 0;
    int frames = 0;
    for (int step = 0; step <= 8; ++step) {
      const double c = 400 + (n - 800) * step / 8.0;
      view.setView(QPointF(c, c), scale);
      ASSERT_TRUE(settle(&view));
      EXPECT_LE(view.cache().bytes(), limit);
      QElapsedTimer t;
      t.start();
      view.repaint();
      const double ms = double(t.nsecsElapsed()) / 1e6;
      sum_ms += ms;
      worst_ms = std::max(worst_ms, ms);
      ++frames;
    }
    std::printf("[ figure  ] scale %.2f (level %d): repaint %.2f ms mean, cache %.1f MiB of %.0f MiB\n", scale,
                view.currentLevel(), sum_ms / frames, double(view.cache().bytes()) / (1 << 20),
                double(limit) / (1 << 20));
  }
  std::printf("[ figure  ] worst repaint %.2f ms, peak cache %.1f MiB, limit %.0f MiB\n", worst_ms,
              double(view.cache().peak_bytes()) / (1 << 20), double(limit) / (1 << 20));
  EXPECT_LE(view.cache().peak_bytes(), limit);
}

// What `tessera infer --mosaic` and `--cog` write, opened as the overlay: the mosaic VRT of two
// scenes' label rasters (io::build_scene_mosaic) shows each scene's classes at its place with
// the names the VRT carries; a COG label raster (io::restyle_label_raster with cog) has
// internal overviews the viewer reads when zoomed out, and still shows its classes there.
// image_value's pattern for any height: a dark top and a bright bottom tenth, so that the
// 2–98 % stretch is the identity and the middle shows kImage.
std::function<uint8_t(int, int, int)> banded_image(int height) {
  return [height](int band, int, int y) {
    if (y < height / 10 + 1) return uint8_t(0);
    if (y >= height - height / 10 - 1) return uint8_t(255);
    return uint8_t(100 + 50 * band);
  };
}

TEST(RasterView, MosaicVrtOfScenesShowsEachScenesLabelsWithTheirNames) {
  TempDir dir;
  const std::vector<double> left = {500000, 0.5, 0, 5800000, 0, -0.5}, right = {500064, 0.5, 0, 5800000, 0, -0.5};
  const std::string a = dir.file("scene_a.tif"), b = dir.file("scene_b.tif"), mosaic = dir.file("mosaic.vrt");
  test::write_raster(a, 128, 96, 1, [](int, int x, int y) { return uint8_t(x >= 20 && x < 60 && y >= 20 && y < 60 ? 2 : 0); }, left);
  test::write_raster(b, 128, 96, 1, [](int, int x, int y) { return uint8_t(x >= 70 && x < 110 && y >= 30 && y < 70 ? 1 : 0); }, right);
  io::build_scene_mosaic({a, b}, mosaic, io::LabelStyle().with_class_names({"vegetation", "building", "road"}).with_classes(3));
  const std::string image = dir.file("image.tif");  // the mosaic's grid: 256 x 96 from x = 500000
  test::write_raster(image, 256, 96, 3, banded_image(96), left);
  Viewer v;
  ASSERT_TRUE(v.open(image, mosaic));
  RasterView* view = v.window.rasterView();
  ASSERT_TRUE(view->labelMeta().has_value());
  EXPECT_EQ(view->labelMeta()->width, 256);
  EXPECT_EQ(view->labelMeta()->class_names[1], "building");
  EXPECT_EQ(view->labelMeta()->class_names[2], "road");
  view->setView(QPointF(128, 48), 3.0);
  ASSERT_TRUE(settle(view));
  EXPECT_EQ(pixel_at(view, 40, 40), expected(2, 0.5));        // scene a's road
  EXPECT_EQ(pixel_at(view, 128 + 90, 50), expected(1, 0.5));  // scene b's building, 128 px further east
  EXPECT_EQ(pixel_at(view, 90, 50), kImage);                  // scene a there is background
}

TEST(RasterView, CogLabelsOpenWithInternalOverviewsAndShowTheirClassesZoomedOut) {
  TempDir dir;
  const int n = 2048;
  const std::string labels = dir.file("labels.tif"), image = dir.file("image.tif");
  test::write_raster(labels, n, n, 1, [](int, int x, int y) { return uint8_t(x >= 512 && x < 1536 && y >= 512 && y < 1536 ? 2 : 0); });
  io::restyle_label_raster(labels, io::LabelStyle().with_classes(3).with_cog(true));
  test::write_raster(image, n, n, 3, banded_image(n));
  ASSERT_FALSE(std::filesystem::exists(labels + ".ovr"));  // overviews inside the file
  Viewer v;
  ASSERT_TRUE(v.open(image, labels));
  RasterView* view = v.window.rasterView();
  ASSERT_TRUE(view->labelMeta().has_value());
  EXPECT_GE(view->labelMeta()->overview_count, 2);
  view->setView(QPointF(n / 2.0, n / 2.0), 0.125);
  ASSERT_TRUE(settle(view));
  EXPECT_GE(view->currentLevel(), 2);
  EXPECT_EQ(pixel_at(view, 1024, 1024), expected(2, 0.5));
  EXPECT_EQ(pixel_at(view, 300, 300), kImage);
}

}  // namespace
}  // namespace tessera::gui
