#pragma once
// RasterView: pans and zooms over a 2-D raster of any size with an optional label overlay.
// Draws only the visible tiles of the level matching the zoom (level k = 2^k downsampling,
// read from the file's overviews), from a bounded TileCache; missing tiles are requested from
// a TileLoader (worker threads) and drawn from a coarser cached level meanwhile.
// Coordinates: "image" = full-resolution pixel (x = column, y = row, origin top-left
// corner of pixel (0, 0)); scale = screen pixels per image pixel.
// Opening is asynchronous: openRaster() returns at once; opened() or failed() follows.
#include <array>
#include <memory>
#include <optional>
#include <thread>

#include <QElapsedTimer>
#include <QPointF>
#include <QWidget>

#include "overlay_compositor.hpp"
#include "raster_pyramid.hpp"
#include "tile_cache.hpp"
#include "tile_loader.hpp"

namespace tessera::gui {

/// What the readout shows for one pixel (full resolution).
struct RasterProbe {
  int x = -1, y = -1;
  QVector<double> values;
  int label = -1;
};

class RasterView : public QWidget {
  Q_OBJECT

 public:
  explicit RasterView(QWidget* parent = nullptr, int64_t cache_bytes = 256ll << 20);
  ~RasterView() override;

  /// Opens image (and labels, may be empty) in a worker; emits opened() or failed().
  /// `bands` (1-based; one band: grey, three: RGB) defaults to the first three (or one).
  /// `keep_view`: keep centre and zoom (a reload of the same scene, e.g. new run tiles).
  void openRaster(const QString& image, const QString& labels, const std::vector<int>& bands = {},
                  bool keep_view = false);
  const std::vector<int>& bands() const { return bands_; }
  bool hasImage() const { return loader_ != nullptr; }
  /// Text shown in the empty view (e.g. why a file could not be opened).
  void setPlaceholder(const QString& text) {
    placeholder_ = text;
    update();
  }
  QString placeholder() const { return placeholder_; }
  const RasterMeta& meta() const { return meta_; }
  const std::optional<RasterMeta>& labelMeta() const { return label_meta_; }

  void setOverlayStyle(const OverlayStyle& style);
  const OverlayStyle& overlayStyle() const { return style_; }
  /// Centre (image pixels) and scale (screen px per image px).
  void setView(QPointF center, double scale);
  void fitToWindow();
  QPointF center() const { return center_; }
  double scale() const { return scale_; }
  int currentLevel() const;
  QPointF widgetToImage(QPointF p) const;
  QPointF imageToWidget(QPointF p) const;
  /// The widget pixels an image rectangle covers: each edge rounded on its own, so
  /// rectangles that share an edge in the image share it on screen (no gap, no overlap).
  QRect imageRectToWidget(const QRectF& image_rect) const;
  /// Asks the loader for the values under an image pixel; answered by probed().
  void probePixel(int x, int y);

  const TileCache& cache() const { return cache_; }
  /// Tiles the last paint wanted but did not have; 0 when the view is complete.
  int missingTiles() const { return missing_; }
  bool loading() const { return loader_ && (loader_->busy() > 0 || missing_ > 0); }
  double lastPaintMs() const { return last_paint_ms_; }
  const std::array<int64_t, 256>& labelCounts() const { return counts_; }
  bool countsReady() const { return counts_ready_; }

 signals:
  void opened();
  void failed(QString message);
  void message(QString text);
  void probed(tessera::gui::RasterProbe probe);
  void countsChanged();
  void viewComplete();

 protected:
  void paintEvent(QPaintEvent*) override;
  void wheelEvent(QWheelEvent*) override;
  void mousePressEvent(QMouseEvent*) override;
  void mouseMoveEvent(QMouseEvent*) override;
  void mouseReleaseEvent(QMouseEvent*) override;
  void keyPressEvent(QKeyEvent*) override;
  void resizeEvent(QResizeEvent*) override;

 private:
  struct OpenResult;
  void finishOpen(std::shared_ptr<OpenResult> r);
  void onTile(TileKey key, Tile tile);
  void stopJobs();
  bool drawFallback(QPainter& p, const TileKey& key, const QRect& target);
  QRectF tileImageRect(const TileKey& key) const;

  RasterMeta meta_;
  std::optional<RasterMeta> label_meta_;
  std::vector<int> bands_;
  std::unique_ptr<TileLoader> loader_;
  TileCache cache_;
  OverlayStyle style_;
  int style_version_ = 0;
  int levels_ = 1;
  static constexpr int tile_ = 256;
  QPointF center_{0, 0};
  double scale_ = 1.0;
  bool fitted_ = false;
  int missing_ = 0;
  double last_paint_ms_ = 0;
  std::optional<QPoint> drag_from_;
  std::array<int64_t, 256> counts_{};
  bool counts_ready_ = false;
  std::atomic<bool> cancel_{false};
  std::thread open_job_, count_job_;
  int open_generation_ = 0;
  QString last_tile_error_;
  QString placeholder_;
};

}  // namespace tessera::gui

Q_DECLARE_METATYPE(tessera::gui::RasterProbe)
