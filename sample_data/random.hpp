#pragma once
// Deterministic randomness for the sample generator: one seed gives the same bytes on every
// platform. std::mt19937_64 is fully specified by the standard, the standard distributions
// are not, so the few distributions used here are written out. Value noise is a pure function
// of (position, seed), so rasters can be rendered strip by strip in any order.
#include <cstdint>
#include <random>

namespace tessera::sample {

/// A seeded stream of numbers. Not thread-safe; give each thread or strip its own.
class Rng {
 public:
  explicit Rng(uint64_t seed) : engine_(seed) {}

  /// Uniform in [0, 1), 53 random bits.
  double uniform() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  /// Uniform integer in [lo, hi], both ends included.
  int uniform_int(int lo, int hi);
  bool chance(double p) { return uniform() < p; }
  /// Standard normal deviate (Box–Muller; the second value of each pair is kept).
  double normal();
  double normal(double mean, double sd) { return mean + sd * normal(); }

 private:
  std::mt19937_64 engine_;
  double spare_ = 0.0;
  bool has_spare_ = false;
};

/// A seed for an independent sub-stream (`stream` = purpose or strip number), via splitmix64.
uint64_t mix_seed(uint64_t seed, uint64_t stream);

/// Target domains for domain adaptation are numbered 1 … kMaxTargetDomains; 0 is the source.
inline constexpr int kMaxTargetDomains = 7;

/// The seed everything of domain `k` derives from (layout, phantom, textures, noise): `seed`
/// itself for the source (k = 0), an independent stream for each target domain.
inline uint64_t domain_seed(uint64_t seed, int k) {
  return k == 0 ? seed : mix_seed(seed, 0x7A4E7000ull + static_cast<uint64_t>(k));
}

/// How far target domain k moves from the source, in [0, 1]: 0 for the source, 0.5 for
/// k = 1 (mild), 0.75 for k = 2, 1 from k = 3 on (later domains differ by their draws).
inline double domain_shift(int k) { return k == 0 ? 0.0 : (k >= 3 ? 1.0 : 0.25 + 0.25 * k); }

/// Smooth value noise in [0, 1]: random values on a lattice of `cell` units, interpolated
/// with a C1 smoothstep. Coordinates in any unit (pixels, millimetres).
float value_noise(double x, double y, double cell, uint64_t seed);
float value_noise(double x, double y, double z, double cell, uint64_t seed);

/// Fractal sum of `octaves` value noises, the cell halving and the weight halving each
/// octave, normalised back to [0, 1].
float fbm(double x, double y, double cell, int octaves, uint64_t seed);
float fbm(double x, double y, double z, double cell, int octaves, uint64_t seed);

/// The random values at the corners of one value-noise lattice cell (x fastest, then y, z).
struct LatticeCell {
  int64_t ix = 0, iy = 0, iz = 0;
  int dims = 0;  ///< 0: empty, 2 or 3: which corners are filled
  float corner[8] = {};
};

/// fbm() with its per-octave seeds worked out once and the last lattice cell of each octave
/// kept, so neighbouring points (a raster row, a volume line) skip most hashing; gives exactly
/// fbm()'s values. Not thread-safe because of that cache: one object per thread.
class FractalNoise {
 public:
  static constexpr int kMaxOctaves = 4;
  FractalNoise() = default;
  FractalNoise(double cell, int octaves, uint64_t seed);
  float operator()(double x, double y) const;
  float operator()(double x, double y, double z) const;

 private:
  double cell_ = 1.0;
  int octaves_ = 0;
  uint64_t seeds_[kMaxOctaves] = {};
  mutable LatticeCell cells_[kMaxOctaves];
};

/// 0 below `lo`, 1 above `hi`, smooth in between.
inline float smoothstep(float lo, float hi, float v) {
  float t = (v - lo) / (hi - lo);
  t = t < 0.f ? 0.f : (t > 1.f ? 1.f : t);
  return t * t * (3.f - 2.f * t);
}

}  // namespace tessera::sample
