#include "tessera/core/tile_choice.hpp"

#include <gtest/gtest.h>

#include <limits>

#include "tessera/core/error.hpp"
#include "tessera/core/tile_grid.hpp"

namespace tessera {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

// A memory model that grows with the tile volume: 1 KiB per pixel of inset plus 100 MiB.
int64_t volume_model(const Index& steps) {
  int64_t v = 1;
  for (int64_t s : steps) v *= s;
  return 100 * kMiB + 1024 * v;
}

TileChoiceOptions auto_with(int64_t budget) { return TileChoiceOptions().with_memory_budget(budget); }

TEST(TileChoice, DefaultOptionsAreValid) {
  EXPECT_NO_THROW(TileChoiceOptions().validate());
  EXPECT_EQ(TileChoiceOptions().tile, 0);  // auto
}

TEST(TileChoice, AutoTakesTheWholeSmallImageRoundedUpToTheAlignment) {
  const TileChoice c = choose_tile(auto_with(8 * kMiB * 1024), {41, 41, 41}, 8, volume_model);
  EXPECT_EQ(c.tile, 48);
  EXPECT_EQ(c.steps, (Index{48, 48, 48}));
  EXPECT_EQ(c.predicted_bytes, volume_model(c.steps));
  EXPECT_EQ(c.summary().rfind("tile 48 (auto: whole image, 41³ rounded up to 8", 0), 0u) << c.summary();
}

TEST(TileChoice, TileNeverExceedsTheImageAlongAnyAxis) {
  // A one-slice volume and a 1 × 1 raster: thin tiles, not cubes of the largest side.
  const TileChoice slice = choose_tile(auto_with(int64_t{8} << 30), {1, 300, 300}, 8, volume_model);
  EXPECT_EQ(slice.steps, (Index{8, 304, 304}));
  EXPECT_EQ(slice.tile, 304);
  EXPECT_NE(slice.summary().find("tile 8×304×304"), std::string::npos) << slice.summary();
  const TileChoice pixel = choose_tile(auto_with(int64_t{8} << 30), {1, 1}, 8, volume_model);
  EXPECT_EQ(pixel.steps, (Index{8, 8}));
  for (const TileChoice& c : {slice, pixel}) {
    const TileGrid grid(TileGridOptions(c.steps.size() == 3 ? Index{1, 300, 300} : Index{1, 1})
                            .with_step(c.tile)
                            .with_alignment(8));
    EXPECT_EQ(grid.steps(), c.steps);  // the grid uses exactly the steps the memory was predicted for
    EXPECT_EQ(grid.size(), 1);
  }
}

TEST(TileChoice, ExplicitTileLargerThanTheImageIsClampedAndSaysSo) {
  const TileChoice c = choose_tile(TileChoiceOptions().with_tile(512), {40, 40, 40}, 4, volume_model);
  EXPECT_EQ(c.tile, 40);
  EXPECT_EQ(c.summary(), "tile 40 (--tile 512 clamped to the image, 40³ rounded up to 4)");
  const TileChoice kept = choose_tile(TileChoiceOptions().with_tile(64), {300, 300}, 8, volume_model);
  EXPECT_EQ(kept.summary(), "tile 64 (--tile 64)");
  EXPECT_THROW(choose_tile(TileChoiceOptions().with_tile(100), {300, 300}, 8, volume_model), Error);
}

TEST(TileChoice, AutoRespectsTheBudgetAndASmallerBudgetGivesASmallerTile) {
  const Index scene{10000, 10000};
  int64_t previous = std::numeric_limits<int64_t>::max();
  for (int64_t budget : {int64_t{4} << 30, int64_t{1} << 30, 400 * kMiB, 150 * kMiB}) {
    const TileChoice c = choose_tile(auto_with(budget), scene, 16, volume_model);
    EXPECT_EQ(c.tile % 16, 0);
    EXPECT_LE(c.predicted_bytes, budget);
    // Largest: one tile fewer per axis would not fit; balanced: no smaller side gives as few.
    const int64_t per_axis = (10000 + c.tile - 1) / c.tile;
    const int64_t fewer = ((10000 + per_axis - 2) / (per_axis - 1) + 15) / 16 * 16;
    EXPECT_GT(volume_model(clamped_steps(scene, fewer, 16)), budget) << "fewer tiles would fit too";
    EXPECT_GT((10000 + c.tile - 17) / (c.tile - 16), per_axis) << "a smaller side gives as many tiles";
    EXPECT_LT(c.tile, previous);
    EXPECT_NE(c.reason.find("largest fitting the"), std::string::npos) << c.reason;
    previous = c.tile;
  }
}

TEST(TileChoice, AutoSaysSoWhenNothingFits) {
  const TileChoice c = choose_tile(auto_with(50 * kMiB), {1000, 1000}, 16, volume_model);
  EXPECT_EQ(c.tile, 16);
  EXPECT_NE(c.reason.find("exceeds the 50 MiB budget"), std::string::npos) << c.reason;
}

TEST(TileChoice, AutoLeavesATilePerRankWhenAsked) {
  const TileChoice c = choose_tile(auto_with(int64_t{8} << 30).with_min_tiles(4), {256, 256}, 16, volume_model);
  EXPECT_EQ(c.tile, 128);
  EXPECT_NE(c.reason.find("leaving 4 tiles"), std::string::npos) << c.reason;
  // A 1 × 1 image cannot give 4 tiles: the smallest tile, one tile.
  EXPECT_EQ(choose_tile(auto_with(int64_t{8} << 30).with_min_tiles(4), {1, 1}, 16, volume_model).tile, 16);
}

TEST(TileChoice, SidesTheNetworkCannotTakeDoNotFit) {
  auto picky = [](const Index& steps) -> int64_t {
    if (steps.front() > 64) throw Error("layer sequence: too large");
    return volume_model(steps);
  };
  EXPECT_EQ(choose_tile(auto_with(int64_t{8} << 30), {500, 500}, 16, picky).tile, 64);
}

TEST(TileChoice, ParsesTileAndMemoryFlags) {
  EXPECT_EQ(parse_tile_option("auto"), 0);
  EXPECT_EQ(parse_tile_option("256"), 256);
  for (const char* bad : {"0", "-8", "12x", "", "Auto"}) EXPECT_THROW(parse_tile_option(bad), Error) << bad;
  EXPECT_EQ(parse_memory_size("2GiB"), int64_t{2} << 30);
  EXPECT_EQ(parse_memory_size("2 GB"), int64_t{2} << 30);
  EXPECT_EQ(parse_memory_size("1.5G"), int64_t{3} << 29);
  EXPECT_EQ(parse_memory_size("512MiB"), 512 * kMiB);
  EXPECT_EQ(parse_memory_size("800"), 800 * kMiB);
  EXPECT_EQ(parse_memory_size("4096B"), 4096);
  for (const char* bad : {"", "abc", "-1GiB", "0", "2XB", "nan", "1e30GiB"})
    EXPECT_THROW(parse_memory_size(bad), Error) << bad;
  try {
    parse_memory_size("lots");
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--memory-budget"), std::string::npos);
  }
}

TEST(TileChoice, FormatsBytes) {
  EXPECT_EQ(format_bytes(12), "12 B");
  EXPECT_EQ(format_bytes(512 * kMiB), "512 MiB");
  EXPECT_EQ(format_bytes(int64_t{3} << 29), "1.5 GiB");
}

TEST(TileChoice, DefaultBudgetIsAShareOfAvailableMemory) {
  const int64_t available = available_memory_bytes();
  EXPECT_GT(available, 0);
  const int64_t budget = default_memory_budget(2);
  EXPECT_GT(budget, 0);
  EXPECT_LT(budget, available);  // half, split between two ranks (it may move a little in between)
}

}  // namespace
}  // namespace tessera
