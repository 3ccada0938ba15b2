#include "raster_view.hpp"

#include <algorithm>
#include <cmath>

#include <QKeyEvent>
#include <QMouseEvent>
#include <QPainter>
#include <QTimer>
#include <QWheelEvent>

namespace tessera::gui {

struct RasterView::OpenResult {
  RasterMeta meta;
  std::optional<RasterMeta> labels;
  Stretch stretch;
  std::vector<int> bands;
  int levels = 1;
  QString error;
  QStringList messages;  // shown after opening: bad band selection, unusable labels
};

RasterView::RasterView(QWidget* parent, int64_t cache_bytes) : QWidget(parent), cache_(cache_bytes) {
  qRegisterMetaType<TileKey>();
  qRegisterMetaType<Tile>();
  qRegisterMetaType<RasterProbe>();
  setMouseTracking(true);
  setFocusPolicy(Qt::StrongFocus);
  setMinimumSize(200, 150);
  setAttribute(Qt::WA_OpaquePaintEvent);
}

RasterView::~RasterView() { stopJobs(); }

void RasterView::stopJobs() {
  cancel_ = true;
  if (open_job_.joinable()) open_job_.join();
  if (count_job_.joinable()) count_job_.join();
  cancel_ = false;
}

void RasterView::openRaster(const QString& image, const QString& labels, const std::vector<int>& bands,
                            bool keep_view) {
  stopJobs();
  if (!keep_view) {
    loader_.reset();
    cache_.clear();
    fitted_ = false;
  }
  const int generation = ++open_generation_;
  const std::string image_path = image.toStdString(), labels_path = labels.toStdString();
  open_job_ = std::thread([this, image_path, labels_path, bands, generation] {
    auto r = std::make_shared<OpenResult>();
    try {
      RasterPyramid img(image_path);
      r->meta = img.meta();
      r->bands = r->meta.bands >= 3 ? std::vector<int>{1, 2, 3} : std::vector<int>{1};
      const bool valid = (bands.size() == 1 || bands.size() == 3) &&
                         std::all_of(bands.begin(), bands.end(), [&](int b) { return b >= 1 && b <= r->meta.bands; });
      if (valid)
        r->bands = bands;
      else if (!bands.empty())
        r->messages << QString("%1: band selection must be 1 or 3 bands of 1..%2; showing the default")
                               .arg(QString::fromStdString(image_path)).arg(r->meta.bands);
      // The stretch comes from a small overview of the whole scene (2nd–98th percentile).
      r->levels = img.level_count(tile_);
      const int level = img.level_count(1024) - 1;
      r->stretch = percentile_stretch(
          img.read(level, 0, 0, img.level_width(level), img.level_height(level), r->bands, false));
      if (!labels_path.empty()) {
        try {
          RasterPyramid lab(labels_path);
          if (lab.meta().width != r->meta.width || lab.meta().height != r->meta.height)
            r->messages << QString("%1: label map is %2 × %3 but the image is %4 × %5; overlay not shown")
                                   .arg(QString::fromStdString(labels_path))
                                   .arg(lab.meta().width)
                                   .arg(lab.meta().height)
                                   .arg(r->meta.width)
                                   .arg(r->meta.height);
          else
            r->labels = lab.meta();
        } catch (const std::exception& e) {
          r->messages << QString::fromStdString(e.what());
        }
      }
    } catch (const std::exception& e) {
      r->error = QString::fromStdString(e.what());
    }
    QMetaObject::invokeMethod(
        this, [this, r, generation] {
          if (generation == open_generation_) finishOpen(r);
        },
        Qt::QueuedConnection);
  });
}

void RasterView::finishOpen(std::shared_ptr<OpenResult> r) {
  if (open_job_.joinable()) open_job_.join();
  if (!r->error.isEmpty()) {
    update();
    emit failed(r->error);
    return;
  }
  loader_.reset();  // joins the previous workers
  cache_.clear();
  last_tile_error_.clear();
  counts_.fill(0);
  counts_ready_ = false;
  meta_ = r->meta;
  label_meta_ = r->labels;
  RasterLayers layers;
  layers.image_path = meta_.path;
  if (label_meta_) layers.labels_path = label_meta_->path;
  layers.bands = bands_ = r->bands;
  layers.stretch = r->stretch;
  layers.tile = tile_;
  levels_ = r->levels;
  loader_ = std::make_unique<TileLoader>(layers, 2);
  // Tiles of a previous loader may still be queued to us after a reopen: drop them.
  const int generation = open_generation_;
  connect(loader_.get(), &TileLoader::tileReady, this, [this, generation](TileKey key, Tile tile) {
    if (generation == open_generation_) onTile(key, std::move(tile));
  });
  connect(loader_.get(), &TileLoader::tileFailed, this, [this, generation](TileKey key, QString msg) {
    if (generation != open_generation_) return;
    // A tile that cannot be read is drawn as a hole and reported once, not retried forever.
    Tile hole;
    hole.rgb = QImage(1, 1, QImage::Format_RGB32);
    hole.rgb.fill(qRgb(90, 20, 20));
    cache_.insert(key, hole);
    update();
    if (msg != last_tile_error_) emit message(msg);  // once per distinct error, not per tile
    last_tile_error_ = msg;
  });
  connect(loader_.get(), &TileLoader::probeReady, this, [this](int x, int y, QVector<double> v, int label) {
    emit probed(RasterProbe{x, y, v, label});
  });
  if (label_meta_ && label_meta_->color_table) {
    for (int i = 1; i < 255; ++i) style_.colors[size_t(i)] = (*label_meta_->color_table)[size_t(i)];
    ++style_version_;
  }
  if (!fitted_) fitToWindow();
  if (label_meta_) {
    const std::string path = label_meta_->path;
    count_job_ = std::thread([this, path, generation] {
      auto counts = std::make_shared<std::array<int64_t, 256>>();
      counts->fill(0);
      try {
        RasterPyramid lab(path);
        const int w = lab.meta().width, h = lab.meta().height;
        for (int y = 0; y < h && !cancel_; y += 256) {
          const auto strip = lab.read_labels(0, 0, y, w, std::min(256, h - y));
          accumulate_label_counts(strip.data(), int64_t(strip.size()), *counts);
        }
      } catch (const std::exception&) {
        return;  // the tiles report the read error
      }
      if (cancel_) return;
      QMetaObject::invokeMethod(
          this, [this, counts, generation] {
            if (generation != open_generation_) return;
            counts_ = *counts;
            counts_ready_ = true;
            emit countsChanged();
          },
          Qt::QueuedConnection);
    });
  }
  emit opened();
  for (const QString& m : r->messages) emit message(m);
  update();
}

void RasterView::setOverlayStyle(const OverlayStyle& style) {
  style_ = style;
  ++style_version_;
  update();
}

void RasterView::setView(QPointF center, double scale) {
  center_ = center;
  scale_ = std::clamp(scale, 1e-4, 64.0);
  fitted_ = true;
  update();
}

void RasterView::fitToWindow() {
  if (meta_.width <= 0) return;
  const double s = std::min(double(width()) / meta_.width, double(height()) / meta_.height);
  setView(QPointF(meta_.width / 2.0, meta_.height / 2.0), s > 0 ? s : 1.0);
}

int RasterView::currentLevel() const {
  if (scale_ >= 1.0) return 0;
  return std::clamp(int(std::floor(std::log2(1.0 / scale_) + 1e-9)), 0, levels_ - 1);
}

QPointF RasterView::widgetToImage(QPointF p) const {
  return center_ + (p - QPointF(width() / 2.0, height() / 2.0)) / scale_;
}

QPointF RasterView::imageToWidget(QPointF p) const {
  return (p - center_) * scale_ + QPointF(width() / 2.0, height() / 2.0);
}

QRect RasterView::imageRectToWidget(const QRectF& r) const {
  const QPointF a = imageToWidget(r.topLeft()), b = imageToWidget(r.bottomRight());
  const int left = int(std::lround(a.x())), top = int(std::lround(a.y()));
  return QRect(left, top, int(std::lround(b.x())) - left, int(std::lround(b.y())) - top);
}

QRectF RasterView::tileImageRect(const TileKey& key) const {
  const int64_t span = int64_t(tile_) << key.level;
  const double x0 = double(key.tx * span), y0 = double(key.ty * span);
  const double x1 = std::min<double>(meta_.width, double((key.tx + 1) * span));
  const double y1 = std::min<double>(meta_.height, double((key.ty + 1) * span));
  return QRectF(x0, y0, x1 - x0, y1 - y0);
}

void RasterView::probePixel(int x, int y) {
  if (loader_ && x >= 0 && y >= 0 && x < meta_.width && y < meta_.height) loader_->probe(x, y);
}

void RasterView::onTile(TileKey key, Tile tile) {
  cache_.insert(key, std::move(tile));
  update();
}

bool RasterView::drawFallback(QPainter& p, const TileKey& key, const QRect& target) {
  const QRectF child = tileImageRect(key);
  for (int l = key.level + 1; l < levels_; ++l) {
    const int d = l - key.level;
    const TileKey parent{l, key.tx >> d, key.ty >> d};
    if (!cache_.contains(parent)) continue;
    Tile* t = cache_.find(parent);
    const QImage& img = (!t->labels.isNull() && t->composed_version == style_version_) ? t->composed : t->rgb;
    const QRectF pr = tileImageRect(parent);
    const double fx = img.width() / pr.width(), fy = img.height() / pr.height();
    const QRectF source((child.x() - pr.x()) * fx, (child.y() - pr.y()) * fy, child.width() * fx, child.height() * fy);
    p.drawImage(QRectF(target), img, source);
    return true;
  }
  return false;
}

void RasterView::paintEvent(QPaintEvent*) {
  QElapsedTimer timer;
  timer.start();
  QPainter p(this);
  p.fillRect(rect(), QColor(40, 40, 40));
  if (!loader_) {
    p.setPen(Qt::lightGray);
    p.drawText(rect().adjusted(20, 20, -20, -20), Qt::AlignCenter | Qt::TextWordWrap,
               placeholder_.isEmpty() ? tr("Open an image: File > Open, or drop a file here") : placeholder_);
    return;
  }
  if (!fitted_) fitToWindow();
  p.setRenderHint(QPainter::SmoothPixmapTransform, false);
  const int level = currentLevel();
  const int64_t span = int64_t(tile_) << level;
  const QPointF a = widgetToImage(QPointF(0, 0)), b = widgetToImage(QPointF(width(), height()));
  const double x0 = std::max(0.0, a.x()), y0 = std::max(0.0, a.y());
  const double x1 = std::min<double>(meta_.width, b.x()), y1 = std::min<double>(meta_.height, b.y());
  std::vector<TileKey> wanted;
  if (x1 > x0 && y1 > y0) {
    const int tx0 = int(x0 / double(span)), tx1 = int(std::ceil(x1 / double(span)));
    const int ty0 = int(y0 / double(span)), ty1 = int(std::ceil(y1 / double(span)));
    for (int ty = ty0; ty < ty1; ++ty)
      for (int tx = tx0; tx < tx1; ++tx) {
        const TileKey key{level, tx, ty};
        // Whole screen pixels from shared edges: at a fractional zoom, neighbours placed by
        // their own rounded corners leave a background-coloured line between them.
        const QRect target = imageRectToWidget(tileImageRect(key));
        if (target.isEmpty()) continue;
        Tile* t = cache_.find(key);
        if (!t) {
          drawFallback(p, key, target);
          wanted.push_back(key);
          continue;
        }
        if (t->labels.isNull()) {
          p.drawImage(target, t->rgb);
          continue;
        }
        if (t->composed_version != style_version_) {
          t->composed = composite_overlay(t->rgb, t->labels.constBits(), int(t->labels.bytesPerLine()), style_);
          t->composed_version = style_version_;
          cache_.update_bytes(key);
        }
        p.drawImage(target, t->composed);
      }
  }
  // Nearest tiles to the centre first.
  const QPointF c = center_;
  std::sort(wanted.begin(), wanted.end(), [&](const TileKey& l, const TileKey& r) {
    const QPointF dl = tileImageRect(l).center() - c, dr = tileImageRect(r).center() - c;
    return QPointF::dotProduct(dl, dl) < QPointF::dotProduct(dr, dr);
  });
  missing_ = int(wanted.size());
  loader_->request(wanted);
  last_paint_ms_ = double(timer.nsecsElapsed()) / 1e6;
  if (missing_ == 0) QTimer::singleShot(0, this, [this] { if (missing_ == 0) emit viewComplete(); });
}

void RasterView::wheelEvent(QWheelEvent* e) {
  const QPointF pos = e->position();
  const QPointF anchor = widgetToImage(pos);
  const double s = std::clamp(scale_ * std::pow(1.0015, e->angleDelta().y()), 1e-4, 64.0);
  // Keep the image point under the cursor fixed.
  center_ = anchor - (pos - QPointF(width() / 2.0, height() / 2.0)) / s;
  scale_ = s;
  update();
}

void RasterView::mousePressEvent(QMouseEvent* e) {
  if (e->button() == Qt::LeftButton) drag_from_ = e->position().toPoint();
}

void RasterView::mouseMoveEvent(QMouseEvent* e) {
  const QPoint pos = e->position().toPoint();
  if (drag_from_) {
    center_ -= QPointF(pos - *drag_from_) / scale_;
    drag_from_ = pos;
    update();
  }
  const QPointF ip = widgetToImage(e->position());
  probePixel(int(std::floor(ip.x())), int(std::floor(ip.y())));
}

void RasterView::mouseReleaseEvent(QMouseEvent*) { drag_from_.reset(); }

void RasterView::keyPressEvent(QKeyEvent* e) {
  const double step = 100.0 / scale_;
  switch (e->key()) {
    case Qt::Key_Left: center_.rx() -= step; break;
    case Qt::Key_Right: center_.rx() += step; break;
    case Qt::Key_Up: center_.ry() -= step; break;
    case Qt::Key_Down: center_.ry() += step; break;
    case Qt::Key_Plus: case Qt::Key_Equal: scale_ = std::min(64.0, scale_ * 1.25); break;
    case Qt::Key_Minus: scale_ = std::max(1e-4, scale_ / 1.25); break;
    case Qt::Key_0: fitToWindow(); break;
    default: QWidget::keyPressEvent(e); return;
  }
  update();
}

void RasterView::resizeEvent(QResizeEvent*) {
  if (!fitted_ && loader_) fitToWindow();
}

}  // namespace tessera::gui
