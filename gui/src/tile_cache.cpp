#include "tile_cache.hpp"

namespace tessera::gui {

Tile* TileCache::find(const TileKey& key) {
  auto it = index_.find(key);
  if (it == index_.end()) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second);
  return &it->second->tile;
}

void TileCache::insert(const TileKey& key, Tile tile) {
  auto it = index_.find(key);
  if (it != index_.end()) {
    bytes_ -= it->second->bytes;
    lru_.erase(it->second);
    index_.erase(it);
  }
  const int64_t b = tile.bytes();
  if (b > limit_) return;
  lru_.push_front(Entry{key, std::move(tile), b});
  index_[key] = lru_.begin();
  bytes_ += b;
  evict_to_limit();
  peak_ = std::max(peak_, bytes_);
}

void TileCache::update_bytes(const TileKey& key) {
  auto it = index_.find(key);
  if (it == index_.end()) return;
  bytes_ -= it->second->bytes;
  it->second->bytes = it->second->tile.bytes();
  bytes_ += it->second->bytes;
  // Never evict the tile being updated: it is in use by the caller right now.
  lru_.splice(lru_.begin(), lru_, it->second);
  evict_to_limit();
  peak_ = std::max(peak_, bytes_);
}

void TileCache::evict_to_limit() {
  while (bytes_ > limit_ && lru_.size() > 1) {
    bytes_ -= lru_.back().bytes;
    index_.erase(lru_.back().key);
    lru_.pop_back();
  }
}

void TileCache::clear() {
  lru_.clear();
  index_.clear();
  bytes_ = 0;
}

}  // namespace tessera::gui
