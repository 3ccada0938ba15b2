#pragma once
// The sensor that turns the ground's blurred reflectance (R, G, B, NIR; reflectance × 10000)
// into the digital numbers of one output pixel. The source sensor is the one scene.tif has
// always been rendered with: 0.5 m pixels, a slight illumination gradient, white noise
// σ = 90 DN, nothing else. A target sensor (domain adaptation) sees the same kinds of ground
// through another instrument:
//   at-sensor   L_b = light(x, y) · ρ_b + haze_b · h(x, y)       (h: smooth field in [0, 1])
//   band mixing m_b = Σ_c mixing[b][c] · L_c                       (rows sum to 1)
//   response    DN_b = offset_b + gain_b · 10000 · (m_b / 10000)^gamma_b + N(0, noise_sigma²)
// on coarser pixels (pixel_metres > 0.5, same ground extent in fewer pixels). Values are
// clamped to UInt16. A sensor is a value; respond() is const and thread-safe.
#include <array>
#include <cstdint>
#include <string>

#include "random.hpp"
#include "scene_layout.hpp"

namespace tessera::sample {

inline constexpr int kSceneBands = 4;
using BandValues = std::array<float, kSceneBands>;  ///< red, green, blue, nir

struct SceneSensor {
  double pixel_metres = kScenePixelMetres;  ///< ground size of one output pixel
  std::array<BandValues, kSceneBands> mixing{{{1, 0, 0, 0}, {0, 1, 0, 0}, {0, 0, 1, 0},
                                              {0, 0, 0, 1}}};
  BandValues gamma{1, 1, 1, 1};
  BandValues gain{1, 1, 1, 1};
  BandValues offset{0, 0, 0, 0};  ///< DN
  BandValues haze{0, 0, 0, 0};    ///< path radiance where the haze field is 1, DN
  double haze_cell_metres = 300.0;  ///< size of the haze field's largest blobs
  uint64_t haze_seed = 0;
  double light_x = 0.07, light_y = -0.05;  ///< illumination gain change across the scene
  float noise_sigma = 90.f;                 ///< DN
  bool target = false;  ///< false: only light and noise, the source sensor's exact arithmetic

  /// The source sensor (all defaults).
  static SceneSensor source() { return {}; }
  /// Target sensor k ∈ [1, kMaxTargetDomains], a pure function of (seed, k): 1.5× coarser
  /// pixels for every k; k = 1 is the mildest radiometric shift, k ≥ 3 the strongest.
  static SceneSensor target_domain(uint64_t seed, int k);

  /// Pixels per side for a layout of `layout_size` pixels: the same ground in pixel_metres.
  int output_size(int layout_size) const;
  /// Layout pixel (row or column) nearest to the centre of output pixel `i`.
  int layout_index(int i, int layout_size) const;
  /// Position of output pixel `i`'s centre in layout pixel units (for textures).
  double layout_position(int i) const;

  /// The haze field h ∈ [0, 1] at output pixel (x, y) (fractional positions allowed).
  float haze_level(double x, double y) const;

  /// Digital numbers of output pixel (x, y) of an output image `size` pixels wide, given the
  /// blurred ground reflectance there and haze_level() (ignored by the source sensor).
  /// Draws kSceneBands normals from `noise`, in band order.
  std::array<uint16_t, kSceneBands> respond(const BandValues& reflectance, int x, int y,
                                            int size, float haze_level, Rng& noise) const;

  /// One line for file metadata and the summary: the transforms with their parameters.
  std::string describe() const;
};

}  // namespace tessera::sample
