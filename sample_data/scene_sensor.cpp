#include "scene_sensor.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace tessera::sample {
namespace {

constexpr double kTargetPixelScale = 1.5;  // target pixels are 1.5 × the layout's 0.5 m

enum Band { kRed = 0, kGreen = 1, kBlue = 2, kNir = 3 };

// Band cross-talk close to identity: each band picks up some of its spectral neighbours
// (the red edge leaks between red and NIR), then every row is normalised to sum to 1.
std::array<BandValues, kSceneBands> draw_mixing(Rng& rng, double t) {
  std::array<BandValues, kSceneBands> m{};
  auto leak = [&](int to, int from, double lo, double hi) {
    m[size_t(to)][size_t(from)] = float(t * rng.uniform(lo, hi));
  };
  leak(kRed, kGreen, 0.04, 0.12);
  leak(kRed, kNir, 0.04, 0.14);
  leak(kGreen, kRed, 0.04, 0.12);
  leak(kGreen, kBlue, 0.04, 0.12);
  leak(kBlue, kGreen, 0.06, 0.16);
  leak(kNir, kRed, 0.08, 0.20);
  for (size_t b = 0; b < kSceneBands; ++b) {
    float leaked = 0.f;
    for (float v : m[b]) leaked += v;
    m[b][b] = 1.f - leaked;
  }
  return m;
}

}  // namespace

SceneSensor SceneSensor::target_domain(uint64_t seed, int k) {
  Rng rng(mix_seed(domain_seed(seed, k), 50));
  const double t = domain_shift(k);
  SceneSensor s;
  s.target = true;
  s.pixel_metres = kScenePixelMetres * kTargetPixelScale;
  s.mixing = draw_mixing(rng, t);
  for (float& g : s.gamma) g = float(1.0 + t * rng.uniform(-0.25, 0.25));
  s.gain = {float(1.0 + t * rng.uniform(-0.2, 0.2)), float(1.0 + t * rng.uniform(-0.2, 0.2)),
            float(1.0 + t * rng.uniform(0.2, 0.45)), float(1.0 - t * rng.uniform(0.3, 0.5))};
  s.offset = {float(t * rng.uniform(0.0, 300.0)), float(t * rng.uniform(0.0, 300.0)),
              float(t * rng.uniform(150.0, 450.0)), float(t * rng.uniform(-150.0, 150.0))};
  const double blue_haze = t * rng.uniform(500.0, 1000.0);  // path radiance falls with λ
  s.haze = {float(0.4 * blue_haze), float(0.6 * blue_haze), float(blue_haze),
            float(0.15 * blue_haze)};
  s.haze_cell_metres = rng.uniform(250.0, 400.0);
  s.haze_seed = mix_seed(domain_seed(seed, k), 51);
  s.light_x = t * rng.uniform(-0.15, 0.15);
  s.light_y = t * rng.uniform(-0.15, 0.15);
  s.noise_sigma = float(90.0 * (1.6 + t * rng.uniform(0.4, 1.4)));
  return s;
}

int SceneSensor::output_size(int layout_size) const {
  return int(std::lround(layout_size * kScenePixelMetres / pixel_metres));
}

int SceneSensor::layout_index(int i, int layout_size) const {
  const double scale = pixel_metres / kScenePixelMetres;
  return std::clamp(int(std::floor((i + 0.5) * scale)), 0, layout_size - 1);
}

double SceneSensor::layout_position(int i) const {
  return (i + 0.5) * (pixel_metres / kScenePixelMetres) - 0.5;
}

float SceneSensor::haze_level(double x, double y) const {
  return smoothstep(0.3f, 0.7f, fbm(x * pixel_metres, y * pixel_metres, haze_cell_metres, 2,
                                    haze_seed));
}

std::array<uint16_t, kSceneBands> SceneSensor::respond(const BandValues& reflectance, int x,
                                                       int y, int size, float h,
                                                       Rng& noise) const {
  const float light =
      float(1.0 + light_x * (double(x) / size - 0.5) + light_y * (double(y) / size - 0.5));
  BandValues dn;
  if (!target) {
    for (int b = 0; b < kSceneBands; ++b)
      dn[size_t(b)] = reflectance[size_t(b)] * light + noise_sigma * float(noise.normal());
  } else {
    BandValues at_sensor;
    for (size_t b = 0; b < kSceneBands; ++b)
      at_sensor[b] = reflectance[b] * light + haze[b] * h;
    for (size_t b = 0; b < kSceneBands; ++b) {
      float mixed = 0.f;
      for (size_t c = 0; c < kSceneBands; ++c) mixed += mixing[b][c] * at_sensor[c];
      const float response = 10000.f * std::pow(std::max(mixed, 0.f) / 10000.f, gamma[b]);
      dn[b] = offset[b] + gain[b] * response + noise_sigma * float(noise.normal());
    }
  }
  std::array<uint16_t, kSceneBands> out;
  for (size_t b = 0; b < kSceneBands; ++b)
    out[b] = static_cast<uint16_t>(std::clamp(std::lround(dn[b]), 0L, 65535L));
  return out;
}

std::string SceneSensor::describe() const {
  if (!target)
    return fmt::format("source sensor: {} m pixels, noise sigma {:.0f} DN", pixel_metres,
                       noise_sigma);
  std::string mix;
  for (const auto& row : mixing)
    mix += fmt::format("{}[{:.3f} {:.3f} {:.3f} {:.3f}]", mix.empty() ? "" : " ", row[0], row[1],
                       row[2], row[3]);
  auto four = [](const BandValues& v, const char* format) {
    return fmt::format(fmt::runtime(format), v[0], v[1], v[2], v[3]);
  };
  return fmt::format(
      "target sensor: {} m pixels; mixing rows (r g b nir) {}; gamma {}; gain {}; offset {} DN; "
      "haze {} DN over {:.0f} m blobs; light gradient {:+.3f} {:+.3f}; noise sigma {:.0f} DN",
      pixel_metres, mix, four(gamma, "{:.3f} {:.3f} {:.3f} {:.3f}"),
      four(gain, "{:.3f} {:.3f} {:.3f} {:.3f}"), four(offset, "{:.0f} {:.0f} {:.0f} {:.0f}"),
      four(haze, "{:.0f} {:.0f} {:.0f} {:.0f}"), haze_cell_metres, light_x, light_y,
      noise_sigma);
}

}  // namespace tessera::sample
