#pragma once
// Background reading of raster tiles for RasterView (Qt's mandelbrot / QgsMapRendererJob
// pattern): worker threads each own their io raster readers, take the most recent requests
// first, and hand back decoded QImages through queued signals. The widget never does I/O.
// request() replaces whatever is still queued (tiles the user panned away from are
// dropped). The destructor cancels the queue and joins the workers.
// Thread safety: request()/probe() from the GUI thread; signals arrive in the GUI thread.
#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <QObject>
#include <QString>
#include <QVector>

#include "raster_pyramid.hpp"
#include "tile_cache.hpp"

namespace tessera::gui {

/// What the tiles are made of. `bands` are 1-based (1 band: grey, 3: RGB); the stretch maps
/// stretch.lo..hi of each band to 0..255.
struct RasterLayers {
  std::string image_path;
  std::string labels_path;  ///< empty: no overlay
  std::vector<int> bands;
  Stretch stretch;
  int tile = 256;
};

/// Decodes one level block into an RGB32 image with the stretch (NaN → dark grey).
QImage stretch_to_image(const LevelBlock& block, const Stretch& stretch);

class TileLoader : public QObject {
  Q_OBJECT

 public:
  explicit TileLoader(RasterLayers layers, int threads = 2, QObject* parent = nullptr);
  ~TileLoader() override;

  const RasterLayers& layers() const { return layers_; }
  /// Queue these tiles, most important first, replacing older queued requests.
  void request(const std::vector<TileKey>& keys);
  /// Read the full-resolution values under pixel (x, y); answered by probeReady.
  void probe(int x, int y);
  /// Tiles queued or being read.
  int busy() const;

 signals:
  void tileReady(tessera::gui::TileKey key, tessera::gui::Tile tile);
  void tileFailed(tessera::gui::TileKey key, QString message);
  void probeReady(int x, int y, QVector<double> values, int label);
  void idle();

 private:
  struct Job {
    bool is_probe = false;
    TileKey key;
    int x = 0, y = 0;
  };
  void work();
  Tile load(const RasterPyramid& image, const RasterPyramid* labels, const TileKey& key) const;

  RasterLayers layers_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Job> queue_;
  std::set<std::tuple<int, int, int>> in_flight_;
  std::atomic<bool> stop_{false};
  std::vector<std::thread> workers_;
};

}  // namespace tessera::gui
