#pragma once
// Helpers for the GUI tests: waiting on the event loop and writing small GDAL rasters.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace tessera::gui::test {

/// Processes events until pred() holds or timeout_ms passes; returns pred().
bool wait_until(const std::function<bool()>& pred, int timeout_ms = 20000);

/// A fresh empty directory under the system temp dir, removed by the destructor.
struct TempDir {
  std::filesystem::path path;
  TempDir();
  ~TempDir();
  std::string file(const std::string& name) const { return (path / name).string(); }
};

/// Writes a tiled GeoTIFF, band-major values from value(band, x, y); EPSG:32633 with the
/// given geotransform; Byte data. With `overviews`, builds internal-style external .ovr.
void write_raster(const std::string& path, int width, int height, int bands,
                  const std::function<uint8_t(int band, int x, int y)>& value,
                  const std::vector<double>& geotransform = {500000, 0.5, 0, 5800000, 0, -0.5},
                  bool overviews = false);

}  // namespace tessera::gui::test
