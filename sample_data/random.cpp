#include "random.hpp"

#include <cmath>

namespace tessera::sample {
namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Random value in [0, 1) attached to one lattice point.
float lattice(int64_t ix, int64_t iy, int64_t iz, uint64_t seed) {
  uint64_t h = splitmix64(seed ^ static_cast<uint64_t>(ix) * 0x8CB92BA72F3D8DD7ull);
  h = splitmix64(h ^ static_cast<uint64_t>(iy) * 0xD6E8FEB86659FD93ull);
  h = splitmix64(h ^ static_cast<uint64_t>(iz) * 0xA0761D6478BD642Full);
  return static_cast<float>(h >> 40) * 0x1.0p-24f;
}

float fade(double t) { return static_cast<float>(t * t * (3.0 - 2.0 * t)); }

float lerp(float a, float b, float t) { return a + (b - a) * t; }

}  // namespace

int Rng::uniform_int(int lo, int hi) {
  const double span = static_cast<double>(hi) - lo + 1.0;
  const int v = lo + static_cast<int>(std::floor(uniform() * span));
  return v > hi ? hi : v;
}

double Rng::normal() {
  if (has_spare_) {
    has_spare_ = false;
    return spare_;
  }
  const double u1 = 1.0 - uniform();  // (0, 1]: log stays finite
  const double u2 = uniform();
  const double r = std::sqrt(-2.0 * std::log(u1));
  const double angle = 6.283185307179586 * u2;
  spare_ = r * std::sin(angle);
  has_spare_ = true;
  return r * std::cos(angle);
}

uint64_t mix_seed(uint64_t seed, uint64_t stream) {
  return splitmix64(splitmix64(seed) ^ splitmix64(stream + 0x51ED27ull));
}

float value_noise(double x, double y, double cell, uint64_t seed) {
  const double fx = x / cell, fy = y / cell;
  const double gx = std::floor(fx), gy = std::floor(fy);
  const auto ix = static_cast<int64_t>(gx), iy = static_cast<int64_t>(gy);
  const float tx = fade(fx - gx), ty = fade(fy - gy);
  const float top = lerp(lattice(ix, iy, 0, seed), lattice(ix + 1, iy, 0, seed), tx);
  const float bottom = lerp(lattice(ix, iy + 1, 0, seed), lattice(ix + 1, iy + 1, 0, seed), tx);
  return lerp(top, bottom, ty);
}

float value_noise(double x, double y, double z, double cell, uint64_t seed) {
  const double fx = x / cell, fy = y / cell, fz = z / cell;
  const double gx = std::floor(fx), gy = std::floor(fy), gz = std::floor(fz);
  const auto ix = static_cast<int64_t>(gx), iy = static_cast<int64_t>(gy),
             iz = static_cast<int64_t>(gz);
  const float tx = fade(fx - gx), ty = fade(fy - gy), tz = fade(fz - gz);
  float plane[2];
  for (int dz = 0; dz < 2; ++dz) {
    const float top = lerp(lattice(ix, iy, iz + dz, seed), lattice(ix + 1, iy, iz + dz, seed), tx);
    const float bottom =
        lerp(lattice(ix, iy + 1, iz + dz, seed), lattice(ix + 1, iy + 1, iz + dz, seed), tx);
    plane[dz] = lerp(top, bottom, ty);
  }
  return lerp(plane[0], plane[1], tz);
}

float fbm(double x, double y, double cell, int octaves, uint64_t seed) {
  float sum = 0.f, weight = 1.f, total = 0.f;
  for (int o = 0; o < octaves; ++o) {
    sum += weight * value_noise(x, y, cell, mix_seed(seed, static_cast<uint64_t>(o)));
    total += weight;
    weight *= 0.5f;
    cell *= 0.5;
  }
  return sum / total;
}

float fbm(double x, double y, double z, double cell, int octaves, uint64_t seed) {
  float sum = 0.f, weight = 1.f, total = 0.f;
  for (int o = 0; o < octaves; ++o) {
    sum += weight * value_noise(x, y, z, cell, mix_seed(seed, static_cast<uint64_t>(o)));
    total += weight;
    weight *= 0.5f;
    cell *= 0.5;
  }
  return sum / total;
}

}  // namespace tessera::sample
