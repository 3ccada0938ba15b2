#pragma once
// TileGrid cuts an image of any size into tiles whose stitched insets equal the network
// applied to the whole (reflect-padded) image. DESIGN.md, "Exact tiling":
//   - tile k of an axis has output origin o = k·S, with S a multiple of the pooling
//     alignment 2^(L-1) so every origin sits on the pooling grid;
//   - the network reads the input window [o − ε, o + S + r + ε) and computes S + r outputs;
//   - the tile keeps only its inset [o, min(o + S, N)); insets tile the image exactly once.
// The step never exceeds the image: along an axis of N pixels it is min(S, N rounded up to
// the alignment), so a 40-voxel axis is cut into one 40 → 48 tile, not one of S = 512, and a
// one-slice volume reads a thin slab. Any aligned step gives the same stitched answer, so
// clamping changes only the cost (steps(), input_sides()).
// Input windows that leave the image are filled by reflect_index (geometry.hpp).
// Coordinates are pixel/voxel indices, axis order (y, x) or (z, y, x). Immutable, thread safe.
#include <cstdint>
#include <string>

#include "tessera/core/geometry.hpp"

namespace tessera {

struct TileGridOptions {
  Index image;            ///< image extent per axis (required)
  int64_t step = 256;     ///< inset side S asked for; multiple of `alignment` (clamped per axis)
  int64_t remainder = 0;  ///< r: the architecture's valid output size is S + r
  int64_t halo = 0;       ///< ε: input pixels lost per side
  int64_t alignment = 1;  ///< 2^(L-1) for an L-level U-Net

  TileGridOptions(Index image_) : image(std::move(image_)) {}
  TileGridOptions& with_step(int64_t s) { step = s; return *this; }
  TileGridOptions& with_remainder(int64_t r) { remainder = r; return *this; }
  TileGridOptions& with_halo(int64_t h) { halo = h; return *this; }
  TileGridOptions& with_alignment(int64_t a) { alignment = a; return *this; }

  /// Throws tessera::Error naming the first bad field.
  void validate() const;
};

/// Inset side per axis for a step S: min(S, extent rounded up to `alignment`). What TileGrid
/// uses, and what the tile choice (tile_choice.hpp) predicts memory for.
Index clamped_steps(const Index& image, int64_t step, int64_t alignment);

struct Tile {
  int64_t index = 0;  ///< linear index, last axis fastest
  Box output;         ///< what the network computes: origin o, size S + r per axis
  Box inset;          ///< what the tile keeps: [o, min(o + S, N)) per axis
  Box input;          ///< what the network reads: output grown by ε per side
};

class TileGrid {
 public:
  explicit TileGrid(TileGridOptions options);

  const TileGridOptions& options() const { return options_; }
  int dims() const { return static_cast<int>(options_.image.size()); }
  int64_t size() const { return total_; }          ///< number of tiles
  const Index& counts() const { return counts_; }  ///< tiles per axis
  /// Inset side per axis: min(S, image extent rounded up to the alignment).
  const Index& steps() const { return steps_; }
  Tile tile(int64_t index) const;
  /// Side of the network's input window per axis: step + r + 2ε.
  Index input_sides() const;
  /// The largest of input_sides(): S + r + 2ε unless every axis is clamped.
  int64_t input_side() const;
  /// Input pixels read per output pixel kept, over the whole image (>= 1).
  double overhead() const;

 private:
  TileGridOptions options_;
  Index steps_;
  Index counts_;
  int64_t total_ = 0;
};

}  // namespace tessera
