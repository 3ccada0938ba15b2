#include "scene_render.hpp"

#include <algorithm>
#include <array>
#include <cmath>

#include "random.hpp"

namespace tessera::sample {
namespace {

using Spectrum = std::array<float, kSceneBands>;  // R, G, B, NIR in reflectance × 10000

constexpr float kNoiseSigma = 90.f;  // ~2 % of the ~4500 DN the scene spans

constexpr Spectrum kGrass{520, 880, 420, 3900};
constexpr Spectrum kDryGrass{1050, 1150, 720, 2900};
constexpr Spectrum kTrees{330, 560, 300, 3300};
constexpr Spectrum kAsphaltSpectrum{1020, 1050, 1100, 1150};
constexpr Spectrum kPaint{2900, 2900, 2800, 2700};
constexpr Spectrum kWaterSpectrum{260, 420, 520, 130};
constexpr std::array<Spectrum, kRoofTypes> kRoofs{{
    {2150, 950, 760, 2300},   // red tile
    {1500, 1050, 850, 2000},  // brown tile
    {1450, 1500, 1650, 1750},  // slate / dark grey
    {2100, 2100, 2150, 2250},  // concrete
    {3400, 3400, 3350, 3100},  // white membrane
}};

Spectrum mix(const Spectrum& a, const Spectrum& b, float t) {
  Spectrum out;
  for (int i = 0; i < kSceneBands; ++i) out[i] = a[i] + (b[i] - a[i]) * t;
  return out;
}

Spectrum scaled(const Spectrum& a, float f) {
  Spectrum out;
  for (int i = 0; i < kSceneBands; ++i) out[i] = a[i] * f;
  return out;
}

class Shader {
 public:
  explicit Shader(uint64_t seed) : seed_(seed) {}

  Spectrum ground(double x, double y) const {
    const float woods = smoothstep(0.5f, 0.62f, fbm(x, y, 320.0, 3, stream(1)));
    const float dry = smoothstep(0.5f, 0.75f, fbm(x, y, 180.0, 2, stream(2)));
    const float grain = 0.93f + 0.14f * fbm(x, y, 4.0, 2, stream(3));
    const Spectrum meadow = scaled(mix(kGrass, kDryGrass, dry), grain);
    const float crowns = 0.6f + 0.8f * fbm(x, y, 9.0, 2, stream(4));  // tree crowns and gaps
    return mix(meadow, scaled(kTrees, crowns), woods);
  }

  Spectrum shade(uint8_t material, double x, double y) const {
    switch (material) {
      case kGround: return ground(x, y);
      case kShadow: {
        Spectrum s = scaled(ground(x, y), 0.38f);
        s[2] *= 1.3f;  // blue skylight fills shadows
        return s;
      }
      case kAsphalt:
        return scaled(kAsphaltSpectrum, (0.9f + 0.2f * fbm(x, y, 6.0, 2, stream(5))) *
                                            (0.94f + 0.12f * fbm(x, y, 90.0, 1, stream(6))));
      case kMarking: return kPaint;
      case kOpenWater:
        return scaled(kWaterSpectrum, 0.8f + 0.4f * fbm(x, y, 220.0, 2, stream(7)));
      default: break;
    }
    const int roof = material - kRoofFirst;
    const int half = roof % 2, level = (roof / 2) % kRoofLevels, type = roof / 2 / kRoofLevels;
    const float brightness = 0.85f + 0.06f * float(level);
    const float side = half == 0 ? 1.f : 0.78f;
    const float grain = 0.95f + 0.1f * value_noise(x, y, 2.5, stream(8));
    return scaled(kRoofs[std::min(type, kRoofTypes - 1)], brightness * side * grain);
  }

 private:
  uint64_t stream(uint64_t id) const { return mix_seed(seed_, 100 + id); }
  uint64_t seed_;
};

}  // namespace

void render_scene_rows(const SceneLayout& layout, uint64_t seed, int row0, int row1,
                       uint64_t strip_id, std::vector<uint16_t>& out) {
  const int size = layout.size;
  const int top = std::max(0, row0 - 1), bottom = std::min(size, row1 + 1);
  const int rows = bottom - top;
  const Shader shader(seed);

  // Clean radiance with one halo row each side, band-interleaved per pixel.
  std::vector<float> clean(size_t(rows) * size * kSceneBands);
  for (int y = top; y < bottom; ++y) {
    const uint8_t* m = layout.material.data() + size_t(y) * size;
    float* dst = clean.data() + size_t(y - top) * size * kSceneBands;
    for (int x = 0; x < size; ++x) {
      const Spectrum s = shader.shade(m[x], x, y);
      std::copy(s.begin(), s.end(), dst + size_t(x) * kSceneBands);
    }
  }

  // 3 × 3 binomial point-spread (1 2 1)/4 per axis, edges clamped; then light and noise.
  Rng noise(mix_seed(seed, 1000 + strip_id));
  const double gx = 0.07, gy = -0.05;  // illumination gradient across the scene
  out.resize(size_t(row1 - row0) * size * kSceneBands);
  auto at = [&](int y, int x, int b) {
    y = std::clamp(y, top, bottom - 1);
    x = std::clamp(x, 0, size - 1);
    return clean[(size_t(y - top) * size + x) * kSceneBands + b];
  };
  for (int y = row0; y < row1; ++y) {
    for (int x = 0; x < size; ++x) {
      const float light = float(1.0 + gx * (double(x) / size - 0.5) + gy * (double(y) / size - 0.5));
      for (int b = 0; b < kSceneBands; ++b) {
        float v = 0.f;
        for (int dy = -1; dy <= 1; ++dy) {
          const float wy = dy == 0 ? 0.5f : 0.25f;
          v += wy * (0.25f * at(y + dy, x - 1, b) + 0.5f * at(y + dy, x, b) +
                     0.25f * at(y + dy, x + 1, b));
        }
        v = v * light + kNoiseSigma * float(noise.normal());
        out[(size_t(y - row0) * size + x) * kSceneBands + b] =
            static_cast<uint16_t>(std::clamp(std::lround(v), 0L, 65535L));
      }
    }
  }
}

}  // namespace tessera::sample
