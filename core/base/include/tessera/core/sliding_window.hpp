#pragma once
// Sliding-window inference (nnU-Net, MONAI): for a model whose output depends on the window it
// sees — instance or group norm take their statistics over the window, SE blocks pool over it —
// the image is run in windows of the size the model was trained on, overlapping, and their
// logits blended with a Gaussian that weights each window's centre over its border. Exact
// halo tiling (tile_grid.hpp) and streaming stay right for models whose output does not depend
// on the window (valid convolutions, batch norm in eval mode): there the answer is the whole
// image's whatever the tile; for the others a tile as large as the image feeds the norm
// statistics it never saw in training.
//
// This file is the torch-free part: the geometry (window origins, Gaussian profile) and the
// choice between the two (choose_window); core/inference.hpp's for_each_tile runs it. Sides in
// pixels/voxels, axis order (y, x) or (z, y, x). Plain functions, thread safe.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tessera/core/geometry.hpp"
#include "tessera/core/unet_spec.hpp"

namespace tessera {

/// nnU-Net's and MONAI's defaults: neighbours overlap by half a window; σ = side / 8.
inline constexpr double kWindowOverlap = 0.5;
inline constexpr double kWindowSigmaScale = 0.125;

struct SlidingWindowOptions {
  Index window;                           ///< input sides the network reads per axis (the training window); required
  double overlap = kWindowOverlap;        ///< share of a window its neighbour covers, in [0, 1)
  double sigma_scale = kWindowSigmaScale; ///< Gaussian σ per axis = sigma_scale × the window's output side
  bool mirror = false;                    ///< test-time mirroring: logits averaged over flips of every axis subset

  SlidingWindowOptions& with_window(Index v) { window = std::move(v); return *this; }
  SlidingWindowOptions& with_overlap(double v) { overlap = v; return *this; }
  SlidingWindowOptions& with_mirror(bool v) { mirror = v; return *this; }

  /// Throws tessera::Error naming the bad field (window, overlap, sigma_scale); `model` checks
  /// the window is a size the network takes (same: on the pooling grid; valid: S + r + 2ε).
  void validate(const UNetOptions& model) const;
};

/// Output origins of the windows along an axis of `extent` for a window computing `side`
/// outputs: evenly spaced from 0 to extent − side, neighbours about side·(1 − overlap) apart
/// (nnU-Net's compute_steps_for_sliding_window), each rounded to a multiple of `alignment`
/// (the pooling grid 2^(L−1), on which a valid U-Net's windows give the whole image's answer;
/// the last rounded up, past the border where it must); {0} when the axis fits one window.
std::vector<int64_t> window_starts(int64_t extent, int64_t side, double overlap, int64_t alignment = 1);

/// exp(−(i − c)² / 2σ²) for i in [0, side), c = (side − 1) / 2, σ = sigma_scale · side: the
/// weight of a window's output along one axis (the window's weight is the product over axes).
std::vector<double> gaussian_profile(int64_t side, double sigma_scale);

/// The outputs a window of input sides `window` computes per axis: the same sides for `same`
/// padding, S + r for valid (window − 2ε). Throws tessera::Error naming the window when the
/// network cannot take it.
Index window_output_sides(const UNetOptions& model, const Index& window);

/// The input window the trainer reads for training tiles of inset `tile` (core/trainer.hpp):
/// tile + r + 2ε per axis for valid padding, tile for same. What a checkpoint records.
Index training_window(const UNetOptions& model, int64_t tile);

/// Why the output of `model` depends on the window it sees ("norm is instance (statistics over
/// the window)"), or nullopt: a built-in U-Net without instance or group norm. A registry model
/// (a plugin such as se-unet) is assumed to depend on it: its layers are not known here.
std::optional<std::string> window_dependence(const UNetOptions& model);

/// --window text: auto, gaussian or exact. Throws tessera::Error naming --window.
void check_window_option(const std::string& asked);

struct WindowChoice {
  bool gaussian = false;  ///< sliding Gaussian windows of `window`; false: exact tiles / stream
  Index window;           ///< the training window (input sides), when gaussian
  std::string why;        ///< "gaussian windows 32×32 (auto: norm is instance …; the training window)"
};

/// --window `asked` for `model`, trained on input windows `training_window` (empty: the
/// checkpoint does not say). gaussian: the training window, refused (tessera::Error naming
/// --window) when unknown or `exact_only` names a flag that needs exact tiles; exact: tiles;
/// auto: gaussian when the model depends on the window, the window is known and nothing needs
/// exact tiles, else exact, saying why.
WindowChoice choose_window(const std::string& asked, const UNetOptions& model, const Index& training_window,
                           const std::string& exact_only);

}  // namespace tessera
