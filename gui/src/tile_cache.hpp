#pragma once
// A bounded least-recently-used cache of decoded raster tiles, keyed by (level, tile x,
// tile y) where level k is a 2^k downsampling of the full-resolution grid. The byte limit
// counts the pixel buffers of every image a tile holds; inserting past the limit evicts the
// least recently used tiles first (a single tile larger than the limit is not kept).
// Thread safety: none; the GUI thread owns it, workers hand tiles over through signals.
#include <cstdint>
#include <list>
#include <unordered_map>

#include <QImage>
#include <QMetaType>

namespace tessera::gui {

struct TileKey {
  int level = 0, tx = 0, ty = 0;
  bool operator==(const TileKey&) const = default;
};

struct TileKeyHash {
  size_t operator()(const TileKey& k) const noexcept {
    return (static_cast<size_t>(k.level) * 0x9E3779B97F4A7C15ull) ^ (static_cast<size_t>(k.tx) << 32) ^
           static_cast<size_t>(k.ty);
  }
};

/// One decoded tile: the stretched image (RGB32) and, with an overlay, its labels
/// (Grayscale8, raw ids). `composed` caches the overlay result for `composed_version`.
struct Tile {
  QImage rgb;
  QImage labels;
  QImage composed;
  int composed_version = -1;
  int64_t bytes() const { return rgb.sizeInBytes() + labels.sizeInBytes() + composed.sizeInBytes(); }
};

class TileCache {
 public:
  explicit TileCache(int64_t byte_limit) : limit_(byte_limit) {}
  /// The tile, marked most recently used; nullptr when absent.
  Tile* find(const TileKey& key);
  bool contains(const TileKey& key) const { return index_.count(key) != 0; }
  void insert(const TileKey& key, Tile tile);
  /// Re-counts a tile whose images changed in place (e.g. a new composed image).
  void update_bytes(const TileKey& key);
  void clear();
  int64_t bytes() const { return bytes_; }
  int64_t byte_limit() const { return limit_; }
  int64_t peak_bytes() const { return peak_; }
  size_t size() const { return index_.size(); }

 private:
  struct Entry {
    TileKey key;
    Tile tile;
    int64_t bytes;
  };
  void evict_to_limit();
  int64_t limit_;
  int64_t bytes_ = 0;
  int64_t peak_ = 0;
  std::list<Entry> lru_;  // front = most recent
  std::unordered_map<TileKey, std::list<Entry>::iterator, TileKeyHash> index_;
};

}  // namespace tessera::gui

Q_DECLARE_METATYPE(tessera::gui::TileKey)
Q_DECLARE_METATYPE(tessera::gui::Tile)
