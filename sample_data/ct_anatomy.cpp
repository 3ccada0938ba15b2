// The phantom's anatomy, painted back to front: body layers, then lungs, liver, kidneys,
// vessels and bone, each later structure replacing what lies under it.
#include <algorithm>
#include <cmath>

#include "ct_anatomy.hpp"
#include "ct_phantom.hpp"
#include "random.hpp"

namespace tessera::sample {
namespace {

constexpr double kTwoPi = 6.283185307179586;

double sq(double v) { return v * v; }

// Normalised radius of an axis-aligned ellipsoid; < 1 inside.
double ellipsoid(const Point3& p, double cu, double cv, double cw, double au, double av,
                 double aw) {
  return std::sqrt(sq((p.u - cu) / au) + sq((p.v - cv) / av) + sq((p.w - cw) / aw));
}

double ellipse(const Point3& p, double cu, double cv, double au, double av) {
  return std::sqrt(sq((p.u - cu) / au) + sq((p.v - cv) / av));
}

class Painter {
 public:
  Painter(const Point3& p, uint64_t seed) : p_(p), seed_(seed) {}

  float noise(double cell_mm, int octaves, uint64_t id) const {
    return fbm(p_.x, p_.y, p_.z, cell_mm, octaves, mix_seed(seed_, 200 + id));
  }

  Tissue paint() {
    // Body: an elliptic cylinder whose outline breathes slowly along z.
    const double a = 0.86 + 0.03 * std::sin(kTwoPi * 1.1 * p_.w);
    const double b = 0.70 + 0.02 * std::sin(kTwoPi * 0.8 * p_.w + 1.0);
    const double e = ellipse(p_, 0.0, 0.0, a, b) + 0.03 * (noise(30.0, 1, 1) - 0.5);
    if (e > 1.0) return table();
    if (e > 0.9) return {-105.f + 20.f * (noise(6.0, 1, 2) - 0.5f), kCtBackground};
    if (e > 0.82) return {rib(e) ? 600.f : 50.f, kCtBackground};
    t_ = interior();
    e_ = e;
    lungs();
    liver();
    kidneys();
    vessels();
    spine();
    return t_;
  }

 private:
  Tissue table() const {
    const double vt = 0.82 + 0.05 * sq(p_.u);
    const double d = std::abs(p_.v - vt);
    if (d < 0.03 && std::abs(p_.u) < 0.95) return {d > 0.018 ? 120.f : -400.f, kCtBackground};
    return {-1000.f, kCtBackground};
  }

  // Abdomen: bowel loops (with gas anteriorly) packed in visceral fat, so organs stand out
  // against fat as they do in real CT.
  Tissue interior() const {
    if (std::abs(p_.u) < 0.3 && p_.v > 0.35) return {55.f, kCtBackground};  // paraspinal muscle
    const float fat = smoothstep(0.47f, 0.57f, noise(22.0, 2, 4));
    float hu = 25.f + 20.f * (noise(6.0, 2, 3) - 0.5f);
    if (p_.v < 0.1 && noise(9.0, 2, 5) > 0.72f) hu = -750.f;
    return {hu + (-95.f - hu) * fat, kCtBackground};
  }

  void lungs() {
    const double grow = std::sqrt(std::clamp((p_.w - 0.72) / 0.15, 0.0, 1.0));
    if (grow <= 0.0) return;
    for (int side = -1; side <= 1; side += 2) {
      if (ellipse(p_, side * 0.40, 0.05, 0.30 * grow, 0.48 * grow) < 1.0 && e_ < 0.8)
        t_ = {-850.f + 60.f * (noise(5.0, 2, 6) - 0.5f), kCtBackground};
    }
  }

  void liver() {
    const double right = ellipsoid(p_, -0.36, -0.08, 0.57, 0.42, 0.40, 0.375);
    const double left = ellipsoid(p_, 0.12, -0.30, 0.78, 0.32, 0.20, 0.16);
    const double f = std::min(right, left) + 0.12 * (noise(25.0, 2, 7) - 0.5);
    if (e_ >= 0.8 || f >= 1.1) return;
    if (f >= 1.0) t_ = {-70.f, kCtBackground};  // a rim of fat around the liver
    else t_ = {64.f + 10.f * (noise(4.0, 2, 8) - 0.5f), kLiver};
  }

  // Cortex brighter than medulla, a fat capsule around, the renal sinus opening medially.
  void kidneys() {
    for (int side = -1; side <= 1; side += 2) {
      const double cu = side * 0.40, cv = 0.36, cw = side < 0 ? 0.60 : 0.65;
      const double f = ellipsoid(p_, cu, cv, cw, 0.14, 0.17, 0.25) +
                       0.08 * (noise(15.0, 1, 9) - 0.5);
      if (f >= 1.3 || e_ >= 0.82) continue;
      if (f >= 1.0) { t_ = {-90.f, kCtBackground}; continue; }
      if (ellipsoid(p_, cu - side * 0.09, cv, cw, 0.06, 0.07, 0.12) < 1.0) {
        t_ = {-40.f, kCtBackground};
        continue;
      }
      t_ = {(f > 0.7 ? 170.f : 135.f) + 10.f * (noise(3.0, 1, 10) - 0.5f), kKidney};
    }
  }

  void vessels() {
    if (ellipse(p_, 0.08, 0.12, 0.055, 0.055) < 1.0) t_ = {190.f, kCtBackground};  // aorta
    if (ellipse(p_, -0.10, 0.10, 0.065, 0.05) < 1.0) t_ = {130.f, kCtBackground};  // cava
  }

  void spine() {
    constexpr float kCortical = 800.f, kArch = 650.f;
    const bool disc = std::fmod(p_.z + 1000.0, 28.0) < 5.0;
    const double body = ellipse(p_, 0.0, 0.30, 0.12, 0.11);
    if (body < 1.0) {
      if (disc) t_ = {90.f, kCtBackground};
      else if (body > 0.85) t_ = {kCortical, kCtBackground};
      else t_ = {440.f + 160.f * (noise(3.0, 2, 11) - 0.5f), kCtBackground};
      return;
    }
    const double canal = ellipse(p_, 0.0, 0.47, 0.05, 0.05);
    if (canal < 1.0) { t_ = {15.f, kCtBackground}; return; }
    if (disc) return;
    const bool arch = canal < 1.7 && p_.v > 0.42;
    const bool spinous = std::abs(p_.u) < 0.025 && p_.v > 0.5 && p_.v < 0.64;
    const bool transverse = std::abs(p_.v - 0.42) < 0.02 && std::abs(p_.u) < 0.17;
    if (arch || spinous || transverse) t_ = {kArch, kCtBackground};
  }

  // Ribs cross the muscle wall in the upper half, one every 20 mm of z, sloping down towards
  // the front so that an axial slice cuts them into arcs.
  bool rib(double e) const {
    return p_.w > 0.55 && p_.v > -0.4 && e > 0.83 && e < 0.88 &&
           std::fmod(p_.z + 25.0 * p_.v + 1000.0, 20.0) < 4.0;
  }

  Point3 p_;
  uint64_t seed_;
  Tissue t_;
  double e_ = 0.0;
};

}  // namespace

Tissue tissue_at(const Point3& p, uint64_t seed) { return Painter(p, seed).paint(); }

}  // namespace tessera::sample
