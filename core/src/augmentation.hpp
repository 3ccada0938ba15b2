#pragma once
// Internal to the trainer: the spatial and intensity augmentations of TrainOptions::Augmentation
// beyond flips and quarter turns (tile_sampler.cpp does those). The sampler draws one
// AugmentDraw per tile from its seeded stream (only the augmentations that are on draw, so a
// run without them keeps its stream); load() applies it to the tile it read.
//   spatial    rotation (2-D one angle, 3-D one per axis), zoom, elastic deformation: one
//              sampling grid (LibTorch affine_grid + a smoothed random displacement) applied to
//              the image (bilinear, zero outside) and to the labels (nearest: labels stay class
//              ids; pixels from outside the tile become ignore_index). The image and label
//              grids share their centre: a `valid` network's input with its halo and its
//              output inset move together.
//   intensity  Gaussian blur (convolution), contrast about the tile's mean (clipped to its
//              range), gamma on the tile's range; brightness and noise stay in tile_sampler.cpp.
// Layout: the image (C, spatial…) float, the labels (spatial…) int64; 2-D and 3-D alike.
#include <cstdint>
#include <random>
#include <vector>

#include <torch/types.h>

#include "tessera/core/trainer.hpp"

namespace tessera::detail {

struct AugmentDraw {
  std::vector<double> angles;  ///< radians; 2-D one, 3-D three (about z, y, x); empty: no rotation
  double zoom = 1;             ///< > 1 magnifies
  uint64_t elastic_seed = 0;   ///< 0: no elastic deformation
  double blur_sigma = 0;       ///< voxels; 0: no blur
  double contrast = 1;
  double gamma = 1;
  bool spatial() const { return !angles.empty() || zoom != 1 || elastic_seed != 0; }
};

/// Draws the augmentations `a` switches on, each with probability a.probability, from `rng`
/// (nothing is drawn for those that are off).
AugmentDraw draw_augmentation(const TrainOptions::Augmentation& a, int dims, std::mt19937_64& rng);

/// Applies `d` to one tile: `image` (C, spatial…) float, `labels` (spatial…) int64, centred on
/// the image. `elastic` and `elastic_sigma` (voxels) size the deformation.
void apply_augmentation(const AugmentDraw& d, const TrainOptions::Augmentation& a, int64_t ignore_index,
                        torch::Tensor& image, torch::Tensor& labels);

/// `x` (N, spatial…) smoothed along every spatial axis by a Gaussian of `sigma` voxels (zero padding).
torch::Tensor gaussian_smooth(const torch::Tensor& x, double sigma);

/// Throws tessera::Error naming the train.augment_* key out of range.
void validate_augmentation(const TrainOptions::Augmentation& a);

}  // namespace tessera::detail
