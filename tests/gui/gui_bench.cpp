// Repaint benchmark: tessera_gui_bench [SIZE] [DIR]
// Writes a SIZE² (default 16384) 3-band GeoTIFF and a label raster with overviews into DIR
// (default a temp dir, reused if the files exist), then pans a 1280 × 800 RasterView across
// it at several zooms and prints the time of each repaint of the visible area (with overlay)
// and the time until every visible tile is loaded. A figure, not a check.
#include <QApplication>
#include <QElapsedTimer>
#include <QThread>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <vector>

#include <gdal.h>

#include "raster_view.hpp"

using tessera::gui::RasterView;

static void write(const std::string& path, int n, int bands, bool labels) {
  GDALAllRegister();
  const char* options[] = {"TILED=YES", "COMPRESS=DEFLATE", "BIGTIFF=YES", nullptr};
  GDALDatasetH ds = GDALCreate(GDALGetDriverByName("GTiff"), path.c_str(), n, n, bands, GDT_Byte,
                               const_cast<char**>(options));
  double gt[6] = {500000, 0.5, 0, 5800000, 0, -0.5};
  GDALSetGeoTransform(ds, gt);
  std::vector<uint8_t> strip(size_t(n) * 256);
  for (int b = 1; b <= bands; ++b)
    for (int y0 = 0; y0 < n; y0 += 256) {
      for (int y = 0; y < 256; ++y)
        for (int x = 0; x < n; ++x)
          strip[size_t(y) * n + x] = labels ? uint8_t(((x >> 7) + ((y0 + y) >> 7)) % 5)
                                            : uint8_t(((x >> 2) ^ ((y0 + y) >> 2)) * (b + 1));
      if (GDALRasterIO(GDALGetRasterBand(ds, b), GF_Write, 0, y0, n, 256, strip.data(), n, 256, GDT_Byte, 0, 0) !=
          CE_None)
        std::fprintf(stderr, "%s: write failed\n", path.c_str());
    }
  std::vector<int> f;
  for (int k = 2; n / k >= 128; k *= 2) f.push_back(k);
  if (GDALBuildOverviews(ds, labels ? "NEAREST" : "AVERAGE", int(f.size()), f.data(), 0, nullptr, nullptr, nullptr) !=
      CE_None)
    std::fprintf(stderr, "%s: building overviews failed\n", path.c_str());
  GDALClose(ds);
}

int main(int argc, char** argv) {
  if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM")) qputenv("QT_QPA_PLATFORM", "offscreen");
  QApplication app(argc, argv);
  const int n = argc > 1 ? std::atoi(argv[1]) : 16384;
  const std::filesystem::path dir = argc > 2 ? argv[2] : std::filesystem::temp_directory_path() / "tessera-gui-bench";
  std::filesystem::create_directories(dir);
  const std::string image = (dir / ("bench-" + std::to_string(n) + ".tif")).string();
  const std::string labels = (dir / ("bench-" + std::to_string(n) + "-labels.tif")).string();
  QElapsedTimer t;
  t.start();
  if (!std::filesystem::exists(image)) write(image, n, 3, false);
  if (!std::filesystem::exists(labels)) write(labels, n, 1, true);
  std::printf("data %d × %d ready in %.1f s (%s)\n", n, n, double(t.elapsed()) / 1000, image.c_str());

  const int64_t limit = 256ll << 20;
  RasterView view(nullptr, limit);
  view.resize(1280, 800);
  view.show();
  view.openRaster(QString::fromStdString(image), QString::fromStdString(labels));
  auto settle = [&] {
    QElapsedTimer w;
    w.start();
    do {
      view.repaint();
      QCoreApplication::processEvents(QEventLoop::AllEvents, 5);
      QThread::msleep(1);
    } while (!(view.hasImage() && view.missingTiles() == 0 && !view.loading()) && w.elapsed() < 60000);
    return double(w.elapsed());
  };
  settle();
  std::printf("%-8s %-6s %-12s %-12s %-12s %s\n", "scale", "level", "load ms", "repaint ms", "worst ms", "cache MiB");
  double worst_all = 0;
  for (double scale : {2.0, 1.0, 0.5, 0.25, 0.1, 0.03, 0.01}) {
    double load = 0, sum = 0, worst = 0;
    int frames = 0;
    for (int step = 0; step < 6; ++step) {
      const double c = n * (0.1 + 0.8 * step / 5.0);
      view.setView(QPointF(c, c * 0.7), scale);
      load += settle();
      for (int r = 0; r < 3; ++r) {
        QElapsedTimer p;
        p.start();
        view.repaint();
        const double ms = double(p.nsecsElapsed()) / 1e6;
        sum += ms;
        worst = std::max(worst, ms);
        ++frames;
      }
    }
    worst_all = std::max(worst_all, worst);
    std::printf("%-8.2f %-6d %-12.1f %-12.2f %-12.2f %.1f\n", scale, view.currentLevel(), load / 6, sum / frames, worst,
                double(view.cache().bytes()) / (1 << 20));
  }
  std::printf("worst repaint %.2f ms; peak cache %.1f MiB (limit %.0f MiB)\n", worst_all,
              double(view.cache().peak_bytes()) / (1 << 20), double(limit) / (1 << 20));
  return 0;
}
