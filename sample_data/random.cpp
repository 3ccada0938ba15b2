#include "random.hpp"

#include <cmath>
#include <cstdlib>

namespace tessera::sample {
namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Random values in [0, 1) attached to lattice points: the hash chains x, then y, then z,
// so corners that share x (and y) share the first links of the chain.
uint64_t hash_x(int64_t ix, uint64_t seed) {
  return splitmix64(seed ^ static_cast<uint64_t>(ix) * 0x8CB92BA72F3D8DD7ull);
}
uint64_t hash_xy(uint64_t hx, int64_t iy) {
  return splitmix64(hx ^ static_cast<uint64_t>(iy) * 0xD6E8FEB86659FD93ull);
}
float lattice(uint64_t hxy, int64_t iz) {
  const uint64_t h = splitmix64(hxy ^ static_cast<uint64_t>(iz) * 0xA0761D6478BD642Full);
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

namespace {

// Fills `c` with the corners of cell (ix, iy[, iz]) unless it holds them already.
void fill_cell(LatticeCell& c, int64_t ix, int64_t iy, int64_t iz, int dims, uint64_t seed) {
  if (c.dims == dims && c.ix == ix && c.iy == iy && c.iz == iz) return;
  const uint64_t x0 = hash_x(ix, seed), x1 = hash_x(ix + 1, seed);
  const uint64_t xy[4] = {hash_xy(x0, iy), hash_xy(x1, iy), hash_xy(x0, iy + 1),
                          hash_xy(x1, iy + 1)};
  for (int dz = 0; dz < dims - 1; ++dz)
    for (int i = 0; i < 4; ++i) c.corner[dz * 4 + i] = lattice(xy[i], iz + dz);
  c.ix = ix, c.iy = iy, c.iz = iz, c.dims = dims;
}

float noise2(double x, double y, double cell, uint64_t seed, LatticeCell& c) {
  const double fx = x / cell, fy = y / cell;
  const double gx = std::floor(fx), gy = std::floor(fy);
  fill_cell(c, static_cast<int64_t>(gx), static_cast<int64_t>(gy), 0, 2, seed);
  const float tx = fade(fx - gx), ty = fade(fy - gy);
  const float top = lerp(c.corner[0], c.corner[1], tx);
  const float bottom = lerp(c.corner[2], c.corner[3], tx);
  return lerp(top, bottom, ty);
}

float noise3(double x, double y, double z, double cell, uint64_t seed, LatticeCell& c) {
  const double fx = x / cell, fy = y / cell, fz = z / cell;
  const double gx = std::floor(fx), gy = std::floor(fy), gz = std::floor(fz);
  fill_cell(c, static_cast<int64_t>(gx), static_cast<int64_t>(gy), static_cast<int64_t>(gz), 3,
            seed);
  const float tx = fade(fx - gx), ty = fade(fy - gy), tz = fade(fz - gz);
  float plane[2];
  for (int dz = 0; dz < 2; ++dz) {
    const float top = lerp(c.corner[dz * 4 + 0], c.corner[dz * 4 + 1], tx);
    const float bottom = lerp(c.corner[dz * 4 + 2], c.corner[dz * 4 + 3], tx);
    plane[dz] = lerp(top, bottom, ty);
  }
  return lerp(plane[0], plane[1], tz);
}

}  // namespace

float value_noise(double x, double y, double cell, uint64_t seed) {
  LatticeCell c;
  return noise2(x, y, cell, seed, c);
}

float value_noise(double x, double y, double z, double cell, uint64_t seed) {
  LatticeCell c;
  return noise3(x, y, z, cell, seed, c);
}

FractalNoise::FractalNoise(double cell, int octaves, uint64_t seed)
    : cell_(cell), octaves_(octaves) {
  if (octaves < 1 || octaves > kMaxOctaves) std::abort();  // a programming error
  for (int o = 0; o < octaves; ++o) seeds_[o] = mix_seed(seed, static_cast<uint64_t>(o));
}

float FractalNoise::operator()(double x, double y) const {
  float sum = 0.f, weight = 1.f, total = 0.f;
  double cell = cell_;
  for (int o = 0; o < octaves_; ++o) {
    sum += weight * noise2(x, y, cell, seeds_[o], cells_[o]);
    total += weight;
    weight *= 0.5f;
    cell *= 0.5;
  }
  return sum / total;
}

float FractalNoise::operator()(double x, double y, double z) const {
  float sum = 0.f, weight = 1.f, total = 0.f;
  double cell = cell_;
  for (int o = 0; o < octaves_; ++o) {
    sum += weight * noise3(x, y, z, cell, seeds_[o], cells_[o]);
    total += weight;
    weight *= 0.5f;
    cell *= 0.5;
  }
  return sum / total;
}

float fbm(double x, double y, double cell, int octaves, uint64_t seed) {
  return FractalNoise(cell, octaves, seed)(x, y);
}

float fbm(double x, double y, double z, double cell, int octaves, uint64_t seed) {
  return FractalNoise(cell, octaves, seed)(x, y, z);
}

}  // namespace tessera::sample
