#include "tile_loader.hpp"

#include <algorithm>
#include <cmath>
#include <optional>

#include "tessera/core/error.hpp"

namespace tessera::gui {

QImage stretch_to_image(const LevelBlock& block, const Stretch& stretch) {
  QImage img(block.w, block.h, QImage::Format_RGB32);
  const size_t plane = size_t(block.w) * size_t(block.h);
  const int nb = block.bands;
  const int c[3] = {0, nb >= 3 ? 1 : 0, nb >= 3 ? 2 : 0};
  float scale[3], lo[3];
  for (int k = 0; k < 3; ++k) {
    lo[k] = stretch.lo[size_t(c[k])];
    scale[k] = 255.0f / (stretch.hi[size_t(c[k])] - stretch.lo[size_t(c[k])]);
  }
  for (int y = 0; y < block.h; ++y) {
    auto* px = reinterpret_cast<QRgb*>(img.scanLine(y));
    for (int x = 0; x < block.w; ++x) {
      const size_t i = size_t(y) * size_t(block.w) + size_t(x);
      int v[3];
      bool nodata = false;
      for (int k = 0; k < 3; ++k) {
        const float f = block.data[size_t(c[k]) * plane + i];
        if (!std::isfinite(f)) nodata = true;
        v[k] = std::clamp(static_cast<int>((f - lo[k]) * scale[k] + 0.5f), 0, 255);
      }
      px[x] = nodata ? qRgb(32, 32, 32) : qRgb(v[0], v[1], v[2]);
    }
  }
  return img;
}

TileLoader::TileLoader(RasterLayers layers, int threads, QObject* parent) : QObject(parent), layers_(std::move(layers)) {
  for (int i = 0; i < std::max(1, threads); ++i) workers_.emplace_back([this] { work(); });
}

TileLoader::~TileLoader() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
    queue_.clear();
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

void TileLoader::request(const std::vector<TileKey>& keys) {
  {
    std::lock_guard lock(mutex_);
    std::deque<Job> probes;
    for (const Job& j : queue_)
      if (j.is_probe) probes.push_back(j);
    queue_ = std::move(probes);
    for (const TileKey& k : keys)
      if (!in_flight_.count({k.level, k.tx, k.ty})) queue_.push_back(Job{false, k, 0, 0});
  }
  wake_.notify_all();
}

void TileLoader::probe(int x, int y) {
  {
    std::lock_guard lock(mutex_);
    // Only the latest probe matters: drop older ones.
    std::erase_if(queue_, [](const Job& j) { return j.is_probe; });
    queue_.push_front(Job{true, {}, x, y});
  }
  wake_.notify_one();
}

int TileLoader::busy() const {
  std::lock_guard lock(mutex_);
  return static_cast<int>(queue_.size() + in_flight_.size());
}

Tile TileLoader::load(const RasterPyramid& image, const RasterPyramid* labels, const TileKey& key) const {
  const int t = layers_.tile;
  const int x0 = key.tx * t, y0 = key.ty * t;
  const int w = std::min(t, image.level_width(key.level) - x0), h = std::min(t, image.level_height(key.level) - y0);
  Tile tile;
  tile.rgb = stretch_to_image(image.read(key.level, x0, y0, w, h, layers_.bands, false), layers_.stretch);
  if (labels) {
    const std::vector<uint8_t> l = labels->read_labels(key.level, x0, y0, w, h);
    tile.labels = QImage(w, h, QImage::Format_Grayscale8);
    for (int y = 0; y < h; ++y) std::copy_n(l.data() + size_t(y) * size_t(w), w, tile.labels.scanLine(y));
  }
  return tile;
}

void TileLoader::work() {
  std::optional<RasterPyramid> image, labels;
  QString open_error;
  try {
    image.emplace(layers_.image_path);
    if (!layers_.labels_path.empty()) labels.emplace(layers_.labels_path);
  } catch (const std::exception& e) {
    open_error = QString::fromStdString(e.what());
  }
  for (;;) {
    Job job;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (stop_) return;
      job = queue_.front();
      queue_.pop_front();
      if (!job.is_probe) in_flight_.insert({job.key.level, job.key.tx, job.key.ty});
    }
    if (job.is_probe) {
      QVector<double> values;
      int label = -1;
      try {
        if (image)
          for (double v : image->read_pixel(job.x, job.y)) values.push_back(v);
        if (labels) {
          const auto l = labels->read_pixel(job.x, job.y);
          if (!l.empty()) label = static_cast<int>(l[0]);
        }
      } catch (const std::exception&) {
        values.clear();
      }
      emit probeReady(job.x, job.y, values, label);
      continue;
    }
    bool ok = false;
    Tile tile;
    QString error = open_error;
    if (image) {
      try {
        tile = load(*image, labels ? &*labels : nullptr, job.key);
        ok = true;
      } catch (const std::exception& e) {
        error = QString::fromStdString(e.what());
      }
    }
    bool now_idle = false;
    {
      std::lock_guard lock(mutex_);
      in_flight_.erase({job.key.level, job.key.tx, job.key.ty});
      now_idle = queue_.empty() && in_flight_.empty();
    }
    if (ok)
      emit tileReady(job.key, tile);
    else
      emit tileFailed(job.key, error);
    if (now_idle) emit idle();
  }
}

}  // namespace tessera::gui
