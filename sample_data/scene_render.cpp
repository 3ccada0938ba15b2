#include "scene_render.hpp"

#include <algorithm>
#include <array>
#include <cmath>

#include "random.hpp"

namespace tessera::sample {
namespace {

using Spectrum = BandValues;  // R, G, B, NIR in reflectance × 10000

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
  explicit Shader(uint64_t seed)
      : woods_(320.0, 3, stream(seed, 1)),
        dry_(180.0, 2, stream(seed, 2)),
        grain_(4.0, 2, stream(seed, 3)),
        crowns_(9.0, 2, stream(seed, 4)),
        asphalt_(6.0, 2, stream(seed, 5)),
        asphalt_patches_(90.0, 1, stream(seed, 6)),
        water_(220.0, 2, stream(seed, 7)),
        roof_seed_(stream(seed, 8)) {}

  Spectrum ground(double x, double y) const {
    const float woods = smoothstep(0.5f, 0.62f, woods_(x, y));
    const float dry = smoothstep(0.5f, 0.75f, dry_(x, y));
    const float grain = 0.93f + 0.14f * grain_(x, y);
    const Spectrum meadow = scaled(mix(kGrass, kDryGrass, dry), grain);
    const float crowns = 0.6f + 0.8f * crowns_(x, y);  // tree crowns and gaps
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
        return scaled(kAsphaltSpectrum, (0.9f + 0.2f * asphalt_(x, y)) *
                                            (0.94f + 0.12f * asphalt_patches_(x, y)));
      case kMarking: return kPaint;
      case kOpenWater:
        return scaled(kWaterSpectrum, 0.8f + 0.4f * water_(x, y));
      default: break;
    }
    const int roof = material - kRoofFirst;
    const int half = roof % 2, level = (roof / 2) % kRoofLevels, type = roof / 2 / kRoofLevels;
    const float brightness = 0.85f + 0.06f * float(level);
    const float side = half == 0 ? 1.f : 0.78f;
    const float grain = 0.95f + 0.1f * value_noise(x, y, 2.5, roof_seed_);
    return scaled(kRoofs[std::min(type, kRoofTypes - 1)], brightness * side * grain);
  }

 private:
  static uint64_t stream(uint64_t seed, uint64_t id) { return mix_seed(seed, 100 + id); }
  FractalNoise woods_, dry_, grain_, crowns_, asphalt_, asphalt_patches_, water_;
  uint64_t roof_seed_;
};

// The haze field along output row y: exact every kHazeStep columns, linear in between (its
// smallest blobs span well over 100 pixels).
void haze_row(const SceneSensor& sensor, int y, int size, std::vector<float>& row) {
  constexpr int kHazeStep = 8;
  row.assign(size_t(size), 0.f);
  if (!sensor.target) return;
  float left = sensor.haze_level(0, y);
  for (int x0 = 0; x0 < size; x0 += kHazeStep) {
    const int x1 = std::min(x0 + kHazeStep, size - 1);
    const float right = x1 > x0 ? sensor.haze_level(x1, y) : left;
    for (int x = x0; x < std::min(x0 + kHazeStep, size); ++x)
      row[size_t(x)] = x1 > x0 ? left + (right - left) * float(x - x0) / float(x1 - x0) : left;
    left = right;
  }
}

}  // namespace

void render_scene_rows(const SceneLayout& layout, const SceneSensor& sensor, uint64_t seed,
                       int row0, int row1, uint64_t strip_id, std::vector<uint16_t>& out) {
  const int size = sensor.output_size(layout.size);
  const int top = std::max(0, row0 - 1), bottom = std::min(size, row1 + 1);
  const int rows = bottom - top;
  const Shader shader(seed);

  // Clean reflectance at the output pixel centres, one halo row each side, band-interleaved.
  std::vector<int> columns(static_cast<size_t>(size));
  std::vector<double> positions(static_cast<size_t>(size));
  for (int x = 0; x < size; ++x) {
    columns[size_t(x)] = sensor.layout_index(x, layout.size);
    positions[size_t(x)] = sensor.layout_position(x);
  }
  std::vector<float> clean(size_t(rows) * size * kSceneBands);
  for (int y = top; y < bottom; ++y) {
    const uint8_t* m =
        layout.material.data() + size_t(sensor.layout_index(y, layout.size)) * layout.size;
    const double ly = sensor.layout_position(y);
    float* dst = clean.data() + size_t(y - top) * size * kSceneBands;
    for (int x = 0; x < size; ++x) {
      const Spectrum s = shader.shade(m[columns[size_t(x)]], positions[size_t(x)], ly);
      std::copy(s.begin(), s.end(), dst + size_t(x) * kSceneBands);
    }
  }

  // 3 × 3 binomial point-spread (1 2 1)/4 per axis, edges clamped; then the sensor.
  Rng noise(mix_seed(seed, 1000 + strip_id));
  out.resize(size_t(row1 - row0) * size * kSceneBands);
  auto at = [&](int y, int x, int b) {
    y = std::clamp(y, top, bottom - 1);
    x = std::clamp(x, 0, size - 1);
    return clean[(size_t(y - top) * size + x) * kSceneBands + b];
  };
  std::vector<float> haze;
  for (int y = row0; y < row1; ++y) {
    haze_row(sensor, y, size, haze);
    for (int x = 0; x < size; ++x) {
      Spectrum blurred;
      for (int b = 0; b < kSceneBands; ++b) {
        float v = 0.f;
        for (int dy = -1; dy <= 1; ++dy) {
          const float wy = dy == 0 ? 0.5f : 0.25f;
          v += wy * (0.25f * at(y + dy, x - 1, b) + 0.5f * at(y + dy, x, b) +
                     0.25f * at(y + dy, x + 1, b));
        }
        blurred[size_t(b)] = v;
      }
      const auto dn = sensor.respond(blurred, x, y, size, haze[size_t(x)], noise);
      std::copy(dn.begin(), dn.end(), out.begin() + (size_t(y - row0) * size + x) * kSceneBands);
    }
  }
}

std::vector<uint8_t> sensor_labels(const SceneLayout& layout, const SceneSensor& sensor) {
  const int size = sensor.output_size(layout.size);
  std::vector<uint8_t> labels(size_t(size) * size);
  for (int y = 0; y < size; ++y) {
    const uint8_t* row =
        layout.labels.data() + size_t(sensor.layout_index(y, layout.size)) * layout.size;
    for (int x = 0; x < size; ++x)
      labels[size_t(y) * size + x] = row[sensor.layout_index(x, layout.size)];
  }
  return labels;
}

}  // namespace tessera::sample
