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

/// Smooth value noise in [0, 1]: random values on a lattice of `cell` units, interpolated
/// with a C1 smoothstep. Coordinates in any unit (pixels, millimetres).
float value_noise(double x, double y, double cell, uint64_t seed);
float value_noise(double x, double y, double z, double cell, uint64_t seed);

/// Fractal sum of `octaves` value noises, the cell halving and the weight halving each
/// octave, normalised back to [0, 1].
float fbm(double x, double y, double cell, int octaves, uint64_t seed);
float fbm(double x, double y, double z, double cell, int octaves, uint64_t seed);

/// 0 below `lo`, 1 above `hi`, smooth in between.
inline float smoothstep(float lo, float hi, float v) {
  float t = (v - lo) / (hi - lo);
  t = t < 0.f ? 0.f : (t > 1.f ? 1.f : t);
  return t * t * (3.f - 2.f * t);
}

}  // namespace tessera::sample
