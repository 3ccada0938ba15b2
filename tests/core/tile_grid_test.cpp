#include "tessera/core/tile_grid.hpp"

#include <gtest/gtest.h>

#include "tessera/core/error.hpp"

namespace tessera {
namespace {

// Counts how often each pixel is covered by some tile's inset.
std::vector<int> coverage(const TileGrid& g) {
  const Index& n = g.options().image;
  int64_t total = 1;
  for (int64_t v : n) total *= v;
  std::vector<int> hits(total, 0);
  for (int64_t i = 0; i < g.size(); ++i) {
    const Box b = g.tile(i).inset;
    if (g.dims() == 2) {
      for (int64_t y = b.origin[0]; y < b.end()[0]; ++y)
        for (int64_t x = b.origin[1]; x < b.end()[1]; ++x) ++hits[y * n[1] + x];
    } else {
      for (int64_t z = b.origin[0]; z < b.end()[0]; ++z)
        for (int64_t y = b.origin[1]; y < b.end()[1]; ++y)
          for (int64_t x = b.origin[2]; x < b.end()[2]; ++x) ++hits[(z * n[1] + y) * n[2] + x];
    }
  }
  return hits;
}

TEST(TileGrid, StitchedInsetsCoverImageOnce2d) {
  TileGrid g(TileGridOptions({131, 70}).with_step(32).with_remainder(4).with_halo(44).with_alignment(8));
  for (int h : coverage(g)) ASSERT_EQ(h, 1);
  EXPECT_EQ(g.counts(), (Index{5, 3}));
}

TEST(TileGrid, StitchedInsetsCoverImageOnce3d) {
  TileGrid g(TileGridOptions({17, 9, 33}).with_step(8).with_remainder(4).with_halo(20).with_alignment(4));
  for (int h : coverage(g)) ASSERT_EQ(h, 1);
}

TEST(TileGrid, WindowsSitOnThePoolingGridWithHalo) {
  TileGrid g(TileGridOptions({100, 100}).with_step(48).with_remainder(4).with_halo(44).with_alignment(16));
  for (int64_t i = 0; i < g.size(); ++i) {
    const Tile t = g.tile(i);
    for (int a = 0; a < 2; ++a) {
      EXPECT_EQ(t.output.origin[a] % 16, 0);
      EXPECT_EQ(t.input.origin[a], t.output.origin[a] - 44);
      EXPECT_EQ(t.input.size[a], 48 + 4 + 2 * 44);
      EXPECT_TRUE(t.output.contains(t.inset));
    }
  }
  EXPECT_EQ(g.input_side(), 140);
}

TEST(TileGrid, StepNeverExceedsTheImageRoundedUpToTheAlignment) {
  // 40³ with S = 512: one 40³ tile, not 512³. A one-slice volume: a thin slab.
  TileGrid cube(TileGridOptions({40, 40, 40}).with_step(512).with_remainder(4).with_halo(20).with_alignment(8));
  EXPECT_EQ(cube.steps(), (Index{40, 40, 40}));
  EXPECT_EQ(cube.size(), 1);
  EXPECT_EQ(cube.input_side(), 40 + 4 + 40);
  TileGrid slab(TileGridOptions({1, 131, 70}).with_step(64).with_remainder(4).with_halo(20).with_alignment(8));
  EXPECT_EQ(slab.steps(), (Index{8, 64, 64}));
  EXPECT_EQ(slab.input_sides(), (Index{8 + 44, 64 + 44, 64 + 44}));
  EXPECT_EQ(slab.counts(), (Index{1, 3, 2}));
  for (int h : coverage(slab)) ASSERT_EQ(h, 1);
  const Tile t = slab.tile(0);
  EXPECT_EQ(t.input.size, slab.input_sides());
  EXPECT_TRUE(t.output.contains(t.inset));
  // 1 × 1: read (8 + r + 2ε)², overhead bounded by the alignment, not by S.
  TileGrid pixel(TileGridOptions({1, 1}).with_step(512).with_remainder(4).with_halo(44).with_alignment(8));
  EXPECT_EQ(pixel.steps(), (Index{8, 8}));
  EXPECT_DOUBLE_EQ(pixel.overhead(), 100.0 * 100.0);
}

TEST(TileGrid, RejectsStepOffThePoolingGrid) {
  EXPECT_THROW(TileGrid(TileGridOptions({64, 64}).with_step(20).with_alignment(8)), Error);
  EXPECT_THROW(TileGrid(TileGridOptions({0, 64}).with_step(8)), Error);
}

TEST(Geometry, ReflectIndexMirrorsWithoutRepeatingTheEdge) {
  // numpy.pad(..., mode="reflect") of [0 1 2 3]: 3 2 1 | 0 1 2 3 | 2 1 0
  const int64_t n = 4;
  const std::vector<int64_t> expect_left{3, 2, 1}, expect_right{2, 1, 0};
  for (int i = 0; i < 3; ++i) EXPECT_EQ(reflect_index(-3 + i, n), expect_left[i]);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(reflect_index(4 + i, n), expect_right[i]);
  for (int64_t i = -50; i < 50; ++i) {
    const int64_t r = reflect_index(i, 5);
    EXPECT_GE(r, 0);
    EXPECT_LT(r, 5);
    EXPECT_EQ(r, reflect_index(-i, 5));  // symmetric about 0
  }
  EXPECT_EQ(reflect_index(7, 1), 0);
}

}  // namespace
}  // namespace tessera
