#pragma once
// The geometry of the synthetic aerial scene: which class and which surface material every
// pixel has. Roads form a wavy grid plus a few diagonals, a river and lakes make the water,
// buildings stand in rows along the roads and fill the blocks, each casting a shadow to the
// south-east that stays background. Pixel space, row-major (y, x), 0.5 m pixels; every size is
// in pixels, so larger scenes hold more of the same, not bigger of the same.
#include <cstdint>
#include <string>
#include <vector>

namespace tessera::sample {

/// Ground size of one layout pixel (and of one pixel of scene.tif).
inline constexpr double kScenePixelMetres = 0.5;

struct SceneOptions {
  int size = 2048;    ///< width and height in pixels
  uint64_t seed = 7;  ///< same seed, same bytes
  /// Throws tessera::Error naming the bad field.
  void validate() const;
};

/// Label ids written to scene_labels.tif.
enum SceneClass : uint8_t { kVegetation = 0, kBuilding = 1, kRoad = 2, kWater = 3 };
inline constexpr int kSceneClassCount = 4;
const std::vector<std::string>& scene_class_names();

/// Surface materials the renderer knows. Roofs are kRoofFirst + encode_roof(...).
enum Material : uint8_t {
  kGround = 0,   ///< grass, meadow, trees: textured by noise
  kShadow = 1,   ///< ground in a building's shadow
  kAsphalt = 2,
  kMarking = 3,  ///< painted road centre line
  kOpenWater = 4,
  kRoofFirst = 8,
};
inline constexpr int kRoofTypes = 5;   ///< red tile, brown tile, slate, concrete, white
inline constexpr int kRoofLevels = 6;  ///< brightness steps per type
/// Roof material for a type, brightness level and roof half (0 sunlit, 1 shaded side).
inline uint8_t encode_roof(int type, int level, int half) {
  return static_cast<uint8_t>(kRoofFirst + (type * kRoofLevels + level) * 2 + half);
}

struct SceneLayout {
  int size = 0;
  std::vector<uint8_t> labels;    ///< SceneClass per pixel, size × size, row-major
  std::vector<uint8_t> material;  ///< Material per pixel, same layout
};

/// Builds the layout for `options` (validated first). Deterministic in the seed.
SceneLayout make_scene_layout(const SceneOptions& options);

}  // namespace tessera::sample
