// GoogleTest main for the GUI tests: a QApplication on the offscreen platform.
#include <QApplication>
#include <QElapsedTimer>
#include <QThread>
#include <gtest/gtest.h>

#include <atomic>
#include <random>

#include <gdal.h>
#include <cpl_conv.h>
#include <ogr_srs_api.h>

#include "gui_test_util.hpp"
#include "tessera/core/error.hpp"

namespace tessera::gui::test {

bool wait_until(const std::function<bool()>& pred, int timeout_ms) {
  QElapsedTimer t;
  t.start();
  while (!pred()) {
    if (t.elapsed() > timeout_ms) return false;
    QCoreApplication::processEvents(QEventLoop::AllEvents, 20);
    QThread::msleep(2);
  }
  return true;
}

TempDir::TempDir() {
  static std::atomic<int> n{0};
  path = std::filesystem::temp_directory_path() /
         ("tessera-gui-test-" + std::to_string(::getpid()) + "-" + std::to_string(n++));
  std::filesystem::create_directories(path);
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
}

void write_raster(const std::string& path, int width, int height, int bands,
                  const std::function<uint8_t(int, int, int)>& value, const std::vector<double>& gt, bool overviews) {
  GDALAllRegister();
  GDALDriverH driver = GDALGetDriverByName("GTiff");
  const char* options[] = {"TILED=YES", "BLOCKXSIZE=256", "BLOCKYSIZE=256", "COMPRESS=DEFLATE", nullptr};
  GDALDatasetH ds = GDALCreate(driver, path.c_str(), width, height, bands, GDT_Byte, const_cast<char**>(options));
  if (!ds) throw Error(path + ": cannot create test raster");
  GDALSetGeoTransform(ds, const_cast<double*>(gt.data()));
  OGRSpatialReferenceH srs = OSRNewSpatialReference(nullptr);
  OSRImportFromEPSG(srs, 32633);
  char* wkt = nullptr;
  OSRExportToWkt(srs, &wkt);
  GDALSetProjection(ds, wkt);
  CPLFree(wkt);
  OSRDestroySpatialReference(srs);
  std::vector<uint8_t> row(size_t(width) * 256);
  for (int b = 1; b <= bands; ++b)
    for (int y0 = 0; y0 < height; y0 += 256) {
      const int h = std::min(256, height - y0);
      for (int y = 0; y < h; ++y)
        for (int x = 0; x < width; ++x) row[size_t(y) * size_t(width) + size_t(x)] = value(b - 1, x, y0 + y);
      if (GDALRasterIO(GDALGetRasterBand(ds, b), GF_Write, 0, y0, width, h, row.data(), width, h, GDT_Byte, 0, 0) !=
          CE_None)
        throw Error(path + ": write failed");
    }
  if (overviews) {
    std::vector<int> f;
    for (int k = 2; std::max(width, height) / k >= 128; k *= 2) f.push_back(k);
    if (GDALBuildOverviews(ds, "AVERAGE", int(f.size()), f.data(), 0, nullptr, nullptr, nullptr) != CE_None)
      throw Error(path + ": building overviews failed");
  }
  GDALClose(ds);
}

}  // namespace tessera::gui::test

int main(int argc, char** argv) {
  if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM")) qputenv("QT_QPA_PLATFORM", "offscreen");
  QApplication app(argc, argv);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
