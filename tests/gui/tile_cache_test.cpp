#include <gtest/gtest.h>

#include "tile_cache.hpp"

namespace tessera::gui {
namespace {

Tile tile_of(int side) {
  Tile t;
  t.rgb = QImage(side, side, QImage::Format_RGB32);
  return t;
}

TEST(TileCache, EvictsLeastRecentlyUsedToStayUnderByteLimit) {
  const int64_t one = tile_of(64).bytes();  // 16 KiB
  TileCache cache(3 * one);
  cache.insert({0, 0, 0}, tile_of(64));
  cache.insert({0, 1, 0}, tile_of(64));
  cache.insert({0, 2, 0}, tile_of(64));
  ASSERT_NE(cache.find({0, 0, 0}), nullptr);  // touch: (0,1,0) is now the oldest
  cache.insert({1, 0, 0}, tile_of(64));
  EXPECT_EQ(cache.size(), 3u);
  EXPECT_FALSE(cache.contains({0, 1, 0}));
  EXPECT_TRUE(cache.contains({0, 0, 0}));
  EXPECT_TRUE(cache.contains({1, 0, 0}));
  EXPECT_LE(cache.bytes(), cache.byte_limit());
  EXPECT_LE(cache.peak_bytes(), cache.byte_limit());
}

TEST(TileCache, KeysDifferByLevel) {
  TileCache cache(1 << 20);
  cache.insert({0, 1, 1}, tile_of(8));
  EXPECT_FALSE(cache.contains({1, 1, 1}));
  EXPECT_TRUE(cache.contains({0, 1, 1}));
}

TEST(TileCache, ReplacingATileRecountsBytes) {
  TileCache cache(1 << 20);
  cache.insert({0, 0, 0}, tile_of(64));
  cache.insert({0, 0, 0}, tile_of(32));
  EXPECT_EQ(cache.bytes(), tile_of(32).bytes());
  Tile* t = cache.find({0, 0, 0});
  t->composed = QImage(32, 32, QImage::Format_RGB32);
  cache.update_bytes({0, 0, 0});
  EXPECT_EQ(cache.bytes(), 2 * tile_of(32).bytes());
}

}  // namespace
}  // namespace tessera::gui
